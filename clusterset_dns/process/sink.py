"""Where a source's ops go (:class:`Sink`): this process's cache, then every worker's,
the serial stepped at most once a tick; and the memory a bulk load leaves, released.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
from collections.abc import Callable, Iterator

from clusterset_dns.base import metrics
from clusterset_dns.base.clock import SYSTEM
from clusterset_dns.process import workers
from clusterset_dns.zone import serials
from clusterset_dns.zone.cache import (
    Cache,
    Op,
    SetSerial,
    SetSynced,
)

BULK = 1000  # services rebuilt in one update: a (re)list or a big file
# Work of one slice of the answers built after the sync (Pending.build_some), in
# endpoints: a service counts SERVICE_COST plus its endpoints. Measured on the bench's
# ClusterSet (bench/kube_scale.py): a ClusterSetIP service takes about 0.1 ms to build,
# a Headless one about 13 us an endpoint, so a slice is about 2.5 ms.
SERVICE_COST, BUILD_SLICE = 8, 200


def slice_cost(cache: Cache) -> Callable[[tuple[str, str]], int]:
    """The work of building one service's answers, in endpoints."""
    def cost(service: tuple[str, str]) -> int:
        return SERVICE_COST + sum(len(piece.endpoints) for piece in cache.slices_of(service))
    return cost


async def build_pending(cache: Cache, budget: int = BUILD_SLICE) -> None:
    """Builds the answers a first list left waiting (``cache.pending``), a slice at a
    time with a turn of the event loop after each, so that queries keep being
    answered (a query for a name still waiting builds its service itself); the cyclic
    collector is off during a slice (what is built stays, and has no cycles), and
    what the build left is frozen and the heap trimmed at the end, as after a load."""
    cost = slice_cost(cache)
    while cache.pending:
        enabled = gc.isenabled()
        gc.disable()
        try:
            cache.pending.build_some(budget, cost)
        finally:
            if enabled:
                gc.enable()
        await asyncio.sleep(0)
    release_memory(collect=False)


def release_memory(collect: bool = True) -> None:
    """After a bulk load: moves what survived out of the cyclic garbage collector's
    sight (a full collection over every answer would stall queries for tens of ms;
    the data has no cycles, reference counting frees it), and hands the heap freed
    by the load (raw JSON pages, old answers) back to the OS, so the resident size
    reflects the data kept rather than the peak of a list.

    ``collect=False``: freeze without the full collection first (0.14 s at 10,000
    imports and 100,000 endpoints), for the first load, which makes no cyclic garbage
    (a full collection after it found none)."""
    if collect:
        gc.collect()
    gc.freeze()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Sink:
    """Where a source's ops go: this process's cache, then every worker's. When this
    process's apply raises (a bug), the workers do not get the update; the source's
    recovery (a relist that rebuilds) reaches them all.

    The serial steps at most once a tick (:mod:`serials`: 1/20 s) and never runs
    ahead of the clock: an update that comes while the serial already holds this
    tick waits for the next one (at most a tick), with every other update of that
    tick, and all of them are one step: one serial, one journal difference, one
    NOTIFY. The update that completes the first sync is applied at once (start-up
    does not wait) and steps a second past the clock (see Cache._rebuild_all): above
    every serial a previous run or another replica handed out, which were at most
    their clock."""

    def __init__(self, cache: Cache, pool: workers.WorkerPool, meters: metrics.Metrics,
                 on_serial: Callable[[], None] = lambda: None,
                 on_synced: Callable[[], None] = lambda: None) -> None:
        """``on_synced``: called once, when the cache is first synced and the answers
        the sync left to build are built."""
        self.cache = cache
        self.pool = pool
        self.metrics = meters
        self.on_serial = on_serial
        self.on_synced = on_synced
        self.clock = cache.clock
        self.synced = asyncio.Event()
        # The start-up window (first_load): the cyclic collector is off, and the first
        # sync freezes what the load left without a full collection.
        self._starting = False
        self.held: list[Op] = []  # updates waiting for the next tick
        self._timer: asyncio.TimerHandle | None = None
        self.building: asyncio.Task[None] | None = None  # build_pending, after the sync
        # Trigger times before this moment are changes made before the server ran: not
        # a programming delay of ours (kube-proxy drops them the same way). Observing
        # them put a slice changed days ago in the histogram at every start.
        self.started = self.clock()

    @contextlib.contextmanager
    def first_load(self) -> Iterator[None]:
        """The start-up window, around the wait for the first sync: the first load is a
        few hundred thousand objects that all stay (answers, models), so the cyclic
        collector, which would go over them again and again while they arrive (0.17 s of
        a 2.6 s start at 10,000 imports and 100,000 endpoints) and find nothing, is off;
        and the sync freezes what the load left without a full collection."""
        self._starting = True
        gc.disable()
        try:
            yield
        finally:
            gc.enable()
            self._starting = False

    def apply(self, ops: list[Op]) -> None:
        completes_sync = not self.synced.is_set() and any(
            isinstance(op, SetSynced) and op.synced for op in ops)
        now = self.clock()
        if not completes_sync and not serials.after(serials.at(now), self.cache.zone.serial):
            self.held.extend(ops)
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(
                    self.hold(now) + 0.001, self.flush)
            return
        self.held.extend(ops)
        self.flush()

    async def _build_pending(self) -> None:
        await build_pending(self.cache)
        self.on_synced()  # it reads the answers

    def hold(self, now: float) -> float:
        """Seconds updates arriving at ``now`` wait: until the clock's next serial, and at
        most a second whatever the serial (a clock set back must not hold answers for
        longer)."""
        return min(1.0, serials.wait(self.cache.zone.serial, now))

    def flush(self) -> None:
        """Applies the updates held for the next second (now)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.held:
            ops, self.held = self.held, []
            self._apply(ops)

    def _apply(self, ops: list[Op]) -> None:
        started = SYSTEM.monotonic()
        serial = self.cache.zone.serial
        try:
            applied = self.cache.apply(ops)
        finally:
            # Even an update that raised (a bug, rebuilt later) reaches the workers:
            # their caches keep matching this one, serial included.
            seconds = SYSTEM.monotonic() - started
            self.metrics.update_seconds.observe(seconds)
            # Served from here on (this process; the workers a moment later).
            if self.cache.programmed:
                now = self.clock()
                for kind, trigger in self.cache.programmed:
                    if trigger >= self.started:
                        self.metrics.programming.labels(kind).observe(max(0.0, now - trigger))
                self.cache.programmed.clear()
            self.pool.send([*ops, SetSerial(self.cache.zone.serial)], seconds)
            if self.cache.zone.serial != serial:
                self.on_serial()
        for rejected in applied.rejected:
            self.metrics.invalid(rejected.kind)
        # A first list comes in page by page (each below BULK): its load ends when the
        # cache is first synced.
        first_sync = self.cache.zone.synced and not self.synced.is_set()
        if applied.rebuilt >= BULK or first_sync:
            release_memory(collect=not (first_sync and self._starting))
        if first_sync:
            if self.cache.pending:
                self.building = asyncio.get_running_loop().create_task(
                    self._build_pending(), name="build-pending")
            else:
                self.on_synced()
        if self.cache.zone.synced:
            self.synced.set()
