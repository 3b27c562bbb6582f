"""The answer observer (serving.observe) at each transport, over real loopback sockets:
every answer is shown once, with the query and the response as they travelled, the
client's address and port and the transport; remembered responses too; a failing
observer never costs an answer."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest

from clusterset_dns.serving import observe, udpbatch
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.observe import Address, fan_out
from clusterset_dns.serving.server import DNSServer, UDPReader, make_socket
from clusterset_dns_testkit.objects import service_import

from .helpers import DEFAULT_UDP_CAP, build_cache, query, udp_client

WEB = "web.prod.svc.clusterset.local."
Seen = tuple[bytes, "bytes | None", bool, Address, int]


def handler() -> Handler:
    return Handler(build_cache([service_import("web", "prod", ips=["10.1.0.1"])]).zone,
                   DEFAULT_UDP_CAP)


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def __call__(self, query: bytes, response: bytes | None, tcp: bool, peer: Address,
                 started: int) -> None:
        self.seen.append((query, response, tcp, peer, started))


client = pytest.fixture(udp_client, name="client")


def drain(reader: UDPReader | udpbatch.BatchReader, count: int,
          clients: list[socket.socket]) -> list[bytes]:
    """Calls the reader until ``count`` replies reached ``clients`` (each asked once)."""
    got: list[bytes] = []
    for sock in clients:
        for _ in range(50):
            reader._readable()
            try:
                sock.settimeout(0.05)
                got.append(sock.recvfrom(65535)[0])
                break
            except TimeoutError:
                continue
    assert len(got) == count
    return got


@pytest.mark.skipif(udpbatch.load() is not None, reason="no batched UDP I/O here")
def test_batched_udp_shows_every_answer_remembered_ones_too(client: socket.socket) -> None:
    answers = handler()
    seen = Recorder()
    sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
    reader = udpbatch.BatchReader(sock, answers.handle, answers, seen)
    where = sock.getsockname()
    first, second = query(WEB, qid=1), query(WEB, qid=2)
    client.sendto(first, where)
    drain(reader, 1, [client])
    # In one batch: a datagram that gets no answer, then a remembered response.
    client.sendto(b"\x00\x01", where)
    client.sendto(second, where)
    for _ in range(50):
        reader._readable()
        if len(seen.seen) == 3:
            break
    reply = client.recvfrom(65535)[0]
    assert reply[:2] == second[:2] and reply[2:] == seen.seen[0][1][2:]  # type: ignore[index]
    assert answers.responses.get(second[2:]) is not None  # it was the remembered one
    me = client.getsockname()
    assert [(q, tcp, peer[:2]) for q, _, tcp, peer, _ in seen.seen] == [
        (first, False, me), (b"\x00\x01", False, me), (second, False, me)]
    assert seen.seen[1][1] is None and seen.seen[2][1] == reply
    sock.close()


def test_plain_udp_shows_every_answer(client: socket.socket) -> None:
    answers = handler()
    seen = Recorder()
    sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
    reader = UDPReader(sock, answers.handle, seen)
    asked = query(WEB, qid=5)
    client.sendto(asked, sock.getsockname())
    [reply] = drain(reader, 1, [client])
    assert [(q, r, tcp, peer) for q, r, tcp, peer, _ in seen.seen] == [
        (asked, reply, False, client.getsockname())]
    sock.close()


def test_tcp_shows_every_answer_and_a_failing_observer_costs_none(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # logged once a process: this test's failure is the first, whatever ran before it
    monkeypatch.setattr(observe, "_failed", False)
    seen = Recorder()

    def failing(*args: object) -> None:
        raise RuntimeError("observer bug")

    async def main() -> None:
        dns = DNSServer(handler().handle, [("127.0.0.1", 0)], 5.0,
                        observe=fan_out([seen, failing]))
        await dns.start()
        try:
            reader, writer = await asyncio.open_connection(*dns.bound[0])
            asked = [query(WEB, qid=7), query(WEB, qid=8)]
            writer.write(b"".join(struct.pack("!H", len(q)) + q for q in asked))
            got = []
            for _ in asked:
                size = struct.unpack("!H", await reader.readexactly(2))[0]
                got.append(await reader.readexactly(size))
            me = writer.get_extra_info("sockname")
            assert [(q, r, tcp, peer) for q, r, tcp, peer, _ in seen.seen] == [
                (asked[0], got[0], True, me), (asked[1], got[1], True, me)]
            writer.close()
        finally:
            await dns.stop()

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records].count(
        "answer observer failed (logged once; answers go on)") == 1


def test_fan_out() -> None:
    assert fan_out([]) is None and fan_out([None]) is None
    one = Recorder()
    assert fan_out([None, one]) is one
    calls: list[str] = []
    both = fan_out([lambda *a: calls.append("a"), lambda *a: calls.append("b")])
    assert both is not None
    both(b"q", None, False, ("127.0.0.1", 1), 0)
    assert calls == ["a", "b"]


def test_a_failing_observer_is_logged_once_with_its_traceback(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observe, "_failed", False)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            try:
                raise RuntimeError("observer bug")
            except RuntimeError:
                observe.failed()
    [record] = [r for r in caplog.records if r.name == "clusterset_dns.serving.observe"]
    assert record.getMessage() == "answer observer failed (logged once; answers go on)"
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert str(record.exc_info[1]) == "observer bug"


def test_fan_out_hands_every_argument_on() -> None:
    first, second = Recorder(), Recorder()
    both = fan_out([first, second])
    assert both is not None
    both(b"q", b"r", True, ("::1", 53, 0, 0), 12345)
    assert first.seen == second.seen == [(b"q", b"r", True, ("::1", 53, 0, 0), 12345)]


def test_fan_out_goes_on_past_an_observer_that_raises(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # the query log failing must not cost dnstap its message (nor the other way round)
    monkeypatch.setattr(observe, "_failed", False)
    after = Recorder()

    def failing(*args: object) -> None:
        raise RuntimeError("observer bug")

    both = fan_out([failing, after])
    assert both is not None
    with caplog.at_level(logging.ERROR):
        both(b"q1", b"r1", False, ("127.0.0.1", 1), 1)
        both(b"q2", None, True, ("127.0.0.1", 2), 2)
    assert after.seen == [(b"q1", b"r1", False, ("127.0.0.1", 1), 1),
                          (b"q2", None, True, ("127.0.0.1", 2), 2)]
    assert [r.getMessage() for r in caplog.records].count(
        "answer observer failed (logged once; answers go on)") == 1
