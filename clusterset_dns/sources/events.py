"""``--events``: a Warning Event on each object the server rejects, from one replica.

One replica emits: the holder of a coordination.k8s.io Lease (``--events-lease``
in ``--events-namespace``), renewed every RENEW_SECONDS and taken over when its
holder stops renewing for LEASE_SECONDS. The Event's name is derived from the
object and the reason, so a second emission of the same rejection (by this
replica after a restart, or by the next holder) is refused by the API server as
existing: one Event per object and reason. At most BURST Events at once, then
one every REFILL_SECONDS; a POST refused as existing costs no token (at most
DUPLICATES_PER_SCAN are tried a scan), and the newest rejections are tried first,
so that a new holder's first Events are about what was rejected since, not the
repeats of its predecessor's. On taking the Lease, the holder lists the Events
that exist (RBAC: list events; without it, it tries each and is refused) and
sends none of those again. Rejected objects without a uid (refused by admission
after conversion) are not reported: an Event must name its object's uid for
``kubectl describe`` to show it. A cluster-scoped object (a ClusterProperty)
has its Event in ``default``, with no namespace in involvedObject: the core
Event API accepts no other namespace for one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.sources.kube import ApiError, KubeError, page_of
from clusterset_dns.zone.cache import IMPORT, SLICE, Cache, Rejection
from clusterset_dns.zone.model import ObjectKey

log = logging.getLogger(__name__)

LEASE_SECONDS = 15
RENEW_SECONDS = 5.0
SCAN_SECONDS = 1.0  # how often the leader looks for new rejections
BURST, REFILL_SECONDS = 20, 6.0  # Events sent at once, then one per REFILL_SECONDS
# POSTs refused as existing (sent by an earlier holder) cost no token, but ask the API
# server for something: at most this many a scan.
DUPLICATES_PER_SCAN = 100
SEED_PAGE = 500  # Events per page of the list read on taking the Lease
COMPONENT = "clusterset-dns"
REASON = "NotServedByDNS"
# Where the Event of a cluster-scoped object goes: core/v1 Events without eventTime
# (ours) about an object without a namespace are accepted in "default" only.
CLUSTER_EVENTS_NAMESPACE = "default"


class Client(Protocol):
    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any: ...

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any: ...


def _stamp(clock: Clock) -> str:
    return datetime.fromtimestamp(clock.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: Any) -> float:
    """A renewTime as the API server writes it (fromisoformat reads its "Z" since Python
    3.11); one that cannot be read proves no holder alive: long past, whatever the
    Lease's duration."""
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return -math.inf


def identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


class Elector:
    """Holds the Lease while it can; ``leader`` says whether it does now."""

    def __init__(self, client: Client, namespace: str, name: str, me: str,
                 on_change: Callable[[bool], None] = lambda _: None,
                 clock: Clock = SYSTEM) -> None:
        self.client, self.namespace, self.name, self.me = client, namespace, name, me
        self.leader = False
        self.on_change = on_change
        self.clock = clock
        self.terms = 0  # how many times this replica took the Lease (Emitter seeds per term)
        self._until = 0.0  # monotonic time our hold ends if not renewed

    @property
    def collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = _stamp(self.clock)
        return {"holderIdentity": self.me, "leaseDurationSeconds": LEASE_SECONDS,
                "acquireTime": acquired or now, "renewTime": now,
                "leaseTransitions": transitions}

    async def step(self) -> bool:
        """One try to take or renew the Lease; whether we hold it after."""
        started = self.clock.monotonic()
        try:
            lease = await self.client.get(f"{self.collection}/{self.name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            try:
                await self.client.send("POST", self.collection, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None, 0)})
            except ApiError as conflict:
                if conflict.status != 409:
                    raise
                return False  # another replica created it first
            self._until = started + LEASE_SECONDS
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or LEASE_SECONDS
        expired = self.clock.time() > _parse(spec.get("renewTime")) + float(duration)
        if holder != self.me and holder and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.me)
        lease["spec"] = self._spec(spec.get("acquireTime") if holder == self.me else None,
                                   transitions)
        try:
            await self.client.send("PUT", f"{self.collection}/{self.name}", lease)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return False  # someone else renewed or took it meanwhile
        self._until = started + LEASE_SECONDS
        return True

    async def run(self) -> None:
        while True:
            try:
                held = await self.step()
            except KubeError as exc:
                log.warning("events: Lease %s/%s: %s", self.namespace, self.name, exc)
                held = self.leader and self.clock.monotonic() < self._until
            if held != self.leader:
                self.leader = held
                self.terms += held
                log.info("events: %s the Lease %s/%s", "holding" if held else "not holding",
                         self.namespace, self.name)
                self.on_change(held)
            await self.clock.sleep(RENEW_SECONDS * self.clock.uniform(0.8, 1.0))


def event_name(kind: str, key: ObjectKey, reason: str) -> str:
    digest = hashlib.sha256(f"{kind}\0{key[0]}\0{key[1]}\0{reason}".encode()).hexdigest()
    return f"{key[1][:200]}.{digest[:16]}"


def event_namespace(key: ObjectKey) -> str:
    return key[0] or CLUSTER_EVENTS_NAMESPACE


def event_body(kind: str, key: ObjectKey, rejection: Rejection, me: str,
               previous: bool = False, clock: Clock = SYSTEM) -> dict[str, Any]:
    """``previous``: an earlier, valid version of the object is still served (§5.11).
    ``key``: ("", name) for a cluster-scoped object."""
    api_version, uid = rejection.reference
    now = _stamp(clock)
    what = ("this version not served by clusterset-dns (the last valid one still is)"
            if previous else "not served by clusterset-dns" if not rejection.served
            else "partly served by clusterset-dns")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(kind, key, rejection.reason),
                     "namespace": event_namespace(key)},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "name": key[1], "uid": uid,
                           **({"namespace": key[0]} if key[0] else {})},
        "reason": REASON, "type": "Warning",
        "message": f"{what}: {rejection.reason}"[:1024],
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "reportingInstance": me[:128], "firstTimestamp": now[:19] + "Z",
        "lastTimestamp": now[:19] + "Z", "count": 1,
    }


class Emitter:
    """While ``elector`` holds the Lease: an Event for each rejection not sent yet."""

    def __init__(self, client: Client, cache: Cache, elector: Elector,
                 clock: Clock = SYSTEM) -> None:
        self.client, self.cache, self.elector = client, cache, elector
        self.clock = clock
        self.sent: set[tuple[str, ObjectKey, str]] = set()  # by this replica (or refused)
        self.existing: set[str] = set()  # names of the Events listed on taking the Lease
        self.tokens = float(BURST)
        self._refilled = clock.monotonic()
        self._seeded_term = 0
        self.emitted = 0  # Events this replica created
        self.refused = 0  # POSTs refused as existing

    def _refill(self) -> bool:
        """Whether a token is there (one is spent only by an Event created or failed)."""
        now = self.clock.monotonic()
        self.tokens = min(BURST, self.tokens + (now - self._refilled) / REFILL_SECONDS)
        self._refilled = now
        return self.tokens >= 1

    async def seed(self) -> None:
        """The Events that exist (an earlier holder's): their names, never sent again.
        Read once a term; without the right to list Events every one is tried and
        refused instead, which costs requests but no token."""
        names: set[str] = set()
        params: dict[str, Any] = {"fieldSelector": f"reason={REASON},reportingComponent="
                                  f"{COMPONENT}", "limit": SEED_PAGE}
        try:
            while True:
                page = page_of(await self.client.get("/api/v1/events", params))
                for item in page.items:
                    meta = item.get("metadata")
                    name = meta.get("name") if isinstance(meta, dict) else None
                    if isinstance(name, str):
                        names.add(name)
                if not page.continue_token:
                    break
                params["continue"] = page.continue_token
        except KubeError as exc:
            log.info("events: the Events that exist could not be listed (%s); each "
                     "rejection is sent, and an existing one refused", exc)
            return
        self.existing = names
        log.info("events: %d Events exist already; they are not sent again", len(names))

    async def scan(self) -> None:
        if not self.elector.leader:
            return
        if self._seeded_term != self.elector.terms:
            self._seeded_term = self.elector.terms
            await self.seed()
        duplicates = 0
        # Newest first: the cache keeps rejections in the order they came (a changed
        # reason comes again), and a new holder's first tokens go to what is new.
        for (kind, key), rejection in list(reversed(self.cache.rejections.items())):
            mark = (kind, key, rejection.reason)
            if mark in self.sent or not rejection.reference[1]:
                continue
            name = event_name(kind, key, rejection.reason)
            if name in self.existing:
                self.existing.discard(name)  # marked sent instead
                self._mark(mark)
                continue
            if not self._refill() or duplicates >= DUPLICATES_PER_SCAN:
                return  # rate limited: the rest next time
            stored = (self.cache.imports if kind == IMPORT else
                      self.cache.slices if kind == SLICE else {})
            body = event_body(kind, key, rejection, self.elector.me, key in stored, self.clock)
            try:
                await self.client.send(
                    "POST", f"/api/v1/namespaces/{event_namespace(key)}/events", body)
                self.emitted += 1
                self.tokens -= 1
            except ApiError as exc:
                if exc.status != 409:
                    self.tokens -= 1
                    log.warning("events: %s %s: %s", kind, "/".join(filter(None, key)), exc)
                    continue
                duplicates += 1  # sent before (by us or another holder): costs no token
                self.refused += 1
            self._mark(mark)

    def _mark(self, mark: tuple[str, ObjectKey, str]) -> None:
        if len(self.sent) > 100_000:
            self.sent.clear()  # bounded; the API server still refuses repeats
        self.sent.add(mark)

    async def run(self) -> None:
        while True:
            try:
                await self.scan()
            except KubeError as exc:
                log.warning("events: %s", exc)
            await self.clock.sleep(SCAN_SECONDS)


async def run(client: Client, cache: Cache, namespace: str, lease: str) -> None:
    elector = Elector(client, namespace, lease, identity())
    emitter = Emitter(client, cache, elector)
    await asyncio.gather(elector.run(), emitter.run())
