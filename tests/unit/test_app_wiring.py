"""What each process builds from the flags and hands on (process/app.py: process_state,
ProcessState.server, Server's constructor): every part gets the flag it names and this
process's own counters, cache and handler, and the callbacks they are given count in
this run's metrics. A stop signal sets the stop event; SIGHUP is ignored, and said so by
the parent only. Written for the survivors of ``scripts/mutate
clusterset_dns/process/app.py``."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns.base.config import Config, DnstapTarget
from clusterset_dns.process import app, collector
from clusterset_dns.process.querylog import QueryLog
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import PutImport, SetSynced
from clusterset_dns_testkit.objects import service_import
from clusterset_dns_testkit.peers import free_port

from .fakeclock import FakeClock

LOCAL = "127.0.0.1"
ANYONE = (ipaddress.ip_network("127.0.0.1/32"),)


def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "xfr.key"
    path.write_text("hmac-sha256:xfr-key:" + base64.b64encode(b"k" * 32).decode() + "\n")
    return path


async def state_of(config: Config, worker: bool | None = None) -> app.ProcessState:
    """process_state in the running loop (whose close removes its signal handlers)."""
    if worker is None:
        return app.process_state(config, (signal.SIGUSR1,))
    return app.process_state(config, (signal.SIGUSR1,), worker)


def test_a_parent_by_default_and_a_worker_when_told(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[tuple[bool, bool, bool]]:
        seen = []
        for worker in (None, False, True):
            state = await state_of(Config(), worker)
            with caplog.at_level(logging.INFO, logger=app.log.name):
                caplog.clear()
                os.kill(os.getpid(), signal.SIGHUP)  # ignored: the process goes on
                for _ in range(50):
                    await asyncio.sleep(0)
                said = "SIGHUP ignored" in caplog.text
            cache = state.cache
            seen.append((cache.admission.log_rejected, cache.record_programming, said))
            assert not state.stop.is_set()
            os.kill(os.getpid(), signal.SIGUSR1)  # the stop signal asked
            await asyncio.wait_for(state.stop.wait(), 10)
        return seen

    assert asyncio.run(main()) == [(True, True, True), (True, True, True),
                                   (False, False, False)]


def test_the_cache_defers_the_first_list_and_knows_the_name_servers() -> None:
    config = Config(ns_addresses=(ipaddress.ip_address("10.0.0.53"),))
    cache = asyncio.run(state_of(config)).cache
    assert cache.defer is True
    assert cache._ns_addresses == [ipaddress.ip_address("10.0.0.53")]


@pytest.mark.parametrize(("count", "slots"), [(3, 5), (5, 3)])
def test_transfers_get_the_flags_this_process_s_counters_and_its_share(
        tmp_path: Path, count: int, slots: int) -> None:
    config = Config(allow_transfer=ANYONE, transfer_tsig_key=key_file(tmp_path),
                    xfr_timeout=7.5, workers=count)
    state = asyncio.run(state_of(config))
    transfers, handler = state.transfers, state.handler
    assert transfers is not None and state.journal is not None
    assert (transfers.zone, transfers.journal, transfers.allow) == (
        state.cache.zone, state.journal, ANYONE)
    assert transfers.key is not None and str(transfers.key.name) == "xfr-key."
    assert transfers.counts.by is handler.stats.transfers
    assert (transfers.max_transfers, transfers.timeout) == (slots, 7.5)
    assert (handler.stats, handler.udp_transfer, handler.signer) == (
        handler.stats, transfers.udp, transfers)
    assert handler.stats is state.handler.stats and handler.zone is state.cache.zone


def test_unsigned_transfers_get_no_signer_and_no_transfers_no_handler_of_them() -> None:
    state = asyncio.run(state_of(Config(allow_transfer=ANYONE)))
    assert state.transfers is not None and state.transfers.key is None
    assert state.handler.udp_transfer == state.transfers.udp and state.handler.signer is None
    plain = asyncio.run(state_of(Config()))
    assert (plain.handler.udp_transfer, plain.handler.signer) == (None, None)


@pytest.mark.parametrize("query_log", ["off", "all"])
def test_the_dns_server_takes_the_flags_and_this_process_s_parts(
        tmp_path: Path, query_log: str) -> None:
    config = Config(listen=((LOCAL, 5353), (LOCAL, 5354)), tcp_idle_timeout=7, udp_io="plain",
                    max_tcp_connections=9, duration_sample=3, allow_transfer=ANYONE,
                    query_log=query_log, dnstap=DnstapTarget(path=str(tmp_path / "tap.sock")),
                    dnstap_identity="me")

    async def main() -> None:
        state = await state_of(config)
        tap = state.tap
        assert tap is not None and tap.target == config.dnstap and tap.task is not None
        assert tap.stats is state.handler.stats
        for reuse in (False, True):
            dns = state.server(config, reuse)
            assert dns.handle == state.handler.handle and dns.remembering is state.handler
            assert (dns.listen, dns.tcp_idle_timeout, dns.reuse_port, dns.udp_io,
                    dns.max_tcp_connections) == ([(LOCAL, 5353), (LOCAL, 5354)], 7, reuse,
                                                 "plain", 9)
            assert dns.stats is state.handler.stats
            assert dns.udp_sampler is not None and dns.udp_sampler.every == 3
            assert state.transfers is not None and dns.transfer == state.transfers.start
            if query_log == "off":
                assert dns.observe == tap.observe
            else:  # both, in turn
                assert dns.observe is not None and dns.observe != tap.observe
        await tap.stop()

    asyncio.run(main())
    plain = asyncio.run(state_of(Config()))
    assert plain.server(Config(), False).transfer is None


def test_the_query_log_counts_in_this_process_s_stats() -> None:
    config = Config(query_log="all")
    state = asyncio.run(state_of(config))
    observe = app.answer_observer(config, state.handler.stats)
    assert observe is not None
    query_log = observe.__self__  # type: ignore[attr-defined]
    assert isinstance(query_log, QueryLog) and query_log.stats is state.handler.stats
    dns = state.server(config, False)
    assert dns.observe.__self__.stats is state.handler.stats  # type: ignore[union-attr]


# -- the parent ----------------------------------------------------------------------------------

def sample(server: app.Server, name: str, **labels: str) -> float | None:
    return server.metrics.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(("count", "reuse"), [(1, False), (2, True), (3, True)])
def test_the_parent_s_parts_get_its_flags_and_count_in_its_metrics(
        tmp_path: Path, count: int, reuse: bool) -> None:
    config = Config(manifests=tmp_path, workers=count, allow_transfer=ANYONE,
                    transfer_tsig_key=key_file(tmp_path), notify=((LOCAL, 5300),))

    async def main() -> None:
        s = app.Server(config, FakeClock())
        cache, meters = s.state.cache, s.metrics
        pool = s.pool
        assert (pool.config, len(pool.workers), pool.entry) == (config, count - 1,
                                                                app.WORKER_ENTRY)
        assert pool.snapshot == cache.snapshot
        pool.on_restart("stalled")
        assert sample(s, "clusterset_dns_worker_restarts_total", reason="stalled") == 1
        assert s.dns.reuse_port is reuse and s.dns.stats is s.state.handler.stats
        notifier = s.notifier
        assert notifier is not None and s.state.transfers is not None
        assert (str(notifier.zone), notifier.targets) == ("clusterset.local.",
                                                          ((LOCAL, 5300),))
        assert notifier.key is s.state.transfers.key
        ttl, rdata = notifier.soa()
        assert ttl == config.ttl and rdata  # the zone's SOA, read when sent
        notifier.on_result("acknowledged")
        assert sample(s, "clusterset_dns_notify_total", result="acknowledged") == 1
        sink = s.sink
        assert (sink.cache, sink.pool, sink.metrics) == (cache, pool, meters)
        assert sink.on_serial == notifier.changed
        s.http.on_evict()
        assert sample(s, "clusterset_dns_http_connections_closed_total") == 1
        explainer = s.explainer
        assert explainer.cache is cache and explainer.largest == s.largest.get
        explainer.on_refused("busy")
        assert sample(s, "clusterset_dns_explain_refused_total", reason="busy") == 1

    asyncio.run(main())


def test_the_parent_s_collector_reads_its_journal_workers_and_largest_set(
        tmp_path: Path) -> None:
    async def main() -> None:
        s = app.Server(Config(manifests=tmp_path, workers=3, allow_transfer=ANYONE),
                       FakeClock())
        found = [c for c in s.metrics.registry._collector_to_names
                 if isinstance(c, collector.ServerCollector)]
        assert len(found) == 1
        server_collector = found[0]
        assert server_collector.cache is s.state.cache
        assert server_collector.stats is s.state.handler.stats
        assert server_collector.largest is s.largest
        s.pool.serving = True  # neither worker serves yet
        assert server_collector.workers_missing() == 2
        assert s.state.journal is not None
        s.state.cache.apply([SetSynced(True)])
        s.state.cache.apply([PutImport(("prod", "web"), convert.service_import(
            service_import("web", ips=["10.1.0.1"])))])
        assert s.state.journal.records > 0  # the difference of that update
        assert server_collector.journal_records() == s.state.journal.records
        plain = app.Server(Config(manifests=tmp_path), FakeClock())
        assert [c.journal_records() for c in plain.metrics.registry._collector_to_names
                if isinstance(c, collector.ServerCollector)] == [0]

    asyncio.run(main())


@pytest.mark.parametrize("transfers", [False, True])
def test_large_rrsets_are_warned_about_after_the_sync_only_with_transfers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transfers: bool) -> None:
    warned: list[Any] = []
    monkeypatch.setattr(collector, "warn_large_rrsets", warned.append)

    async def main() -> None:
        s = app.Server(Config(manifests=tmp_path,
                              allow_transfer=ANYONE if transfers else ()), FakeClock())
        assert s.notifier is None and s.sink.on_serial() is None
        # NOTIFY without transfers (a secondary fed by another primary): unsigned.
        notifying = app.Server(Config(manifests=tmp_path, notify=((LOCAL, 5300),),
                                      allow_transfer=ANYONE if transfers else ()), FakeClock())
        assert notifying.notifier is not None and notifying.notifier.key is None
        assert s.sink.on_synced() is None
        assert warned == ([s.state.cache] if transfers else [])

    asyncio.run(main())


def test_a_start_up_failing_before_the_source_runs_still_shuts_down(tmp_path: Path) -> None:
    """The health port taken: start-up raises, and the shutdown, which has no source
    nor stop task to cancel, lets that error through."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((LOCAL, 0))
        taken.listen()
        config = Config(manifests=tmp_path, listen=((LOCAL, free_port()),),
                        health_listen=taken.getsockname(), ready_listen=None,
                        metrics_listen=None)

        async def main() -> None:
            s = app.Server(config, FakeClock())
            with pytest.raises(OSError):
                await s.serve()
            assert (s.source, s.stopper, s.stopping) == (None, None, False)

        asyncio.run(main())


def test_without_transfers_the_tap_counts_in_the_handler_s_stats(tmp_path: Path) -> None:
    async def main() -> None:
        state = await state_of(Config(dnstap=DnstapTarget(path=str(tmp_path / "tap.sock"))))
        assert state.tap is not None and state.tap.stats is state.handler.stats
        await state.tap.stop()

    asyncio.run(main())
