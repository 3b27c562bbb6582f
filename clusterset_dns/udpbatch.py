"""Batched UDP I/O on Linux: one ``recvmmsg`` and one ``sendmmsg`` per wake-up.

With one ``recvfrom`` and one ``sendto`` per datagram, the two system calls
cost more than answering from the ready-made cache. This reader owns every
buffer of the batch: the receive buffers and peer-address slots, the
``mmsghdr``/``iovec`` arrays for both directions, all built once; the handler
stays bytes -> bytes. ctypes calls libc directly (the standard library has no
``recvmmsg``); :func:`available` checks the structure layout before anything
relies on it, and the server falls back to the plain reader when it is not
what this module expects.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import socket
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

Handle = Callable[[bytes, bool], "bytes | None"]
PeerHandle = Callable[[bytes, str], "bytes | None"]

BATCH = 64  # datagrams per wake-up; then yield to the loop so a flood cannot starve the watch
MAX_QUERY = 4096  # a DNS query over UDP is a few hundred bytes at most
ADDR_SIZE = 28  # sizeof(struct sockaddr_in6), the largest peer address of AF_INET/AF_INET6
MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20
MMSG = 64  # sizeof(struct mmsghdr)


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
_EXPECTED_LAYOUT = {"sizeof(msghdr)": 56, "sizeof(mmsghdr)": 64, "offsetof(msg_iov)": 16,
                    "offsetof(msg_flags)": 48, "offsetof(msg_len)": 56, "sizeof(iovec)": 16}


def _layout() -> dict[str, int]:
    return {"sizeof(msghdr)": ctypes.sizeof(MsgHdr), "sizeof(mmsghdr)": ctypes.sizeof(MMsgHdr),
            "offsetof(msg_iov)": MsgHdr.msg_iov.offset,
            "offsetof(msg_flags)": MsgHdr.msg_flags.offset,
            "offsetof(msg_len)": MMsgHdr.msg_len.offset, "sizeof(iovec)": ctypes.sizeof(IOVec)}


class _Calls:
    """The two libc functions, typed; None when this system lacks them."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.recvmmsg = libc.recvmmsg
        # Addresses are passed as plain integers: converting an int is the cheapest
        # argument ctypes has, and the arrays never move.
        self.recvmmsg.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint,
                                  ctypes.c_int, ctypes.c_void_p)
        self.recvmmsg.restype = ctypes.c_int
        self.sendmmsg = libc.sendmmsg
        self.sendmmsg.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int)
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


def available() -> str | None:
    """None when batched I/O can be used here, else why not (for the log)."""
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


class BatchReader:
    """Answers a UDP socket from the loop's reader callback, a batch per system call.

    Same contract as :class:`clusterset_dns.server.UDPReader` (start/stop, answers in
    the loop thread); the replies of one batch leave in one ``sendmmsg``."""

    kind = "recvmmsg/sendmmsg"

    def __init__(self, sock: socket.socket, handle: Handle,
                 peer_handle: PeerHandle | None = None) -> None:
        reason = available()
        if reason is not None:
            raise OSError(errno.ENOSYS, f"batched UDP I/O unavailable: {reason}")
        assert _calls is not None
        self.sock = sock
        self.fd = sock.fileno()
        self.handle = handle
        self.peer_handle = peer_handle
        self.recvmmsg = _calls.recvmmsg
        self.sendmmsg = _calls.sendmmsg
        # One contiguous block per kind of buffer; slot i of each belongs to datagram i.
        self.data = ctypes.create_string_buffer(MAX_QUERY * BATCH)
        self.view = memoryview(self.data).cast("B")
        self.names = ctypes.create_string_buffer(ADDR_SIZE * BATCH)
        self.rx_iov = (IOVec * BATCH)()
        self.rx = (MMsgHdr * BATCH)()
        self.tx_iov = (IOVec * BATCH)()
        self.tx = (MMsgHdr * BATCH)()
        data_at, names_at = ctypes.addressof(self.data), ctypes.addressof(self.names)
        for i in range(BATCH):
            self.rx_iov[i].iov_base = data_at + i * MAX_QUERY
            self.rx_iov[i].iov_len = MAX_QUERY
            hdr = self.rx[i].msg_hdr
            hdr.msg_name = names_at + i * ADDR_SIZE
            hdr.msg_namelen = ADDR_SIZE
            hdr.msg_iov = ctypes.pointer(self.rx_iov[i])
            hdr.msg_iovlen = 1
            self.tx[i].msg_hdr.msg_iov = ctypes.pointer(self.tx_iov[i])
            self.tx[i].msg_hdr.msg_iovlen = 1
        self.rx_base = ctypes.addressof(self.rx)
        self.tx_base = ctypes.addressof(self.tx)
        # The per-datagram work reads and writes the arrays through integer views
        # (indices below follow the layout checked by available()): a ctypes
        # attribute chain costs several times more than a memoryview item.
        self.rx_bytes = memoryview(self.rx).cast("B")
        self.rx_template = bytes(self.rx_bytes)  # every name length reset to ADDR_SIZE
        self.rx32 = self.rx_bytes.cast("I")
        self.tx64 = memoryview(self.tx).cast("B").cast("Q")
        self.tx32 = memoryview(self.tx).cast("B").cast("I")
        self.txiov64 = memoryview(self.tx_iov).cast("B").cast("Q")
        self.name_at = [names_at + i * ADDR_SIZE for i in range(BATCH)]
        self.used = BATCH  # rx slots the last recvmmsg filled (their name lengths changed)
        self.dropped = 0  # replies the kernel would not take (send buffer full, ...)

    def start(self, loop: object) -> None:
        loop.add_reader(self.fd, self._readable)  # type: ignore[attr-defined]

    def stop(self, loop: object) -> None:
        loop.remove_reader(self.fd)  # type: ignore[attr-defined]
        self.sock.close()

    def _readable(self) -> None:
        used = self.used * MMSG
        self.rx_bytes[:used] = self.rx_template[:used]  # the kernel set the name lengths
        count = self.recvmmsg(self.fd, self.rx_base, BATCH, MSG_DONTWAIT, None)
        if count <= 0:
            self.used = 0
            if count < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                log.debug("UDP receive: %s", errno.errorcode.get(ctypes.get_errno()))
            return
        self.used = count
        view, handle, rx32 = self.view, self.handle, self.rx32
        tx64, tx32, iov64, name_at = self.tx64, self.tx32, self.txiov64, self.name_at
        offset = _DATA_OFFSET
        assert offset is not None
        keep: list[bytes] = []  # the replies must outlive sendmmsg: tx points into them
        append = keep.append
        j = 0  # replies so far (= len(keep))
        for i in range(count):
            start = i * MAX_QUERY
            query = view[start:start + rx32[i * 16 + 14]].tobytes()  # msg_len
            response = handle(query, False)
            if not response:
                if response is None or self.peer_handle is None:
                    continue
                # PEER_NEEDED (an IXFR): rare, so the address is decoded only here
                response = self.peer_handle(query, self._peer(i))
                if response is None:
                    continue
            append(response)
            iov64[2 * j] = id(response) + offset  # iov_base: the reply, in place
            iov64[2 * j + 1] = len(response)  # iov_len
            tx64[8 * j] = name_at[i]  # msg_name: the peer's address as received
            tx32[16 * j + 2] = rx32[16 * i + 2]  # msg_namelen
            j += 1
        if j:
            self._send(j)

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
            n = self.sendmmsg(self.fd, self.tx_base + sent * MMSG, total - sent, MSG_DONTWAIT)
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
