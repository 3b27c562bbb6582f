"""List, then watch from the list's resourceVersion: one :class:`Reflector` per
resource (and per namespace with --namespace).

- a paginated list gives the full state; it becomes ops that also delete what
  this reflector had but the list no longer has (a relist after 410 Gone
  removes what disappeared meanwhile);
- a watch with bookmarks from the list's resourceVersion; a stream that ends
  is resumed from the last resourceVersion seen; 410 Gone means relist; a stream
  silent (not even a bookmark) for --inactivity-timeout is dropped and resumed;
- before a watch is resumed, a one-object list asks the API server for its
  current resourceVersion: one lower than ours means its storage went back in
  time (etcd restored from a backup; the watch would wait silently for a
  revision that never comes), and we relist;
- every --relist-interval (jittered) a full relist repairs any drift; what it
  finds different is counted;
- events are coalesced per object while they wait to be applied (a storm of
  updates of one large slice costs one rebuild, not one per update) and applied
  in short chunks with a yield to the event loop between them, so that queries
  keep being answered.

Errors are classified where they arise. API and network errors (every
:class:`kube.KubeError`, shape errors included) are logged, counted and retried
with back-off; the cache is never flushed on an error: the last known data
keeps being served. A bad object is invalid: counted and skipped. Anything else
is a bug: logged with its traceback, counted as reason="bug", and the reflector
starts over with a full relist that rebuilds every service it feeds, so that
an update aborted half way does not leave answers half built.

Time (back-offs, jitter, the inactivity and relist timers) is the clock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from clusterset_dns.base.clock import SYSTEM, Backoff, Clock
from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import convert
from clusterset_dns.sources.kube import (
    ApiError,
    Event,
    Inactive,
    KubeError,
    event_of,
    page_of,
)
from clusterset_dns.sources.resource import Client, Gone, NotServed, Resource
from clusterset_dns.zone.model import ObjectKey
from clusterset_dns.zone.ops import IMPORT, SLICE, Op, PutImport, PutRejected, PutSlice

log = logging.getLogger(__name__)

# List pages are sized by bytes (a body is read whole, the next one prefetched): each
# asks for what PAGE_BYTES holds, the first of objects as large as the API stores, the
# next at the largest bytes per item so far, at most twice the page before, between 1
# (an object over the budget, alone) and PAGE_SIZE; never 0 (the API's "no limit").
PAGE_SIZE, PAGE_BYTES = 500, 4 << 20
MAX_OBJECT_BYTES = 2 << 20  # etcd's default request limit (1.5 MiB), as JSON, rounded up
FIRST_PAGE = max(1, PAGE_BYTES // MAX_OBJECT_BYTES)
BACKOFF_FIRST, BACKOFF_CAP = 0.5, 30.0
# Longest stretch of watch work (reading events, converting and applying them) before
# the event loop gets a turn to answer queries. One object's rebuild is not split.
SLICE_SECONDS = 0.005
RELIST_JITTER = 0.2  # the periodic relist comes at interval * (1 +- this)


def api_backoff(clock: Clock) -> Backoff:
    """The back-off of API and network errors."""
    return Backoff(clock, BACKOFF_FIRST, BACKOFF_CAP)


class Reflector:
    def __init__(self, client: Client, resource: Resource, apply: Callable[[list[Op]], None],
                 invalid: Callable[[str], None], config: Config,
                 on_listed: Callable[[], None], discovered: bool = False, *,
                 metrics: Metrics, clock: Clock = SYSTEM) -> None:
        self.client = client
        self.clock = clock
        self.metrics = metrics
        self.resource = resource
        self.apply = apply
        self.invalid = invalid
        self.config = config
        self.on_listed = on_listed
        # What this reflector has put in the cache: key -> model (None: ignored by DNS).
        # The models are the cache's own objects; only the dict is extra.
        self.known: dict[ObjectKey, object | None] = {}
        self.resource_version: str | None = None
        self.heard = 0.0  # when the watch stream last said anything (the clock's time)
        self.listed = False
        self.backoff = api_backoff(clock)
        self.discovered = discovered  # a 404 then means "discover again", not "retry"
        # Events read but not applied yet, latest per object (coalescing).
        self.pending: dict[ObjectKey, Event] = {}
        # Keys of updates that raised (may be half applied): the rebuild deletes them too.
        self.suspect: set[ObjectKey] = set()
        # Objects that failed to convert, reported to the cache (PutRejected): their
        # names' empty answers say why. Cleared when they are deleted or valid again.
        self.rejected: set[ObjectKey] = set()
        self.kind = resource.kind or (IMPORT if resource.op_kind == "import" else SLICE)
        self._rejections: list[Op] = []  # PutRejected ops waiting for the next apply
        self.next_relist = self._relist_due()

    def _relist_due(self) -> float | None:
        interval = self.config.relist_interval
        if not interval:
            return None
        return self.clock.monotonic() + self.clock.jitter(interval, RELIST_JITTER)

    def _key_of(self, obj: Mapping[str, Any]) -> ObjectKey:
        key = convert.key_of(obj)  # raises InvalidObject
        return ("", key[1]) if self.resource.cluster_scoped else key

    def _safe_key(self, obj: Mapping[str, Any]) -> ObjectKey | None:
        with contextlib.suppress(convert.InvalidObject):
            return self._key_of(obj)
        return None

    def _convert(self, obj: Mapping[str, Any]) -> tuple[ObjectKey, object | None] | None:
        """(key, model or None when DNS ignores it); None when the object is invalid."""
        what = convert.describe(obj)

        def warn(message: str) -> None:
            log.warning("%s: %s", what, message)

        try:
            key = self._key_of(obj)
            converted = key, self.resource.to_model(obj, warn)
        except convert.InvalidObject as exc:
            log.warning("%s skipped: %s", what, exc)
            self.invalid(convert.kind_of(obj) or self.resource.op_kind)
            key_seen = self._safe_key(obj)
            if key_seen is not None:
                self.rejected.add(key_seen)
                api_version, uid = convert.reference(obj)
                service = None if self.resource.cluster_scoped else convert.service_key(obj)
                self._rejections.append(PutRejected(self.kind, key_seen, service, str(exc), (
                    api_version or self.resource.api_version, uid)))
            return None
        if key in self.rejected:
            self.rejected.discard(key)  # the put clears it in the cache
        return converted

    def _convert_page(self, items: Sequence[Mapping[str, Any]],
                      found: dict[ObjectKey, object | None]) -> int:
        """Converts one list page into ``found``; returns how many objects it held.
        Page by page: only the cut-down models outlive a page, so the raw objects of
        a large list never all sit in memory at once."""
        for obj in items:
            converted = self._convert(obj)
            if converted is None:
                invalid_key = self._safe_key(obj)
                if invalid_key is not None and invalid_key in self.known:
                    # invalid now: keep serving its last valid state
                    found[invalid_key] = self.known[invalid_key]
                continue
            key, model = converted
            found[key] = model
        return len(items)

    def _put_page(self, items: Sequence[Mapping[str, Any]],
                  found: dict[ObjectKey, object | None]) -> int:
        """A page of a first list into ``found`` and the cache at once (nothing known:
        nothing to delete); returns how many objects it held."""
        part: dict[ObjectKey, object | None] = {}
        count = self._convert_page(items, part)
        found.update(part)
        # Known before applied: if this list fails half way, the next one deletes what
        # it put in and is gone by then.
        self.known.update(part)
        if part:
            self._apply([self.resource.put(key, model) for key, model in part.items()])
        return count

    def _params(self) -> dict[str, Any]:
        params = {"labelSelector": self.resource.selector} if self.resource.selector else {}
        if self.resource.field_selector:
            params["fieldSelector"] = self.resource.field_selector
        return params

    async def relist(self, reason: str = "initial", rebuild: bool = False) -> None:
        """A full list; ``rebuild``: re-put every object so that every service this
        reflector feeds is rebuilt (after a bug aborted an update half way)."""
        params: dict[str, Any] = {"limit": FIRST_PAGE, **self._params()}
        sizes: list[int] = []  # body bytes of each page, as the client reports them
        largest = 0.0  # bytes per item of the page with the largest items so far
        found: dict[ObjectKey, object | None] = {}
        count = 0
        rejected_before, self.rejected = self.rejected, set()
        path = self.resource.path
        # Nothing known (the first list, mostly): nothing can have to be deleted, so each
        # page goes into the cache as soon as it is converted, and its answers are built
        # while the API server prepares the next page, instead of all of them after the
        # last one. Otherwise the list is applied in one update at the end, deletions of
        # what it lacks included.
        streaming = not self.known and not rebuild
        streamed = 0  # items of the first response, read as it arrived (see below)

        def stream(items: list[dict[str, Any]]) -> None:
            nonlocal count, streamed
            streamed += len(items)
            count += self._put_page(items, found)

        # Nothing known: the first request asks for resourceVersion 0, which the API
        # server answers from its watch cache (as client-go's informers start): all of
        # it in one response whatever the limit, at a fraction of the API server's CPU
        # of pages read from etcd. It is read as it arrives (liststream), so its items
        # never all exist at once. An API server without a watch cache (or before it is
        # filled) pages it: the pages after it go on as below, at the list's version.
        # Any later list is consistent (no resourceVersion): it must see every deletion.
        first = {**params, "resourceVersion": "0"} if streaming else params
        # The next page is asked for before this one is converted: the API server
        # (another process, another core) prepares it meanwhile. One turn of the event
        # loop sends the request; without it, it would leave after the conversion.
        fetch = asyncio.ensure_future(self.client.get(
            path, first, sizes=sizes, each=stream if streaming else None))
        try:
            while True:
                page = page_of(await fetch)
                token, version = page.continue_token, page.resource_version
                items = len(page.items) or streamed
                streamed = 0
                if sizes and items:
                    largest = max(largest, sizes[-1] / items)
                    params["limit"] = page_limit(params["limit"], largest)
                if token:
                    fetch = asyncio.ensure_future(
                        self.client.get(path, {**params, "continue": token}, sizes=sizes))
                    await asyncio.sleep(0)
                if streaming:
                    count += self._put_page(page.items, found)
                else:
                    count += self._convert_page(page.items, found)
                del page
                if not token:
                    break
        finally:
            if not fetch.done():
                fetch.cancel()  # the relist was cancelled (stop) while a page was asked
        if self.listed:
            self._count_drift(found, {} if streaming else self.known, reason)
        ops: list[Op] = self._take_rejections()
        # Rejected before and absent from this list: deleted meanwhile.
        ops += [PutRejected(self.kind, key, None, None)
                for key in rejected_before - self.rejected if key not in found]
        if streaming:
            pass  # every page is in already
        elif rebuild:
            ops += [self.resource.put(key, None) for key in self.known.keys() | self.suspect]
            ops += [self.resource.put(key, model) for key, model in found.items()]
        else:
            ops += [self.resource.put(key, None) for key in self.known if key not in found]
            ops += [self.resource.put(key, model) for key, model in found.items()]
        self.pending.clear()  # the list is newer than any event still waiting
        self.metrics.relists.labels(self.resource.op_kind, reason).inc()
        if ops:
            self._apply(ops)
        self.known, self.suspect = found, set()
        self.resource_version = version
        self.next_relist = self._relist_due()
        log.info("listed %d %s (resourceVersion %s)", count, self.resource.description, version)
        if not self.listed:
            self.listed = True
            self.on_listed()

    def _count_drift(self, found: Mapping[ObjectKey, object | None],
                     known: Mapping[ObjectKey, object | None], reason: str) -> None:
        """What a relist finds that the watch had not delivered (``known``: what this
        reflector had before the list)."""
        added = sum(1 for key in found if key not in known)
        removed = sum(1 for key in known if key not in found)
        changed = sum(1 for key, model in found.items()
                      if key in known and known[key] != model)
        for change, number in (("added", added), ("removed", removed), ("changed", changed)):
            if number:
                self.metrics.relist_drift.labels(self.resource.op_kind, change).inc(number)
        if added or removed or changed:
            log.warning("%s: the %s relist found %d added, %d removed, %d changed objects "
                        "that the watch had not delivered; repaired", self.resource.description,
                        reason, added, removed, changed)

    async def went_back(self) -> bool:
        """True when the API server's current resourceVersion is lower than ours: its
        storage was restored to an earlier state, and a watch from our version would
        wait, silently, for a revision that may never come."""
        if self.resource_version is None:
            return False
        page = page_of(await self.client.get(self.resource.path, {"limit": 1, **self._params()}))
        if page.resource_version is None or not _older(page.resource_version,
                                                       self.resource_version):
            return False
        log.warning("%s: the API server is at resourceVersion %s, before ours (%s): its "
                    "storage went back in time (restored from a backup?); listing again",
                    self.resource.description, page.resource_version, self.resource_version)
        return True

    async def watch(self) -> None:
        """Follows the stream until it ends (then returns) or fails (then raises).

        A reader task takes events off the stream into :attr:`pending` (latest per
        object); this coroutine applies them whenever the reader waits for the
        network, in chunks (see :meth:`_flush`) with a yield in between."""
        timeout = self.clock.jitter(self.config.watch_timeout, 0.1)
        if self.next_relist is not None:  # end in time for the periodic relist
            timeout = min(timeout, max(1.0, self.next_relist - self.clock.monotonic()))
        params: dict[str, Any] = {
            "resourceVersion": self.resource_version or "",
            "allowWatchBookmarks": True,
            # Spread renewals so that many servers do not reconnect in step.
            "timeoutSeconds": int(timeout) or 1,
            **self._params(),
        }
        wake = asyncio.Event()
        self.heard = self.clock.monotonic()
        reader = asyncio.create_task(self._read(
            self.client.stream(self.resource.path, params), wake))
        silence = asyncio.create_task(self._silence(self.config.inactivity_timeout))
        try:
            while not reader.done():
                waiter = asyncio.create_task(wake.wait())
                await asyncio.wait({reader, waiter, silence},
                                   return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                wake.clear()
                await self._flush()
                if silence.done():
                    silence.result()  # raises Inactive, after applying what came before
            reader.result()  # raises what ended the stream, after applying what came before
        finally:
            reader.cancel()
            silence.cancel()

    async def _silence(self, limit: float) -> None:
        """Raises :class:`kube.Inactive` once the stream has said nothing (not even a
        bookmark) for ``limit`` seconds: a stalled API server, or a connection that died
        without a word, ends no stream by itself."""
        while True:
            quiet = self.clock.monotonic() - self.heard
            if quiet >= limit:
                raise Inactive(f"watch {self.resource.path}: silent for {limit:g}s")
            await self.clock.sleep(limit - quiet)

    async def _read(self, stream: AsyncIterator[Any], wake: asyncio.Event) -> None:
        last_yield = self.clock.monotonic()
        async for raw in stream:
            self.heard = self.clock.monotonic()
            event = event_of(raw)
            self.metrics.last_event.labels(self.resource.op_kind).set(self.clock.time())
            if event.type == "ERROR":
                code = event.object.get("code")
                if code == 410:
                    raise Gone(str(event.object.get("message", "410 Gone")))
                raise ApiError(code if isinstance(code, int) else 0,
                               str(event.object.get("message")))
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                key = self._safe_key(event.object)
                if key is None:
                    if event.type != "DELETED":
                        self._convert(event.object)  # logs and counts it as invalid
                else:
                    self.pending.pop(key, None)  # re-inserted last: keeps event order
                    self.pending[key] = event
                    wake.set()
            if event.resource_version:
                self.resource_version = event.resource_version
            self.backoff.reset()  # the stream works: forget earlier errors
            # Parsing a burst that is already buffered does not wait for the network:
            # let queries (and the applier) in now and then.
            if self.clock.monotonic() - last_yield > SLICE_SECONDS:
                await asyncio.sleep(0)
                last_yield = self.clock.monotonic()

    async def _flush(self) -> None:
        """Applies :attr:`pending`: converted now (only the latest version of each object
        is converted); objects are converted for about SLICE_SECONDS, then applied
        together as one update, then the loop gets a turn."""
        while self.pending:
            batch, self.pending = self.pending, {}
            items = iter(batch.items())
            done = False
            while not done:
                started = self.clock.monotonic()
                ops: list[Op] = []
                while True:  # at least one object per chunk, however long it takes
                    item = next(items, None)
                    if item is None:
                        done = True
                        break
                    op = self._op_of(*item)
                    if op is not None:
                        ops.append(op)
                    if self.clock.monotonic() - started >= SLICE_SECONDS:
                        break
                if ops or self._rejections:
                    self._apply(ops)
                await asyncio.sleep(0)

    def _take_rejections(self) -> list[Op]:
        ops, self._rejections = self._rejections, []
        return ops

    def _apply(self, ops: list[Op]) -> None:
        if self._rejections:
            ops = [*ops, *self._take_rejections()]
        try:
            self.apply(ops)
        except Exception:
            # Half applied, maybe: remember what it touched for the rebuild.
            self.suspect.update(op.key for op in ops if isinstance(op, PutImport | PutSlice))
            raise

    def _op_of(self, key: ObjectKey, event: Event) -> Op | None:
        if event.type == "DELETED":
            if key in self.rejected:
                self.rejected.discard(key)
                if key not in self.known:
                    return PutRejected(self.kind, key, None, None)
            if key not in self.known:
                return None
            del self.known[key]
            return self.resource.put(key, None)
        converted = self._convert(event.object)
        if converted is None:
            return None  # invalid: the last valid version (if any) keeps being served
        self.known[key] = converted[1]
        return self.resource.put(key, converted[1])

    async def run(self) -> None:
        reason: str | None = "initial"  # why the next step is a list (None: watch)
        rebuild = False
        while True:
            try:
                if reason is None and await self.went_back():
                    self.metrics.watch_restarts.labels(self.resource.op_kind, "rv-backwards").inc()
                    reason = "rv-backwards"
                if reason is not None:
                    await self.relist(reason, rebuild)
                    reason, rebuild = None, False
                await self.watch()
                if self.next_relist is not None and self.clock.monotonic() >= self.next_relist:
                    reason = "periodic"
                    continue
                self.metrics.watch_restarts.labels(self.resource.op_kind, "timeout").inc()
                log.debug("watch of %s ended; resuming", self.resource.description)
            except Gone as exc:
                log.info("%s: resourceVersion too old (%s); listing again",
                         self.resource.description, exc)
                self.metrics.watch_restarts.labels(self.resource.op_kind, "gone").inc()
                reason = "gone"
            except KubeError as exc:
                if isinstance(exc, ApiError) and exc.status == 404 and self.discovered:
                    raise NotServed(f"{self.resource.description}: {exc}") from None
                if isinstance(exc, ApiError) and exc.status == 410:
                    reason = "gone"  # expired list continue token, or 410 as a status
                cause = ("api-error" if isinstance(exc, ApiError)
                         else "inactive" if isinstance(exc, Inactive) else "unreachable")
                self.metrics.watch_restarts.labels(self.resource.op_kind, cause).inc()
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1fs (serving the last known data)",
                            self.resource.description, exc, delay)
                await self.clock.sleep(delay)
            except (NotServed, asyncio.CancelledError):
                raise
            except Exception:
                # A bug, not the API server's doing: say so loudly, then start over with
                # a list that rebuilds everything this reflector feeds (the failed update
                # may have stopped half way). Backed off: a bug that repeats on every
                # list must not spin.
                self.metrics.watch_restarts.labels(self.resource.op_kind, "bug").inc()
                delay = self.backoff.next()
                log.exception("%s: internal error (a bug; please report it); rebuilding "
                              "from a full list in %.1fs", self.resource.description, delay)
                self.pending.clear()
                reason, rebuild = "bug", True
                await self.clock.sleep(delay)


def page_limit(previous: int, largest: float) -> int:
    """The next page's limit after one of ``previous``, at ``largest`` bytes per item."""
    return max(1, min(PAGE_SIZE, 2 * previous, int(PAGE_BYTES // max(largest, 1.0))))


def _older(version: str, than: str) -> bool:
    """resourceVersions are opaque strings, but every API server backed by etcd3 hands out
    etcd revisions (decimal integers); anything else is never called older."""
    if not (version.isdigit() and than.isdigit()):
        return False
    return int(version) < int(than)

