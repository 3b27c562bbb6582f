"""Signals to the real server process (and its workers): a stop signal during
start-up stops it at once; SIGHUP is ignored; SIGTERM to the whole process group
with --workers is one orderly shutdown (no worker restarted, nothing logged as an
error, answers meanwhile)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, query, wait_for
from clusterset_dns_testkit.peers import free_port

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "tests" / "conformance" / "objects" / "core"
HELLO = "hello.conf.svc.clusterset.local."

UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"""


def errors(server: ServerProcess) -> list[str]:
    return [line for line in server.log_text().splitlines() if " ERROR " in line]


def hello(server: ServerProcess) -> list[str]:
    response = query(server.host, server.port, HELLO, "A")
    return [str(r) for rrset in response.answer for r in rrset]


@pytest.mark.parametrize(("signum", "group", "workers"), [
    (signal.SIGTERM, False, "1"), (signal.SIGINT, True, "2")], ids=["sigterm", "ctrl-c-group"])
def test_stop_signal_during_start_up_stops_at_once(tmp_path: Path, signum: int, group: bool,
                                                   workers: str) -> None:
    """An API server that never answers: start-up would wait --startup-timeout (120 s);
    the signal must end it well before (and with no lame duck: nothing is served)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE.format(port=free_port()))
    server = ServerProcess("--kubeconfig", str(kubeconfig), "--startup-timeout", "120",
                           "--lameduck", "5", "--workers", workers)
    with server:
        wait_for(lambda: server.ready_status() == 503, 30, "/ready to answer 503 (starting)")
        assert server.proc is not None
        if group:
            os.killpg(server.proc.pid, signum)  # a terminal's Ctrl-C: the whole group
        else:
            server.proc.send_signal(signum)
        try:
            code = server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still starting after the signal\n{server.log_text()}")
        assert code == 0, server.log_text()
        assert "stopped during start-up" in server.log_text()
        assert errors(server) == [], server.log_text()


def test_sighup_is_ignored_by_the_parent_and_its_workers() -> None:
    server = ServerProcess("--manifests", str(CORE), "--workers", "2")
    with server:
        server.wait_ready()
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGHUP)  # a closed terminal: every process
        wait_for(lambda: "SIGHUP ignored" in server.log_text(), 10, "SIGHUP to be logged")
        for _ in range(20):  # both processes' sockets (SO_REUSEPORT spreads the sources)
            assert hello(server) == ["10.42.0.10"]
        assert server.ready_status() == 200
        assert server.metric("clusterset_dns_worker_restarts_total") == 0
        assert errors(server) == [], server.log_text()


def test_sigterm_to_the_process_group_with_workers_is_one_shutdown() -> None:
    """Before: the worker stopped at once, the parent logged ERROR and restarted it in
    the middle of its own lame duck."""
    lameduck = 3.0
    server = ServerProcess("--manifests", str(CORE), "--workers", "2",
                           "--lameduck", str(lameduck))
    with server:
        server.wait_ready()
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGTERM)
        wait_for(lambda: server.ready_status() == 503, lameduck / 2, "/ready to be 503")
        for _ in range(20):  # answered meanwhile, by either process
            assert hello(server) == ["10.42.0.10"]
        assert server.proc.wait(timeout=lameduck + 30) == 0, server.log_text()
        log = server.log_text()
        assert errors(server) == [], log
        assert "restarting" not in log and log.count("worker 1 started") == 1, log
