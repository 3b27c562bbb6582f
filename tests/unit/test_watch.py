"""The Kubernetes source against a fake API client (the ``reflector.Client`` seam).

Every list response and watch stream is scripted. When a reflector asks for a
watch and no script is left, the fake stream stays open (like an idle watch)
and the test inspects the cache, then cancels the reflector.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert, kube, liststream, reflector, watch
from clusterset_dns.sources.kube import ApiError, KubeClient, KubeError
from clusterset_dns.zone.cache import Cache, Op, PutImport, PutSlice, SetSynced
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .fakeclock import FakeClock
from .helpers import DEFAULT_UDP_CAP, ZONE, ask, query

GV = "multicluster.x-k8s.io/v1beta1"
IMPORTS_PATH = f"/apis/{GV}/serviceimports"
SLICES_PATH = "/apis/discovery.k8s.io/v1/endpointslices"

WEB = service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")])
WEB2 = service_import("web", ips=["10.1.0.2"], ports=[port(80, "TCP", "http")])
WEB_BAD = service_import("web", type_="Bogus", ips=["10.1.0.3"])
DB = service_import("db", type_="Headless")
API = service_import("api", namespace="other", ips=["10.9.0.1"])
BAD_NEW = service_import("newbad", type_="Bogus")
DB_EAST = endpoint_slice("db-east", "db", cluster="east", endpoints=[endpoint("10.2.0.1")])
DB_EAST2 = endpoint_slice("db-east", "db", cluster="east", endpoints=[endpoint("10.2.0.9")])
DB_WEST = endpoint_slice("db-west", "db", cluster="west", endpoints=[endpoint("10.3.0.1")])
SLICE_BAD = endpoint_slice("db-east", None, cluster="east", endpoints=[endpoint("10.2.0.7")])


def page(*items: dict[str, Any], rv: str | None = None,
         cont: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if rv is not None:
        meta["resourceVersion"] = rv
    if cont is not None:
        meta["continue"] = cont
    return {"kind": "List", "metadata": meta, "items": list(items)}


def event(kind: str, obj: dict[str, Any], rv: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = rv
    return {"type": kind, "object": obj}


def bookmark(rv: str, kind: str = "ServiceImport") -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": GV,
                                           "metadata": {"resourceVersion": rv}}}


def error_event(code: int, message: str = "too old resource version") -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                                        "status": "Failure", "code": code, "message": message}}


ListItem = dict[str, Any] | BaseException | Callable[[], Awaitable[dict[str, Any]]]


class Unexpected(BaseException):
    """A call the script did not plan for: ends the test (no ``except Exception`` stops it)."""


class FakeClient:
    """Scripted ``get`` answers and watch streams, per path; records every call.

    A one-object list without sizes (``limit=1``, the resourceVersion probe before a
    watch is resumed; a list page asks for its body's size) is answered with
    :attr:`current` of the path (no resourceVersion when unset) and recorded in
    :attr:`probes`, not in :attr:`gets`."""

    def __init__(self, clock: FakeClock | None = None,
                 snapshot: Callable[[], Any] = lambda: None) -> None:
        self.clock = clock or FakeClock()
        self.current: dict[str, str] = {}
        self.probes: list[str] = []
        self.lists: dict[str, list[ListItem]] = defaultdict(list)
        self.streams: dict[str, list[list[Any]]] = defaultdict(list)
        self.gets: list[tuple[str, dict[str, Any]]] = []
        self.watches: list[tuple[str, dict[str, Any], Any]] = []
        self.hanging: set[str] = set()
        self.snapshot = snapshot
        self.streamed: list[str] = []  # paths of the gets read as they arrived (each=)

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, sizes: list[int] | None = None,
                  each: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        """``each``: the page's items go there, in batches as the real client hands
        them over (liststream.STREAM_BATCH), and the page comes back without them."""
        got = await self._get(path, params, timeout, sizes)
        if each is None or not isinstance(got, dict):
            return got
        self.streamed.append(path)
        items = got.get("items") or []
        if not isinstance(items, list):
            raise KubeError("reading: items is neither an array nor null")  # as liststream
        for start in range(0, len(items), liststream.STREAM_BATCH):
            batch = items[start : start + liststream.STREAM_BATCH]
            good = list(itertools.takewhile(lambda item: isinstance(item, dict), batch))
            if good:
                each(good)
            if len(good) < len(batch):  # what was read before it stays read
                raise KubeError("reading: an item is not an object")
        return {**got, "items": []}

    async def _get(self, path: str, params: Mapping[str, Any] | None,
                   timeout: float, sizes: list[int] | None) -> Any:
        if (params or {}).get("limit") == 1 and sizes is None:  # a list page asks for sizes
            self.probes.append(path)
            return page(rv=self.current.get(path))
        self.gets.append((path, dict(params or {})))
        if not self.lists[path]:
            raise Unexpected(f"unexpected GET {path} {params}")
        item = self.lists[path].pop(0)
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return await item()
        if sizes is not None:  # as the real client reports the body's length
            sizes.append(len(json.dumps(item)))
        return copy.deepcopy(item)

    def stream(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self.watches.append((path, dict(params), self.snapshot()))
        script = self.streams[path].pop(0) if self.streams[path] else None
        return self._events(path, script)

    async def _events(self, path: str, script: list[Any] | None) -> AsyncIterator[dict[str, Any]]:
        if script is None:
            self.hanging.add(path)
            await asyncio.Event().wait()  # an idle watch, until the test cancels
        for item in script or ():
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, float):  # the stream stays quiet this long
                await self.clock.sleep(item)
                continue
            yield copy.deepcopy(item)

    def watch_params(self, path: str) -> list[dict[str, Any]]:
        return [params for p, params, _ in self.watches if p == path]

    def get_params(self, path: str) -> list[dict[str, Any]]:
        return [params for p, params in self.gets if p == path]


# How far :func:`until` moves the clock at a time: beyond every back-off, short of the
# inactivity timeout (a watch is never found silent while the test waits for its work).
HORIZON = 60.0


async def until(condition: Callable[[], bool], task: asyncio.Task[Any],
                clock: FakeClock) -> None:
    """Lets ``task`` work until ``condition`` holds; whenever it does not yet, time moves
    on to the next sleeper's deadline (a back-off, a quiet stream) after the work that
    is ready has run."""
    while not condition():
        if task.done():
            task.result()  # raises what made the task end
            raise AssertionError("the source stopped")
        await asyncio.sleep(0.001)
        if not condition():
            clock.jump(HORIZON)


async def stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def run_until(run: Callable[[], Awaitable[None]], condition: Callable[[], bool],
              clock: FakeClock) -> None:
    """Runs a source or reflector until ``condition`` holds, then cancels it."""
    async def main() -> None:
        task = asyncio.ensure_future(run())
        try:
            await until(condition, task, clock)
        finally:
            await stop(task)

    asyncio.run(main())


@pytest.fixture
def clock() -> FakeClock:
    """Time for the reflectors: back-off sleeps are recorded (``clock.sleeps``) and end
    when :func:`until` moves the clock on."""
    return FakeClock()


class Run:
    """One reflector over a real cache, driven by a :class:`FakeClient`."""

    def __init__(self, resource: reflector.Resource, clock: FakeClock) -> None:
        self.cache = Cache(ZoneNames(ZONE), 5)
        self.clock = clock
        self.ops: list[list[Op]] = []
        self.invalid: list[str] = []
        self.listed = 0
        self.client = FakeClient(clock, lambda: (sorted(self.cache.imports),
                                                 sorted(self.cache.slices)))
        self.path = resource.path

        def apply(ops: list[Op]) -> None:
            self.ops.append(list(ops))
            self.cache.apply(ops)

        def on_listed() -> None:
            self.listed += 1

        self.metrics = Metrics()
        self.reflector = reflector.Reflector(self.client, resource, apply, self.invalid.append,
                                             Config(), on_listed, metrics=self.metrics,
                                             clock=clock)

    def counter(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def run(self) -> None:
        run_until(self.reflector.run, lambda: self.path in self.client.hanging, self.clock)

    def imports(self) -> dict[str, tuple[Any, ...]]:
        return {f"{ns}/{name}": tuple(str(ip) for ip in imp.ips)
                for (ns, name), imp in self.cache.imports.items()}

    def slices(self) -> dict[str, tuple[str, ...]]:
        return {f"{ns}/{name}": tuple(str(a) for e in s.endpoints for a in e.addresses)
                for (ns, name), s in self.cache.slices.items()}


def imports_run(clock: FakeClock) -> Run:
    return Run(watch.import_resource(GV, None), clock)


def slices_run(clock: FakeClock) -> Run:
    return Run(watch.slice_resource(None), clock)


# -- list -------------------------------------------------------------------------------------

def fat_slices(count: int, blob: int) -> list[dict[str, Any]]:
    fat = [copy.deepcopy(DB_EAST) for _ in range(count)]
    for i, obj in enumerate(fat):
        obj["metadata"]["name"] = f"db-east-{i}"
        obj["metadata"]["annotations"] = {"blob": "x" * blob}
    return fat


def list_limits(clock: FakeClock, pages: list[list[dict[str, Any]]]) -> list[int]:
    """The ``limit`` of each page asked for, the pages being ``pages`` (the fake client
    reports each body's size, as the real one does)."""
    run = slices_run(clock)
    run.client.lists[run.path] = [page(*items, rv="10", cont=f"c{i}" if i < len(pages) - 1
                                       else None) for i, items in enumerate(pages)]
    run.run()
    assert len(run.slices()) == sum(len(items) for items in pages)
    return [params["limit"] for params in run.client.get_params(run.path)]


def test_list_pages_are_sized_by_bytes(clock: FakeClock) -> None:
    """The first page asks for what PAGE_BYTES holds of the largest objects the API
    stores (before: 10, whatever their size); each next one for what it holds at the
    largest bytes per item seen, at most twice the page before. Objects of 256 KiB:
    2, 4, 8, then 15 (16 of them and the page's own bytes are more than 4 MiB)."""
    assert reflector.FIRST_PAGE == reflector.PAGE_BYTES // reflector.MAX_OBJECT_BYTES == 2
    fat = fat_slices(20, 256 << 10)
    limits = list_limits(clock, [fat[0:2], fat[2:6], fat[6:14], fat[14:20]])
    per_item = len(json.dumps(page(*fat[0:2], rv="10", cont="c0"))) / 2
    assert limits == [2, 4, 8, int(reflector.PAGE_BYTES // per_item)] == [2, 4, 8, 15]


def test_an_object_larger_than_the_page_budget_is_listed_alone(clock: FakeClock) -> None:
    """A limit is never 0 (the API server's "no limit"): one object over PAGE_BYTES
    makes the next pages one object each, and it is listed."""
    big = fat_slices(3, reflector.PAGE_BYTES + 1)
    assert list_limits(clock, [big[0:2], big[2:3]]) == [2, 1]
    assert reflector.page_limit(500, float(reflector.PAGE_BYTES * 10)) == 1
    assert reflector.page_limit(1, 0.0) == 2


def test_small_objects_double_the_page_up_to_page_size(clock: FakeClock) -> None:
    small = [copy.deepcopy(DB_EAST) for _ in range(1100)]
    for i, obj in enumerate(small):
        obj["metadata"]["name"] = f"db-east-{i}"
    pages, at, size = [], 0, reflector.FIRST_PAGE
    while at < len(small):
        pages.append(small[at:at + size])
        at += size
        size = min(2 * size, reflector.PAGE_SIZE)
    assert list_limits(clock, pages) == [2, 4, 8, 16, 32, 64, 128, 256, 500, 500]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("make", "items", "selector"), [
    (imports_run, [WEB, DB, API], None),
    (slices_run, [DB_EAST, DB_WEST, endpoint_slice("x", "api", namespace="other")],
     convert.SERVICE_NAME_LABEL),
], ids=["imports", "slices"])
def test_list_pagination(clock: FakeClock, make: Callable[[FakeClock], Run],
                         items: list[dict[str, Any]], selector: str | None) -> None:
    run = make(clock)
    run.client.lists[run.path] = [page(items[0], rv="10", cont="c1"),
                                  page(items[1], rv="10", cont="c2"),
                                  page(items[2], rv="12")]
    run.run()
    base = {"labelSelector": selector} if selector else {}
    # Small objects: a first page of FIRST_PAGE, then twice the page before. The first
    # list's first request asks for resourceVersion 0 (the watch cache's); an API server
    # that pages it anyway gets the next pages asked for at its version by the continue
    # token alone (a resourceVersion beside one is refused).
    assert run.client.get_params(run.path) == [
        base | {"limit": reflector.FIRST_PAGE, "resourceVersion": "0"},
        base | {"limit": 2 * reflector.FIRST_PAGE, "continue": "c1"},
        base | {"limit": 4 * reflector.FIRST_PAGE, "continue": "c2"}]
    got = run.imports() if make is imports_run else run.slices()
    assert sorted(got) == sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                                 for o in items)
    # The first list: nothing to delete, so each page is applied as it comes (its answers
    # are built while the next page is fetched).
    assert [len(ops) for ops in run.ops] == [1, 1, 1]
    assert run.listed == 1
    (params,) = run.client.watch_params(run.path)
    assert params["resourceVersion"] == "12"
    assert params["allowWatchBookmarks"] is True
    assert params.get("labelSelector") == selector
    assert clock.sleeps == []


# -- watch events -----------------------------------------------------------------------------

WATCH_IMPORTS = [
    ("added", [WEB], [event("ADDED", DB, "11"), event("ADDED", API, "12")],
     {"prod/web": ("10.1.0.1",), "prod/db": (), "other/api": ("10.9.0.1",)}),
    ("modified", [WEB, DB], [event("MODIFIED", WEB2, "11")],
     {"prod/web": ("10.1.0.2",), "prod/db": ()}),
    ("deleted", [WEB, DB], [event("DELETED", DB, "11")], {"prod/web": ("10.1.0.1",)}),
    ("deleted-invalid-version", [WEB, DB], [event("DELETED", WEB_BAD, "11")], {"prod/db": ()}),
    ("added-then-deleted", [], [event("ADDED", WEB, "11"), event("DELETED", WEB, "12")], {}),
    ("deleted-unknown", [WEB], [event("DELETED", API, "11")], {"prod/web": ("10.1.0.1",)}),
    ("bookmark-only", [WEB], [bookmark("50")], {"prod/web": ("10.1.0.1",)}),
    ("invalid-modification-keeps-last-valid", [WEB],
     [event("MODIFIED", WEB_BAD, "11")], {"prod/web": ("10.1.0.1",)}),
    ("invalid-new-object-skipped", [WEB], [event("ADDED", BAD_NEW, "11"),
                                           event("ADDED", API, "12")],
     {"prod/web": ("10.1.0.1",), "other/api": ("10.9.0.1",)}),
    ("valid-again", [WEB], [event("MODIFIED", WEB_BAD, "11"), event("MODIFIED", WEB2, "12")],
     {"prod/web": ("10.1.0.2",)}),
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("listed", "events", "expected"),
                         [(li, ev, ex) for _, li, ev, ex in WATCH_IMPORTS],
                         ids=[i for i, _, _, _ in WATCH_IMPORTS])
def test_watch_events_reach_the_cache(clock: FakeClock, listed: list[dict[str, Any]],
                                      events: list[dict[str, Any]],
                                      expected: dict[str, tuple[str, ...]]) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(*listed, rv="10")]
    run.client.streams[run.path] = [events]  # then the stream ends: resumed, no relist
    run.run()
    assert run.imports() == expected
    assert len(run.client.gets) == 1
    # Events of one object that arrive together are coalesced: only the last one is
    # converted, so an invalid version followed at once by a valid one is never seen.
    last = {e["object"]["metadata"]["name"]: e for e in events if e["type"] != "BOOKMARK"}
    invalid = [e for e in last.values() if e["type"] in ("ADDED", "MODIFIED")
               and e["object"]["spec"]["type"] == "Bogus"]
    assert run.invalid == ["ServiceImport"] * len(invalid)  # each counted once
    last_rv = events[-1]["object"]["metadata"]["resourceVersion"] if events else "10"
    assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", last_rv]
    assert clock.sleeps == []  # a stream that ends is resumed at once


@pytest.mark.timeout(10)
def test_watch_answers_dns(clock: FakeClock) -> None:
    run = slices_run(clock)
    handler = Handler(run.cache.zone, DEFAULT_UDP_CAP)
    run.cache.apply([PutImport(("prod", "db"), convert.service_import(DB)),
                     SetSynced(True)])
    run.client.lists[run.path] = [page(DB_EAST, rv="10")]
    run.client.streams[run.path] = [[event("MODIFIED", DB_EAST2, "11"),
                                     event("ADDED", DB_WEST, "12")]]
    run.run()
    reply = ask(handler, query(f"db.prod.svc.{ZONE}.", "A"))
    assert [line.split()[-1] for line in reply.answer] == ["10.2.0.9", "10.3.0.1"]


@pytest.mark.timeout(10)
def test_invalid_slice_event_keeps_last_valid_version(clock: FakeClock) -> None:
    run = slices_run(clock)
    run.client.lists[run.path] = [page(DB_EAST, rv="10")]
    run.client.streams[run.path] = [[event("MODIFIED", SLICE_BAD, "11")]]
    run.run()
    assert run.slices() == {"prod/db-east": ("10.2.0.1",)}
    assert run.invalid == ["EndpointSlice"]
    assert run.client.watch_params(run.path)[-1]["resourceVersion"] == "11"


@pytest.mark.timeout(10)
def test_bookmark_sets_the_next_resource_version(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    run.client.streams[run.path] = [
        [event("ADDED", DB, "11"), bookmark("20")],
        [bookmark("25"), bookmark("30")],
    ]
    run.run()
    assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == \
        ["10", "20", "30"]
    assert len(run.client.gets) == 1
    assert sorted(run.imports()) == ["prod/db", "prod/web"]


# -- 410 Gone: list again ---------------------------------------------------------------------

@pytest.mark.timeout(10)
@pytest.mark.parametrize("how", ["error-event", "api-error-on-watch"])
def test_gone_relists_and_deletes_what_vanished(clock: FakeClock, how: str) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"),
                                  page(WEB2, rv="30")]  # DB and API went meanwhile
    gone: Any = error_event(410) if how == "error-event" else ApiError(410, "Gone")
    run.client.streams[run.path] = [[event("ADDED", API, "11"), gone]]
    run.run()
    assert run.imports() == {"prod/web": ("10.1.0.2",)}
    assert len(run.client.get_params(run.path)) == 2
    assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", "30"]
    assert run.listed == 1  # on_listed only the first time
    assert set(run.reflector.known) == {("prod", "web")}


@pytest.mark.timeout(10)
def test_a_paginated_relist_is_one_update(clock: FakeClock) -> None:
    """A relist with objects known: one update at the end, deletions of what the list
    lacks in the same update (never a state where only some pages are new)."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"),
                                  page(WEB2, rv="30", cont="c1"), page(API, rv="30")]
    run.client.streams[run.path] = [[error_event(410)]]
    run.run()
    first, relist = run.ops
    assert len(first) == 2
    assert sorted((type(op).__name__, op.key, op.obj is None) for op in relist) == [
        ("PutImport", ("other", "api"), False), ("PutImport", ("prod", "db"), True),
        ("PutImport", ("prod", "web"), False)]
    assert run.imports() == {"prod/web": ("10.1.0.2",), "other/api": ("10.9.0.1",)}


@pytest.mark.timeout(10)
def test_a_first_list_failing_half_way_leaves_nothing_it_lacks_later(
        clock: FakeClock) -> None:
    """The first page of a first list is applied at once; the list then fails, and the
    next list (which no longer has that page's object) deletes it."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10", cont="c1"), KubeError("reset"),
                                  page(API, rv="20")]
    run.run()
    assert run.imports() == {"other/api": ("10.9.0.1",)}
    assert set(run.reflector.known) == {("other", "api")}
    assert run.listed == 1
    assert len(clock.sleeps) == 1


@pytest.mark.timeout(10)
def test_relist_keeps_a_known_object_that_became_invalid(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), page(WEB_BAD, rv="30")]
    run.client.streams[run.path] = [[error_event(410)]]
    run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}  # DB went, web kept its last state
    assert run.invalid == ["ServiceImport"]


@pytest.mark.timeout(10)
def test_expired_continue_token_lists_from_the_start(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10", cont="c1"), ApiError(410, "Expired"),
                                  page(DB, rv="40", cont="d1"), page(API, rv="40")]
    run.run()
    assert [p.get("continue") for p in run.client.get_params(run.path)] == \
        [None, "c1", None, "d1"]
    assert sorted(run.imports()) == ["other/api", "prod/db"]
    assert run.client.watch_params(run.path)[0]["resourceVersion"] == "40"
    assert len(clock.sleeps) == 1


# -- errors: back off, resume, keep serving ---------------------------------------------------

@pytest.mark.timeout(10)
@pytest.mark.parametrize("failure", [
    KubeError("connection reset by peer"),
    ApiError(500, "internal error"),
    error_event(500, "etcd unavailable"),
    ["not", "an", "event"],
    {"type": "ADDED"},
    {"type": "ADDED", "object": "text"},
], ids=["kube-error", "api-error", "error-event", "event-not-an-object",
        "event-without-object", "object-not-an-object"])
def test_stream_error_backs_off_and_resumes(clock: FakeClock, failure: Any) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10")]
    run.client.streams[run.path] = [
        [event("MODIFIED", WEB2, "11"), failure],
        [event("ADDED", API, "12")],
    ]
    run.run()
    assert len(run.client.gets) == 1  # no relist
    watches = run.client.watches
    assert [p["resourceVersion"] for _, p, _ in watches] == ["10", "11", "12"]
    # the cache was not flushed while the API server was away
    assert watches[1][2] == ([("prod", "db"), ("prod", "web")], [])
    assert run.imports() == {"prod/web": ("10.1.0.2",), "prod/db": (),
                             "other/api": ("10.9.0.1",)}
    assert len(clock.sleeps) == 1
    assert reflector.BACKOFF_FIRST / 2 <= clock.sleeps[0] <= reflector.BACKOFF_FIRST


@pytest.mark.timeout(10)
def test_a_silent_watch_is_dropped_after_the_inactivity_timeout(clock: FakeClock) -> None:
    """Nothing arrives, no error, no end (a stalled API server): once the clock has
    moved on by --inactivity-timeout, the stream is dropped, counted as inactive and
    resumed from the same resourceVersion after a back-off, without a relist."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    inactive = run.counter("clusterset_dns_watch_restarts_total", resource="import",
                           reason="inactive")

    async def main() -> None:
        task = asyncio.ensure_future(run.reflector.run())
        try:
            await until(lambda: run.path in run.client.hanging, task, clock)
            run.client.hanging.clear()
            clock.advance(Config().inactivity_timeout - 1)
            await asyncio.sleep(0.01)
            assert len(run.client.watches) == 1  # not silent long enough yet
            clock.advance(1)
            await until(lambda: run.path in run.client.hanging, task, clock)
        finally:
            await stop(task)

    asyncio.run(main())
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                       reason="inactive") == inactive + 1
    assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", "10"]
    assert len(run.client.gets) == 1  # no relist
    assert run.imports() == {"prod/web": ("10.1.0.1",)}


@pytest.mark.timeout(10)
def test_a_watch_that_keeps_talking_is_not_dropped(clock: FakeClock) -> None:
    """Events (or bookmarks) each within the inactivity timeout of the one before keep
    the stream, however long it lasts in all."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    quiet = Config().inactivity_timeout * 0.75
    run.client.streams[run.path] = [[quiet, bookmark("11"), quiet, event("ADDED", API, "12"),
                                     quiet, bookmark("13")]]
    inactive = run.counter("clusterset_dns_watch_restarts_total", resource="import",
                           reason="inactive")

    async def main() -> None:
        task = asyncio.ensure_future(run.reflector.run())
        try:
            while run.path not in run.client.hanging:
                await asyncio.sleep(0.001)
                clock.jump(quiet)  # the stream's pauses, never the inactivity timeout
        finally:
            await stop(task)

    asyncio.run(main())
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                       reason="inactive") == inactive
    assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", "13"]
    assert sorted(run.imports()) == ["other/api", "prod/web"]


def named_imports(count: int) -> list[dict[str, Any]]:
    return [service_import(f"svc-{i}", ips=[f"10.9.{i // 250}.{i % 250 + 1}"])
            for i in range(count)]


@pytest.mark.timeout(10)
def test_the_first_list_is_read_as_it_arrives_in_batches(clock: FakeClock) -> None:
    """resourceVersion 0, one response (the watch cache ignores the limit), its items
    applied a batch at a time while it is read; the watch starts at its version."""
    run = imports_run(clock)
    items = named_imports(2 * liststream.STREAM_BATCH + 1)
    run.client.lists[run.path] = [page(*items, rv="30")]
    run.run()
    assert run.client.get_params(run.path) == [
        {"limit": reflector.FIRST_PAGE, "resourceVersion": "0"}]
    assert run.client.streamed == [run.path]
    assert [len(ops) for ops in run.ops] == [liststream.STREAM_BATCH,
                                             liststream.STREAM_BATCH, 1]
    assert len(run.imports()) == len(items) and run.listed == 1
    (params,) = run.client.watch_params(run.path)
    assert params["resourceVersion"] == "30"


@pytest.mark.timeout(10)
def test_a_list_after_the_first_is_consistent_and_whole(clock: FakeClock) -> None:
    """After 410 Gone the list must see every deletion: no resourceVersion (etcd's
    newest, paged), not read as it arrives, applied once with the deletions."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), page(WEB, rv="20")]
    run.client.streams[run.path] = [[error_event(410)]]
    run.run()
    first, again = run.client.get_params(run.path)
    assert first == {"limit": reflector.FIRST_PAGE, "resourceVersion": "0"}
    assert again == {"limit": reflector.FIRST_PAGE}
    assert run.client.streamed == [run.path]  # the first only
    assert sorted(run.imports()) == ["prod/web"]


@pytest.mark.timeout(10)
def test_a_first_list_broken_half_way_is_listed_again_consistently(clock: FakeClock) -> None:
    """What was read before the break is in (nothing was known: nothing to delete);
    the next list is a consistent one, which deletes what it lacks."""
    run = imports_run(clock)
    run.client.lists[run.path] = [{"items": [WEB, DB, "not an object"]}, page(WEB, rv="20")]
    run.run()
    assert run.client.streamed == [run.path]
    assert [params.get("resourceVersion") for params in run.client.get_params(run.path)] \
        == ["0", None]
    assert sorted(run.imports()) == ["prod/web"]
    assert len(clock.sleeps) == 1


@pytest.mark.timeout(10)
@pytest.mark.parametrize("answer", [
    ["a", "list"],
    {"items": "not a list"},
    {"items": [WEB, "not an object"]},
    {"items": [], "metadata": []},
    {"items": [], "metadata": {"resourceVersion": 12}},
], ids=["not-an-object", "items-not-a-list", "item-not-an-object", "metadata-not-an-object",
        "resource-version-not-a-string"])
def test_a_list_of_the_wrong_shape_is_an_api_error(clock: FakeClock, answer: Any) -> None:
    """Used whole or not at all: a partial list would delete what it lacks."""
    run = imports_run(clock)
    run.client.lists[run.path] = [answer, page(WEB, rv="10")]
    before = run.counter("clusterset_dns_watch_restarts_total", resource="import",
                     reason="unreachable")
    run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    assert len(clock.sleeps) == 1
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                   reason="unreachable") == before + 1


@pytest.mark.timeout(10)
def test_backoff_grows_and_resets(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [KubeError("refused"), KubeError("refused"), page(WEB, rv="10")]
    run.client.streams[run.path] = [
        [KubeError("reset")], [KubeError("reset")], [KubeError("reset")],
        [KubeError("reset")], [KubeError("reset")],
        [event("ADDED", DB, "11"), KubeError("reset")],  # an event: the back-off starts over
    ]
    run.run()
    first, cap = reflector.BACKOFF_FIRST, reflector.BACKOFF_CAP
    windows = [min(first * 2**i, cap) for i in range(7)] + [first]
    assert len(clock.sleeps) == len(windows)
    for delay, window in zip(clock.sleeps, windows, strict=True):
        assert window / 2 <= delay <= window
    assert sorted(run.imports()) == ["prod/db", "prod/web"]
    assert run.client.watch_params(run.path)[-1]["resourceVersion"] == "11"


@pytest.mark.timeout(10)
def test_list_error_keeps_serving_and_retries(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), KubeError("down"), page(WEB, rv="20")]
    run.client.streams[run.path] = [[error_event(410)]]
    states: list[Any] = []
    original = run.client.get

    async def get(path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, sizes: list[int] | None = None,
                  each: Any = None) -> Any:
        states.append(sorted(run.cache.imports))
        return await original(path, params, timeout, sizes, each)

    run.client.get = get  # type: ignore[method-assign]
    run.run()
    assert states[2] == [("prod", "db"), ("prod", "web")]  # still served during the outage
    assert sorted(run.imports()) == ["prod/web"]
    assert len(clock.sleeps) == 1


# -- bugs: loud, never "unreachable", and nothing stays half built ----------------------------

@pytest.mark.timeout(10)
@pytest.mark.parametrize("where", ["rebuild", "stream"])
def test_a_bug_is_logged_counted_and_rebuilt_from_a_full_list(
        clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        where: str) -> None:
    """A bug (here: the answer builder, or the stream code, raising) is not an API error:
    it is logged with its traceback, counted as reason="bug", and the reflector relists
    with a rebuild of everything it feeds, so the update that stopped half way (the
    import stored, its answers not rebuilt) is served whole afterwards."""
    run = imports_run(clock)
    handler = Handler(run.cache.zone, DEFAULT_UDP_CAP)
    run.cache.apply([SetSynced(True)])
    real_service = run.cache.builder.service
    failures = [RuntimeError("builder bug")] if where == "rebuild" else []

    def service(imp: Any, *args: Any) -> Any:
        if failures and imp == convert.service_import(WEB2):  # the watch's update
            raise failures.pop()
        return real_service(imp, *args)

    run.client.lists[run.path] = [page(WEB, rv="10"), page(WEB2, rv="12")]
    if where == "rebuild":
        run.client.streams[run.path] = [[event("MODIFIED", WEB2, "11"), 0.05]]
    else:
        run.client.streams[run.path] = [[event("MODIFIED", WEB2, "11"), 0.05,
                                         TypeError("a bug in the stream code")]]
    bugs = run.counter("clusterset_dns_watch_restarts_total", resource="import", reason="bug")
    unreachable = run.counter("clusterset_dns_watch_restarts_total", resource="import",
                          reason="unreachable")

    def fail_once() -> None:
        monkeypatch.setattr(run.cache.builder, "service", service)

    fail_once()
    run.run()
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                   reason="bug") == bugs + 1
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                   reason="unreachable") == unreachable
    assert run.counter("clusterset_dns_relists_total", resource="import", reason="bug") >= 1
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)
    assert len(run.client.get_params(run.path)) == 2  # the full list again
    reply = ask(handler, query(f"web.prod.svc.{ZONE}.", "A"))
    assert [line.split()[-1] for line in reply.answer] == ["10.1.0.2"]
    # the relist re-put every object: delete and put of web in one update
    assert run.ops[-1] == [PutImport(("prod", "web"), None),
                           PutImport(("prod", "web"), convert.service_import(WEB2))]
    # a back-off before the relist (and the stream's quiet 0.05 s, when it came)
    assert len([delay for delay in clock.sleeps if delay != 0.05]) == 1


@pytest.mark.timeout(10)
def test_a_failed_delete_is_redone_by_the_rebuild(clock: FakeClock) -> None:
    """The update carrying a DELETED event raised before the cache applied it: the
    rebuild must delete that object too, although the reflector already forgot it."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), page(WEB, rv="12")]
    run.client.streams[run.path] = [[event("DELETED", DB, "11"), 0.05]]
    real_apply = run.reflector.apply
    failed: list[list[Op]] = []

    def apply(ops: list[Op]) -> None:
        if not failed and ops == [PutImport(("prod", "db"), None)]:
            failed.append(ops)
            raise RuntimeError("aborted before anything was applied")
        real_apply(ops)

    run.reflector.apply = apply
    run.run()
    assert failed
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    assert run.reflector.suspect == set()


# -- drift: the API server going back in time, periodic relists -----------------------------

@pytest.mark.timeout(10)
@pytest.mark.parametrize(("current", "relisted"), [("5", True), ("200", False), ("12", False),
                                                   ("opaque", False)],
                         ids=["behind-ours", "ahead", "equal", "not-a-number"])
def test_resource_version_going_back_relists(clock: FakeClock, current: str,
                                             relisted: bool) -> None:
    run = imports_run(clock)
    run.client.current[run.path] = current
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), page(WEB2, rv="5")]
    run.client.streams[run.path] = [[event("ADDED", API, "12")]]  # ends: resumed
    before = run.counter("clusterset_dns_relists_total", resource="import", reason="rv-backwards")
    run.run()
    assert run.client.probes == [run.path]  # asked once, before resuming
    after = run.counter("clusterset_dns_relists_total", resource="import", reason="rv-backwards")
    if relisted:
        assert run.imports() == {"prod/web": ("10.1.0.2",)}
        assert after == before + 1
        assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", "5"]
    else:
        assert sorted(run.imports()) == ["other/api", "prod/db", "prod/web"]
        assert after == before
        assert [p["resourceVersion"] for p in run.client.watch_params(run.path)] == ["10", "12"]


@pytest.mark.timeout(10)
def test_periodic_relist_repairs_and_counts_drift(clock: FakeClock) -> None:
    """The watch missed changes (no event came): the periodic relist finds them."""
    run = imports_run(clock)
    run.reflector.config = Config(relist_interval=0.05)
    run.client.lists[run.path] = [page(WEB, DB, rv="10"), page(WEB2, API, rv="20")]
    run.client.streams[run.path] = [[0.2]]  # a quiet watch that ends after the interval
    drift = {change: run.counter("clusterset_dns_relist_drift_total", resource="import",
                             change=change) for change in ("added", "removed", "changed")}
    run.run()
    assert sorted(run.imports()) == ["other/api", "prod/web"]
    assert run.imports()["prod/web"] == ("10.1.0.2",)
    for change in drift:
        assert run.counter("clusterset_dns_relist_drift_total", resource="import",
                       change=change) == drift[change] + 1, change
    assert run.counter("clusterset_dns_relists_total", resource="import", reason="periodic") >= 1
    # the watch was asked to end in time for the relist
    assert run.client.watch_params(run.path)[0]["timeoutSeconds"] == 1


def test_periodic_relist_off() -> None:
    relister = reflector.Reflector(FakeClient(), watch.import_resource(GV, None),
                                   lambda ops: None, lambda kind: None,
                                   Config(relist_interval=0), lambda: None, metrics=Metrics())
    assert relister.next_relist is None
    with pytest.raises(ValueError, match="relist-interval"):
        Config(relist_interval=-1)


# -- update storms: coalesced per object, applied in chunks with yields ---------------------

def big_slice(generation: int) -> dict[str, Any]:
    return endpoint_slice("db-east", "db", cluster="east", endpoints=[
        endpoint(f"10.{generation}.{i // 250}.{i % 250}", hostname=f"h{i}") for i in range(300)])


@pytest.mark.timeout(10)
def test_a_storm_of_updates_of_one_object_costs_one_rebuild(
        clock: FakeClock) -> None:
    run = slices_run(clock)  # the clock stands still: the reader never stops half way
    run.client.lists[run.path] = [page(rv="10")]
    run.client.streams[run.path] = [
        [event("MODIFIED", big_slice(g), str(11 + g)) for g in range(30)]]
    run.run()
    puts = [op for ops in run.ops for op in ops if isinstance(op, PutSlice)]
    assert len(puts) == 1  # 30 updates arrived together: only the last was converted
    assert run.slices()["prod/db-east"][0] == "10.29.0.0"
    assert run.client.watch_params(run.path)[-1]["resourceVersion"] == "40"


@pytest.mark.timeout(10)
def test_applying_a_burst_yields_to_the_event_loop(clock: FakeClock) -> None:
    """Queries are answered between chunks: a task that runs whenever the loop is free
    sees the cache part way through a burst of 100 new objects."""
    clock.tick = 1.0  # every object takes longer than SLICE_SECONDS: its own chunk
    run = imports_run(clock)
    run.client.lists[run.path] = [page(rv="10")]
    run.client.streams[run.path] = [[event("ADDED", service_import(f"s{i}", ips=["10.0.0.1"]),
                                           str(11 + i)) for i in range(100)]]
    seen: list[int] = []

    async def main() -> None:
        async def ticker() -> None:
            while True:
                seen.append(len(run.cache.imports))
                await asyncio.sleep(0)

        tick = asyncio.create_task(ticker())
        task = asyncio.ensure_future(run.reflector.run())
        try:
            await until(lambda: run.path in run.client.hanging, task, clock)
        finally:
            await stop(task)
            tick.cancel()

    asyncio.run(main())
    assert len(run.cache.imports) == 100
    assert len({n for n in seen if 0 < n < 100}) > 10  # many intermediate states observed


# -- KubeSource -------------------------------------------------------------------------------

class Gate:
    """A list answer held back until the test opens the gate."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.open = asyncio.Event()
        self.answer = answer
        self.waiting = False

    async def __call__(self) -> dict[str, Any]:
        self.waiting = True
        await self.open.wait()
        return self.answer


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("namespaces", "held"), [
    ((), IMPORTS_PATH),
    ((), SLICES_PATH),
    (("prod", "other"), f"/apis/{GV}/namespaces/other/serviceimports"),
    (("prod", "other"), "/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices"),
], ids=["imports-late", "slices-late", "ns-imports-late", "ns-slices-late"])
def test_synced_only_after_every_reflector_listed(clock: FakeClock,
                                                  namespaces: tuple[str, ...],
                                                  held: str) -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    synced_ops: list[Op] = []
    client = FakeClient(clock)
    if namespaces:
        paths = [f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices" for ns in namespaces]
        paths += [f"/apis/{GV}/namespaces/{ns}/serviceimports" for ns in namespaces]
    else:
        paths = [SLICES_PATH, IMPORTS_PATH]
    gate = Gate(page(rv="5"))
    for path in paths:
        client.lists[path] = [gate if path == held else page(rv="5")]

    def apply(ops: list[Op]) -> None:
        synced_ops.extend(op for op in ops if isinstance(op, SetSynced))
        cache.apply(ops)

    config = Config(serviceimport_apis=(GV,), namespaces=namespaces)
    source = watch.KubeSource(config, apply, Metrics(), client, clock=clock)

    async def main() -> None:
        task = asyncio.create_task(source.run())
        try:
            others = [p for p in paths if p != held]
            await until(lambda: gate.waiting and all(p in client.hanging for p in others), task,
                        clock)
            assert not cache.zone.synced
            assert synced_ops == []
            reply = ask(handler, query(f"nothere.prod.svc.{ZONE}.", "A"))
            assert reply.rcode == 2  # SERVFAIL
            gate.open.set()
            await until(lambda: held in client.hanging, task, clock)
            assert cache.zone.synced
            assert synced_ops == [SetSynced(True)]
            assert ask(handler, query(f"nothere.prod.svc.{ZONE}.", "A")).rcode == 3
        finally:
            await stop(task)

    asyncio.run(main())
    assert sorted(path for path, _ in client.gets) == sorted(paths)


@pytest.mark.timeout(10)
def test_discovery_picks_the_preferred_version(clock: FakeClock) -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    alpha = "multicluster.x-k8s.io/v1alpha1"
    client.lists["/apis/multicluster.x-k8s.io"] = [
        KubeError("no route"),
        {"kind": "APIGroup", "name": "multicluster.x-k8s.io",
         "versions": [{"groupVersion": alpha, "version": "v1alpha1"},
                      {"groupVersion": GV, "version": "v1beta1"}],
         "preferredVersion": {"groupVersion": alpha, "version": "v1alpha1"}},
    ]
    client.lists[f"/apis/{alpha}"] = [resource_list("serviceimports", "serviceexports")]
    client.lists[f"/apis/{alpha}/serviceimports"] = [page(WEB, rv="7")]
    client.lists[SLICES_PATH] = [page(rv="7")]
    source = watch.KubeSource(Config(), cache.apply, Metrics(), client, clock=clock)

    run_until(source.run,
              lambda: {SLICES_PATH, f"/apis/{alpha}/serviceimports"} <= client.hanging, clock)
    assert cache.zone.synced
    assert sorted(cache.imports) == [("prod", "web")]
    assert len(clock.sleeps) == 1  # the discovery error was retried after a back-off


def resource_list(*plurals: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [{"name": p} for p in plurals]}


def test_discovery_skips_a_preferred_version_without_serviceimports(
        clock: FakeClock) -> None:
    """mcs-api v0.5.0's ServiceExport CRD keeps v1beta1 of the group served (and preferred)
    beside a v0.4.1 ServiceImport CRD that only has v1alpha1."""
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    alpha = "multicluster.x-k8s.io/v1alpha1"
    client.lists["/apis/multicluster.x-k8s.io"] = [
        {"kind": "APIGroup", "name": "multicluster.x-k8s.io",
         "versions": [{"groupVersion": GV, "version": "v1beta1"},
                      {"groupVersion": alpha, "version": "v1alpha1"}],
         "preferredVersion": {"groupVersion": GV, "version": "v1beta1"}},
    ]
    client.lists[f"/apis/{GV}"] = [resource_list("serviceexports", "serviceexports/status")]
    client.lists[f"/apis/{alpha}"] = [resource_list("serviceimports")]
    client.lists[f"/apis/{alpha}/serviceimports"] = [page(WEB, rv="7")]
    client.lists[SLICES_PATH] = [page(rv="7")]
    source = watch.KubeSource(Config(), cache.apply, Metrics(), client, clock=clock)

    run_until(source.run,
              lambda: {SLICES_PATH, f"/apis/{alpha}/serviceimports"} <= client.hanging, clock)
    assert sorted(cache.imports) == [("prod", "web")]
    assert f"/apis/{GV}/serviceimports" not in [path for path, _ in client.gets]


def test_a_discovered_version_that_stops_being_served_is_discovered_again(
        clock: FakeClock) -> None:
    """A CRD upgrade drops v1beta1: the watch gets 404, discovery finds v1alpha1, and
    the list through it removes what the old version had that the new one lacks."""
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    alpha = "multicluster.x-k8s.io/v1alpha1"

    def group(*versions: str) -> dict[str, Any]:
        return {"kind": "APIGroup", "name": "multicluster.x-k8s.io",
                "versions": [{"groupVersion": v} for v in versions],
                "preferredVersion": {"groupVersion": versions[0]}}

    client.lists["/apis/multicluster.x-k8s.io"] = [group(GV, alpha), group(alpha)]
    client.lists[f"/apis/{GV}"] = [resource_list("serviceimports")]
    client.lists[f"/apis/{alpha}"] = [resource_list("serviceimports")]
    client.lists[IMPORTS_PATH] = [page(WEB, API, rv="7")]
    client.streams[IMPORTS_PATH] = [[ApiError(404, "the server could not find it")]]
    client.lists[f"/apis/{alpha}/serviceimports"] = [page(WEB2, rv="9")]
    client.lists[SLICES_PATH] = [page(rv="7")]
    source = watch.KubeSource(Config(), cache.apply, Metrics(), client, clock=clock)

    run_until(source.run, lambda: f"/apis/{alpha}/serviceimports" in client.hanging, clock)
    assert sorted(cache.imports) == [("prod", "web")]  # other/api went with v1beta1
    assert str(cache.imports[("prod", "web")].ips[0]) == "10.1.0.2"
    assert cache.zone.synced


# -- rejected objects explain their names (RFC 8914 texts) -------------------------------------

@pytest.mark.timeout(10)
def test_rejections_reach_the_cache_and_leave_with_their_object(clock: FakeClock) -> None:
    """An object that fails to convert is reported with its reason (its name's empty
    answers say it); deleted, or gone from a relist, it is forgotten; valid again, its
    put clears it."""
    run = imports_run(clock)
    other_bad = service_import("otherbad", type_="Bogus")
    run.client.lists[run.path] = [page(WEB, BAD_NEW, rv="10"), page(WEB, rv="30")]
    run.client.streams[run.path] = [
        [event("ADDED", other_bad, "11"), event("DELETED", BAD_NEW, "12"), error_event(410)]]
    rejected: list[set[tuple[str, str]]] = []
    real = run.cache.apply

    def spy(ops: Any) -> Any:
        result = real(ops)
        rejected.append({key for _, key in run.cache.rejections})
        return result

    run.cache.apply = spy  # type: ignore[method-assign]
    run.run()
    assert {("prod", "newbad")} in rejected  # after the first list
    assert {("prod", "otherbad")} in rejected  # after the events: newbad deleted
    assert run.cache.rejections == {}  # the relist lacks otherbad: gone meanwhile
    reason = "type 'Bogus' is neither ClusterSetIP nor Headless"
    puts = [op for ops in run.ops for op in ops if type(op).__name__ == "PutRejected"]
    assert sorted((op.key, op.reason or "") for op in puts) == [
        (("prod", "newbad"), ""), (("prod", "newbad"), reason),
        (("prod", "otherbad"), ""), (("prod", "otherbad"), reason)]


def test_list_page_sizes_follow_the_largest_objects_seen_so_far(clock: FakeClock) -> None:
    """Pages of varying object sizes: each next limit is what PAGE_BYTES holds of the
    largest objects seen in any page so far (a page of small ones after large ones does
    not raise it past that), doubling at most; an object over the budget makes it 1,
    never 0 (no limit, to the API server), and the small ones after it stay at 1."""
    small = fat_slices(12, 100)
    large = fat_slices(2, 100 << 10)
    over = fat_slices(1, reflector.PAGE_BYTES + (1 << 20))
    for i, obj in enumerate([*large, *over]):
        obj["metadata"]["name"] = f"big-{i}"
    pages = [small[0:2], large, small[2:4], small[4:6], small[6:8], over, small[8:9]]
    limits = list_limits(clock, pages)
    per_item = len(json.dumps(page(*large, rv="10", cont="c1"))) / 2
    at_large = int(reflector.PAGE_BYTES // per_item)
    assert limits == [reflector.FIRST_PAGE, 4, 8, 16, 32, at_large, 1] and at_large == 40


# -- the source itself: discovery's retries, its client, its reflectors -----------------------

GROUP_PATH = "/apis/multicluster.x-k8s.io"


def served_group(*versions: str) -> dict[str, Any]:
    return {"kind": "APIGroup", "versions": [{"groupVersion": v} for v in versions]}


def test_discovery_retries_until_a_version_serves_serviceimports(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The group not served (404), then served without serviceimports, then with: each
    miss is said and retried after a back-off."""
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    client.lists[GROUP_PATH] = [ApiError(404, "not found"), served_group(GV), served_group(GV)]
    client.lists[f"/apis/{GV}"] = [resource_list("serviceexports"),
                                   resource_list("serviceimports")]
    client.lists[IMPORTS_PATH] = [page(WEB, rv="7")]
    client.lists[SLICES_PATH] = [page(rv="7")]
    source = watch.KubeSource(Config(), cache.apply, Metrics(), client, clock=clock)
    with caplog.at_level("WARNING", logger=watch.__name__):
        run_until(source.run, lambda: {SLICES_PATH, IMPORTS_PATH} <= client.hanging, clock)
    assert sorted(cache.imports) == [("prod", "web")] and len(clock.sleeps) == 2
    said = [r.getMessage() for r in caplog.records if r.name == watch.__name__]
    assert len(said) == 2
    assert said[0].startswith("discovering multicluster.x-k8s.io: multicluster.x-k8s.io is "
                              "not served (is the mcs-api CRD installed?)")
    assert said[1].startswith("discovering multicluster.x-k8s.io: no served version of "
                              "multicluster.x-k8s.io has serviceimports")


def test_a_slice_list_not_found_is_retried_never_rediscovered(clock: FakeClock) -> None:
    """Only ServiceImports are discovered: a 404 of the EndpointSlices is an error to
    retry, not a version gone."""
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    client.lists[GROUP_PATH] = [served_group(GV)]
    client.lists[f"/apis/{GV}"] = [resource_list("serviceimports")]
    client.lists[IMPORTS_PATH] = [page(rv="7")]
    client.lists[SLICES_PATH] = [ApiError(404, "not found"), page(DB_EAST, rv="7")]
    source = watch.KubeSource(Config(), cache.apply, Metrics(), client, clock=clock)
    run_until(source.run, lambda: {SLICES_PATH, IMPORTS_PATH} <= client.hanging, clock)
    assert sorted(cache.slices) == [("prod", "db-east")] and cache.zone.synced


def test_the_source_counts_invalid_objects(clock: FakeClock) -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    client.lists[IMPORTS_PATH] = [page(WEB_BAD, rv="7")]
    client.lists[SLICES_PATH] = [page(SLICE_BAD, rv="7")]
    metrics = Metrics()
    source = watch.KubeSource(Config(serviceimport_apis=(GV,)), cache.apply, metrics, client,
                              clock=clock)
    run_until(source.run, lambda: {SLICES_PATH, IMPORTS_PATH} <= client.hanging, clock)
    assert cache.zone.synced and not clock.sleeps  # no retry: nothing failed
    count = metrics.registry.get_sample_value
    assert count("clusterset_dns_invalid_objects_total", {"kind": "ServiceImport"}) == 1
    assert count("clusterset_dns_invalid_objects_total", {"kind": "EndpointSlice"}) == 1


def test_extra_tasks_run_with_the_sources_client(clock: FakeClock) -> None:
    client = FakeClient(clock)
    client.lists[IMPORTS_PATH] = [page(rv="7")]
    client.lists[SLICES_PATH] = [page(rv="7")]
    given: list[Any] = []

    async def extra(c: Any) -> None:
        given.append(c)

    source = watch.KubeSource(Config(serviceimport_apis=(GV,)), lambda ops: None, Metrics(),
                              client, extra=[extra, extra], clock=clock)
    run_until(source.run, lambda: {SLICES_PATH, IMPORTS_PATH} <= client.hanging, clock)
    assert given == [client, client]


def test_a_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    source = watch.KubeSource(Config(kubeconfig=missing), lambda ops: None, Metrics())
    with pytest.raises(ConfigError) as raised:
        asyncio.run(source.run())
    assert str(raised.value) == f"kubeconfig {missing}: no such file"


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: here
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: me
  user: {token: "t"}
contexts:
- name: one
  context: {cluster: here, user: me}
current-context: one
"""


def test_the_configured_context_is_the_one_read(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    source = watch.KubeSource(Config(kubeconfig=path, context="two"), lambda ops: None,
                              Metrics())
    with pytest.raises(ConfigError, match=f"^kubeconfig {path}: .*two"):
        asyncio.run(source.run())


@pytest.mark.parametrize("own", [True, False])
def test_the_source_closes_the_client_it_made_and_no_other(
        tmp_path: Path, clock: FakeClock, own: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own client (from the kubeconfig: an API server on a closed loopback port) is
    closed when the source stops; one given to it is the giver's to close."""
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    closed: list[Any] = []

    async def close(self: KubeClient) -> None:
        closed.append(self)

    monkeypatch.setattr(KubeClient, "close", close)
    config = Config(kubeconfig=path, serviceimport_apis=(GV,))

    async def main() -> None:
        given = None if own else await KubeClient.connect(path, None)
        source = watch.KubeSource(config, lambda ops: None, Metrics(), given, clock=clock)
        task = asyncio.create_task(source.run())
        try:
            await until(lambda: len(clock.sleeps) >= 2, task, clock)  # both lists failed
        finally:
            await stop(task)
        assert isinstance(source.client, KubeClient)
        assert closed == ([source.client] if own else [])

    asyncio.run(main())


@pytest.mark.parametrize(("made", "description", "path", "kind", "api_version"), [
    ((GV, None), f"serviceimports {GV}", IMPORTS_PATH, "ServiceImport", GV),
    ((GV, "prod"), f"serviceimports {GV} in prod",
     f"/apis/{GV}/namespaces/prod/serviceimports", "ServiceImport", GV),
    ((None,), "endpointslices", SLICES_PATH, "EndpointSlice", "discovery.k8s.io/v1"),
    (("prod",), "endpointslices in prod",
     "/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices", "EndpointSlice",
     "discovery.k8s.io/v1"),
])
def test_what_each_reflector_reads_and_names(made: tuple[Any, ...], description: str,
                                             path: str, kind: str, api_version: str) -> None:
    """The description is what the logs say; kind and apiVersion name a rejected object
    in its Event. (Made here, not at collection: the code under test runs in the test.)"""
    resource = watch.import_resource(*made) if len(made) == 2 else watch.slice_resource(*made)
    assert (resource.description, resource.path, resource.kind, resource.api_version) == (
        description, path, kind, api_version)


def test_a_version_gone_is_discovered_again_in_each_namespace(clock: FakeClock) -> None:
    """With --namespace prod and other: each namespace's new reflector deletes what its
    namespace had through the old version and lacks now, and nothing of the other's."""
    cache = Cache(ZoneNames(ZONE), 5)
    client = FakeClient(clock)
    alpha = "multicluster.x-k8s.io/v1alpha1"

    def group(*versions: str) -> dict[str, Any]:
        return {"kind": "APIGroup", "versions": [{"groupVersion": v} for v in versions],
                "preferredVersion": {"groupVersion": versions[0]}}

    def imports(version: str, ns: str) -> str:
        return f"/apis/{version}/namespaces/{ns}/serviceimports"

    other_db = service_import("db", namespace="other", ips=["10.9.0.2"])
    client.lists[GROUP_PATH] = [group(GV, alpha), group(alpha)]
    client.lists[f"/apis/{GV}"] = [resource_list("serviceimports")]
    client.lists[f"/apis/{alpha}"] = [resource_list("serviceimports")]
    client.lists[imports(GV, "prod")] = [page(WEB, DB, rv="7")]
    client.lists[imports(GV, "other")] = [page(API, other_db, rv="7")]
    client.streams[imports(GV, "prod")] = [[ApiError(404, "the server could not find it")]]
    client.lists[imports(alpha, "prod")] = [page(WEB2, rv="9")]
    client.lists[imports(alpha, "other")] = [page(API, rv="9")]
    for ns in ("prod", "other"):
        client.lists[f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"] = [page(rv="7")]
    metrics = Metrics()
    source = watch.KubeSource(Config(namespaces=("prod", "other")), cache.apply, metrics,
                              client, clock=clock)
    run_until(source.run, lambda: {imports(alpha, "prod"), imports(alpha, "other")}
              <= client.hanging, clock)
    assert sorted(cache.imports) == [("other", "api"), ("prod", "web")]
    assert str(cache.imports[("prod", "web")].ips[0]) == "10.1.0.2"
    assert metrics.registry.get_sample_value("clusterset_dns_watch_restarts_total", {
        "resource": "import", "reason": "not-served"}) == 1


# -- edges found by scripts/mutate on reflector.py ----------------------------------------------

def test_an_event_for_an_object_without_a_name_is_invalid(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(rv="10")]
    nameless = copy.deepcopy(WEB)
    del nameless["metadata"]["name"]
    run.client.streams[run.path] = [[event("ADDED", nameless, "11"), event("ADDED", WEB, "12")]]
    run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    assert run.invalid == ["ServiceImport"]
    assert len(run.client.gets) == 1  # no relist: nothing went wrong


def test_a_list_without_a_resource_version_is_never_found_gone_back(clock: FakeClock) -> None:
    """With no resourceVersion to compare, the watch is resumed without a probe."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB)]
    run.client.streams[run.path] = [[]]  # ends at once: resumed
    run.run()
    assert len(run.client.gets) == 1 and run.client.probes == []
    assert run.counter("clusterset_dns_watch_restarts_total", resource="import",
                       reason="rv-backwards") == 0


def test_an_object_from_a_watch_that_becomes_invalid_keeps_its_last_state(
        clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(rv="10"), page(WEB_BAD, rv="30")]
    run.client.streams[run.path] = [[event("ADDED", WEB, "11"), error_event(410)]]
    run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    assert run.invalid == ["ServiceImport"]


def drift_reflector() -> reflector.Reflector:
    return reflector.Reflector(FakeClient(), watch.import_resource(GV, None), lambda ops: None,
                               lambda kind: None, Config(relist_interval=0), lambda: None,
                               metrics=Metrics())


def test_the_relist_drift_counts_each_change(caplog: pytest.LogCaptureFixture) -> None:
    relister = drift_reflector()
    known: dict[Any, object | None] = {("p", n): n for n in ("a", "b", "c", "f", "h")}
    found: dict[Any, object | None] = {("p", "a"): "a", ("p", "b"): "B", ("p", "d"): "d",
                                       ("p", "e"): "e", ("p", "g"): "g"}
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.reflector"):
        relister._count_drift(found, known, "periodic")
    counts = {change: relister.metrics.registry.get_sample_value(
        "clusterset_dns_relist_drift_total", {"resource": "import", "change": change})
        for change in ("added", "removed", "changed")}
    assert counts == {"added": 3, "removed": 3, "changed": 1}
    assert "3 added, 3 removed, 1 changed" in caplog.text


@pytest.mark.parametrize(("found", "known", "logged"), [
    ({"a": 1}, {}, True), ({}, {"a": 1}, True), ({"a": 2}, {"a": 1}, True),
    ({"a": 1}, {"a": 1}, False)], ids=["added", "removed", "changed", "none"])
def test_any_drift_alone_is_logged(found: dict[Any, object | None],
                                   known: dict[Any, object | None], logged: bool,
                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.reflector"):
        drift_reflector()._count_drift(found, known, "periodic")
    assert ("the periodic relist found" in caplog.text) is logged


def test_a_chunk_of_a_burst_ends_once_the_slice_time_is_spent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each object read takes half the slice (times in binary fractions, so the sums are
    exact): a chunk ends at the object after which the whole slice has passed."""
    monkeypatch.setattr(reflector, "SLICE_SECONDS", 2.0**-7)
    clock = FakeClock(tick=2.0**-8)
    applied: list[int] = []
    burster = reflector.Reflector(FakeClient(clock), watch.import_resource(GV, None),
                                  lambda ops: applied.append(len(ops)), lambda kind: None,
                                  Config(relist_interval=0), lambda: None, metrics=Metrics(),
                                  clock=clock)
    for i in range(5):
        obj = service_import(f"s{i}", ips=["10.0.0.1"])
        burster.pending[("prod", f"s{i}")] = kube.event_of({"type": "ADDED", "object": obj})
    asyncio.run(burster._flush())
    assert applied == [2, 2, 1]


def test_an_invalid_object_in_a_page_skips_only_itself(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The objects after it are listed; its rejection names its service; the log line
    names the object."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(BAD_NEW, WEB, rv="10")]
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.reflector"):
        run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    [rejection] = [op for ops in run.ops for op in ops if type(op).__name__ == "PutRejected"]
    assert (rejection.key, rejection.service) == (("prod", "newbad"), ("prod", "newbad"))
    assert "ServiceImport prod/newbad skipped: type 'Bogus'" in caplog.text


def test_what_a_conversion_drops_is_logged_with_the_object(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(service_import("web", ips=["10.1.0.1", "bogus"]),
                                       rv="10")]
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.reflector"):
        run.run()
    assert run.imports() == {"prod/web": ("10.1.0.1",)}
    assert "ServiceImport prod/web: IP 'bogus' does not parse, dropped" in caplog.text


def read_events(events: list[dict[str, Any]]) -> tuple[reflector.Reflector, BaseException | None]:
    """The reflector after its _read of ``events``, and what that raised."""
    reader = drift_reflector()

    async def stream() -> AsyncIterator[dict[str, Any]]:
        for item in events:
            yield copy.deepcopy(item)

    async def main() -> BaseException | None:
        try:
            await reader._read(stream(), asyncio.Event())
        except (KubeError, reflector.Gone) as exc:
            return exc
        return None

    return reader, asyncio.run(main())


@pytest.mark.parametrize(("error", "kind", "text", "status"), [
    (error_event(410, "too old"), reflector.Gone, "too old", None),
    ({"type": "ERROR", "object": {"code": 410}}, reflector.Gone, "410 Gone", None),
    (error_event(404, "gone away"), ApiError, "HTTP 404: gone away", 404),
    ({"type": "ERROR", "object": {"code": "500"}}, ApiError, "HTTP 0: None", 0),
])
def test_an_error_event_ends_the_watch_with_its_code_and_message(
        error: dict[str, Any], kind: type[BaseException], text: str, status: int | None) -> None:
    _, raised = read_events([error])
    assert (type(raised), str(raised), getattr(raised, "status", None)) == (kind, text, status)


def test_a_deleted_event_without_a_name_is_not_counted_invalid() -> None:
    nameless = copy.deepcopy(WEB)
    del nameless["metadata"]["name"]
    counted: list[str] = []
    reader = drift_reflector()
    reader.invalid = counted.append
    events = [event("DELETED", nameless, "11"), event("DELETED", nameless, "12"),
              event("ADDED", nameless, "13")]

    async def main() -> None:
        async def stream() -> AsyncIterator[dict[str, Any]]:
            for item in events:
                yield item

        await reader._read(stream(), asyncio.Event())

    asyncio.run(main())
    assert counted == ["ServiceImport"]  # the ADDED one only


def test_pending_events_keep_the_order_of_their_latest_version() -> None:
    web_again = event("MODIFIED", WEB2, "13")
    reader, raised = read_events([event("ADDED", WEB, "11"), event("ADDED", API, "12"),
                                  web_again])
    assert raised is None
    assert list(reader.pending) == [("other", "api"), ("prod", "web")]
    assert reader.pending[("prod", "web")].object["metadata"]["resourceVersion"] == "13"
