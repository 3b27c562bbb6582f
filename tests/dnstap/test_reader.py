"""--dnstap against golang-dnstap's reader (built by scripts/build-peers dnstap), over
loopback: every field of every message read back, from the frames the reader wrote
(decoded here from protobuf's wire format) and from the reader's own decoding (Go's
protobuf, ``dnstap -r -j``); and a collector absent at start, killed mid-stream, and
never reading, while the answers go on. Nothing here is timed: waits are bounded polls,
and drops are asserted by count."""

from __future__ import annotations

import datetime as dt
import socket
import time
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import pytest

from clusterset_dns_testkit.dnsserver import REPO, ServerProcess, wait_for
from clusterset_dns_testkit.dnstapreader import Reader

EXAMPLES = REPO / "examples"
AUTH_QUERY, AUTH_RESPONSE = 1, 2
NAME = "db.demo.svc.clusterset.local."


@pytest.fixture(autouse=True)
def _reader_built() -> None:
    from clusterset_dns_testkit import dnstapreader
    try:
        dnstapreader.binary()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))  # a missing peer is an error, never a skip


def serve(target: str, *extra: str) -> ServerProcess:
    server = ServerProcess("--manifests", str(EXAMPLES), "--dnstap", target, *extra).start()
    server.wait_ready()
    return server


class Exchange:
    """One query sent from a socket of our own: the bytes both ways, the client port,
    and the wall clock just before sending and just after the response came."""

    def __init__(self, server: ServerProcess, name: str, rdtype: str, tcp: bool,
                 query_id: int) -> None:
        message = dns.message.make_query(name, rdtype, use_edns=0)
        message.id = query_id
        self.query = message.to_wire()
        self.tcp = tcp
        kind = socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM
        with socket.socket(socket.AF_INET, kind) as sock:
            sock.settimeout(5)
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
            self.before = time.time_ns()
            if tcp:
                sock.connect((server.host, server.port))
                sock.sendall(len(self.query).to_bytes(2, "big") + self.query)
                size = int.from_bytes(_exactly(sock, 2), "big")
                self.response = _exactly(sock, size)
            else:
                sock.sendto(self.query, (server.host, server.port))
                self.response = sock.recv(65535)
            self.after = time.time_ns()
        self.parsed = dns.message.from_wire(self.response)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def of(messages: list[dict[int, Any]], kind: int, query: bytes) -> list[dict[int, Any]]:
    """The Dnstaps of ``kind`` about ``query`` (by its ID: unique within each test)."""
    field = 10 if kind == AUTH_QUERY else 14  # query_message, response_message
    return [m for m in messages if m[14][1] == kind and m[14][field][:2] == query[:2]]


def ns(sec: int, nsec: int) -> int:
    return sec * 1_000_000_000 + nsec


def rfc3339(value: int) -> str:
    """What the reader's JSON shows of a time in ns: Go's RFC3339Nano in UTC."""
    seconds, nanos = divmod(value, 1_000_000_000)
    text = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return text + (f".{fraction}" if fraction else "") + "Z"


@pytest.mark.parametrize("tcp_collector", [False, True], ids=["unix", "tcp"])
def test_every_field_read_back(tmp_path: Path, tcp_collector: bool) -> None:
    with Reader(tmp_path, tcp=tcp_collector) as reader:
        server = serve(reader.target, "--dnstap-identity", "tap-test",
                       "--dnstap-version", "v-test")
        try:
            exchanges = [Exchange(server, NAME, "A", False, 0x1001),
                         Exchange(server, NAME, "SRV", True, 0x1002),
                         Exchange(server, "nope.demo.svc.clusterset.local.", "A", False, 0x1003)]
            messages, files = reader.messages(lambda found: len(found) >= 6)
            collected = time.time_ns()
        finally:
            server.stop()
    assert len(messages) == 6
    assert exchanges[0].parsed.answer and exchanges[2].parsed.rcode() == dns.rcode.NXDOMAIN
    for ex in exchanges:
        (q,) = of(messages, AUTH_QUERY, ex.query)
        (r,) = of(messages, AUTH_RESPONSE, ex.query)
        for d in (q, r):
            assert (d[1], d[2], d[15]) == (b"tap-test", b"v-test", 1)  # type MESSAGE
            m = d[14]
            assert m[2] == 1  # INET
            assert m[3] == (2 if ex.tcp else 1)  # TCP, UDP
            assert m[4] == b"\x7f\x00\x00\x01" and m[6] == ex.port
            assert ex.before <= ns(m[8], m[9]) <= ex.after
        assert q[14][10] == ex.query and 14 not in q[14] and 12 not in q[14]
        assert r[14][14] == ex.response and 10 not in r[14]
        assert (r[14][8], r[14][9]) == (q[14][8], q[14][9])
        # A response is stamped when the server saw it sent, which may be after the
        # client read it (ex.after), but always before the collector had it.
        assert ns(q[14][8], q[14][9]) <= ns(r[14][12], r[14][13]) <= collected
    # The reader's own decoding (Go's protobuf) of the same frames.
    decoded = [j for path in files for j in Reader.as_json(path)]
    assert len(decoded) == 6
    for ex in exchanges:
        query_id = int.from_bytes(ex.query[:2], "big")
        mine = [j for j in decoded if f"id: {query_id}\n" in
                (j["message"].get("query_message") or j["message"].get("response_message"))]
        assert sorted(j["message"]["type"] for j in mine) == ["AUTH_QUERY", "AUTH_RESPONSE"]
        (q,) = of(messages, AUTH_QUERY, ex.query)
        for j in mine:
            assert (j["type"], j["identity"], j["version"]) == ("MESSAGE", "tap-test", "v-test")
            m = j["message"]
            assert (m["socket_family"], m["socket_protocol"]) == (
                "INET", "TCP" if ex.tcp else "UDP")
            assert (m["query_address"], m["query_port"]) == ("127.0.0.1", ex.port)
            assert m["query_time"] == rfc3339(ns(q[14][8], q[14][9]))
        response_text = next(j for j in mine if j["message"]["type"] == "AUTH_RESPONSE")[
            "message"]["response_message"]
        assert f"status: {dns.rcode.to_text(ex.parsed.rcode())}," in response_text
        for rrset in ex.parsed.answer:
            for rdata in rrset:
                assert str(rdata) in response_text


def query_ok(server: ServerProcess, name: str = NAME) -> bool:
    response = server.ask(name)
    return response.rcode() == dns.rcode.NOERROR and bool(response.answer)


def test_collector_absent_at_start_then_connected(tmp_path: Path) -> None:
    reader = Reader(tmp_path)
    server = serve(reader.target, "--dnstap-queue", "2")
    try:
        # 5 answers while nothing listens: 2 are queued, the 3 others' 6 messages dropped.
        ids = []
        for n in range(5):
            ex = Exchange(server, NAME, "A", False, 0x2000 + n)
            assert ex.parsed.answer
            ids.append(ex.query)
        assert server.metric("clusterset_dns_dnstap_dropped_total") == 6
        assert server.metric("clusterset_dns_dnstap_frames_sent_total") == 0
        with reader.start():
            wait_for(lambda: "dnstap: connected to" in server.log_text(), 30, "a connection")
            later = Exchange(server, NAME, "A", False, 0x2100)
            messages, _ = reader.messages(lambda found: bool(of(found, AUTH_QUERY, later.query)))
            # the queued (oldest) two, then what came after the connection
            assert [m[14][10] for m in messages if m[14][1] == AUTH_QUERY] == [
                ids[0], ids[1], later.query]
            assert server.metric("clusterset_dns_dnstap_dropped_total") == 6
            assert server.metric("clusterset_dns_dnstap_frames_sent_total") == 6
    finally:
        server.stop()
    assert "cannot reach the collector" in server.log_text()


def test_collector_killed_mid_stream_is_reconnected(tmp_path: Path) -> None:
    reader = Reader(tmp_path).start()
    server = serve(reader.target)
    try:
        first = Exchange(server, NAME, "A", False, 0x3001)
        reader.messages(lambda found: bool(of(found, AUTH_RESPONSE, first.query)))
        reader.kill()
        for _ in range(20):  # answers go on while the collector is gone
            assert query_ok(server)
        wait_for(lambda: "lost the collector" in server.log_text(), 20, "the loss logged")
        reader.start()
        after = Exchange(server, NAME, "A", True, 0x3002)
        messages, _ = reader.messages(lambda found: bool(of(found, AUTH_RESPONSE, after.query)),
                                      timeout=60)  # the retries may be 8 s apart
        assert of(messages, AUTH_QUERY, after.query)
        assert server.log_text().count("dnstap: connected to") == 2
    finally:
        server.stop()
        reader.kill()


def test_collector_that_never_reads_bounds_the_queue_and_answers_go_on(tmp_path: Path) -> None:
    with Reader(tmp_path) as reader:
        server = serve(reader.target, "--dnstap-queue", "100")
        try:
            first = Exchange(server, NAME, "A", False, 0x4001)
            reader.messages(lambda found: bool(of(found, AUTH_RESPONSE, first.query)))
            reader.pause()  # reads nothing from now on
            answered = 0
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(5)
                query = dns.message.make_query(NAME, "SRV", use_edns=0)
                for n in range(3000):
                    query.id = n
                    sock.sendto(query.to_wire(), (server.host, server.port))
                    response = dns.message.from_wire(sock.recv(65535))
                    assert response.id == n and len(response.answer[0]) == 4
                    answered += 1
            sent = server.metric("clusterset_dns_dnstap_frames_sent_total")
            dropped = server.metric("clusterset_dns_dnstap_dropped_total")
            total = 2 * (answered + 1)  # and the first
            assert dropped > 0
            # every answer's two messages were written, dropped, or wait in the queue
            assert total - 2 * 100 <= sent + dropped <= total
            assert query_ok(server)
        finally:
            server.stop()


def test_workers_each_connect(tmp_path: Path) -> None:
    with Reader(tmp_path) as reader:
        server = serve(reader.target, "--workers", "2")
        try:
            wait_for(lambda: server.log_text().count("dnstap: connected to") == 2, 30,
                     "both processes connected")
            exchanges = [Exchange(server, NAME, "A", n % 2 == 1, 0x5000 + n) for n in range(40)]
            messages, _ = reader.messages(lambda found: all(
                of(found, AUTH_RESPONSE, ex.query) for ex in exchanges))
            for ex in exchanges:
                assert len(of(messages, AUTH_QUERY, ex.query)) == 1
        finally:
            server.stop()

