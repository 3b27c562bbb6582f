"""Where the server runs, learnt from the Kubernetes API (Kubernetes source only).

- The cluster id: the about-api ClusterProperty ``cluster.clusterset.k8s.io``, else
  ``id.k8s.io`` (the name the MCS DNS specification still uses; group
  about.k8s.io, cluster-scoped), watched by a :class:`reflector.Reflector` over the
  ClusterProperties (a field selector names one object only; a cluster has a
  handful), so that a change at run time applies. Only
  when ``--cluster-id`` is not given (the flag wins). When no version of the
  group serves ``clusterproperties`` (the CRD is not installed), nothing
  changes: that is said once, and discovery is tried again every
  :data:`DISCOVER_INTERVAL` seconds, quietly. A deleted property makes the id
  unknown again (every cluster's endpoints, as without PreferClose).
- The topology zone, with ``--topology-zone-from-node NODE``: the Node's
  ``topology.kubernetes.io/zone`` label, read with a GET (RBAC: get nodes)
  at start and again every :data:`NODE_RECHECK` seconds.

Both reach the cache as ops (SetClusterId, SetTopologyZone), like any other
update, so worker processes follow. Neither holds readiness back: until they
are known, PreferClose imports answer with every cluster's endpoints.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import discovery, properties
from clusterset_dns.sources.kube import KubeError
from clusterset_dns.sources.reflector import Reflector, api_backoff
from clusterset_dns.sources.resource import Client, NotServed, Resource
from clusterset_dns.zone.model import ObjectKey
from clusterset_dns.zone.ops import Op, SetClusterId, SetTopologyZone

log = logging.getLogger(__name__)

DISCOVER_INTERVAL = 60.0  # seconds between looks for the ClusterProperty CRD while absent
NODE_RECHECK = 300.0  # seconds between reads of the Node's zone label


def property_resource(group_version: str, values: dict[str, str | None]) -> Resource:
    """``values``: the id each naming property gives now, kept by ``put``: the ops it
    makes are applied in the order they are made, so the last one carries the id."""
    def put(key: ObjectKey, cluster_id: str | None) -> Op:
        if key[1] in properties.CLUSTER_ID_PROPERTIES:
            values[key[1]] = cluster_id
        return SetClusterId(properties.pick_cluster_id(values))

    def to_model(obj: Mapping[str, Any], warn: Callable[[str], None]) -> str | None:
        return properties.cluster_property(obj, warn)

    return Resource(f"clusterproperties {group_version}",
                    f"/apis/{group_version}/clusterproperties", "property", None, to_model,
                    put, kind="ClusterProperty", api_version=group_version, cluster_scoped=True)


class Locality:
    def __init__(self, config: Config, apply: Callable[[list[Op]], None],
                 metrics: Metrics, clock: Clock = SYSTEM) -> None:
        self.config = config
        self.apply = apply
        self.metrics = metrics
        self.clock = clock

    async def run(self, client: Client) -> None:
        tasks = []
        if self.config.cluster_id is None:
            tasks.append(self._guarded("the ClusterProperty", lambda: self.cluster_property(
                client)))
        node = self.config.topology_zone_from_node
        if node is not None:
            tasks.append(self._guarded(f"Node {node}", lambda: self.node_zone(client, node)))
        await asyncio.gather(*tasks)

    async def _guarded(self, what: str, task: Callable[[], Awaitable[None]]) -> None:
        """Runs ``task`` again after a bug (an API answer of a shape nobody foresaw):
        where the server runs is an extra, and must never stop the source."""
        backoff = api_backoff(self.clock)
        while True:
            try:
                await task()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = backoff.next()
                log.exception("following %s failed (a bug; please report it); the last "
                              "known value is kept, starting again in %.1fs", what, delay)
                await self.clock.sleep(delay)

    async def discover(self, client: Client) -> str | None:
        """The preferred served version of about.k8s.io with clusterproperties, or None
        when there is none (raises KubeError for any other failure)."""
        found = await discovery.served(client, properties.ABOUT_GROUP, "clusterproperties")
        return found.version if found is not None else None

    async def cluster_property(self, client: Client) -> None:
        backoff = api_backoff(self.clock)
        said_absent = False
        while True:
            try:
                group_version = await self.discover(client)
            except KubeError as exc:
                delay = backoff.next()
                log.warning("discovering %s: %s; retrying in %.1fs", properties.ABOUT_GROUP, exc,
                            delay)
                await self.clock.sleep(delay)
                continue
            backoff.reset()
            if group_version is None:
                if not said_absent:  # an optional CRD: said once, not at every look
                    log.info("no ClusterProperty API (%s) is served and --cluster-id is not "
                             "given: the cluster id is unknown, PreferClose imports answer "
                             "with every cluster's endpoints", properties.ABOUT_GROUP)
                    said_absent = True
                await self.clock.sleep(DISCOVER_INTERVAL)
                continue
            said_absent = False
            log.info("watching ClusterProperty %s (%s) for the cluster id",
                     " / ".join(properties.CLUSTER_ID_PROPERTIES), group_version)
            values: dict[str, str | None] = {}
            reflector = Reflector(client, property_resource(group_version, values), self.apply,
                                  self.metrics.invalid, self.config, lambda: None,
                                  discovered=True, metrics=self.metrics, clock=self.clock)
            try:
                await reflector.run()
            except NotServed as exc:
                # The CRD went away (or changed version): the id is no longer known.
                log.warning("%s; the cluster id is unknown until it is served again", exc)
                self.apply([SetClusterId(None)])
                await self.clock.sleep(backoff.next())

    async def node_zone(self, client: Client, node: str) -> None:
        backoff = api_backoff(self.clock)
        known: str | None = None
        first = True
        while True:
            try:
                obj = await client.get(f"/api/v1/nodes/{quote(node, safe='')}")
            except KubeError as exc:
                delay = backoff.next() if first else NODE_RECHECK
                log.warning("reading Node %s for its zone: %s; retrying in %.1fs%s", node, exc,
                            delay, "" if first else " (keeping the zone read before)")
                await self.clock.sleep(delay)
                continue
            zone = properties.node_zone(obj) if isinstance(obj, Mapping) else None
            if first or zone != known:
                log.info("topology zone %s (label %s of Node %s)", zone or "unknown",
                         properties.ZONE_LABEL, node)
                self.apply([SetTopologyZone(zone)])
                known, first = zone, False
            backoff.reset()
            await self.clock.sleep(NODE_RECHECK)
