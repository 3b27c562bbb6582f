"""The Kubernetes source: list, then watch from the list's resourceVersion.

One :class:`Reflector` per resource (and per namespace with --namespace):
- a paginated list gives the full state; it becomes ops that also delete what
  this reflector had but the list no longer has (a relist after 410 Gone
  removes what disappeared meanwhile);
- a watch with bookmarks from the list's resourceVersion; a stream that ends
  is resumed from the last resourceVersion seen; 410 Gone means relist;
- any error: log, count, back off (exponential, capped, with jitter) and
  resume. The cache is never flushed on an error: the last known data keeps
  being served while the API server is away.
Synced = every reflector has listed once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from clusterset_dns import convert, metrics
from clusterset_dns.cache import Op, PutImport, PutSlice, SetSynced
from clusterset_dns.config import Config
from clusterset_dns.kube import ApiError, KubeClient, KubeError
from clusterset_dns.model import ObjectKey

log = logging.getLogger(__name__)

PAGE_SIZE = 500
BACKOFF_FIRST, BACKOFF_CAP = 0.5, 30.0


class Client(Protocol):
    """What the reflectors need of the API client (the seam unit tests fake)."""

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30) -> Any: ...

    def stream(self, path: str, params: Mapping[str, Any],
               inactivity_timeout: float) -> Any: ...


class Gone(Exception):
    """The resourceVersion is too old: list again."""


class NotServed(Exception):
    """The discovered ServiceImport version is no longer served (CRD upgraded)."""


@dataclass(frozen=True, slots=True)
class Resource:
    label: str  # for logs and metrics: "serviceimports multicluster.x-k8s.io/v1beta1"
    path: str  # collection path, e.g. /apis/discovery.k8s.io/v1/endpointslices
    op_kind: str  # "import" or "slice": metric label and invalid-object kind
    selector: str | None  # label selector, applied by the API server
    to_model: Callable[[Mapping[str, Any], Callable[[str], None]], Any]
    put: Callable[[ObjectKey, Any], Op]  # the cache op storing (or, None, deleting) one


def import_resource(group_version: str, namespace: str | None) -> Resource:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return Resource(f"serviceimports {group_version}{' in ' + namespace if namespace else ''}",
                    f"/apis/{group_version}{scope}/serviceimports", "import", None,
                    convert.service_import, PutImport)


def slice_resource(namespace: str | None) -> Resource:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return Resource(f"endpointslices{' in ' + namespace if namespace else ''}",
                    f"/apis/discovery.k8s.io/v1{scope}/endpointslices", "slice",
                    convert.SERVICE_NAME_LABEL, convert.endpoint_slice, PutSlice)


class Backoff:
    def __init__(self) -> None:
        self.delay = BACKOFF_FIRST

    def next(self) -> float:
        """Full jitter over an exponentially growing, capped window."""
        delay = random.uniform(self.delay / 2, self.delay)
        self.delay = min(self.delay * 2, BACKOFF_CAP)
        return delay

    def reset(self) -> None:
        self.delay = BACKOFF_FIRST


class Reflector:
    def __init__(self, client: Client, resource: Resource, apply: Callable[[list[Op]], None],
                 invalid: Callable[[str], None], config: Config,
                 on_listed: Callable[[], None], discovered: bool = False) -> None:
        self.client = client
        self.resource = resource
        self.apply = apply
        self.invalid = invalid
        self.config = config
        self.on_listed = on_listed
        self.known: set[ObjectKey] = set()
        self.resource_version: str | None = None
        self.listed = False
        self.backoff = Backoff()
        self.discovered = discovered  # a 404 then means "discover again", not "retry"

    def _convert(self, obj: Mapping[str, Any]) -> tuple[ObjectKey, object | None] | None:
        """(key, model or None when DNS ignores it); None when the object is invalid."""
        what = convert.describe(obj)

        def warn(message: str) -> None:
            log.warning("%s: %s", what, message)

        try:
            key = convert.key_of(obj)
            return key, self.resource.to_model(obj, warn)
        except convert.InvalidObject as exc:
            log.warning("%s skipped: %s", what, exc)
            self.invalid(convert.kind_of(obj) or self.resource.op_kind)
            return None

    async def list(self) -> None:
        params: dict[str, Any] = {"limit": PAGE_SIZE}
        if self.resource.selector:
            params["labelSelector"] = self.resource.selector
        ops: list[Op] = []
        seen: set[ObjectKey] = set()
        count = 0
        while True:
            page = await self.client.get(self.resource.path, params)
            # Convert page by page: only the cut-down models outlive a page, so the
            # raw objects of a large list never all sit in memory at once.
            for obj in page.get("items") or []:
                count += 1
                converted = self._convert(obj)
                if converted is None:
                    invalid_key = _safe_key(obj)
                    if invalid_key is not None and invalid_key in self.known:
                        seen.add(invalid_key)  # invalid now: keep serving its last valid state
                    continue
                key, model = converted
                seen.add(key)
                ops.append(self.resource.put(key, model))
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            del page
            if not token:
                break
            params["continue"] = token
        for gone in self.known - seen:
            ops.append(self.resource.put(gone, None))
        self.known = seen
        self.resource_version = meta.get("resourceVersion")
        metrics.relists.labels(self.resource.op_kind).inc()
        self.apply(ops)
        log.info("listed %d %s (resourceVersion %s)", count, self.resource.label,
                 self.resource_version)
        if not self.listed:
            self.listed = True
            self.on_listed()

    async def watch(self) -> None:
        """Follows the stream until it ends (then returns) or fails (then raises)."""
        params: dict[str, Any] = {
            "resourceVersion": self.resource_version or "",
            "allowWatchBookmarks": True,
            # Spread renewals so that many servers do not reconnect in step.
            "timeoutSeconds": int(self.config.watch_timeout * random.uniform(0.9, 1.1)) or 1,
        }
        if self.resource.selector:
            params["labelSelector"] = self.resource.selector
        async for event in self.client.stream(self.resource.path, params,
                                              self.config.inactivity_timeout):
            kind, obj = event.get("type"), event.get("object") or {}
            metrics.last_event.labels(self.resource.op_kind).set(time.time())
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone(obj.get("message", "410 Gone"))
                raise ApiError(int(obj.get("code") or 0), str(obj.get("message")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                converted = self._convert(obj)
                if converted is not None:
                    key, model = converted
                    self.known.add(key)
                    self.apply([self.resource.put(key, model)])
            elif kind == "DELETED":
                deleted = _safe_key(obj)
                if deleted is not None:
                    self.known.discard(deleted)
                    self.apply([self.resource.put(deleted, None)])
            if version:
                self.resource_version = version
            self.backoff.reset()  # the stream works: forget earlier errors

    async def run(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self.list()
                    need_list = False
                await self.watch()
                metrics.watch_restarts.labels(self.resource.op_kind, "timeout").inc()
                log.debug("watch of %s ended; resuming", self.resource.label)
            except Gone as exc:
                log.info("%s: resourceVersion too old (%s); listing again",
                         self.resource.label, exc)
                metrics.watch_restarts.labels(self.resource.op_kind, "gone").inc()
                need_list = True
            except (KubeError, ValueError, KeyError, TypeError, AttributeError) as exc:
                if isinstance(exc, ApiError) and exc.status == 404 and self.discovered:
                    raise NotServed(f"{self.resource.label}: {exc}") from None
                if isinstance(exc, ApiError) and exc.status == 410:
                    need_list = True  # expired list continue token, or 410 as a status
                reason = "api-error" if isinstance(exc, ApiError) else "unreachable"
                metrics.watch_restarts.labels(self.resource.op_kind, reason).inc()
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1fs (serving the last known data)",
                            self.resource.label, exc, delay)
                await asyncio.sleep(delay)


def _safe_key(obj: Mapping[str, Any]) -> ObjectKey | None:
    try:
        return convert.key_of(obj)
    except convert.InvalidObject:
        return None


class KubeSource:
    """Discovers what to watch, then runs one reflector per resource and namespace."""

    def __init__(self, config: Config, apply: Callable[[list[Op]], None],
                 invalid: Callable[[str], None], client: Client | None = None) -> None:
        self.config = config
        self.apply = apply
        self.invalid = invalid
        self.client = client
        self.reflectors: list[Reflector] = []

    async def discover(self) -> list[str]:
        """Group/versions of ServiceImports: the configured ones, else the most preferred
        version of multicluster.x-k8s.io that serves ``serviceimports``.

        The group's preferred version alone is not enough: the ServiceExport CRD of
        another mcs-api release can keep a version of the group served that has no
        ServiceImports (v0.5.0 ServiceExport beside v0.4.1 ServiceImport)."""
        if self.config.serviceimport_apis:
            return list(self.config.serviceimport_apis)
        assert self.client is not None
        backoff = Backoff()
        while True:
            try:
                group = await self.client.get(f"/apis/{convert.GROUP}")
                versions = [str(v.get("groupVersion")) for v in group.get("versions") or []]
                preferred = (group.get("preferredVersion") or {}).get("groupVersion")
                if preferred in versions:
                    versions.remove(preferred)
                    versions.insert(0, preferred)
                for group_version in versions:
                    resources = await self.client.get(f"/apis/{group_version}")
                    if any(r.get("name") == "serviceimports"
                           for r in resources.get("resources") or []):
                        log.info("ServiceImport versions served: %s; watching %s",
                                 ", ".join(versions), group_version)
                        return [group_version]
                raise KubeError(f"no served version of {convert.GROUP} has serviceimports")
            except (KubeError, AttributeError, TypeError) as exc:
                delay = backoff.next()
                log.warning("discovering %s: %s (is the mcs-api CRD installed?); "
                            "retrying in %.1fs", convert.GROUP, exc, delay)
                await asyncio.sleep(delay)

    async def run(self) -> None:
        own_client = self.client is None
        if self.client is None:
            self.client = await KubeClient.connect(self.config.kubeconfig, self.config.context)
        try:
            slices = [self._reflector(slice_resource(ns)) for ns in self._namespaces()]
            self.reflectors = list(slices)
            await asyncio.gather(*(r.run() for r in slices), self._imports())
        finally:
            if own_client and isinstance(self.client, KubeClient):
                await self.client.close()

    def _namespaces(self) -> list[str | None]:
        return list(self.config.namespaces) or [None]

    def _reflector(self, resource: Resource, discovered: bool = False) -> Reflector:
        assert self.client is not None
        return Reflector(self.client, resource, self.apply, self.invalid, self.config,
                         self._on_listed, discovered)

    def _on_listed(self) -> None:
        # Both kinds must be there: slices may list before ServiceImports are discovered.
        kinds = {r.resource.op_kind for r in self.reflectors}
        if kinds == {"import", "slice"} and all(r.listed for r in self.reflectors):
            log.info("synced: every resource listed once")
            self.apply([SetSynced(True)])

    async def _imports(self) -> None:
        """ServiceImport reflectors; discovered again when their version stops being
        served (a CRD upgrade that drops a version must not stop the updates)."""
        known: set[ObjectKey] = set()
        backoff = Backoff()
        while True:
            discovered = not self.config.serviceimport_apis
            imports = [self._reflector(import_resource(gv, ns), discovered)
                       for gv in await self.discover() for ns in self._namespaces()]
            for reflector in imports:  # the next list deletes what the old version had
                reflector.known = {k for k in known
                                   if reflector.resource.path.count("/namespaces/") == 0
                                   or f"/namespaces/{k[0]}/" in reflector.resource.path}
            self.reflectors = [r for r in self.reflectors if r.resource.op_kind == "slice"]
            self.reflectors += imports
            try:
                await asyncio.gather(*(r.run() for r in imports))
            except NotServed as exc:
                known = set().union(*(r.known for r in imports))
                delay = backoff.next()
                log.warning("%s; discovering the ServiceImport API again in %.1fs", exc, delay)
                metrics.watch_restarts.labels("import", "not-served").inc()
                await asyncio.sleep(delay)
