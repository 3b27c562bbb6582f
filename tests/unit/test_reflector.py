"""One reflector over a scripted API client: what it counts (every reason and resource
label), the parameters it sends, what it logs, and exact boundaries of its timers (the
injected clock). The fakes and the scenarios' objects are test_watch's."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import convert, liststream, reflector, watch
from clusterset_dns.sources.kube import ApiError
from clusterset_dns.sources.resource import NotServed
from clusterset_dns.zone.ops import IMPORT, SLICE, PutImport, PutRejected
from clusterset_dns_testkit.objects import service_import

from .fakeclock import FakeClock
from .test_watch import (
    API,
    BAD_NEW,
    DB,
    GV,
    WEB,
    WEB2,
    FakeClient,
    Run,
    bookmark,
    error_event,
    event,
    fat_slices,
    imports_run,
    list_limits,
    page,
    stop,
    until,
)

LOGGER = "clusterset_dns.sources.reflector"


class EdgeClock(FakeClock):
    """Every random draw is ``high`` (or ``low``): jitter at its edge, exactly."""

    def __init__(self, low: bool = False) -> None:
        super().__init__()
        self.low = low

    def uniform(self, low: float, high: float) -> float:
        return low if self.low else high


class ExactClock(FakeClock):
    """No jitter at all: a relist is due exactly --relist-interval after it."""

    def jitter(self, seconds: float, spread: float) -> float:
        return seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def samples(run: Run, name: str) -> dict[tuple[str, ...], float]:
    """Every non-zero sample of counter ``name`` by its label values."""
    found: dict[tuple[str, ...], float] = {}
    for metric in run.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == name and sample.value:
                found[tuple(sample.labels.values())] = sample.value
    return found


# -- what is counted, under which labels ------------------------------------------------------

COUNTED = [
    # (id, current rv of the probe, lists, watch streams, restarts, relists)
    ("stream-ends", None, [page(WEB, rv="10")], [[]],
     {("import", "timeout"): 1}, {("import", "initial"): 1}),
    ("gone-event", None, [page(WEB, rv="10"), page(WEB, rv="20")], [[error_event(410)]],
     {("import", "gone"): 1}, {("import", "initial"): 1, ("import", "gone"): 1}),
    ("gone-status", None, [page(WEB, rv="10"), page(WEB, rv="20")], [[ApiError(410, "Gone")]],
     {("import", "api-error"): 1}, {("import", "initial"): 1, ("import", "gone"): 1}),
    ("api-error", None, [page(WEB, rv="10")], [[ApiError(500, "down")]],
     {("import", "api-error"): 1}, {("import", "initial"): 1}),
    ("rv-backwards", "5", [page(WEB, rv="10"), page(WEB, rv="5")], [[]],
     {("import", "timeout"): 1, ("import", "rv-backwards"): 1},
     {("import", "initial"): 1, ("import", "rv-backwards"): 1}),
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("current", "lists", "streams", "restarts", "relists"),
                         [case[1:] for case in COUNTED], ids=[case[0] for case in COUNTED])
def test_restarts_and_relists_are_counted_by_resource_and_reason(
        clock: FakeClock, current: str | None, lists: list[Any], streams: list[Any],
        restarts: dict[tuple[str, ...], float], relists: dict[tuple[str, ...], float]) -> None:
    run = imports_run(clock)
    if current is not None:
        run.client.current[run.path] = current
    run.client.lists[run.path] = list(lists)
    run.client.streams[run.path] = list(streams)
    run.run()
    assert samples(run, "clusterset_dns_watch_restarts_total") == restarts
    assert samples(run, "clusterset_dns_relists_total") == relists


@pytest.mark.timeout(10)
def test_a_relist_is_periodic_the_moment_it_is_due(caplog: pytest.LogCaptureFixture) -> None:
    """The watch ends exactly --relist-interval after the list: that is a periodic relist
    (not a watch to resume), and the drift it repairs is logged with that reason."""
    clock = ExactClock()
    run = Run(watch.import_resource(GV, None), clock)
    run.reflector.config = Config(relist_interval=0.25)
    run.client.lists[run.path] = [page(WEB, rv="10"), page(WEB2, rv="20")]
    run.client.streams[run.path] = [[0.25]]  # quiet, then ends: 0.25 s after the list
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run.run()
    assert samples(run, "clusterset_dns_relists_total") == {
        ("import", "initial"): 1, ("import", "periodic"): 1}
    assert samples(run, "clusterset_dns_watch_restarts_total") == {}
    assert "the periodic relist found 0 added, 0 removed, 1 changed objects" in caplog.text


@pytest.mark.timeout(10)
def test_the_last_event_time_is_set_per_resource(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    run.client.streams[run.path] = [[bookmark("11")]]
    run.run()
    assert samples(run, "clusterset_dns_last_event_timestamp_seconds") == {
        ("import",): clock.time()}


# -- what is sent ----------------------------------------------------------------------------

@pytest.mark.timeout(10)
def test_a_field_selector_goes_with_every_list_and_watch(clock: FakeClock) -> None:
    resource = dataclasses.replace(watch.import_resource(GV, None),
                                   field_selector="metadata.name=web")
    run = Run(resource, clock)
    run.client.lists[run.path] = [page(WEB, rv="10", cont="c1"), page(rv="10")]
    run.run()
    gets = run.client.get_params(run.path)
    assert [params.get("fieldSelector") for params in gets] == ["metadata.name=web"] * 2
    assert run.client.watch_params(run.path)[0]["fieldSelector"] == "metadata.name=web"


@pytest.mark.parametrize(("watch_timeout", "low", "sent"), [
    (300.0, False, 330),  # jittered by +10% at most
    (300.0, True, 270),  # and -10%
    (1.0, True, 1),  # 0.9 s: never 0 (no timeout, to the API server)
])
@pytest.mark.timeout(10)
def test_the_watch_timeout_sent_is_jittered_by_a_tenth(watch_timeout: float, low: bool,
                                                       sent: int) -> None:
    clock = EdgeClock(low)
    run = Run(watch.import_resource(GV, None), clock)
    run.reflector.config = Config(watch_timeout=watch_timeout, relist_interval=0)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    run.run()
    assert run.client.watch_params(run.path)[0]["timeoutSeconds"] == sent


@pytest.mark.timeout(10)
def test_a_list_without_a_resource_version_is_watched_from_none(clock: FakeClock) -> None:
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB)]
    run.run()
    assert run.client.watch_params(run.path)[0]["resourceVersion"] == ""


def test_the_first_relist_is_due_from_construction(clock: FakeClock) -> None:
    """Set when the reflector is made (a watch started before any list ends in time)."""
    made = reflector.Reflector(FakeClient(clock), watch.import_resource(GV, None),
                               lambda ops: None, lambda kind: None, Config(relist_interval=100),
                               lambda: None, metrics=Metrics(), clock=ExactClock())
    assert made.next_relist == 1000.0 + 100


def test_a_direct_relist_is_an_initial_first_list(clock: FakeClock) -> None:
    """relist() without arguments: the first list, read as it arrives, counted initial."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, DB, rv="10")]
    asyncio.run(run.reflector.relist())
    assert run.client.streamed == [run.path]
    assert samples(run, "clusterset_dns_relists_total") == {("import", "initial"): 1}
    assert sorted(run.imports()) == ["prod/db", "prod/web"]


# -- what is logged --------------------------------------------------------------------------

@pytest.mark.timeout(10)
@pytest.mark.parametrize(("lists", "listed"), [
    ([page(WEB, DB, API, rv="10")], "listed 3 serviceimports"),  # read as it arrives
    ([page(WEB, rv="10", cont="c"), page(DB, API, rv="10")], "listed 3 serviceimports"),
], ids=["one-response", "pages"])
def test_the_list_logs_how_many_objects_it_held(
        clock: FakeClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        lists: list[Any], listed: str) -> None:
    monkeypatch.setattr(liststream, "STREAM_BATCH", 2)  # a response read in two batches
    run = imports_run(clock)
    run.client.lists[run.path] = list(lists)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run.run()
    assert f"{listed} {GV} (resourceVersion 10)" in caplog.text


@pytest.mark.timeout(10)
def test_a_relist_logs_how_many_objects_it_held(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """A relist with objects known (converted, then applied in one update) counts too."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10"), page(WEB2, rv="20", cont="c"),
                                  page(DB, API, rv="20")]
    run.client.streams[run.path] = [[error_event(410)]]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run.run()
    assert f"listed 3 serviceimports {GV} (resourceVersion 20)" in caplog.text


# -- timers: the silence bound -------------------------------------------------------------

@pytest.mark.timeout(10)
def test_silence_is_measured_from_the_last_word(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """A bookmark 300 s into the watch: the stream is dropped 600 s after it (at 900 s),
    not at 600 s, nor later than 900 s; the error says how long it was silent."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(WEB, rv="10")]
    run.client.streams[run.path] = [[300.0, bookmark("11"), 10_000.0]]

    def inactive() -> float:
        return samples(run, "clusterset_dns_watch_restarts_total").get(("import", "inactive"),
                                                                        0.0)

    async def settle() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def main() -> None:
        task = asyncio.ensure_future(run.reflector.run())
        try:
            await until(lambda: len(run.client.watches) == 1, task, clock)
            await settle()
            start = clock.now
            clock.advance(300)
            await settle()
            clock.advance(start + 899 - clock.now)
            await settle()
            assert inactive() == 0
            clock.advance(1)
            await settle()
            assert inactive() == 1
        finally:
            await stop(task)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        asyncio.run(main())
    assert f"watch {run.path}: silent for 600s; retrying in" in caplog.text


# -- the yields of a burst being read --------------------------------------------------------

def test_reading_a_burst_yields_once_more_than_the_slice_has_passed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each clock reading is a quarter of the slice later (binary fractions: exact sums),
    and the reader reads the clock twice per event: after the second event exactly the
    slice has passed (no yield yet), after the third more than it (a yield)."""
    monkeypatch.setattr(reflector, "SLICE_SECONDS", 2.0**-6)
    clock = FakeClock(tick=2.0**-8)
    reader = reflector.Reflector(FakeClient(clock), watch.import_resource(GV, None),
                                 lambda ops: None, lambda kind: None, Config(relist_interval=0),
                                 lambda: None, metrics=Metrics(), clock=clock)
    turns = 0
    seen: list[int] = []  # the other task's turns when each event is read

    async def stream() -> AsyncIterator[dict[str, Any]]:
        for i in range(6):
            seen.append(turns)
            yield event("ADDED", service_import(f"s{i}", ips=["10.0.0.1"]), str(11 + i))

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def main() -> None:
        ticker = asyncio.create_task(other())
        await asyncio.sleep(0)
        start = turns
        await reader._read(stream(), asyncio.Event())
        ticker.cancel()
        seen[:] = [n - start for n in seen]

    asyncio.run(main())
    assert seen == [0, 0, 0, 1, 1, 1]


# -- rejections ------------------------------------------------------------------------------

@pytest.mark.parametrize(("op_kind", "kind"), [("import", IMPORT), ("slice", SLICE)])
def test_a_resource_without_a_kind_rejects_as_its_op_kind(op_kind: str, kind: str) -> None:
    resource = dataclasses.replace(watch.import_resource(GV, None), kind="", op_kind=op_kind)
    rejector = reflector.Reflector(FakeClient(), resource, lambda ops: None, lambda kind: None,
                                   Config(relist_interval=0), lambda: None, metrics=Metrics())
    assert rejector._convert(BAD_NEW) is None
    [rejection] = rejector._take_rejections()
    assert isinstance(rejection, PutRejected) and rejection.kind == kind


@pytest.mark.timeout(10)
def test_an_object_valid_again_is_no_longer_rejected(clock: FakeClock) -> None:
    """Rejected by the first list, valid in an event, gone from the relist: the relist
    deletes it and reports no rejection to clear (the valid put cleared it)."""
    run = imports_run(clock)
    fixed = service_import("newbad", ips=["10.4.0.1"])
    run.client.lists[run.path] = [page(WEB, BAD_NEW, rv="10"), page(WEB, rv="20")]
    run.client.streams[run.path] = [[event("MODIFIED", fixed, "11"), error_event(410)]]
    run.run()
    assert run.reflector.rejected == set()
    assert run.ops[-1] == [PutImport(("prod", "newbad"), None),
                           PutImport(("prod", "web"), convert.service_import(WEB))]


@pytest.mark.timeout(10)
def test_a_rebuild_reports_the_rejections_it_found(clock: FakeClock) -> None:
    """A bug in the first update: the rebuild's list holds an invalid object, whose
    rejection goes with the rebuild's update."""
    run = imports_run(clock)
    failures = [RuntimeError("a bug in the first update")]
    real = run.reflector.apply

    def apply(ops: Any) -> None:
        if failures:
            raise failures.pop()
        real(ops)

    run.reflector.apply = apply
    run.client.lists[run.path] = [page(WEB, rv="10"), page(WEB, BAD_NEW, rv="10")]
    run.run()
    last = run.ops[-1]
    assert [type(op).__name__ for op in last] == [
        "PutRejected", "PutImport", "PutImport"]
    assert isinstance(last[0], PutRejected) and last[0].key == ("prod", "newbad")
    assert sorted(run.imports()) == ["prod/web"]


# -- the end of a relist that is cancelled --------------------------------------------------

@pytest.mark.timeout(10)
def test_a_relist_cancelled_cancels_the_page_it_asked_for(clock: FakeClock) -> None:
    """Stopped right after asking for the next page: that request is cancelled too."""
    run = imports_run(clock)
    ended: list[str] = []
    holder: list[asyncio.Task[None]] = []

    async def next_page() -> dict[str, Any]:
        holder[0].cancel()  # the source stops while this page is being fetched
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return page()

    run.client.lists[run.path] = [page(WEB, rv="10", cont="c1"), next_page]

    async def main() -> None:
        holder.append(asyncio.ensure_future(run.reflector.relist()))
        with pytest.raises(asyncio.CancelledError):
            await holder[0]
        for _ in range(5):
            await asyncio.sleep(0)
        assert ended == ["cancelled"]  # before asyncio.run cancels what is left

    asyncio.run(main())


# -- discovered or not: a 404 --------------------------------------------------------------

@pytest.mark.timeout(10)
def test_a_404_of_a_discovered_version_says_what_is_not_served(clock: FakeClock) -> None:
    made = reflector.Reflector(FakeClient(clock), watch.import_resource(GV, None),
                               lambda ops: None, lambda kind: None, Config(), lambda: None,
                               True, metrics=Metrics(), clock=clock)
    assert isinstance(made.client, FakeClient)
    made.client.lists[f"/apis/{GV}/serviceimports"] = [ApiError(404, "not found")]
    with pytest.raises(NotServed) as raised:
        asyncio.run(made.run())
    assert str(raised.value) == f"serviceimports {GV}: HTTP 404: not found"


@pytest.mark.timeout(10)
def test_a_404_is_retried_by_a_reflector_not_discovered(clock: FakeClock) -> None:
    run = imports_run(clock)  # made without saying whether its version was discovered
    run.client.lists[run.path] = [ApiError(404, "not found"), page(API, rv="10")]
    run.run()
    assert sorted(run.imports()) == ["other/api"]
    assert len(clock.sleeps) == 1


# -- the limits after a first response read as it arrived -----------------------------------

def test_a_first_response_read_in_batches_sizes_the_next_page_by_all_its_items(
        clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """An API server without a watch cache pages the first list: the response read in
    batches (one item each here) held two objects of 1.5 MiB, so the next page asks for
    what 4 MiB holds of them (2), counted over both batches (not 1, nor 3)."""
    monkeypatch.setattr(liststream, "STREAM_BATCH", 1)
    fat = fat_slices(3, 3 << 19)
    limits = list_limits(clock, [fat[0:2], fat[2:3]])
    per_item = len(json.dumps(page(*fat[0:2], rv="10", cont="c0"))) / 2
    assert limits == [reflector.FIRST_PAGE, int(reflector.PAGE_BYTES // per_item)] == [2, 2]


def test_an_empty_page_with_a_continue_token_leaves_the_limit(clock: FakeClock) -> None:
    """A page of no items tells nothing of their size: the next page asks for as many."""
    small = fat_slices(2, 100)
    assert list_limits(clock, [small[0:1], [], small[1:2]]) == [2, 4, 4]


# -- a relist of nothing known -----------------------------------------------------------------

@pytest.mark.timeout(10)
def test_a_relist_after_an_empty_list_counts_what_it_finds_as_drift(clock: FakeClock) -> None:
    """Nothing known (the first list was empty): the relist is read as it arrives, and
    what it finds was never delivered by the watch: drift, counted as added."""
    run = imports_run(clock)
    run.client.lists[run.path] = [page(rv="10"), page(WEB, DB, rv="20")]
    run.client.streams[run.path] = [[error_event(410)]]
    run.run()
    assert run.client.streamed == [run.path, run.path]
    assert samples(run, "clusterset_dns_relist_drift_total") == {("import", "added"): 2}
    assert sorted(run.imports()) == ["prod/db", "prod/web"]


@pytest.mark.timeout(10)
def test_a_relist_reports_new_rejections_with_the_ones_it_clears(clock: FakeClock) -> None:
    run = imports_run(clock)
    other_bad = service_import("otherbad", type_="Bogus")
    run.client.lists[run.path] = [page(WEB, BAD_NEW, rv="10"), page(WEB, other_bad, rv="20")]
    run.client.streams[run.path] = [[error_event(410)]]
    run.run()
    reason = "type 'Bogus' is neither ClusterSetIP nor Headless"
    assert sorted((op.key, op.reason) for op in run.ops[-1] if isinstance(op, PutRejected)) == [
        (("prod", "newbad"), None), (("prod", "otherbad"), reason)]


def test_a_paged_list_waits_on_no_timer() -> None:
    """The turn that sends the next page's request is one turn of the event loop, not a
    timer: a list of three pages answered at once is done within a bounded number of
    turns (a wait of even a second per page would make a list of thousands of pages
    take that many seconds)."""
    run = imports_run(FakeClock())
    run.client.lists[run.path] = [page(WEB, rv="10", cont="c1"), page(DB, rv="10", cont="c2"),
                                  page(API, rv="10")]

    async def main() -> int:
        task = asyncio.ensure_future(run.reflector.relist())
        for turns in range(100):
            if task.done():
                task.result()
                return turns
            await asyncio.sleep(0)
        await stop(task)
        raise AssertionError("the list was not done in 100 turns of the event loop")

    assert asyncio.run(main()) < 100
    assert sorted(run.imports()) == ["other/api", "prod/db", "prod/web"]
