"""``--events``: a Warning Event on each object the server rejects, from one replica.

One replica emits: the holder of a coordination.k8s.io Lease (``--events-lease``
in ``--events-namespace``), renewed every RENEW_SECONDS and taken over when its
holder stops renewing for LEASE_SECONDS. The Event's name is derived from the
object and the reason, so a second emission of the same rejection (by this
replica after a restart, or by the next holder) is refused by the API server as
existing: one Event per object and reason. At most BURST Events at once, then
one every REFILL_SECONDS. Rejected objects without a uid (refused by admission
after conversion) are not reported: an Event must name its object's uid for
``kubectl describe`` to show it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from clusterset_dns.sources.kube import ApiError, KubeError
from clusterset_dns.zone.cache import IMPORT, Cache, Rejection
from clusterset_dns.zone.model import ObjectKey

log = logging.getLogger(__name__)

LEASE_SECONDS = 15
RENEW_SECONDS = 5.0
SCAN_SECONDS = 1.0  # how often the leader looks for new rejections
BURST, REFILL_SECONDS = 20, 6.0  # Events sent at once, then one per REFILL_SECONDS
COMPONENT = "clusterset-dns"
REASON = "NotServedByDNS"


class Client(Protocol):
    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any: ...

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


class Elector:
    """Holds the Lease while it can; ``leader`` says whether it does now."""

    def __init__(self, client: Client, namespace: str, name: str, me: str,
                 on_change: Callable[[bool], None] = lambda _: None) -> None:
        self.client, self.namespace, self.name, self.me = client, namespace, name, me
        self.leader = False
        self.on_change = on_change
        self._until = 0.0  # monotonic time our hold ends if not renewed

    @property
    def collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = _now()
        return {"holderIdentity": self.me, "leaseDurationSeconds": LEASE_SECONDS,
                "acquireTime": acquired or now, "renewTime": now,
                "leaseTransitions": transitions}

    async def step(self) -> bool:
        """One try to take or renew the Lease; whether we hold it after."""
        started = time.monotonic()
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
        expired = time.time() > _parse(spec.get("renewTime")) + float(duration)
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
                held = self.leader and time.monotonic() < self._until
            if held != self.leader:
                self.leader = held
                log.info("events: %s the Lease %s/%s", "holding" if held else "not holding",
                         self.namespace, self.name)
                self.on_change(held)
            await asyncio.sleep(RENEW_SECONDS * random.uniform(0.8, 1.0))


def event_name(kind: str, key: ObjectKey, reason: str) -> str:
    digest = hashlib.sha256(f"{kind}\0{key[0]}\0{key[1]}\0{reason}".encode()).hexdigest()
    return f"{key[1][:200]}.{digest[:16]}"


def event_body(kind: str, key: ObjectKey, rejection: Rejection, me: str,
               previous: bool = False) -> dict[str, Any]:
    """``previous``: an earlier, valid version of the object is still served (§5.11)."""
    api_version, uid = rejection.reference
    now = _now()
    what = ("this version not served by clusterset-dns (the last valid one still is)"
            if previous else "not served by clusterset-dns" if not rejection.served
            else "partly served by clusterset-dns")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(kind, key, rejection.reason), "namespace": key[0]},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "namespace": key[0],
                           "name": key[1], "uid": uid},
        "reason": REASON, "type": "Warning",
        "message": f"{what}: {rejection.reason}"[:1024],
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "reportingInstance": me[:128], "firstTimestamp": now[:19] + "Z",
        "lastTimestamp": now[:19] + "Z", "count": 1,
    }


class Emitter:
    """While ``elector`` holds the Lease: an Event for each rejection not sent yet."""

    def __init__(self, client: Client, cache: Cache, elector: Elector) -> None:
        self.client, self.cache, self.elector = client, cache, elector
        self.sent: set[tuple[str, ObjectKey, str]] = set()  # by this replica (or refused)
        self.tokens = float(BURST)
        self._refilled = time.monotonic()
        self.emitted = 0  # Events this replica created

    def _take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(BURST, self.tokens + (now - self._refilled) / REFILL_SECONDS)
        self._refilled = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    async def scan(self) -> None:
        if not self.elector.leader:
            return
        for (kind, key), rejection in list(self.cache.rejections.items()):
            mark = (kind, key, rejection.reason)
            if mark in self.sent or not rejection.reference[1]:
                continue
            if not self._take():
                return  # rate limited: the rest next time
            stored = self.cache.imports if kind == IMPORT else self.cache.slices
            body = event_body(kind, key, rejection, self.elector.me, key in stored)
            try:
                await self.client.send("POST", f"/api/v1/namespaces/{key[0]}/events", body)
                self.emitted += 1
            except ApiError as exc:
                if exc.status != 409:  # 409: sent before (by us or another holder)
                    log.warning("events: %s %s/%s: %s", kind, *key, exc)
                    continue
            if len(self.sent) > 100_000:
                self.sent.clear()  # bounded; the API server still refuses repeats
            self.sent.add(mark)

    async def run(self) -> None:
        while True:
            try:
                await self.scan()
            except KubeError as exc:
                log.warning("events: %s", exc)
            await asyncio.sleep(SCAN_SECONDS)


async def run(client: Client, cache: Cache, namespace: str, lease: str) -> None:
    elector = Elector(client, namespace, lease, identity())
    emitter = Emitter(client, cache, elector)
    await asyncio.gather(elector.run(), emitter.run())
