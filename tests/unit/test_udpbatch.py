"""Batched UDP I/O (recvmmsg/sendmmsg) on real loopback sockets.

The reader's callback is called directly (no event loop needed); the send
seam is wrapped only where a kernel condition (partial send, EAGAIN, a failing
peer) cannot be produced on demand.
"""

from __future__ import annotations

import ctypes
import errno
import socket
from collections.abc import Callable
from typing import Any

import pytest

from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.server import make_socket, udp_reader
from clusterset_dns.serving.udpbatch import Handle, Peer
from clusterset_dns_testkit.objects import service_import

from .helpers import DEFAULT_UDP_CAP, ask, build_cache, query

pytestmark = pytest.mark.skipif(udpbatch.load() is not None,
                                reason=f"no batched UDP I/O here: {udpbatch.load()}")


def echo(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
    """Answers b"re:" + the datagram; a datagram starting with b"drop" gets no answer."""
    return None if data.startswith(b"drop") else b"re:" + data


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False



def serve(host: str, handle: Handle = echo,
          remembering: udpbatch.Remembering | None = None,
          ) -> tuple[udpbatch.BatchReader, tuple[str, int]]:
    sock = make_socket(host, 0, socket.SOCK_DGRAM, reuse_port=False)
    reader = udpbatch.BatchReader(sock, handle, remembering)
    port = sock.getsockname()[1]
    return reader, ("127.0.0.1" if host in ("0.0.0.0", "::") else host, port)


def settle(reader: udpbatch.BatchReader, expected: int) -> None:
    """Calls the reader until ``expected`` datagrams were taken (loopback delivery is
    synchronous, but be tolerant of scheduling)."""
    taken = 0
    for _ in range(50):
        reader._readable()
        taken += reader.used
        if taken >= expected:
            return
    raise AssertionError(f"only {taken} of {expected} datagrams were read")


def replies(sock: socket.socket, count: int) -> list[bytes]:
    return [sock.recvfrom(65535)[0] for _ in range(count)]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_each_address_family_length(host: str, clients: Callable[[str], socket.socket]) -> None:
    """sockaddr_in (16 bytes) on an IPv4 socket, sockaddr_in6 (28) on an IPv6 one."""
    if ":" in host and not has_ipv6_loopback():
        pytest.skip("no ::1 here")
    reader, where = serve(host)
    peer = clients(host)
    for i in range(5):
        peer.sendto(b"q%d" % i, (host, where[1]))
    settle(reader, 5)
    assert sorted(replies(peer, 5)) == [b"re:q%d" % i for i in range(5)]
    reader.sock.close()


def test_ipv4_and_ipv6_peers_in_one_batch(clients: Callable[[str], socket.socket]) -> None:
    if not has_ipv6_loopback():
        pytest.skip("no ::1 here")
    reader, (_, port) = serve("::")  # dual-stack: IPv4 peers arrive as ::ffff:127.0.0.1
    v4, v6 = clients("127.0.0.1"), clients("::1")
    for i in range(10):
        (v4 if i % 2 else v6).sendto(b"from%d" % i, ("127.0.0.1" if i % 2 else "::1", port))
    settle(reader, 10)
    assert sorted(replies(v4, 5)) == [b"re:from%d" % i for i in (1, 3, 5, 7, 9)]
    assert sorted(replies(v6, 5)) == [b"re:from%d" % i for i in (0, 2, 4, 6, 8)]
    reader.sock.close()


def test_many_peers_more_than_one_batch(clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1")
    peers = [clients("127.0.0.1") for _ in range(20)]
    total = udpbatch.BATCH * 2 + 7
    for i in range(total):
        peers[i % 20].sendto(b"n%d" % i, where)
    settle(reader, total)
    for k, peer in enumerate(peers):  # each reply went back to the peer that asked
        mine = [b"re:n%d" % i for i in range(total) if i % 20 == k]
        assert sorted(replies(peer, len(mine))) == sorted(mine)
    reader.sock.close()


def test_unanswered_and_malformed_datagrams_in_a_batch(
        clients: Callable[[str], socket.socket]) -> None:
    """The real handler: a datagram shorter than a header gets no answer, a reply
    is only sent for the others, each to its own peer with its own ID."""
    handler = Handler(build_cache([service_import("web", "prod", ips=["10.1.0.1"])]).zone,
                      DEFAULT_UDP_CAP)
    reader, where = serve("127.0.0.1", handler.handle)
    good, bad = clients("127.0.0.1"), clients("127.0.0.1")
    q1 = query("web.prod.svc.clusterset.local.", "A", qid=1)
    q2 = query("nosuch.prod.svc.clusterset.local.", "A", qid=2)
    good.sendto(q1, where)
    bad.sendto(b"\x00\x01\x02", where)
    good.sendto(q2, where)
    settle(reader, 3)
    got = replies(good, 2)
    assert got == [ask(handler, q1).wire, ask(handler, q2).wire]
    bad.settimeout(0.2)
    with pytest.raises(TimeoutError):
        bad.recvfrom(100)
    reader.sock.close()


def test_empty_datagram(clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1")
    peer = clients("127.0.0.1")
    peer.sendto(b"", where)
    settle(reader, 1)
    assert replies(peer, 1) == [b"re:"]
    reader.sock.close()


def wrap_send(reader: udpbatch.BatchReader, fake: Callable[[Any, Any, int, int], int]) -> None:
    reader.sendmmsg = fake  # type: ignore[assignment]


def fail_sends(reader: udpbatch.BatchReader, code: int, calls: list[int]) -> None:
    """The next ``calls[0]`` sendmmsg calls fail with ``code`` (a kernel condition
    that loopback cannot produce on demand); later ones go to the kernel."""
    real = reader.sendmmsg

    def send(fd: Any, vec: Any, vlen: int, flags: int) -> int:
        if calls[0]:
            calls[0] -= 1
            ctypes.set_errno(code)
            return -1
        return int(real(fd, vec, vlen, flags))

    wrap_send(reader, send)


def test_partial_sendmmsg_sends_the_rest(clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1")
    real = reader.sendmmsg
    calls: list[int] = []

    def two_at_a_time(fd: Any, vec: Any, vlen: int, flags: int) -> int:
        calls.append(vlen)
        return int(real(fd, vec, min(vlen, 2), flags))

    wrap_send(reader, two_at_a_time)
    peer = clients("127.0.0.1")
    for i in range(7):
        peer.sendto(b"p%d" % i, where)
    settle(reader, 7)
    assert sorted(replies(peer, 7)) == [b"re:p%d" % i for i in range(7)]
    assert calls[:4] == [7, 5, 3, 1]
    assert reader.dropped == 0
    reader.sock.close()


def test_eagain_on_send_drops_the_batch_and_keeps_serving(
        clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1")
    full = [1]  # one call: EAGAIN drops the rest of the batch
    fail_sends(reader, errno.EAGAIN, full)
    peer = clients("127.0.0.1")
    for i in range(3):
        peer.sendto(b"x%d" % i, where)
    settle(reader, 3)
    assert reader.dropped == 3
    assert full == [0]
    peer.sendto(b"after", where)
    settle(reader, 1)
    assert replies(peer, 1) == [b"re:after"]  # the dropped three never arrive
    reader.sock.close()


def test_one_failing_reply_is_skipped(clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1")
    fail_sends(reader, errno.EPERM, [1])  # e.g. a firewall rule for that one peer
    peer = clients("127.0.0.1")
    for i in range(4):
        peer.sendto(b"f%d" % i, where)
    settle(reader, 4)
    assert sorted(replies(peer, 3)) == [b"re:f1", b"re:f2", b"re:f3"]
    assert reader.dropped == 1
    reader.sock.close()


@pytest.mark.parametrize(("mode", "kind"), [("auto", "recvmmsg/sendmmsg"),
                                            ("batched", "recvmmsg/sendmmsg"),
                                            ("plain", "recvfrom/sendto")])
def test_mode_choice(mode: str, kind: str) -> None:
    sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
    try:
        assert udp_reader(sock, echo, mode).kind == kind
    finally:
        sock.close()


def test_layout_is_checked() -> None:
    assert udpbatch._layout() == udpbatch._EXPECTED_LAYOUT
    assert bytes.__basicsize__ - 1 == udpbatch._DATA_OFFSET


def test_the_handler_can_ask_for_the_senders_address(
        clients: Callable[[str], socket.socket]) -> None:
    """The handler is given a way to ask who sent the datagram (an IXFR needs it for
    access control): each family's sockaddr decoded, IPv4 and IPv6 in one batch, each
    datagram's own sender, and only when asked."""
    if not has_ipv6_loopback():
        pytest.skip("no ::1 here")
    seen: list[tuple[bytes, str]] = []

    def handle(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        if not data.startswith(b"ixfr"):
            return echo(data, tcp)
        assert peer is not None
        seen.append((data, peer()))
        return None if data.endswith(b"-none") else b"peer:" + peer().encode()

    sock = make_socket("::", 0, socket.SOCK_DGRAM, reuse_port=False)
    reader = udpbatch.BatchReader(sock, handle)
    port = sock.getsockname()[1]
    v4, v6 = clients("127.0.0.1"), clients("::1")
    v4.sendto(b"ixfr4", ("127.0.0.1", port))
    v6.sendto(b"ixfr6", ("::1", port))
    v6.sendto(b"ixfr6-none", ("::1", port))
    v4.sendto(b"plain", ("127.0.0.1", port))
    settle(reader, 4)
    assert sorted(replies(v4, 2)) == [b"peer:::ffff:127.0.0.1", b"re:plain"]
    assert replies(v6, 1) == [b"peer:::1"]
    assert sorted(seen) == [(b"ixfr4", "::ffff:127.0.0.1"), (b"ixfr6", "::1"),
                            (b"ixfr6-none", "::1")]
    sock.close()


NOW = 1_760_000_000.0  # unix time of the caches of web_and_nosuch


def web_and_nosuch() -> tuple[Handler, Handler]:
    """A handler, and a second one over the same objects that never answers from memory
    (its expected bytes are worked out afresh). One fixed clock for both: the serial
    steps 20 times a second, and a negative answer carries it (the SOA)."""
    objects = [service_import("web", "prod", ips=["10.1.0.1"])]
    return (Handler(build_cache(objects, clock=lambda: NOW).zone, DEFAULT_UDP_CAP),
            Handler(build_cache(objects, clock=lambda: NOW).zone, DEFAULT_UDP_CAP))


def fresh_answer(handler: Handler, data: bytes) -> bytes:
    handler.responses.clear()
    response = handler.handle(data, False)
    assert response is not None
    return response


class Seen:
    """``handler`` as the reader sees it, noting every query it is given (its bytes
    after the ID for fast(), whole for slow())."""

    def __init__(self, handler: Handler, seen: list[bytes]) -> None:
        self.handler, self.seen = handler, seen
        self.responses, self.stats = handler.responses, handler.stats

    def fast(self, rest: bytes, tcp: bool) -> bytes | None:
        self.seen.append(rest)
        return self.handler.fast(rest, tcp)

    def slow(self, data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        self.seen.append(data)
        return self.handler.slow(data, tcp, peer)


def remembering(handler: Handler, seen: list[bytes]) -> tuple[udpbatch.BatchReader,
                                                               tuple[str, int]]:
    return serve("127.0.0.1", echo, Seen(handler, seen))


def test_a_remembered_response_is_sent_without_the_handler(
        clients: Callable[[str], socket.socket]) -> None:
    """A query the handler answered before is answered from its memory: the bytes a
    fresh answer has, under the new ID, counted by rcode as the handler counts."""
    handler, fresh = web_and_nosuch()
    seen: list[bytes] = []
    reader, where = remembering(handler, seen)
    peer = clients("127.0.0.1")
    web = [query("web.prod.svc.clusterset.local.", "A", qid=i) for i in (1, 2)]
    nosuch = [query("nosuch.prod.svc.clusterset.local.", "A", edns=0, qid=i) for i in (3, 4)]
    peer.sendto(web[0], where)
    peer.sendto(nosuch[0], where)
    settle(reader, 2)
    assert replies(peer, 2) == [fresh_answer(fresh, web[0]), fresh_answer(fresh, nosuch[0])]
    before = list(handler.stats.rcodes)
    peer.sendto(web[1], where)
    peer.sendto(nosuch[1], where)
    settle(reader, 2)
    assert replies(peer, 2) == [fresh_answer(fresh, web[1]), fresh_answer(fresh, nosuch[1])]
    assert seen == [web[0][2:], nosuch[0][2:]]  # the second two never reached the handler
    counted = [after - b for after, b in zip(handler.stats.rcodes, before, strict=True)]
    assert counted[0] == 1 and counted[3] == 1 and sum(counted) == 2  # NOERROR, NXDOMAIN
    reader.sock.close()


def test_each_datagram_costs_one_look_up_of_the_memory(
        clients: Callable[[str], socket.socket]) -> None:
    """A miss goes to the handler's answer(), which does not look the query up again."""
    objects = [service_import("web", "prod", ips=["10.1.0.1"])]
    zone = build_cache(objects).zone
    looked: list[bytes] = []
    stored = zone.responses.get

    def get(key: bytes) -> tuple[bytes, int] | None:
        looked.append(key)
        return stored(key)

    zone.responses.get = get  # before the handler and the reader bind it
    handler = Handler(zone, DEFAULT_UDP_CAP)
    reader, where = serve("127.0.0.1", echo, handler)
    peer = clients("127.0.0.1")
    sent = [query(name, "A", qid=i) for i, name in enumerate(
        ["web.prod.svc.clusterset.local.", "nosuch.prod.svc.clusterset.local."] * 2)]
    for data in sent:
        peer.sendto(data, where)
        settle(reader, 1)
    assert len(replies(peer, 4)) == 4
    assert looked == [data[2:] for data in sent]  # two misses, then two hits
    assert len(zone.responses) == 2
    reader.sock.close()


def test_replies_move_down_past_datagrams_without_one(
        clients: Callable[[str], socket.socket]) -> None:
    """Remembered answers, fresh ones and datagrams that get none, in one batch: every
    reply reaches its own peer with its own ID; the next batch, with no gaps, too
    (the moved address slots were put back)."""
    handler, fresh = web_and_nosuch()
    reader, where = remembering(handler, [])
    a, b, c = clients("127.0.0.1"), clients("127.0.0.1"), clients("127.0.0.1")
    web = "web.prod.svc.clusterset.local."
    a.sendto(query(web, "A", qid=1), where)
    settle(reader, 1)
    replies(a, 1)
    batch = [(b, b"\x00\x01\x02"), (c, query(web, "A", qid=7)),
             (a, query("nosuch.prod.svc.clusterset.local.", "A", qid=8)),
             (b, b"\x00"), (a, query(web, "A", qid=9))]
    for peer, data in batch:
        peer.sendto(data, where)
    settle(reader, len(batch))
    assert replies(c, 1) == [fresh_answer(fresh, batch[1][1])]
    assert replies(a, 2) == [fresh_answer(fresh, batch[2][1]), fresh_answer(fresh, batch[4][1])]
    b.settimeout(0.2)
    with pytest.raises(TimeoutError):
        b.recvfrom(100)
    again = [(peer, query(web, "A", qid=20 + k)) for k, peer in enumerate((a, b, c))]
    for peer, data in again:
        peer.sendto(data, where)
    settle(reader, 3)
    for peer, data in again:
        assert replies(peer, 1) == [fresh_answer(fresh, data)]
    reader.sock.close()


def test_datagrams_arriving_during_a_batch_are_taken_in_the_same_wake_up(
        clients: Callable[[str], socket.socket]) -> None:
    peer = clients("127.0.0.1")

    def handle(data: bytes, tcp: bool, sender: Peer | None = None) -> bytes | None:
        if data == b"first":  # the next query arrives while this batch is answered
            peer.sendto(b"second", where)
        return echo(data, tcp)

    reader, where = serve("127.0.0.1", handle)
    peer.sendto(b"first", where)
    reader._readable()
    assert reader.used == 2
    assert replies(peer, 2) == [b"re:first", b"re:second"]
    reader.sock.close()


def test_a_wake_up_stops_after_a_full_batch(clients: Callable[[str], socket.socket]) -> None:
    """A flood cannot keep the reader from returning to the loop."""
    reader, where = serve("127.0.0.1")
    peer = clients("127.0.0.1")
    for i in range(udpbatch.BATCH + 5):
        peer.sendto(b"f%d" % i, where)
    reader._readable()
    assert reader.used == udpbatch.BATCH
    reader._readable()
    assert reader.used == 5
    assert sorted(replies(peer, udpbatch.BATCH + 5)) == sorted(
        b"re:f%d" % i for i in range(udpbatch.BATCH + 5))
    reader.sock.close()


def test_a_reply_too_short_for_an_id_is_not_sent(
        clients: Callable[[str], socket.socket]) -> None:
    reader, where = serve("127.0.0.1", lambda d, tcp, peer: b"x" if d == b"short" else echo(d, tcp))
    peer = clients("127.0.0.1")
    for data in (b"one", b"short", b"two"):
        peer.sendto(data, where)
    settle(reader, 3)
    assert replies(peer, 2) == [b"re:one", b"re:two"]
    peer.settimeout(0.2)
    with pytest.raises(TimeoutError):
        peer.recvfrom(100)
    reader.sock.close()


def test_the_array_indices_are_the_fields_of_the_layout() -> None:
    """The integer views and their indices reach the very fields ctypes lays out (the
    layout load() checks), not numbers of their own."""
    reader, _ = serve("127.0.0.1")
    try:
        for i in (0, 1, udpbatch.BATCH - 1):
            reader.rx[i].msg_len = 1000 + i
            assert reader.rx32[udpbatch._LEN + udpbatch._MMSG32 * i] == 1000 + i
            assert reader.tx64[udpbatch._NAME + udpbatch._MMSG64 * i] == \
                reader.tx[i].msg_hdr.msg_name == reader.name_at[i]
            second = reader.tx_iov[2 * i + 1]
            second.iov_base, second.iov_len = 4096 + i, 77 + i
            assert reader.txiov64[udpbatch._BASE2 + udpbatch._IOV2 * i] == 4096 + i
            assert reader.txiov64[udpbatch._LEN2 + udpbatch._IOV2 * i] == 77 + i
    finally:
        reader.sock.close()


def test_a_failure_after_a_reply_moved_down_leaves_no_address_behind(
        clients: Callable[[str], socket.socket]) -> None:
    """A reply moves down past a datagram that got none (tx slot 0 then sends to
    datagram 1's peer); the handler then fails. The next batch's replies still go to
    their own peers: the moved address is put back in any case."""
    def handle(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        if data == b"boom":
            raise RuntimeError("a bug")
        return echo(data, tcp)

    reader, where = serve("127.0.0.1", handle)
    a, b = clients("127.0.0.1"), clients("127.0.0.1")
    a.sendto(b"drop", where)
    b.sendto(b"to-b", where)  # moves down to tx slot 0
    a.sendto(b"boom", where)
    with pytest.raises(RuntimeError):
        reader._readable()
    a.sendto(b"to-a", where)  # alone in the next batch: tx slot 0
    settle(reader, 1)
    assert replies(a, 1) == [b"re:to-a"]
    b.settimeout(0.2)
    with pytest.raises(TimeoutError):
        b.recvfrom(100)  # neither its lost reply nor a's
    reader.sock.close()


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_a_response_that_is_not_bytes_is_not_sent(
        kind: Callable[[bytes], Any], clients: Callable[[str], socket.socket]) -> None:
    """Replies go out from the object's own memory, which only bytes hold in place: any
    other object (a bug) would send whatever lies there. It costs its answer only."""
    keep: list[Any] = []

    def handle(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        response = echo(data, tcp)
        if data == b"odd" and response is not None:
            keep.append(kind(response))
            return keep[-1]  # type: ignore[no-any-return]
        return response

    reader, where = serve("127.0.0.1", handle)
    peer = clients("127.0.0.1")
    for data in (b"one", b"odd", b"two"):
        peer.sendto(data, where)
    settle(reader, 3)
    assert replies(peer, 2) == [b"re:one", b"re:two"]
    peer.settimeout(0.2)
    with pytest.raises(TimeoutError):
        peer.recvfrom(100)
    reader.sock.close()
