"""Graceful shutdown (our own server): on SIGTERM /ready turns 503 at once, DNS keeps
answering for --lameduck seconds, then the listeners close and the process exits 0.
This is what lets a Kubernetes Service drop a terminating pod before it stops
answering (deploy/: terminationGracePeriodSeconds leaves room for it)."""

from __future__ import annotations

import signal
import time

import dns.exception
import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, query

from .csdns_testlib import OBJECTS_DIR

pytestmark = pytest.mark.own_server

HELLO = "hello.conf.svc.clusterset.local"


def test_sigterm_lame_duck_then_exit_0() -> None:
    lameduck = 4.0
    srv = ServerProcess("--manifests", str(OBJECTS_DIR / "core"),
                        "--lameduck", str(lameduck))
    with srv:
        srv.wait_ready()
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        # /ready fails at once (well within the lame-duck period) ...
        deadline = sent + lameduck / 2
        while srv._get(srv.ready_port, "/ready")[0] != 503:
            assert time.monotonic() < deadline, "/ready still not 503 after SIGTERM"
            time.sleep(0.02)
        # ... while DNS keeps answering, over UDP and TCP
        for tcp in (False, True):
            response = query(srv.host, srv.port, HELLO, "A", tcp=tcp)
            assert [str(r) for rrset in response.answer for r in rrset] == ["10.42.0.10"]
        assert srv.proc.poll() is None, "exited before the lame-duck period ended"
        assert srv.proc.wait(timeout=lameduck + 20) == 0, srv.log_text()
        elapsed = time.monotonic() - sent
        # it stayed for the lame-duck period, and then stopped answering
        assert elapsed >= lameduck - 0.5, f"exited {elapsed:.1f}s after SIGTERM"
        with pytest.raises((dns.exception.Timeout, OSError)):
            query(srv.host, srv.port, HELLO, "A", timeout=0.5)
        log = srv.log_text()
        assert "/ready is 503" in log and "closing the listeners" in log, log


def test_lameduck_zero_exits_at_once() -> None:
    srv = ServerProcess("--manifests", str(OBJECTS_DIR / "core"), "--lameduck", "0")
    with srv:
        srv.wait_ready()
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=20) == 0, srv.log_text()
        assert "/ready is 503" not in srv.log_text()
