"""The query log (--query-log) of the real process, asked with the real dig: a JSON
line per answer of the chosen classes, with dig's own source address and port (pinned
with ``dig -b``), over UDP and TCP, from both processes of ``--workers 2``, remembered
answers included; and the rate limit: lines over it are dropped and counted."""

from __future__ import annotations

import contextlib
import json
import re
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


# Labels a query may carry to forge or split a log line: line ends (LF, CR, NEL, the
# Unicode line separator in UTF-8), quotes and backslashes that would close a JSON
# string or an escape, NUL, DEL, bytes that are not UTF-8, and the text of a whole
# forged line (text and JSON) after a newline.
FORGED_TEXT = b"\n2026-01-01 00:00:00,000 INFO clusterset_dns.query: 6.6.6.6:53 udp x. A NOERROR"
FORGED_JSON = b'"}\n{"logger": "clusterset_dns.query", "client": "6.6.6.6", "x": "'
ODD = [b"a\nb", b"c\rd", b"\xc2\x85", b"\xe2\x80\xa8", b'q"\\', b"\\010", b"\x00\x7f\xff",
       b"a b", FORGED_TEXT[:63], FORGED_JSON[:63]]
LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO clusterset_dns\.query: "
                  r"127\.0\.0\.1:\d+ udp (\S+) (A|TYPE\d+) (NOERROR|NXDOMAIN|REFUSED) "
                  r"ede=(-|\d+) size=\d+ duration=\d+\.\d{6}s")


def _wire(labels: list[bytes]) -> bytes:
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\0"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_flood_of_distinct_names_with_two_workers(fmt: str) -> None:
    """--workers 2, every class logged at 200 lines a second (100 a process): 1,200
    distinct questions (successes, NXDOMAIN, REFUSED, and names made of the bytes in
    ODD) are all answered; the lines written plus the lines counted as dropped are
    exactly the answers; and every query log line is one whole line from 127.0.0.1
    (no name splits a line or forges another), its name escaped as RFC 1035 text."""
    srv = ServerProcess("--manifests", str(OBJECTS_DIR / "core"), "--workers", "2",
                        "--log-format", fmt, "--query-log", "all",
                        "--query-log-rate", "200")
    suffix = [b"conf", b"svc", b"clusterset", b"local"]
    with srv:
        srv.wait_ready()
        socks = []
        for _ in range(8):  # eight client ports: the kernel spreads them over both workers
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("127.0.0.1", 0))
            sock.settimeout(5)
            socks.append(sock)
        sent = answered = 0
        try:
            for n in range(1200):
                kind = n % 4
                labels = ([b"hello"] if kind == 0 else [b"n%d" % n] if kind == 1 else
                          [b"r%d" % n, b"example"] if kind == 2 else [ODD[n // 4 % len(ODD)]])
                name = _wire(labels + (suffix if kind != 2 else [b"com"]))
                query = (n.to_bytes(2, "big") + b"\x01\x00\x00\x01" + bytes(6) + name
                         + b"\x00\x01\x00\x01")
                socks[n % 8].sendto(query, (srv.host, srv.port))
                sent += 1
                if n % 8 == 7:  # a window of eight: none lost to a full socket buffer
                    for sock in socks:
                        with contextlib.suppress(TimeoutError):
                            sock.recv(4096)
                            answered += 1
        finally:
            for sock in socks:
                sock.close()
        assert answered == sent == 1200

        def lines() -> list[str]:
            return [line for line in srv.log_text().splitlines()
                    if "clusterset_dns.query" in line or "6.6.6.6" in line]

        def accounted() -> float:
            return len(lines()) + srv.metric("clusterset_dns_query_log_dropped_total")

        wait_for(lambda: accounted() >= answered, 30, "every answer logged or counted")
        assert accounted() == answered, (len(lines()), answered)
        names = []
        for line in lines():
            if fmt == "json":
                entry = json.loads(line)
                assert entry["client"] == "127.0.0.1" and entry["logger"] == "clusterset_dns.query"
                match = LINE.fullmatch("2026-01-01 00:00:00,000 INFO clusterset_dns.query: "
                                       + entry["message"])
                assert match is not None and entry["name"] == match.group(1), line
            else:
                match = LINE.fullmatch(line)
                assert match is not None, line
            names.append(match.group(1))
        assert all(n.isascii() and n.isprintable() for n in names), names
        escaped = " ".join(n for n in names if "\\" in n)
        assert "a\\010b." in escaped and "c\\013d." in escaped, escaped[:2000]
