"""locality.Locality over a scripted API client (the reflector.Client seam): discovery of
the ClusterProperty API, its absence said once, the Node's zone read with retries.
The real API server runs these paths in tests/kube/test_locality.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import locality
from clusterset_dns.sources.kube import ApiError, KubeError
from clusterset_dns.zone.cache import Op, SetClusterId, SetTopologyZone
from clusterset_dns_testkit.objects import cluster_property

from .fakeclock import FakeClock


class Script:
    """``get`` answers per path, in order (an exception is raised); the last repeats."""

    def __init__(self, answers: Mapping[str, list[Any]]) -> None:
        self.answers = {path: list(items) for path, items in answers.items()}
        self.gets: list[str] = []

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30) -> Any:
        self.gets.append(path)
        items = self.answers.get(path)
        if not items:
            raise ApiError(404, f"{path} not found")
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, BaseException):
            raise item
        return item

    def stream(self, path: str, params: Mapping[str, Any]) -> Any:
        raise AssertionError("no watch expected")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def run_for(coro: Any, clock: FakeClock, count: int, turns: int = 1) -> None:
    """Runs ``coro`` until it has slept ``count`` times (each sleep ends once the work
    that is ready has run: ``turns`` turns of the loop), then cancels it."""
    async def main() -> None:
        task = asyncio.ensure_future(coro)
        for _ in range(10_000):
            if len(clock.sleeps) >= count or task.done():
                break
            for _ in range(turns):
                await asyncio.sleep(0)
            clock.jump()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())


GROUP = {"kind": "APIGroup", "name": "about.k8s.io",
         "versions": [{"groupVersion": "about.k8s.io/v1alpha1"},
                      {"groupVersion": "about.k8s.io/v1beta1"}],
         "preferredVersion": {"groupVersion": "about.k8s.io/v1beta1"}}
RESOURCES = {"kind": "APIResourceList", "resources": [{"name": "clusterproperties"}]}


def test_discovery_takes_the_preferred_version_serving_clusterproperties() -> None:
    client = Script({"/apis/about.k8s.io": [GROUP],
                     "/apis/about.k8s.io/v1beta1": [RESOURCES]})
    source = locality.Locality(Config(), lambda ops: None, Metrics())
    assert asyncio.run(source.discover(client)) == "about.k8s.io/v1beta1"


def test_discovery_without_the_resource_is_none() -> None:
    client = Script({"/apis/about.k8s.io": [GROUP],
                     "/apis/about.k8s.io/v1beta1": [{"resources": [{"name": "other"}]}],
                     "/apis/about.k8s.io/v1alpha1": [{"resources": []}]})
    source = locality.Locality(Config(), lambda ops: None, Metrics())
    assert asyncio.run(source.discover(client)) is None


def test_absent_crd_is_said_once_and_looked_for_again(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    applied: list[list[Op]] = []
    source = locality.Locality(Config(), applied.append, Metrics(), clock)
    client = Script({})  # every path 404
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 3)
    assert clock.sleeps[:3] == [locality.DISCOVER_INTERVAL] * 3
    assert client.gets.count("/apis/about.k8s.io") >= 3
    messages = [r.getMessage() for r in caplog.records]
    assert sum("no ClusterProperty API" in m for m in messages) == 1, messages
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert applied == []


def test_cluster_id_flag_skips_the_property() -> None:
    client = Script({})
    source = locality.Locality(Config(cluster_id="east"), lambda ops: None, Metrics())
    asyncio.run(source.run(client))  # nothing to do: returns at once
    assert client.gets == []


def test_node_zone_is_retried_then_applied(clock: FakeClock) -> None:
    applied: list[list[Op]] = []
    node = {"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "zone-a"}}}
    client = Script({"/api/v1/nodes/n1": [KubeError("connection refused"), node]})
    source = locality.Locality(Config(cluster_id="east", topology_zone_from_node="n1"),
                               applied.append, Metrics(), clock)
    run_for(source.run(client), clock, 3)
    assert applied == [[SetTopologyZone("zone-a")]]  # once: the re-reads found no change
    assert clock.sleeps[1:3] == [locality.NODE_RECHECK] * 2
    assert clock.sleeps[0] < locality.NODE_RECHECK  # the first failure backs off, briefly


NEW, OLD = ("default", "cluster.clusterset.k8s.io"), ("default", "id.k8s.io")


@pytest.mark.parametrize(("puts", "expected"), [
    ([(NEW, "east")], "east"),
    ([(NEW, "east"), (NEW, None)], None),
    ([(OLD, "west")], "west"),  # the name the MCS DNS specification uses
    ([(OLD, "west"), (NEW, "east")], "east"),  # both: the newer name wins
    ([(NEW, "east"), (OLD, "west")], "east"),  # in whichever order they come
    ([(NEW, "east"), (OLD, "west"), (NEW, None)], "west"),
    ([(OLD, "west"), (("default", "other.k8s.io"), None)], "west"),  # other properties
])
def test_property_resource_puts_the_cluster_id(
        puts: list[tuple[tuple[str, str], str | None]], expected: str | None) -> None:
    resource = locality.property_resource("about.k8s.io/v1beta1", {})
    assert resource.field_selector is None  # two names: every property is listed
    ops = [resource.put(key, value) for key, value in puts]
    assert ops[-1] == SetClusterId(expected)


def test_a_bug_in_discovery_does_not_stop_the_source(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    applied: list[list[Op]] = []
    # an exception nobody foresaw, raised inside discovery
    client = Script({"/apis/about.k8s.io": [ValueError("unforeseen")]})
    source = locality.Locality(Config(), applied.append, Metrics(), clock)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 2)
    assert len(clock.sleeps) >= 2 and client.gets.count("/apis/about.k8s.io") >= 2
    assert "a bug; please report it" in caplog.text
    assert applied == []


class Served(Script):
    """Also lists (any parameters) and watches: every watch fails with ``gone``."""

    def __init__(self, answers: Mapping[str, list[Any]], gone: BaseException) -> None:
        super().__init__(answers)
        self.gone = gone
        self.streams = 0

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, **_: Any) -> Any:
        return await super().get(path, params, timeout)

    def stream(self, path: str, params: Mapping[str, Any]) -> Any:
        self.streams += 1

        async def events() -> Any:
            raise self.gone
            yield  # an async generator that fails at its first read

        return events()


PROPERTIES = "/apis/about.k8s.io/v1beta1/clusterproperties"
PROPERTY_LIST = {"kind": "ClusterPropertyList", "metadata": {"resourceVersion": "7"},
                 "items": [{**cluster_property("east"),
                            "metadata": {"name": "cluster.clusterset.k8s.io",
                                         "resourceVersion": "7"}}]}


def test_the_cluster_property_api_going_away_clears_the_cluster_id(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """Listed (the id is east), then the CRD is deleted: the watch gets 404, the id is
    unknown again (every cluster's endpoints), and the API is looked for again; its
    absence is said then (once), though it was served before."""
    applied: list[list[Op]] = []
    client = Served({"/apis/about.k8s.io": [GROUP, ApiError(404, "gone")],
                     "/apis/about.k8s.io/v1beta1": [RESOURCES],
                     PROPERTIES: [PROPERTY_LIST]}, ApiError(404, "the server could not find "
                                                          "the requested resource"))
    source = locality.Locality(Config(), applied.append, Metrics(), clock)
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 3, turns=50)  # the watch fails before it is silent
    ids = [op for ops in applied for op in ops if isinstance(op, SetClusterId)]
    assert ids == [SetClusterId("east"), SetClusterId(None)]
    assert sum("no ClusterProperty API" in r.getMessage() for r in caplog.records) == 1
    assert client.streams == 1
    assert client.gets.count("/apis/about.k8s.io") >= 2  # looked for again
    assert locality.DISCOVER_INTERVAL in clock.sleeps


def test_a_nodes_zone_label_changing_at_run_time_is_applied(clock: FakeClock) -> None:
    """Each re-read that finds another zone applies it (the label removed: unknown); a
    re-read that finds the same, or fails, applies nothing and waits the recheck."""
    def node(zone: str | None) -> dict[str, Any]:
        labels = {} if zone is None else {"topology.kubernetes.io/zone": zone}
        return {"metadata": {"name": "n1", "labels": labels}}

    applied: list[list[Op]] = []
    client = Script({"/api/v1/nodes/n1": [node("zone-a"), node("zone-a"),
                                          KubeError("connection refused"), node("zone-b"),
                                          node(None), node(None)]})
    source = locality.Locality(Config(cluster_id="east", topology_zone_from_node="n1"),
                               applied.append, Metrics(), clock)
    run_for(source.run(client), clock, 6)
    assert applied == [[SetTopologyZone("zone-a")], [SetTopologyZone("zone-b")],
                       [SetTopologyZone(None)]]
    assert clock.sleeps[:6] == [locality.NODE_RECHECK] * 6  # a failure after the first
    # read keeps the zone and waits the usual recheck


def test_a_discovery_error_backs_off_and_is_retried(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The API server unreachable at first: a back-off wait (not the absent CRD's
    minute), then the property is watched; nothing is taken for a bug."""
    applied: list[list[Op]] = []
    client = Served({"/apis/about.k8s.io": [KubeError("connection refused"), GROUP],
                     "/apis/about.k8s.io/v1beta1": [RESOURCES],
                     PROPERTIES: [PROPERTY_LIST]}, ApiError(404, "gone"))
    source = locality.Locality(Config(), applied.append, Metrics(), clock)
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 2, turns=50)
    assert 0 < clock.sleeps[0] < locality.DISCOVER_INTERVAL
    assert [op for ops in applied for op in ops if isinstance(op, SetClusterId)][:1] == \
        [SetClusterId("east")]
    assert "a bug" not in caplog.text
    assert "watching ClusterProperty cluster.clusterset.k8s.io / id.k8s.io " \
           "(about.k8s.io/v1beta1)" in caplog.text


def test_a_node_name_is_one_path_segment(clock: FakeClock) -> None:
    """A name with a slash (not a valid Node name, but a flag's value) is quoted whole."""
    client = Script({"/api/v1/nodes/a%2Fb": [{"metadata": {"name": "a/b"}}]})
    source = locality.Locality(Config(cluster_id="east", topology_zone_from_node="a/b"),
                               lambda ops: None, Metrics(), clock)
    run_for(source.run(client), clock, 1)
    assert set(client.gets) == {"/api/v1/nodes/a%2Fb"}


def test_a_failing_property_watch_backs_off_on_the_clock_and_counts_a_bad_item(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The watch of the ClusterProperties fails (the connection drops): the reflector
    says which resource, backs off on the injected clock and watches again; a listed
    property without a name is counted invalid as a ClusterProperty, the good one kept."""
    applied: list[list[Op]] = []
    listed = {**PROPERTY_LIST, "items": [*PROPERTY_LIST["items"], {"metadata": {}}]}
    client = Served({"/apis/about.k8s.io": [GROUP],
                     "/apis/about.k8s.io/v1beta1": [RESOURCES],
                     PROPERTIES: [listed]}, KubeError("connection reset"))
    metrics = Metrics()
    source = locality.Locality(Config(), applied.append, metrics, clock)
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources"):
        run_for(source.run(client), clock, 2, turns=50)
    # watched again after each back-off, taken on the injected clock
    assert len(clock.sleeps) >= 2 and client.streams >= 2
    assert [op for ops in applied for op in ops if isinstance(op, SetClusterId)] == \
        [SetClusterId("east")]
    assert metrics.registry.get_sample_value("clusterset_dns_invalid_objects_total",
                                             {"kind": "ClusterProperty"}) == 1
    assert "clusterproperties about.k8s.io/v1beta1: connection reset; retrying" in caplog.text
    assert "a bug" not in caplog.text


def test_a_bug_reading_the_node_is_said_with_the_node_name(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    client = Script({"/api/v1/nodes/n1": [ValueError("unforeseen"),
                                          {"metadata": {"name": "n1"}}]})
    applied: list[list[Op]] = []
    source = locality.Locality(Config(cluster_id="east", topology_zone_from_node="n1"),
                               applied.append, Metrics(), clock)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 2)
    assert "following Node n1 failed (a bug; please report it)" in caplog.text
    assert applied == [[SetTopologyZone(None)]]  # then read again, and applied


def test_a_bug_following_the_property_is_said_with_its_name(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    client = Script({"/apis/about.k8s.io": [ValueError("unforeseen")]})
    source = locality.Locality(Config(), lambda ops: None, Metrics(), clock)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 1)
    assert "following the ClusterProperty failed (a bug; please report it)" in caplog.text


@pytest.mark.parametrize("answer", [["not", "a", "node"], "text", None])
def test_a_node_answer_that_is_not_an_object_is_no_zone_not_a_bug(
        answer: Any, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """And a first failure is backed off by the source itself, not taken for a bug."""
    client = Script({"/api/v1/nodes/n1": [KubeError("connection refused"), answer]})
    applied: list[list[Op]] = []
    source = locality.Locality(Config(cluster_id="east", topology_zone_from_node="n1"),
                               applied.append, Metrics(), clock)
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources.locality"):
        run_for(source.run(client), clock, 2)
    assert applied == [[SetTopologyZone(None)]]
    assert "a bug" not in caplog.text
    assert 0 < clock.sleeps[0] < locality.NODE_RECHECK == clock.sleeps[1]
