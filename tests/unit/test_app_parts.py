"""The app's parts, each at its boundary, without serving: how the end of the source is
told (exit status and the one line said), the pod's own namespace, what each process
builds from the flags (the cache's settings, a worker's share of the query log rate and
of the transfer slots), the manifest source's groups, and what /ready says in each
state. The whole run is tests/unit/test_app.py's."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from clusterset_dns.base import metrics
from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.process import app, workers
from clusterset_dns.zone.cache import SetSynced


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


# -- the end of the source -------------------------------------------------------------------------

async def ended(body: Coroutine[Any, Any, None] | None) -> int | None:
    async def forever() -> None:
        await asyncio.Event().wait()

    task = asyncio.ensure_future(body if body is not None else forever())
    await asyncio.sleep(0)
    if body is None:
        running = app._source_failed(task)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert app._source_failed(task) is None  # cancelled: no failure either
        return running
    await asyncio.gather(task, return_exceptions=True)
    return app._source_failed(task)


async def fails(exc: BaseException) -> None:
    raise exc


async def returns() -> None:
    pass


@pytest.mark.parametrize(("body", "code", "said"), [
    (None, None, []),  # still running
    ("returns", None, []),  # ended cleanly
    ("config", 2, ["cannot start: no kubeconfig found"]),
    ("bug", 1, ["source failed"]),
])
def test_the_end_of_the_source_is_told_by_its_status(
        body: str | None, code: int | None, said: list[str],
        caplog: pytest.LogCaptureFixture) -> None:
    makers: dict[str | None, Callable[[], Coroutine[Any, Any, None] | None]] = {
        None: lambda: None, "returns": returns,
        "config": lambda: fails(ConfigError("no kubeconfig found")),
        "bug": lambda: fails(RuntimeError("boom"))}
    coro = makers[body]()
    with caplog.at_level(logging.INFO, logger=app.log.name):
        assert run(ended(coro)) == code
    assert [r.getMessage() for r in caplog.records] == said
    # A bug brings its traceback; a configuration error is one line.
    assert ("RuntimeError: boom" in caplog.text) == (body == "bug")
    assert "Traceback" not in caplog.text or body == "bug"


# -- the pod's namespace ---------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "namespace"), [
    (" team-a\n", "team-a"), ("", "default"), ("\n", "default"), (None, "default")])
def test_the_own_namespace_is_the_service_account_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None,
        namespace: str) -> None:
    path = tmp_path / "namespace"
    if content is not None:
        path.write_text(content)
    monkeypatch.setattr(app, "SERVICE_ACCOUNT_NAMESPACE", path)
    assert app._own_namespace() == namespace


# -- what each process builds from the flags -------------------------------------------------------

def built(config: Config, worker: bool = False) -> app.ProcessState:
    async def build() -> app.ProcessState:
        loop = asyncio.get_running_loop()
        state = app.process_state(config, (signal.SIGUSR1,), worker)
        for signum in (signal.SIGUSR1, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        return state

    state: app.ProcessState = run(build())
    return state


@pytest.mark.parametrize("worker", [False, True])
def test_the_cache_takes_its_settings_from_the_flags(worker: bool) -> None:
    config = Config(zone="example.test", ttl=9, cluster_id="east", topology_zone="za",
                    node_name="n1", serve_terminating=True)
    cache = built(config, worker).cache
    builder = cache.builder
    assert (cache.names.apex, builder.ttl) == ((b"example", b"test"), 9)
    assert (builder.cluster_id, builder.topology_zone, builder.node_name,
            builder.serve_terminating) == ("east", "za", "n1", True)
    # A worker's updates were logged and timed by the parent already.
    assert cache.admission.log_rejected is not worker
    assert cache.record_programming is not worker


@pytest.mark.parametrize(("count", "slots"), [(1, 16), (4, 4), (16, 1), (64, 1)])
def test_each_process_gets_its_share_of_the_transfer_slots(count: int, slots: int) -> None:
    from clusterset_dns.transfers import xfr

    assert xfr.MAX_TRANSFERS == 16
    state = built(Config(allow_transfer=(ipaddress.ip_network("127.0.0.1/32"),),
                          workers=count))
    assert state.transfers is not None and state.journal is not None
    assert state.transfers.max_transfers == slots
    assert state.cache.on_change == state.journal.record
    plain = built(Config())
    assert (plain.transfers, plain.journal, plain.tap) == (None, None, None)


@pytest.mark.parametrize(("count", "rate"), [(1, 900.0), (3, 300.0)])
def test_each_process_gets_its_share_of_the_query_log_rate(count: int, rate: float) -> None:
    from clusterset_dns.serving.stats import Stats

    assert app.answer_observer(Config(), Stats()) is None
    observe = app.answer_observer(Config(query_log="all", query_log_rate=900,
                                         workers=count), Stats())
    assert observe is not None
    query_log = observe.__self__  # type: ignore[attr-defined]
    assert query_log.limit.rate == rate


def test_the_manifest_source_watches_the_groups_asked(tmp_path: Path) -> None:
    config = Config(manifests=tmp_path, poll_interval=2.5, namespaces=("prod",),
                    serviceimport_apis=("example.io/v1", "other.io/v2beta1"))
    source = app.make_source(config, lambda ops: None, metrics.Metrics())
    manifests = source.__self__  # type: ignore[attr-defined]
    assert manifests.groups == frozenset({"multicluster.x-k8s.io", "example.io", "other.io"})
    assert (manifests.path, manifests.poll_interval, manifests.namespaces) == (
        tmp_path, 2.5, frozenset({"prod"}))
    assert manifests.cluster_property  # no --cluster-id: the files may name it
    named = app.make_source(Config(manifests=tmp_path, cluster_id="east"), lambda ops: None,
                            metrics.Metrics())
    assert not named.__self__.cluster_property  # type: ignore[attr-defined]


# -- /ready ----------------------------------------------------------------------------------------

def test_ready_says_what_keeps_it_not_ready(tmp_path: Path) -> None:
    async def scenario() -> list[tuple[int, str, bytes]]:
        server = app.Server(Config(manifests=tmp_path, health_listen=("127.0.0.1", 1),
                                   ready_listen=("127.0.0.1", 2), metrics_listen=None))
        try:
            routes = server.routes()
            assert {where: sorted(table) for where, table in routes.items()} == {
                ("127.0.0.1", 1): ["/explain", "/health"], ("127.0.0.1", 2): ["/ready"]}
            ready = cast(Callable[[Mapping[str, str]], tuple[int, str, bytes]],
                         routes[("127.0.0.1", 2)]["/ready"])
            health = cast(Callable[[Mapping[str, str]], tuple[int, str, bytes]],
                          routes[("127.0.0.1", 1)]["/health"])
            said = [ready({})]
            server.state.cache.apply([SetSynced(True)])
            said.append(ready({}))  # synced, DNS not listening yet
            server.dns.bound = [object()]  # type: ignore[list-item]
            server.pool.serving = True
            server.pool.workers = [workers.Worker(2), workers.Worker(3)]
            server.pool.workers[0].serving = True
            said.append(ready({}))
            server.pool.workers[1].serving = True
            said.append(ready({}))
            server.stopping = True
            said.append(ready({}))
            said.append(health({}))
            return said
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                asyncio.get_running_loop().remove_signal_handler(signum)

    assert run(scenario()) == [
        (503, "text/plain", b"not synced\n"), (503, "text/plain", b"not synced\n"),
        (503, "text/plain", b"workers not serving: [3]\n"), (200, "text/plain", b"OK\n"),
        (503, "text/plain", b"shutting down\n"), (200, "text/plain", b"OK\n")]


# -- the sources ---------------------------------------------------------------------------------

def test_a_manifest_file_error_is_counted_by_its_reason(tmp_path: Path) -> None:
    meters = metrics.Metrics()
    source = app.make_source(Config(manifests=tmp_path), lambda ops: None, meters)
    source.__self__.error("parse")  # type: ignore[attr-defined]
    assert meters.registry.get_sample_value("clusterset_dns_manifest_errors_total",
                                            {"reason": "parse"}) == 1


@pytest.mark.parametrize(("events", "given", "namespace", "ran"), [
    (True, "team-b", " team-a\n", [("team-b", "lease-x")]),
    (True, None, " team-a\n", [("team-a", "lease-x")]),  # the pod's own namespace
    (False, "team-b", "team-a", []),
    (True, "team-b", "team-a", None),  # no cache to report the rejections of: no events
])
def test_the_api_source_runs_the_locality_and_the_events_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, events: bool, given: str | None,
        namespace: str, ran: list[tuple[str, str]] | None) -> None:
    from clusterset_dns.sources import events as events_module
    from clusterset_dns.sources.locality import Locality
    from clusterset_dns.sources.watch import KubeSource

    path = tmp_path / "namespace"
    path.write_text(namespace)
    monkeypatch.setattr(app, "SERVICE_ACCOUNT_NAMESPACE", path)
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(events_module, "run", lambda *args: calls.append(args))
    config = Config(events=events, events_namespace=given, events_lease="lease-x")
    meters = metrics.Metrics()
    cache = built(Config()).cache

    def apply(ops: list[Any]) -> None:
        pass

    source = app.make_source(config, apply, meters, cache if ran is not None else None)
    kube = source.__self__  # type: ignore[attr-defined]
    assert isinstance(kube, KubeSource)
    assert (kube.config, kube.apply, kube.metrics) == (config, apply, meters)
    locality = kube.extra[0].__self__
    assert isinstance(locality, Locality)
    assert (locality.config, locality.apply, locality.metrics) == (config, apply, meters)
    for task in kube.extra[1:]:
        task("the client")
    assert [(client, c is cache, n, lease) for client, c, n, lease in calls] == [
        ("the client", True, n, lease) for n, lease in ran or []]
