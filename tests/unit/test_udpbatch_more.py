"""Batched UDP I/O (serving.udpbatch) beside tests/unit/test_udpbatch.py: the observed
path answering from the handler (a datagram without a reply, a reply of two bytes, one
too short, one not bytes, the sender asked for), the remembering handler's memory and
fast path under an observer, the peers' addresses as observers get them and the bounded
cache of them, the reader on the loop, and the pieces loaded once (libc's calls, where
a bytes object keeps its data). Real loopback sockets; the loop is a stand-in."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import select
import signal
import socket
from collections.abc import Callable
from typing import Any, cast

import pytest

from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.stats import Durations, Sampler
from clusterset_dns.serving.udpbatch import BatchReader, Peer

from .fakeclock import FakeClock
from .helpers import ReaderLoop

pytestmark = pytest.mark.skipif(udpbatch.load() is not None,
                                reason=f"no batched UDP I/O here: {udpbatch.load()}")

Seen = tuple[bytes, "bytes | None", bool, tuple[Any, ...], int]


def handle(data: bytes, tcp: bool, peer: Peer | None) -> bytes | None:
    """b"re:" + the datagram; none to b"drop"; b"ok" (two bytes: an ID and nothing) to
    b"two"; one byte to b"short" and a bytearray to b"odd" (bugs: not sent); the
    sender's address to b"who"."""
    assert tcp is False and peer is not None
    if data == b"drop":
        return None
    if data == b"two":
        return b"ok"
    if data == b"short":
        return b"s"
    if data == b"odd":
        return bytearray(b"re:odd")  # type: ignore[return-value]
    if data == b"who":
        return b"at:" + peer().encode()
    return b"re:" + data


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def __call__(self, query: bytes, response: bytes | None, tcp: bool,
                 peer: tuple[Any, ...], started: int) -> None:
        self.seen.append((query, response, tcp, peer, started))



def server(host: str = "127.0.0.1") -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    sock.setblocking(False)
    return sock


def take(reader: BatchReader, count: int) -> None:
    """Calls the reader until it took ``count`` datagrams in all (bounded)."""
    taken = 0
    for _ in range(50):
        reader._readable()
        taken += reader.used
        if taken >= count:
            return
    raise AssertionError(f"only {taken} of {count} datagrams were taken")


def quiet(sock: socket.socket) -> bool:
    """Nothing more waits on ``sock`` (asked without waiting)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        sock.recv(100)
    except BlockingIOError:
        return True
    finally:
        sock.settimeout(timeout)
    return False


BATCH = [b"one", b"drop", b"two", b"short", b"odd", b"who", b"end"]


@pytest.mark.parametrize("observed", [False, True])
def test_a_batch_with_every_kind_of_reply(observed: bool,
                                          clients: Callable[[str], socket.socket]) -> None:
    """Over UDP (the handler is told so), each datagram's own reply to its own peer,
    moved down past those without one; the observer is shown each query with the
    response that went out (None for none), its peer, and the batch's start on the
    clock; the next batch goes to its own peers too."""
    sock, seen = server(), Recorder()
    clock = FakeClock(tick=0.5)
    reader = BatchReader(sock, handle, None, seen if observed else None, None, clock)
    a, b = clients("127.0.0.2"), clients("127.0.0.3")
    where = sock.getsockname()
    for k, data in enumerate(BATCH):
        (a if k % 2 == 0 else b).sendto(data, where)
    take(reader, len(BATCH))
    # a sent one, two, odd, end; b sent drop, short, who
    assert [a.recvfrom(100)[0] for _ in range(3)] == [b"re:one", b"ok", b"re:end"]
    assert b.recvfrom(100)[0] == b"at:127.0.0.3"
    assert quiet(a) and quiet(b)
    if observed:
        pa, pb = a.getsockname(), b.getsockname()
        assert seen.seen == [
            (b"one", b"re:one", False, pa, 1_000_500_000_000),
            (b"drop", None, False, pb, 1_000_500_000_000),
            (b"two", b"ok", False, pa, 1_000_500_000_000),
            (b"short", None, False, pb, 1_000_500_000_000),
            (b"odd", None, False, pa, 1_000_500_000_000),
            (b"who", b"at:127.0.0.3", False, pb, 1_000_500_000_000),
            (b"end", b"re:end", False, pa, 1_000_500_000_000)]
    if observed:  # one entry a peer
        assert sorted(reader.addresses.values()) == sorted([a.getsockname(), b.getsockname()])
    # tx slot 1 sent to a's address above (datagram 2's): now it is b's turn there
    a.sendto(b"first", where)
    b.sendto(b"second", where)
    take(reader, 2)
    assert (a.recvfrom(100)[0], b.recvfrom(100)[0]) == (b"re:first", b"re:second")
    assert quiet(a) and quiet(b)
    sock.close()


class Remembering:
    """A handler's memory (the bytes after the ID -> the response after its ID, the
    counter's index), its fast path (b"fast" only) and its slow one."""

    def __init__(self) -> None:
        self.responses: dict[bytes, tuple[bytes, int]] = {b"mem": (b"+mem", 1)}
        self.stats = type("Counters", (), {"requests": [0, 0, 0]})()

    def fast(self, rest: bytes, tcp: bool, /) -> bytes | None:
        return b"+fast" if rest == b"fast" else None

    def slow(self, data: bytes, tcp: bool, peer: Peer | None = None, /) -> bytes | None:
        return handle(data, tcp, peer)


def test_an_observed_batch_answers_from_memory_and_the_fast_path_and_counts(
        clients: Callable[[str], socket.socket]) -> None:
    sock, seen, memory = server(), Recorder(), Remembering()
    reader = BatchReader(sock, handle, cast(udpbatch.Remembering, memory), seen, None,
                         FakeClock())
    a = clients("127.0.0.1")
    for data in (b"ABmem", b"CDfast", b"EFmem", b"GH"):
        a.sendto(data, sock.getsockname())
    take(reader, 4)
    assert [a.recvfrom(100)[0] for _ in range(4)] == [b"AB+mem", b"CD+fast", b"EF+mem",
                                                      b"re:GH"]
    assert memory.stats.requests == [0, 2, 0]  # one count per remembered answer
    assert [(q, r) for q, r, _, _, _ in seen.seen] == [
        (b"ABmem", b"AB+mem"), (b"CDfast", b"CD+fast"), (b"EFmem", b"EF+mem"),
        (b"GH", b"re:GH")]
    sock.close()


def test_an_ipv6_peer_is_shown_as_the_socket_module_gives_it(
        clients: Callable[[str], socket.socket]) -> None:
    sock, seen = server("::1"), Recorder()
    reader = BatchReader(sock, handle, None, seen)
    c = clients("::1")
    c.sendto(b"six", sock.getsockname()[:2])
    take(reader, 1)
    assert c.recvfrom(100)[0] == b"re:six"
    host, port = c.getsockname()[:2]
    assert [peer for _, _, _, peer, _ in seen.seen] == [(host, port, 0, 0)]
    assert reader._address(0) == (host, port, 0, 0)
    sock.close()


def test_the_cache_of_peer_addresses_is_bounded(clients: Callable[[str], socket.socket]) -> None:
    """Emptied when a new peer would take it past MAX_ADDRESSES; a known peer is found
    in it without adding anything."""
    sock, seen = server(), Recorder()
    reader = BatchReader(sock, handle, None, seen)
    for n in range(udpbatch.MAX_ADDRESSES - 1):
        reader.addresses[b"fake%d" % n] = ("192.0.2.1", n)
    a, b = clients("127.0.0.2"), clients("127.0.0.3")
    where = sock.getsockname()
    a.sendto(b"1", where)
    take(reader, 1)
    assert len(reader.addresses) == udpbatch.MAX_ADDRESSES  # a: the last place
    a.sendto(b"2", where)
    take(reader, 1)
    assert len(reader.addresses) == udpbatch.MAX_ADDRESSES  # found: nothing added
    b.sendto(b"3", where)
    take(reader, 1)
    assert list(reader.addresses.values()) == [b.getsockname()]  # full: emptied first
    assert [peer for _, _, _, peer, _ in seen.seen] == [a.getsockname()] * 2 + [b.getsockname()]
    sock.close()


def test_a_sender_of_no_known_family_is_empty() -> None:
    sock = server()
    reader = BatchReader(sock, handle)
    ctypes.memset(reader.name_at[0], 0, udpbatch.ADDR_SIZE)  # family 0 (AF_UNSPEC)
    assert reader._peer(0) == ""
    sock.close()



def test_the_reader_is_registered_with_the_loop_and_taken_off(
        clients: Callable[[str], socket.socket]) -> None:
    sock, loop = server(), ReaderLoop()
    reader = BatchReader(sock, handle)
    fd = sock.fileno()
    reader.start(cast(asyncio.AbstractEventLoop, loop))
    assert loop.readers == {fd: reader._readable}
    a = clients("127.0.0.1")
    a.sendto(b"one", sock.getsockname())
    for _ in range(50):
        loop.readers[fd]()
        if reader.used:
            break
    assert a.recvfrom(100)[0] == b"re:one"
    reader.stop(cast(asyncio.AbstractEventLoop, loop))
    assert loop.readers == {} and sock.fileno() == -1


def test_libcs_calls_are_loaded_with_their_errno() -> None:
    """recvmmsg and sendmmsg return an int, and the errno of a failed call is kept for
    ctypes.get_errno (which the reader reads to tell EAGAIN from a real error)."""
    calls = udpbatch._Calls()
    assert calls.recvmmsg.restype is ctypes.c_int and calls.sendmmsg.restype is ctypes.c_int
    ctypes.set_errno(0)
    assert calls.recvmmsg(-1, None, 1, udpbatch.MSG_DONTWAIT, None) == -1
    assert ctypes.get_errno() == errno.EBADF
    ctypes.set_errno(0)
    assert calls.sendmmsg(-1, None, 1, udpbatch.MSG_DONTWAIT) == -1
    assert ctypes.get_errno() == errno.EBADF


def test_where_a_bytes_object_keeps_its_data() -> None:
    offset = udpbatch._bytes_data_offset()
    assert offset == bytes.__basicsize__ - 1
    data = b"the reply"
    assert ctypes.string_at(id(data) + offset, len(data)) == data


# -- what a wake-up takes, and what the kernel refuses --------------------------------------


def test_a_sampled_batch_does_not_end_the_wake_up(clients: Callable[[str], socket.socket]) -> None:
    """Every batch timed (1 in 1): datagrams arriving while one is answered are still
    taken in the same wake-up, counted with it."""
    a = clients("127.0.0.1")
    durations = Durations()
    sock = server()
    where = sock.getsockname()

    def more(data: bytes, tcp: bool, peer: Peer | None) -> bytes | None:
        if data == b"first":
            for n in range(3):
                a.sendto(b"then%d" % n, where)
        return b"re:" + data

    reader = BatchReader(sock, more, None, None, Sampler(1, durations, False), FakeClock())
    a.sendto(b"first", where)
    reader._readable()
    assert reader.used == 4
    assert [a.recvfrom(100)[0] for _ in range(4)] == [b"re:first", b"re:then0", b"re:then1",
                                                      b"re:then2"]
    assert sum(durations.counts[False]) == 4  # two timed batches, each of its answers
    sock.close()


def failing(reader: BatchReader, errors: list[int]) -> list[int]:
    """sendmmsg fails with the next of ``errors`` (0: the kernel's own call) per call,
    as the kernel cannot be made to on loopback; the lengths asked for, returned."""
    real, asked = reader.sendmmsg, []

    def send(fd: Any, vec: Any, vlen: int, flags: int) -> int:
        asked.append(vlen)
        code = errors.pop(0) if errors else 0
        if code:
            ctypes.set_errno(code)
            return -1
        return int(real(fd, vec, vlen, flags))

    reader.sendmmsg = send  # type: ignore[assignment]
    return asked


def test_an_interrupted_send_is_made_again(clients: Callable[[str], socket.socket]) -> None:
    sock = server()
    reader = BatchReader(sock, handle)
    asked = failing(reader, [errno.EINTR])
    a = clients("127.0.0.1")
    for data in (b"1", b"2"):
        a.sendto(data, sock.getsockname())
    take(reader, 2)
    assert asked == [2, 2] and reader.dropped == 0
    assert [a.recvfrom(100)[0] for _ in range(2)] == [b"re:1", b"re:2"]
    sock.close()


def test_drops_are_added_up(clients: Callable[[str], socket.socket]) -> None:
    """A full buffer drops the rest of its batch, twice; a reply refused is skipped
    (the third of a batch: those after it still go, once each)."""
    sock = server()
    reader = BatchReader(sock, handle)
    a = clients("127.0.0.1")
    where = sock.getsockname()
    failing(reader, [errno.EAGAIN, errno.ENOBUFS])
    for batch in ([b"1", b"2"], [b"3", b"4", b"5"]):
        for data in batch:
            a.sendto(data, where)
        take(reader, len(batch))
    assert reader.dropped == 5
    real, asked = reader.sendmmsg, []
    steps: list[tuple[str, int]] = [("send", 2), ("fail", errno.EPERM),
                                    ("send", 1), ("send", 1), ("fail", errno.EAGAIN)]

    def scripted(fd: Any, vec: Any, vlen: int, flags: int) -> int:
        asked.append(vlen)
        what, n = steps.pop(0) if steps else ("send", vlen)
        if what == "fail":
            ctypes.set_errno(n)
            return -1
        return int(real(fd, vec, min(vlen, n), flags))

    reader.sendmmsg = scripted  # type: ignore[assignment]
    for data in (b"6", b"7", b"8", b"9"):
        a.sendto(data, where)
    take(reader, 4)
    # 6 and 7 went, 8 was refused (skipped), 9 went
    assert asked == [4, 2, 1]
    assert [a.recvfrom(100)[0] for _ in range(3)] == [b"re:6", b"re:7", b"re:9"]
    assert quiet(a)
    assert reader.dropped == 6
    for data in (b"10", b"11", b"12"):  # one sent, then a full buffer: the other two dropped
        a.sendto(data, where)
    take(reader, 3)
    assert asked[3:] == [3, 2] and reader.dropped == 8
    assert a.recvfrom(100)[0] == b"re:10" and quiet(a)
    sock.close()


def test_a_wake_up_never_waits_even_on_a_blocking_socket(
        clients: Callable[[str], socket.socket]) -> None:
    """recvmmsg is asked not to wait (MSG_DONTWAIT): a blocking socket would otherwise
    hold the loop until a whole batch arrived. An alarm bounds the test if it did."""
    sock = server()
    sock.setblocking(True)
    reader = BatchReader(sock, handle)
    a = clients("127.0.0.1")
    a.sendto(b"one", sock.getsockname())
    select.select([sock], [], [], 2)

    def late(signum: int, frame: Any) -> None:
        raise TimeoutError("the reader waited")

    before = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        reader._readable()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert reader.used == 1 and a.recvfrom(100)[0] == b"re:one"
    sock.close()


@pytest.mark.parametrize(("patch", "reason"), [
    ({"sys.platform": "darwin"}, "not Linux (darwin)"),
    ({"_layout": lambda: {"sizeof(msghdr)": 48}},
     "unexpected struct layout {'sizeof(msghdr)': 48}"),
    ({"_DATA_OFFSET": None}, "cannot address the data of bytes objects"),
])
def test_why_batched_io_cannot_be_used(monkeypatch: pytest.MonkeyPatch, patch: dict[str, Any],
                                       reason: str) -> None:
    for name, value in patch.items():
        if name == "sys.platform":
            monkeypatch.setattr(udpbatch.sys, "platform", value)
        else:
            monkeypatch.setattr(udpbatch, name, value)
    assert udpbatch.load() == reason
    sock = server()
    with pytest.raises(OSError) as raised:
        BatchReader(sock, handle)
    assert (raised.value.errno, raised.value.strerror) == (
        errno.ENOSYS, f"batched UDP I/O unavailable: {reason}")
    sock.close()


def test_libcs_calls_are_loaded_once_and_their_absence_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(udpbatch, "_calls", None)
    assert udpbatch.load() is None
    loaded = udpbatch._calls
    assert isinstance(loaded, udpbatch._Calls)
    assert udpbatch.load() is None and udpbatch._calls is loaded  # once

    def lacking() -> udpbatch._Calls:
        raise AttributeError("undefined symbol: recvmmsg")

    monkeypatch.setattr(udpbatch, "_calls", None)
    monkeypatch.setattr(udpbatch, "_Calls", lacking)
    assert udpbatch.load() == "libc lacks recvmmsg/sendmmsg (undefined symbol: recvmmsg)"


def test_a_receive_error_is_logged_an_empty_socket_is_not(
        caplog: pytest.LogCaptureFixture) -> None:
    sock = server()
    reader = BatchReader(sock, handle)
    with caplog.at_level(logging.DEBUG, "clusterset_dns.serving.udpbatch"):
        reader._readable()  # EAGAIN: nothing to read is no error
        assert caplog.records == [] and reader.used == 0
        sock.close()  # the reader's descriptor is now a bad one: EBADF
        reader._readable()
    assert [r.getMessage() for r in caplog.records] == ["UDP receive: EBADF"]


def test_a_sampled_batch_is_shown_to_the_observer(
        clients: Callable[[str], socket.socket]) -> None:
    sock, seen, durations = server(), Recorder(), Durations()
    reader = BatchReader(sock, handle, None, seen, Sampler(1, durations, False), FakeClock())
    a = clients("127.0.0.1")
    for data in (b"one", b"drop"):
        a.sendto(data, sock.getsockname())
    take(reader, 2)
    assert a.recvfrom(100)[0] == b"re:one"
    assert [(q, r) for q, r, _, _, _ in seen.seen] == [(b"one", b"re:one"), (b"drop", None)]
    assert sum(durations.counts[False]) == 2
    sock.close()
