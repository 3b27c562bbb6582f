"""Batched UDP I/O on Linux: one ``recvmmsg`` and one ``sendmmsg`` per batch.

With one ``recvfrom`` and one ``sendto`` per datagram, the two system calls
cost more than answering from the ready-made cache. This reader owns every
buffer of the batch: the receive buffers and peer-address slots, the
``mmsghdr``/``iovec`` arrays for both directions, all built once; the handler
stays bytes -> bytes (given a way to ask for the sender). A query the handler
answered before (:class:`Remembering`) is answered here from its memory, and the
stored response is sent in place, behind the new query's ID. ctypes calls libc
directly (the standard library has no ``recvmmsg``); the structure layout is
checked (:func:`load`) before anything relies on it, and the server falls back to
the plain reader when it is not what this module expects.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import socket
import sys
from collections.abc import Callable
from typing import Protocol

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.serving.observe import Address, Observer, failed
from clusterset_dns.serving.stats import Sampler

log = logging.getLogger(__name__)

# (query, over TCP, the sender's address when the handler needs it) -> the response
Peer = Callable[[], str]
Handle = Callable[[bytes, bool, "Peer | None"], "bytes | None"]


class Memory(Protocol):
    """responses.ResponseMemory: the bytes of a UDP query after its ID -> (the
    response's bytes after its ID, the index of its counter), or None."""

    def get(self, query: bytes, /) -> tuple[bytes, int] | None: ...


class Counters(Protocol):
    requests: list[int]  # stats.Stats.requests, indexed as the memory's entries say


class Remembering(Protocol):
    """A handler that remembers its UDP responses (handler.Handler). A query found in
    ``responses`` is answered here without a call into the handler, and counted as
    the handler counts it; any other goes to ``fast`` (which does not look again),
    and what that leaves to ``slow``."""

    @property
    def responses(self) -> Memory: ...

    @property
    def stats(self) -> Counters: ...

    def fast(self, rest: bytes, tcp: bool, /) -> bytes | None:
        """The response after its ID to the query whose bytes after the ID are
        ``rest`` (the ID is the query's), or None: ask ``slow``."""

    def slow(self, data: bytes, tcp: bool, peer: Peer | None = None, /) -> bytes | None:
        """The whole response to the whole query ``data``, or None: no answer."""

# Datagrams per recvmmsg. A wake-up stops reading once it took this many, so that a
# flood cannot starve the loop's other work (the watch).
BATCH = 64
MAX_QUERY = 4096  # a DNS query over UDP is a few hundred bytes at most
ADDR_SIZE = 28  # sizeof(struct sockaddr_in6), the largest peer address of AF_INET/AF_INET6
MSG_DONTWAIT = 0x40
MAX_ADDRESSES = 4096  # decoded peer addresses kept for observers


class IOVec(ctypes.Structure):
    _fields_ = (("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t))


class MsgHdr(ctypes.Structure):
    _fields_ = (("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(IOVec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int))


class MMsgHdr(ctypes.Structure):
    _fields_ = (("msg_hdr", MsgHdr), ("msg_len", ctypes.c_uint))


# What the kernel's x86-64 and arm64 ABIs lay out; anything else uses the plain path.
_EXPECTED_LAYOUT = {"sizeof(msghdr)": 56, "sizeof(mmsghdr)": 64, "offsetof(msg_name)": 0,
                    "offsetof(msg_iov)": 16, "offsetof(msg_flags)": 48, "offsetof(msg_len)": 56,
                    "sizeof(iovec)": 16, "offsetof(iov_len)": 8}


MMSG = ctypes.sizeof(MMsgHdr)
# Indices into the integer views of the arrays (see BatchReader), from the layout that
# load() checks: msg_len of rx entry i is rx32[_LEN + i * _MMSG32], msg_name of tx
# entry j is tx64[_NAME + j * _MMSG64], iov_base / iov_len of the second iovec of
# reply j are txiov64[_BASE2 + j * _IOV2], txiov64[_LEN2 + j * _IOV2].
_MMSG32, _MMSG64 = MMSG // 4, MMSG // 8
_LEN = MMsgHdr.msg_len.offset // 4
_NAME = (MMsgHdr.msg_hdr.offset + MsgHdr.msg_name.offset) // 8
_IOV2 = 2 * ctypes.sizeof(IOVec) // 8
_BASE2 = (ctypes.sizeof(IOVec) + IOVec.iov_base.offset) // 8
_LEN2 = (ctypes.sizeof(IOVec) + IOVec.iov_len.offset) // 8


def _layout() -> dict[str, int]:
    return {"sizeof(msghdr)": ctypes.sizeof(MsgHdr), "sizeof(mmsghdr)": ctypes.sizeof(MMsgHdr),
            "offsetof(msg_name)": MMsgHdr.msg_hdr.offset + MsgHdr.msg_name.offset,
            "offsetof(msg_iov)": MsgHdr.msg_iov.offset,
            "offsetof(msg_flags)": MsgHdr.msg_flags.offset,
            "offsetof(msg_len)": MMsgHdr.msg_len.offset, "sizeof(iovec)": ctypes.sizeof(IOVec),
            "offsetof(iov_len)": IOVec.iov_len.offset}


class _Calls:
    """The two libc functions, typed; None when this system lacks them."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        # No argtypes: converting arguments through them costs ~0.3 us a call, as much
        # as a recvmmsg that finds nothing. Every integer argument fits a C int, and the
        # arrays are passed as c_void_p objects built once (see BatchReader).
        self.recvmmsg = libc.recvmmsg
        self.recvmmsg.restype = ctypes.c_int
        self.sendmmsg = libc.sendmmsg
        self.sendmmsg.restype = ctypes.c_int


_calls: _Calls | None = None


def _bytes_data_offset() -> int | None:
    """Where a bytes object's data starts, relative to id() (CPython's layout: the
    header, then the characters). The replies are handed to the kernel in place,
    without a copy or a ctypes object per reply; the offset is checked against
    what ctypes itself passes for a bytes argument before it is trusted."""
    offset = bytes.__basicsize__ - 1
    probe = b"clusterset-dns"
    if ctypes.cast(ctypes.c_char_p(probe), ctypes.c_void_p).value != id(probe) + offset:
        return None
    return offset


_DATA_OFFSET = _bytes_data_offset()


def load() -> str | None:
    """Checks that batched I/O can be used here and loads the libc functions (once,
    into ``_calls``): None when it can, else why not (for the log)."""
    global _calls
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    if _layout() != _EXPECTED_LAYOUT:
        return f"unexpected struct layout {_layout()}"
    if _DATA_OFFSET is None:
        return "cannot address the data of bytes objects"
    if _calls is None:
        try:
            _calls = _Calls()
        except (OSError, AttributeError) as exc:
            return f"libc lacks recvmmsg/sendmmsg ({exc})"
    return None


def _nothing_fast(rest: bytes, tcp: bool) -> None:
    """No fast path (a reader given only ``handle``): every datagram goes there."""
    return None


class BatchReader:
    """Answers a UDP socket from the loop's reader callback, a batch per system call.

    Same contract as :class:`clusterset_dns.serving.udpplain.UDPReader` (start/stop, answers in
    the loop thread); the replies of one batch leave in one ``sendmmsg``."""

    kind = "recvmmsg/sendmmsg"

    def __init__(self, sock: socket.socket, handle: Handle,
                 remembering: Remembering | None = None, observe: Observer | None = None,
                 sampler: Sampler | None = None, clock: Clock = SYSTEM) -> None:
        """``handle`` answers every datagram, or, with ``remembering``, none: that
        handler's memory, fast() and slow() do. ``observe``: shown every answer
        (observe.Observer). ``sampler``: times the batch holding each sampled answer
        (its answers' duration: from the batch's read to its send)."""
        reason = load()
        if reason is not None:
            raise OSError(errno.ENOSYS, f"batched UDP I/O unavailable: {reason}")
        assert _calls is not None
        self.sock = sock
        self.clock = clock  # the stopwatch of sampled batches and observed answers
        self.fd = sock.fileno()
        self.handle: Handle = remembering.slow if remembering else handle
        self.fast: Callable[[bytes, bool], bytes | None] = (
            remembering.fast if remembering else _nothing_fast)
        # What the handler is given to ask for the sender (an IXFR): the datagram being
        # answered is self.current, so that the address is decoded only when asked for.
        self.current = 0
        self.sender: Peer = lambda: self._peer(self.current)
        self.recvmmsg = _calls.recvmmsg
        self.sendmmsg = _calls.sendmmsg
        # One contiguous block per kind of buffer; slot i of each belongs to datagram i.
        self.data = ctypes.create_string_buffer(MAX_QUERY * BATCH)
        view = memoryview(self.data).cast("B")
        self.slots = [view[i * MAX_QUERY:(i + 1) * MAX_QUERY] for i in range(BATCH)]
        self.names = ctypes.create_string_buffer(ADDR_SIZE * BATCH)
        self.rx_iov = (IOVec * BATCH)()
        self.rx = (MMsgHdr * BATCH)()
        self.tx_iov = (IOVec * (2 * BATCH))()  # two per reply: its ID, then the rest
        self.tx = (MMsgHdr * BATCH)()
        data_at, names_at = ctypes.addressof(self.data), ctypes.addressof(self.names)
        self.name_at = [names_at + i * ADDR_SIZE for i in range(BATCH)]
        # All peers of one socket have addresses of one length (sockaddr_in, or
        # sockaddr_in6 on an AF_INET6 socket, v4-mapped peers included), so the length
        # the kernel writes back is the one it is given: no reset between batches.
        namelen = 16 if sock.family == socket.AF_INET else ADDR_SIZE
        for i in range(BATCH):
            self.rx_iov[i].iov_base = data_at + i * MAX_QUERY
            self.rx_iov[i].iov_len = MAX_QUERY
            hdr = self.rx[i].msg_hdr
            hdr.msg_name = self.name_at[i]
            hdr.msg_namelen = namelen
            hdr.msg_iov = ctypes.pointer(self.rx_iov[i])
            hdr.msg_iovlen = 1
            out = self.tx[i].msg_hdr
            out.msg_name = self.name_at[i]  # reply i goes back to datagram i's peer
            out.msg_namelen = namelen
            out.msg_iov = ctypes.pointer(self.tx_iov[2 * i])
            out.msg_iovlen = 2
            self.tx_iov[2 * i].iov_base = data_at + i * MAX_QUERY  # the ID, as received
            self.tx_iov[2 * i].iov_len = 2
        self.tx_base = ctypes.addressof(self.tx)
        self.rx_ptr = ctypes.c_void_p(ctypes.addressof(self.rx))
        self.tx_ptr = ctypes.c_void_p(self.tx_base)
        # The per-datagram work reads and writes the arrays through integer views
        # (indices: _LEN, _NAME, ... above): a ctypes attribute chain costs several
        # times more than a memoryview item.
        self.rx32 = memoryview(self.rx).cast("B").cast("I")
        self.tx64 = memoryview(self.tx).cast("B").cast("Q")
        self.txiov64 = memoryview(self.tx_iov).cast("B").cast("Q")
        # Nothing remembered: every look-up misses, so the counters are never touched.
        nothing: dict[bytes, tuple[bytes, int]] = {}
        self.recall: Callable[[bytes], tuple[bytes, int] | None] = (
            remembering.responses.get if remembering else nothing.get)
        self.counts = remembering.stats.requests if remembering else []
        # Tested once per batch: without an observer a batch takes _answer, untouched.
        self.observe = observe
        # Peer addresses as observers get them, by the raw sockaddr bytes: decoded once per
        # client (bounded: they come from the network).
        self.addresses: dict[bytes, Address] = {}
        self.names_view = memoryview(self.names).cast("B")
        self.sampler = sampler
        self.used = 0  # datagrams the last callback took
        self.dropped = 0  # replies the kernel would not take (send buffer full, ...)

    def start(self, loop: object) -> None:
        loop.add_reader(self.fd, self._readable)  # type: ignore[attr-defined]

    def stop(self, loop: object) -> None:
        loop.remove_reader(self.fd)  # type: ignore[attr-defined]
        self.sock.close()

    def _readable(self) -> None:
        # Batches until the socket is empty: at half load the next datagrams arrive while
        # a batch is answered, and one more recvmmsg costs less than a turn of the loop.
        # At most two batches' worth, then the loop's other work gets its turn.
        taken = 0
        while taken < BATCH:
            count = self.recvmmsg(self.fd, self.rx_ptr, BATCH, MSG_DONTWAIT, None)
            if count <= 0:
                if count < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                    log.debug("UDP receive: %s", errno.errorcode.get(ctypes.get_errno()))
                break
            sampler = self.sampler
            if sampler is not None:
                sampler.left -= count
                if sampler.left <= 0:  # this batch holds a sampled answer: timed whole
                    started = self.clock.perf_counter()
                    self._answer_any(count)
                    sampler.timed(self.clock.perf_counter() - started)
                    taken += count
                    continue
            if self.observe is None:
                self._answer(count)
            else:
                self._answer_observed(count, self.observe)
            taken += count
        self.used = taken

    def _answer_any(self, count: int) -> None:
        if self.observe is None:
            self._answer(count)
        else:
            self._answer_observed(count, self.observe)

    def _answer(self, count: int) -> None:
        """Answers the ``count`` datagrams in the receive slots, with one ``sendmmsg``.

        Reply j leaves from tx slot j in two pieces: the 2-byte ID still in receive
        slot j (iovec 2j, set once) and the rest of the response, in place (iovec
        2j+1). A remembered response, and one from the handler's fast path, is the
        response after its ID: sent as it is, without a copy."""
        handle, slots, iov64, tx64 = self.handle, self.slots, self.txiov64, self.tx64
        sender, fast = self.sender, self.fast
        recall, counts = self.recall, self.counts
        offset = _DATA_OFFSET
        assert offset is not None
        name_, mmsg64, base2, len2, iov2 = _NAME, _MMSG64, _BASE2, _LEN2, _IOV2  # locals
        tail: bytes | None
        keep: list[bytes] = []  # the replies must outlive sendmmsg: tx points into them
        append = keep.append
        j = 0  # replies so far; reply j goes to tx slot j, which sends to datagram j's peer
        moved = False
        try:
            for i, size in enumerate(self.rx32[_LEN:_MMSG32 * count:_MMSG32].tolist()):
                slot = slots[i]
                rest = slot[2:size].tobytes()
                hit = recall(rest)
                if hit is not None:
                    counts[hit[1]] += 1
                    tail = hit[0]
                    at, length = id(tail) + offset, len(tail)
                elif (tail := fast(rest, False)) is not None:
                    at, length = id(tail) + offset, len(tail)
                else:
                    self.current = i
                    response = handle(slot[:size].tobytes(), False, sender)
                    if response is None:
                        continue
                    # Sent in place from the object's memory: only bytes keep their data
                    # there. Anything else, or no room for an ID, is a bug: it costs this
                    # answer only.
                    if type(response) is not bytes or len(response) < 2:
                        continue
                    tail = response
                    slot[:2] = tail[:2]  # the ID the handler chose (the query's, as a rule)
                    at, length = id(tail) + offset + 2, len(tail) - 2
                append(tail)
                if j != i:  # an earlier datagram got no reply: this one moves down to slot j
                    moved = True
                    tx64[name_ + mmsg64 * j] = self.name_at[i]
                    slots[j][:2] = slot[:2]
                iov64[base2 + iov2 * j] = at
                iov64[len2 + iov2 * j] = length
                j += 1
            if j:
                self._send(j)
        finally:
            if moved:  # put back the addresses of the slots that moved, whatever happened
                for k in range(j):
                    tx64[name_ + mmsg64 * k] = self.name_at[k]

    def _answer_observed(self, count: int, observe: Observer) -> None:
        """:meth:`_answer` for a reader with an observer: each datagram is answered as
        there (remembered responses included), then shown with its response once the
        batch is sent. The responses are copied whole (ID included), which the plain
        path avoids: the observer needs the message as it went out anyway."""
        started = self.clock.perf_counter_ns()
        handle, slots, sender, fast = self.handle, self.slots, self.sender, self.fast
        recall, counts = self.recall, self.counts
        iov64, tx64, name_at = self.txiov64, self.tx64, self.name_at
        offset = _DATA_OFFSET
        assert offset is not None
        queries: list[bytes] = []
        responses: list[bytes | None] = []
        j = 0
        moved = False
        try:
            for i, size in enumerate(self.rx32[_LEN:_MMSG32 * count:_MMSG32].tolist()):
                query = slots[i][:size].tobytes()
                rest = query[2:]
                response: bytes | None
                hit = recall(rest)
                if hit is not None:
                    counts[hit[1]] += 1
                    response = query[:2] + hit[0]
                elif (tail := fast(rest, False)) is not None:
                    response = query[:2] + tail
                else:
                    self.current = i
                    response = handle(query, False, sender)
                    if response is not None and (type(response) is not bytes
                                                 or len(response) < 2):
                        response = None  # a bug: costs this answer only (as in _answer)
                queries.append(query)
                responses.append(response)
                if response is None:
                    continue
                slots[j][:2] = response[:2]  # slot j's query was copied: free to reuse
                if j != i:
                    moved = True
                    tx64[_NAME + _MMSG64 * j] = name_at[i]
                iov64[_BASE2 + _IOV2 * j] = id(response) + offset + 2
                iov64[_LEN2 + _IOV2 * j] = len(response) - 2
                j += 1
            if j:
                self._send(j)
        finally:
            if moved:
                for k in range(j):
                    tx64[_NAME + _MMSG64 * k] = name_at[k]
        addresses, size = self.addresses, ADDR_SIZE
        raw = self.names_view[: count * size].tobytes()
        for i, query in enumerate(queries):
            key = raw[i * size : (i + 1) * size]
            peer = addresses.get(key)
            if peer is None:
                if len(addresses) >= MAX_ADDRESSES:
                    addresses.clear()
                peer = addresses[key] = self._address(i)
            try:
                observe(query, responses[i], False, peer, started)
            except Exception:
                failed()

    def _address(self, i: int) -> Address:
        """Datagram ``i``'s sender as the socket module gives it: (host, port[, ...])."""
        raw = ctypes.string_at(self.name_at[i], ADDR_SIZE)
        port = int.from_bytes(raw[2:4], "big")
        host = self._peer(i)
        return (host, port) if ":" not in host else (host, port, 0, 0)

    def _peer(self, i: int) -> str:
        """The address of datagram ``i``'s sender, as text (sockaddr_in / sockaddr_in6)."""
        raw = ctypes.string_at(self.name_at[i], ADDR_SIZE)
        family = int.from_bytes(raw[:2], sys.byteorder)
        if family == socket.AF_INET:
            return socket.inet_ntop(socket.AF_INET, raw[4:8])
        if family == socket.AF_INET6:
            return socket.inet_ntop(socket.AF_INET6, raw[8:24])
        return ""

    def _send(self, total: int) -> None:
        """sendmmsg until every reply went or failed; a failed reply is dropped, as a
        full send buffer drops a datagram (the client asks again)."""
        sent = 0
        while sent < total:
            at = ctypes.c_void_p(self.tx_base + sent * MMSG) if sent else self.tx_ptr
            n = self.sendmmsg(self.fd, at, total - sent, MSG_DONTWAIT)
            if n > 0:
                sent += n
                continue
            code = ctypes.get_errno() if n < 0 else 0
            if code == errno.EINTR:
                continue
            if code in (errno.EAGAIN, errno.ENOBUFS):
                self.dropped += total - sent  # nothing more will fit now
                log.debug("UDP send: %s, %d replies dropped", errno.errorcode[code], total - sent)
                return
            self.dropped += 1  # this reply's peer is unreachable or similar: skip it
            log.debug("UDP send: %s", errno.errorcode.get(code, code))
            sent += 1
