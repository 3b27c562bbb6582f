"""The query log (--query-log) of the real process, asked with the real dig: a JSON
line per answer of the chosen classes, with dig's own source address and port (pinned
with ``dig -b``), over UDP and TCP, from both processes of ``--workers 2``, remembered
answers included; and the rate limit: lines over it are dropped and counted."""

from __future__ import annotations

import json
import socket

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for

from .csdns_testlib import OBJECTS_DIR, run_dig

pytestmark = pytest.mark.own_server

HELLO = "hello.conf.svc.clusterset.local."
NOSUCH = "nosuch.conf.svc.clusterset.local."


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def query_lines(srv: ServerProcess) -> list[dict[str, object]]:
    out = []
    for line in srv.log_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("logger") == "clusterset_dns.query":
                out.append(entry)
    return out


def test_denial_and_error_lines_from_two_workers() -> None:
    srv = ServerProcess("--manifests", str(OBJECTS_DIR / "core"), "--workers", "2",
                        "--log-format", "json", "--query-log", "denial,error")
    with srv:
        srv.wait_ready()
        # (name, type, transport, dig's options, expected rcode, EDE, logged)
        asked = [
            (HELLO, "A", "udp", (), "NOERROR", None, False),  # a success: not in the classes
            (NOSUCH, "A", "udp", (), "NXDOMAIN", None, True),
            # The same, from the same port: the same worker, its remembered answer; logged.
            (NOSUCH, "A", "udp", (), "NXDOMAIN", None, True),
            (NOSUCH, "SRV", "tcp", ("+tcp",), "NXDOMAIN", None, True),
            ("example.com.", "A", "udp", (), "REFUSED", None, True),
        ]
        expected = []
        port = 0
        for index, (name, rdtype, transport, opts, rcode, ede, logged) in enumerate(asked):
            if index != 2:
                port = free_udp_port()
            result = run_dig(srv.host, srv.port, name, rdtype, "-b", f"127.0.0.1#{port}",
                             *opts)
            assert result.rcode == rcode, result.describe()
            assert result.msg_size is not None
            if logged:
                expected.append({"client": "127.0.0.1", "port": port, "transport": transport,
                                 "name": name, "type": rdtype, "rcode": rcode, "ede": ede,
                                 "size": result.msg_size})
        keys = ("client", "port", "transport", "name", "type", "rcode", "ede", "size")

        def seen() -> list[dict[str, object]]:
            return [{k: e[k] for k in keys} for e in query_lines(srv)]

        wait_for(lambda: len(seen()) >= len(expected), 10, "the query log lines")
        assert sorted(seen(), key=str) == sorted(expected, key=str), srv.log_text()[-4000:]
        for entry in query_lines(srv):
            assert entry["level"] == "info" and isinstance(entry["duration"], float)


def test_over_the_rate_lines_are_dropped_and_counted() -> None:
    """A rate so low that the burst is one line (the floor) and no second refills
    within the test: the first answer is logged, the next four are counted."""
    srv = ServerProcess("--manifests", str(OBJECTS_DIR / "core"), "--query-log", "all",
                        "--query-log-rate", "0.001")
    with srv:
        srv.wait_ready()
        for _ in range(5):
            assert run_dig(srv.host, srv.port, HELLO, "A").rcode == "NOERROR"
        lines = [line for line in srv.log_text().splitlines()
                 if " clusterset_dns.query: " in line]
        assert len(lines) == 1, srv.log_text()[-4000:]
        assert f" udp {HELLO} A NOERROR ede=- size=" in lines[0]
        assert srv.metric("clusterset_dns_query_log_dropped_total") == 4
