"""The Kubernetes source: discovers what to watch, then runs one
:class:`reflector.Reflector` per resource (and per namespace with --namespace).
Synced = every reflector has listed once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import convert, discovery
from clusterset_dns.sources.kube import KubeClient, KubeConfigError, KubeError
from clusterset_dns.sources.reflector import Reflector, api_backoff
from clusterset_dns.sources.resource import Client, NotServed, Resource
from clusterset_dns.zone.model import ObjectKey
from clusterset_dns.zone.ops import IMPORT, SLICE, Op, PutImport, PutSlice, SetSynced

log = logging.getLogger(__name__)


def import_resource(group_version: str, namespace: str | None) -> Resource:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return Resource(f"serviceimports {group_version}{' in ' + namespace if namespace else ''}",
                    f"/apis/{group_version}{scope}/serviceimports", "import", None,
                    convert.service_import, PutImport, kind=IMPORT, api_version=group_version)


def slice_resource(namespace: str | None) -> Resource:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return Resource(f"endpointslices{' in ' + namespace if namespace else ''}",
                    f"/apis/discovery.k8s.io/v1{scope}/endpointslices", "slice",
                    convert.SERVICE_NAME_LABEL, convert.endpoint_slice, PutSlice, kind=SLICE,
                    api_version=convert.SLICE_API_VERSION)


class KubeSource:
    """Discovers what to watch, then runs one reflector per resource and namespace."""

    def __init__(self, config: Config, apply: Callable[[list[Op]], None],
                 metrics: Metrics, client: Client | None = None,
                 extra: Sequence[Callable[[Client], Awaitable[None]]] = (),
                 clock: Clock = SYSTEM) -> None:
        """``extra``: more tasks run with the same client, as long as the source runs
        (the server's own locality, :mod:`locality`)."""
        self.config = config
        self.clock = clock
        self.apply = apply
        self.metrics = metrics
        self.client = client
        self.extra = extra
        self.reflectors: list[Reflector] = []

    async def discover(self) -> list[str]:
        """Group/versions of ServiceImports: the configured ones, else the most preferred
        version of multicluster.x-k8s.io that serves ``serviceimports``."""
        if self.config.serviceimport_apis:
            return list(self.config.serviceimport_apis)
        assert self.client is not None
        backoff = api_backoff(self.clock)
        while True:
            try:
                found = await discovery.served(self.client, convert.GROUP, "serviceimports")
                if found is not None and found.version is not None:
                    log.info("ServiceImport versions served: %s; watching %s",
                             ", ".join(found.versions), found.version)
                    return [found.version]
                raise KubeError(f"{convert.GROUP} is not served" if found is None else
                                f"no served version of {convert.GROUP} has serviceimports")
            except KubeError as exc:
                delay = backoff.next()
                log.warning("discovering %s: %s (is the mcs-api CRD installed?); "
                            "retrying in %.1fs", convert.GROUP, exc, delay)
                await self.clock.sleep(delay)

    async def run(self) -> None:
        own_client = self.client is None
        if self.client is None:
            try:
                self.client = await KubeClient.connect(self.config.kubeconfig,
                                                       self.config.context)
            except KubeConfigError as exc:
                raise ConfigError(str(exc)) from None
        try:
            slices = [self._reflector(slice_resource(ns)) for ns in self._namespaces()]
            self.reflectors = list(slices)
            client = self.client
            await asyncio.gather(*(r.run() for r in slices), self._imports(),
                                 *(task(client) for task in self.extra))
        finally:
            if own_client and isinstance(self.client, KubeClient):
                await self.client.close()

    def _namespaces(self) -> list[str | None]:
        return list(self.config.namespaces) or [None]

    def _reflector(self, resource: Resource, discovered: bool = False) -> Reflector:
        assert self.client is not None
        return Reflector(self.client, resource, self.apply, self.metrics.invalid, self.config,
                         self._on_listed, discovered, metrics=self.metrics, clock=self.clock)

    def _on_listed(self) -> None:
        # Both kinds must be there: slices may list before ServiceImports are discovered.
        kinds = {r.resource.op_kind for r in self.reflectors}
        if kinds == {"import", "slice"} and all(r.listed for r in self.reflectors):
            log.info("synced: every resource listed once")
            self.apply([SetSynced(True)])

    async def _imports(self) -> None:
        """ServiceImport reflectors; discovered again when their version stops being
        served (a CRD upgrade that drops a version must not stop the updates)."""
        known: dict[ObjectKey, object | None] = {}
        backoff = api_backoff(self.clock)
        while True:
            discovered = not self.config.serviceimport_apis
            imports = [self._reflector(import_resource(gv, ns), discovered)
                       for gv in await self.discover() for ns in self._namespaces()]
            for reflector in imports:  # the next list deletes what the old version had
                reflector.known = {k: m for k, m in known.items()
                                   if reflector.resource.path.count("/namespaces/") == 0
                                   or f"/namespaces/{k[0]}/" in reflector.resource.path}
            self.reflectors = [r for r in self.reflectors if r.resource.op_kind == "slice"]
            self.reflectors += imports
            try:
                await asyncio.gather(*(r.run() for r in imports))
            except NotServed as exc:
                known = {k: m for r in imports for k, m in r.known.items()}
                delay = backoff.next()
                log.warning("%s; discovering the ServiceImport API again in %.1fs", exc, delay)
                self.metrics.watch_restarts.labels("import", "not-served").inc()
                await self.clock.sleep(delay)
