"""What an Event and a Lease say, to the field, and the bounds of events.Elector and
events.Emitter at their edges (the second a Lease expires, the token that is there, the
refusal that is one too many): the Event's name must stay the same across releases and
replicas (the API server refuses a repeat only by name), and each bound is what keeps
an API server safe from a replica flooding it. Time is the injected clock's."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import time
from typing import Any

import pytest

from clusterset_dns.sources import events
from clusterset_dns.sources.kube import ApiError, KubeError
from clusterset_dns.zone.ops import IMPORT, SLICE, Rejection

from .fakeclock import FakeClock
from .test_events import LEASE, FakeApi

NOW = "2023-11-14T22:30:00.000000Z"  # FakeClock's wall time at its start
V1 = "multicluster.x-k8s.io/v1beta1"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class StubCache:
    """The three maps the Emitter reads of the cache: what was rejected, in the order it
    came, and which imports and slices are served."""

    def __init__(self) -> None:
        self.rejections: dict[tuple[str, tuple[str, str]], Rejection] = {}
        self.imports: dict[tuple[str, str], object] = {}
        self.slices: dict[tuple[str, str], object] = {}

    def reject(self, kind: str, key: tuple[str, str], reason: str = "bad",
               uid: str = "uid", served: bool = False) -> None:
        self.rejections[(kind, key)] = Rejection(None, reason, served, True, (V1, uid))


def rejection(reason: str = "bad name", served: bool = False, uid: str = "uid-1",
              api_version: str = V1) -> Rejection:
    return Rejection(None, reason, served, True, (api_version, uid))


def emitter_of(api: Any, cache: Any, clock: FakeClock, me: str = "a") -> events.Emitter:
    elector = events.Elector(api, "dns", "l", me, clock=clock)
    elector.leader, elector.terms = True, 1
    return events.Emitter(api, cache, elector, clock)


# --- the Event ---------------------------------------------------------------------------

def test_the_event_name_is_stable_across_releases() -> None:
    """The formula is a contract with Events already stored: a change would send every
    rejection's Event again after an upgrade."""
    assert events.event_name(IMPORT, ("prod", "web"), "bad name") == "web.618bf98409670559"
    digest = hashlib.sha256(b"EndpointSlice\0\0p\0r").hexdigest()[:16]
    assert events.event_name(SLICE, ("", "p"), "r") == f"p.{digest}"


@pytest.mark.parametrize("other", [
    (SLICE, ("prod", "web"), "bad name"),
    (IMPORT, ("dev", "web"), "bad name"),
    (IMPORT, ("prod", "web2"), "bad name"),
    (IMPORT, ("prod", "web"), "bad name2"),
    (IMPORT, ("prodw", "eb"), "bad name"),  # the separator keeps the fields apart
])
def test_each_field_makes_its_own_event(other: tuple[str, tuple[str, str], str]) -> None:
    assert events.event_name(*other) != events.event_name(IMPORT, ("prod", "web"), "bad name")


def test_the_event_name_keeps_200_characters_of_the_object_name() -> None:
    """An object name may have 253 characters; an Event name too: 200 + "." + 16."""
    long = "n" * 253
    name = events.event_name(IMPORT, ("prod", long), "r")
    assert name.startswith("n" * 200 + ".") and len(name) == 217
    assert len(events.event_name(IMPORT, ("prod", "n" * 200), "r")) == 217
    assert len(events.event_name(IMPORT, ("prod", "n" * 199), "r")) == 216


def test_a_namespaced_objects_event_to_the_field() -> None:
    body = events.event_body(IMPORT, ("prod", "web"), rejection(), "me", clock=FakeClock())
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.618bf98409670559", "namespace": "prod"},
        "involvedObject": {"apiVersion": V1, "kind": IMPORT, "name": "web", "uid": "uid-1",
                           "namespace": "prod"},
        "reason": "NotServedByDNS", "type": "Warning",
        "message": "not served by clusterset-dns: bad name",
        "source": {"component": "clusterset-dns"}, "reportingComponent": "clusterset-dns",
        "reportingInstance": "me", "firstTimestamp": "2023-11-14T22:30:00Z",
        "lastTimestamp": "2023-11-14T22:30:00Z", "count": 1,
    }


def test_a_cluster_scoped_objects_event_names_no_namespace_and_goes_to_default() -> None:
    clock = FakeClock()
    clock.advance(0.75)  # the timestamps are whole seconds: the fraction is cut, not rounded
    body = events.event_body("ClusterProperty", ("", "id.k8s.io"), rejection(), "me",
                             clock=clock)
    assert body["metadata"]["namespace"] == "default"
    assert body["involvedObject"] == {"apiVersion": V1, "kind": "ClusterProperty",
                                      "name": "id.k8s.io", "uid": "uid-1"}
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2023-11-14T22:30:00Z"
    assert events.event_namespace(("", "x")) == "default"
    assert events.event_namespace(("ns", "x")) == "ns"


@pytest.mark.parametrize("served, previous, text", [
    (False, False, "not served by clusterset-dns: r"),
    (True, False, "partly served by clusterset-dns: r"),
    (False, True, "this version not served by clusterset-dns (the last valid one still is): r"),
    (True, True, "this version not served by clusterset-dns (the last valid one still is): r"),
])
def test_the_message_says_how_much_is_served(served: bool, previous: bool, text: str) -> None:
    body = events.event_body(IMPORT, ("p", "n"), rejection("r", served), "me", previous,
                             FakeClock())
    assert body["message"] == text


def test_the_message_and_the_instance_are_cut_to_what_the_api_accepts() -> None:
    """An object's reason may quote a long field: the message keeps 1024 characters, the
    reporting instance (a host name and a pid) 128."""
    prefix = "not served by clusterset-dns: "
    fits = "x" * (1024 - len(prefix))
    body = events.event_body(IMPORT, ("p", "n"), rejection(fits), "i" * 128, clock=FakeClock())
    assert body["message"] == prefix + fits and body["reportingInstance"] == "i" * 128
    body = events.event_body(IMPORT, ("p", "n"), rejection(fits + "yz"), "i" * 129,
                             clock=FakeClock())
    assert body["message"] == prefix + fits and body["reportingInstance"] == "i" * 128


def test_the_timestamps_are_utc_wherever_the_server_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        body = events.event_body(IMPORT, ("p", "n"), rejection(), "me", clock=FakeClock())
    finally:
        monkeypatch.undo()
        time.tzset()
    assert body["firstTimestamp"] == "2023-11-14T22:30:00Z"


def test_the_replica_is_named_by_its_host_and_process() -> None:
    assert events.identity() == f"{socket.gethostname()}_{os.getpid()}"


# --- the Lease ---------------------------------------------------------------------------

def test_the_lease_created_to_the_field() -> None:
    api = FakeApi()
    assert run(events.Elector(api, "dns", "l", "a", clock=FakeClock()).step()) is True
    assert api.lease == {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "namespace": "dns", "resourceVersion": "1"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": NOW,
                 "renewTime": NOW, "leaseTransitions": 0},
    }
    assert events.Elector(api, "dns", "l", "a").collection == LEASE.rsplit("/", 1)[0]


def test_a_renewal_keeps_the_acquire_time_and_a_takeover_counts_a_transition() -> None:
    api, clock = FakeApi(), FakeClock()
    a = events.Elector(api, "dns", "l", "a", clock=clock)
    b = events.Elector(api, "dns", "l", "b", clock=clock)
    run(a.step())
    clock.advance(2.5)
    assert run(a.step()) is True
    assert api.lease is not None
    assert api.lease["spec"] == {"holderIdentity": "a", "leaseDurationSeconds": 15,
                                 "acquireTime": NOW, "renewTime": "2023-11-14T22:30:02.500000Z",
                                 "leaseTransitions": 0}
    clock.advance(15)  # 15 s after a's renewal: exactly its duration, not expired yet
    assert run(b.step()) is False
    clock.advance(0.001)
    assert run(b.step()) is True
    assert api.lease["spec"] == {"holderIdentity": "b", "leaseDurationSeconds": 15,
                                 "acquireTime": "2023-11-14T22:30:17.501000Z",
                                 "renewTime": "2023-11-14T22:30:17.501000Z",
                                 "leaseTransitions": 1}
    clock.advance(1)
    assert run(b.step()) is True
    assert api.lease["spec"]["leaseTransitions"] == 1
    assert api.lease["spec"]["acquireTime"] == "2023-11-14T22:30:17.501000Z"


def lease_of(holder: str | None, renewed: str | None, duration: int | None = None,
             transitions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "renewTime": renewed}
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if transitions is not None:
        spec["leaseTransitions"] = transitions
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "dns", "resourceVersion": "0"},
            "spec": spec}


@pytest.mark.parametrize("lease, seconds, taken", [
    # The holder's own duration counts, not ours: 30 s.
    (lease_of("x", NOW, 30), 30.0, False),
    (lease_of("x", NOW, 30), 30.001, True),
    # None written: ours, LEASE_SECONDS.
    (lease_of("x", NOW), 15.0, False),
    (lease_of("x", NOW), 15.001, True),
    # No holder: free at once; a renewTime that is no time: long expired.
    (lease_of("", NOW, 30), 0.0, True),
    (lease_of(None, NOW, 30), 0.0, True),
    (lease_of("x", "not a time", 30), 0.0, True),
    (lease_of("x", None, 30), 0.0, True),
    # Unreadable: no holder proven alive, whatever the duration (int32's largest).
    (lease_of("x", "not a time", 2**31 - 1), 0.0, True),
    (lease_of("x", "2023-11-14T22:30:00z", 2**31 - 1), 0.0, True),
    # A renewTime written without the fraction of a second, or with an offset.
    (lease_of("x", "2023-11-14T22:30:00Z", 30), 30.0, False),
    (lease_of("x", "2023-11-14T23:30:00+01:00", 30), 30.001, True),
])
def test_when_another_holders_lease_is_taken(lease: dict[str, Any], seconds: float,
                                              taken: bool) -> None:
    api, clock = FakeApi(), FakeClock()
    api.lease = lease
    clock.advance(seconds)
    assert run(events.Elector(api, "dns", "l", "me", clock=clock).step()) is taken
    assert api.lease["spec"]["holderIdentity"] == ("me" if taken else lease["spec"]
                                                   ["holderIdentity"])


@pytest.mark.parametrize("transitions, holder, after", [
    (None, "x", 1), (4, "x", 5), (4, "me", 4), (None, "me", 0)])
def test_transitions_count_each_change_of_holder(transitions: int | None, holder: str,
                                                 after: int) -> None:
    api, clock = FakeApi(), FakeClock()
    api.lease = lease_of(holder, "2000-01-01T00:00:00Z", 15, transitions)
    assert run(events.Elector(api, "dns", "l", "me", clock=clock).step()) is True
    assert api.lease["spec"]["leaseTransitions"] == after


class FailingApi(FakeApi):
    """The API server answers ``status`` to the chosen method on the Lease."""

    def __init__(self, method: str, status: int) -> None:
        super().__init__()
        self.method, self.status = method, status

    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        if self.method == "GET":
            raise ApiError(self.status, "no")
        return await super().get(path, params, timeout, sizes)

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any:
        if method == self.method:
            raise ApiError(self.status, "no")
        return await super().send(method, path, body, timeout)


@pytest.mark.parametrize("method, status, existing", [
    ("GET", 500, False), ("GET", 403, True), ("POST", 500, False), ("POST", 403, False),
    ("PUT", 500, True), ("PUT", 404, True)])
def test_an_error_other_than_a_conflict_is_raised(method: str, status: int,
                                                  existing: bool) -> None:
    api = FailingApi(method, status)
    if existing:
        api.lease = lease_of("x", "2000-01-01T00:00:00Z", 15)
    with pytest.raises(ApiError) as raised:
        run(events.Elector(api, "dns", "l", "me", clock=FakeClock()).step())
    assert raised.value.status == status


def test_a_conflict_on_create_means_another_replica_was_first() -> None:
    api = FailingApi("POST", 409)
    assert run(events.Elector(api, "dns", "l", "me", clock=FakeClock()).step()) is False


class FixedClock(FakeClock):
    """Random draws are the top of their range, so that the renewals fall on whole
    seconds; the ranges asked for are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, low: float, high: float) -> float:
        self.ranges.append((low, high))
        return high


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.mark.parametrize("last_write", [1000.0, 1005.0], ids=["created", "renewed"])
def test_a_holder_that_cannot_reach_the_api_keeps_the_lease_until_its_hold_ends(
        last_write: float) -> None:
    """The Lease created at 1000 (the clock's start), renewed every 5 s; the API server
    down after ``last_write``: still the holder until last_write + 15 s, when the Lease
    it wrote expires for the others, not then; holding again once it is back (a second
    term)."""
    clock, api = FixedClock(), FakeApi()
    changes: list[bool] = []
    elector = events.Elector(api, "dns", "l", "a", changes.append, clock)
    real_get = api.get
    down = False

    async def get(path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        if down:
            raise KubeError("unreachable")
        return await real_get(path, params, timeout, sizes)

    api.get = get  # type: ignore[method-assign]

    async def scenario() -> None:
        nonlocal down
        task = asyncio.create_task(elector.run())
        await settle()
        assert elector.leader and changes == [True] and elector.terms == 1
        while clock.now < last_write:
            clock.advance(5)
            await settle()
        down = True
        while clock.now < last_write + 10:
            clock.advance(5)
            await settle()
            assert elector.leader and changes == [True]
        clock.advance(5)
        await settle()
        assert clock.now == last_write + 15
        assert not elector.leader and changes == [True, False] and elector.terms == 1
        clock.advance(5)  # still down: not holding, nothing changes
        await settle()
        assert changes == [True, False]
        down = False
        clock.advance(5)
        await settle()
        assert elector.leader and changes == [True, False, True] and elector.terms == 2
        task.cancel()

    run(scenario())
    steps = round((clock.now - 1000) / 5) + 1
    assert clock.sleeps == [5.0] * (steps - 1)  # docs/explain.md: renewed every 5 s
    assert clock.ranges == [(0.8, 1.0)] * steps


def test_renewals_are_spread_over_the_last_fifth_of_the_period() -> None:
    """The draw scales the period (4 s at its lowest), so that replicas started together
    do not ask together."""
    clock = FixedClock()
    clock.uniform = lambda low, high: low  # type: ignore[method-assign]
    elector = events.Elector(FakeApi(), "dns", "l", "a", clock=clock)

    async def scenario() -> None:
        task = asyncio.create_task(elector.run())
        await settle()
        assert clock.pending() == [1004.0]
        task.cancel()

    run(scenario())


@pytest.mark.parametrize("api", [FailingApi("GET", 500), FakeApi()],
                         ids=["unreachable", "held-by-another"])
def test_a_replica_that_does_not_get_the_lease_reports_no_change(api: FakeApi) -> None:
    clock = FixedClock()
    changes: list[bool] = []
    if not isinstance(api, FailingApi):
        api.lease = lease_of("x", NOW, 15)
    elector = events.Elector(api, "dns", "l", "a", changes.append, clock)
    assert elector.leader is False

    async def scenario() -> None:
        task = asyncio.create_task(elector.run())
        await settle()
        task.cancel()

    run(scenario())
    assert not elector.leader and changes == [] and elector.terms == 0


# --- the Emitter -------------------------------------------------------------------------

def test_a_long_idle_holder_still_sends_at_most_a_burst() -> None:
    """Tokens gather up to BURST, never more, however long nothing was rejected."""
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    emitter = emitter_of(api, cache, clock)
    assert emitter.tokens == events.BURST
    clock.advance(600)
    for i in range(23):
        cache.reject(IMPORT, ("p", f"o{i}"), uid=f"u{i}")
    run(emitter.scan())
    assert emitter.emitted == 20 and emitter.tokens == 0  # docs/explain.md: 20 at once
    clock.advance(5.999)  # then one every 6 s
    run(emitter.scan())
    assert emitter.emitted == 20
    clock.advance(0.001)
    run(emitter.scan())
    assert emitter.emitted == 21


def test_the_last_token_is_spent_and_none_is_borrowed() -> None:
    """With 1 token an Event goes; with 0.999 none does, and a scan that finds none
    spends none."""
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    emitter = emitter_of(api, cache, clock)
    emitter.tokens = 1.0
    cache.reject(IMPORT, ("p", "a"), uid="ua")
    cache.reject(IMPORT, ("p", "b"), uid="ub")
    run(emitter.scan())
    assert emitter.emitted == 1 and emitter.tokens == 0
    clock.advance(events.REFILL_SECONDS * 0.999)
    run(emitter.scan())
    assert emitter.emitted == 1 and emitter.tokens == pytest.approx(0.999)
    clock.advance(events.REFILL_SECONDS * 0.001)
    run(emitter.scan())
    assert emitter.emitted == 2


def test_an_event_the_api_refuses_otherwise_costs_a_token_and_is_tried_again() -> None:
    """A 403 or a 500 is not "sent before": the rejection stays to send, one token spent
    each try, so a broken API server is not asked more than the rate allows."""
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    real = api.send
    fails = 2

    async def send(method: str, path: str, body: Any, timeout: float = 10) -> Any:
        nonlocal fails
        if fails:
            fails -= 1
            raise ApiError(500, "busy")
        return await real(method, path, body, timeout)

    api.send = send  # type: ignore[method-assign]
    emitter = emitter_of(api, cache, clock)
    cache.reject(IMPORT, ("p", "a"), uid="ua")
    cache.reject(IMPORT, ("p", "b"), uid="ub")
    run(emitter.scan())  # b (newest) fails, then a fails; both stay to send
    assert emitter.emitted == 0 and emitter.refused == 0 and emitter.sent == set()
    assert emitter.tokens == events.BURST - 2
    run(emitter.scan())
    assert emitter.emitted == 2 and emitter.tokens == events.BURST - 4
    assert emitter.sent == {(IMPORT, ("p", "a"), "bad"), (IMPORT, ("p", "b"), "bad")}


def test_an_error_that_is_not_the_api_servers_answer_ends_the_scan() -> None:
    """Unreachable: the scan stops (Emitter.run logs it and scans again SCAN_SECONDS
    later), nothing is marked sent, and the loop goes on."""
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    real = api.send
    down = True

    async def send(method: str, path: str, body: Any, timeout: float = 10) -> Any:
        if down:
            raise KubeError("unreachable")
        return await real(method, path, body, timeout)

    api.send = send  # type: ignore[method-assign]
    emitter = emitter_of(api, cache, clock)
    cache.reject(IMPORT, ("p", "a"), uid="ua")

    async def scenario() -> None:
        nonlocal down
        task = asyncio.create_task(emitter.run())
        await settle()
        assert emitter.sent == set() and not api.events
        down = False
        clock.advance(0.999)  # a scan a second
        await settle()
        assert not api.events
        clock.advance(0.001)
        await settle()
        assert len(api.events) == 1
        task.cancel()

    run(scenario())
    assert clock.sleeps == [1.0]


@pytest.mark.parametrize("kind, stored, previous", [
    (IMPORT, "imports", True), (IMPORT, "slices", False), (IMPORT, None, False),
    (SLICE, "slices", True), (SLICE, "imports", False), (SLICE, None, False),
    ("ClusterProperty", "imports", False), ("ClusterProperty", "slices", False)])
def test_an_event_says_whether_an_earlier_version_is_served(
        kind: str, stored: str | None, previous: bool) -> None:
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    cache.reject(kind, ("p", "n"), "r")
    if stored:
        getattr(cache, stored)[("p", "n")] = object()
    run(emitter_of(api, cache, clock).scan())
    (event,) = api.events.values()
    assert event["message"] == ("this version not served by clusterset-dns (the last valid "
                                "one still is): r" if previous
                                else "not served by clusterset-dns: r")
    assert event["involvedObject"]["kind"] == kind


def test_an_event_names_this_replica_and_the_clock_time() -> None:
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    clock.advance(61)
    cache.reject(IMPORT, ("p", "n"), "r", served=True)
    run(emitter_of(api, cache, clock, me="replica-7").scan())
    (event,) = api.events.values()
    assert event["reportingInstance"] == "replica-7"
    assert event["firstTimestamp"] == "2023-11-14T22:31:01Z"
    assert event["message"] == "partly served by clusterset-dns: r"


def test_at_most_duplicates_per_scan_refusals_a_scan() -> None:
    """Without the right to list: 150 Events sent before. A scan asks about 100 of them
    (refused, no token), the next scan about the rest."""
    api = FakeApi(listable=False)
    clock, cache = FakeClock(), StubCache()
    for i in range(150):
        cache.reject(IMPORT, ("p", f"o{i}"), uid=f"u{i}")
        api.events[events.event_name(IMPORT, ("p", f"o{i}"), "bad")] = {}
    emitter = emitter_of(api, cache, clock)
    run(emitter.scan())
    assert api.posts == 100 == emitter.refused  # docs/reliability.md: 100 a second
    assert emitter.tokens == events.BURST and emitter.emitted == 0
    run(emitter.scan())
    assert api.posts == 150 == emitter.refused and len(api.lists) == 1


class PagedApi(FakeApi):
    """Events listed as the given pages (what each page's items hold)."""

    def __init__(self, pages: list[list[Any]]) -> None:
        super().__init__()
        self.pages = pages

    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        if path != "/api/v1/events":
            return await super().get(path, params, timeout, sizes)
        self.lists.append(dict(params))
        at = int(params.get("continue", 0))
        return {"metadata": {"continue": str(at + 1) if at + 1 < len(self.pages) else ""},
                "items": self.pages[at]}


def test_the_events_listed_are_read_to_the_last_page_and_odd_items_skipped() -> None:
    """Items without a name (no metadata, metadata not an object, a name not a string)
    are skipped; the others are never sent again."""
    a, b = (events.event_name(IMPORT, ("p", n), "bad") for n in "ab")
    api = PagedApi([[{"metadata": {"name": a}}, {}, {"metadata": "x"}],
                    [{"metadata": {"name": 7}}, {"metadata": {"name": b}}]])
    clock, cache = FakeClock(), StubCache()
    for n in "abc":
        cache.reject(IMPORT, ("p", n), uid=f"u{n}")
    emitter = emitter_of(api, cache, clock)
    run(emitter.seed())
    assert emitter.existing == {a, b}
    assert api.lists == [{"fieldSelector": "reason=NotServedByDNS,reportingComponent="
                                           "clusterset-dns", "limit": 500},
                         {"fieldSelector": "reason=NotServedByDNS,reportingComponent="
                                           "clusterset-dns", "limit": 500,
                          "continue": "1"}]
    emitter.elector.terms = 1
    emitter._seeded_term = 1  # seeded above
    run(emitter.scan())
    assert [e["involvedObject"]["name"] for e in api.events.values()] == ["c"]
    assert api.posts == 1 and emitter.existing == set()
    assert emitter.sent == {(IMPORT, ("p", n), "bad") for n in "abc"}


@pytest.mark.parametrize("answer", [ApiError(403, "forbidden"), KubeError("unreachable"),
                                    ["not a list response"]])
def test_events_that_cannot_be_listed_leave_what_was_known(answer: Any) -> None:
    api = FakeApi()

    async def get(path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    api.get = get  # type: ignore[method-assign]
    emitter = emitter_of(api, StubCache(), FakeClock())
    emitter.existing = {"kept"}
    run(emitter.seed())
    assert emitter.existing == {"kept"}


def test_the_events_are_listed_once_a_term_and_not_while_not_holding() -> None:
    api, clock, cache = FakeApi(), FakeClock(), StubCache()
    emitter = emitter_of(api, cache, clock)
    emitter.elector.leader = False
    run(emitter.scan())
    assert api.lists == []
    emitter.elector.leader = True
    run(emitter.scan())
    run(emitter.scan())
    assert len(api.lists) == 1
    emitter.elector.terms = 2  # lost and taken again: another holder may have sent some
    run(emitter.scan())
    assert len(api.lists) == 2


def test_the_memory_of_what_was_sent_is_bounded() -> None:
    """Past 100,000 marks it starts again (the API server still refuses repeats)."""
    emitter = emitter_of(FakeApi(), StubCache(), FakeClock())
    emitter.sent = {("k", ("p", str(i)), "r") for i in range(100_000)}
    emitter._mark(("k", ("p", "new"), "r"))
    assert len(emitter.sent) == 100_001
    emitter._mark(("k", ("p", "newer"), "r"))
    assert emitter.sent == {("k", ("p", "newer"), "r")}


def test_the_server_runs_one_elector_and_one_emitter_as_this_replica() -> None:
    api, cache = FakeApi(), StubCache()
    cache.reject(IMPORT, ("p", "n"), uid="u")

    async def scenario() -> None:
        task = asyncio.create_task(events.run(api, cache, "dns", "l"))  # type: ignore[arg-type]
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert api.lease is not None
    assert api.lease["metadata"] == {"name": "l", "namespace": "dns", "resourceVersion": "1"}
    assert api.lease["spec"]["holderIdentity"] == events.identity()
    (event,) = api.events.values()
    assert event["reportingInstance"] == events.identity()
