"""dnstap's bytes: the protobuf message ``dnstap.Dnstap`` written by hand, and the
Frame Streams framing around it.

Only what an authoritative server sends is written: a ``Dnstap`` of type MESSAGE
holding one ``Message`` (AUTH_QUERY or AUTH_RESPONSE). Protobuf's wire format is
small enough to write here (varints, fixed32 and length-delimited fields), so the
server needs no protobuf library. Field numbers are dnstap.proto's; the order
written is the numbers', as protobuf encoders do (readers accept any order).

Frame Streams (the fstrm protocol): a data frame is a 32-bit big-endian length and
the payload; a control frame is an "escape" length of zero, the control frame's
length, its type, and fields (here only CONTENT_TYPE). A bidirectional sender sends
READY, waits for ACCEPT, sends START, data frames, and at the end STOP, answered by
FINISH.
"""

from __future__ import annotations

import socket
import struct

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"

# Frame Streams control frame types and the one field type used.
ACCEPT, START, STOP, READY, FINISH = 1, 2, 3, 4, 5
FIELD_CONTENT_TYPE = 1
MAX_CONTROL = 512  # a control frame longer than this is not one we asked for

# dnstap.proto: Dnstap.Type, Message.Type, SocketFamily, SocketProtocol.
DNSTAP_MESSAGE = 1
AUTH_QUERY, AUTH_RESPONSE = 1, 2
INET, INET6 = 1, 2
UDP, TCP = 1, 2

# Field keys ((number << 3) | wire type): 0 varint, 2 length-delimited, 5 fixed32.
_D_IDENTITY, _D_VERSION, _D_MESSAGE, _D_TYPE = b"\x0a", b"\x12", b"\x72", b"\x78"
_M_TYPE, _M_FAMILY, _M_PROTOCOL = b"\x08", b"\x10", b"\x18"
_M_QUERY_ADDRESS, _M_QUERY_PORT = b"\x22", b"\x30"
_M_QUERY_SEC, _M_QUERY_NSEC, _M_QUERY_MESSAGE = b"\x40", b"\x4d", b"\x52"
_M_RESPONSE_SEC, _M_RESPONSE_NSEC, _M_RESPONSE_MESSAGE = b"\x60", b"\x6d", b"\x72"
_FIXED32 = struct.Struct("<I")
_U32 = struct.Struct("!I")
_V4_MAPPED = b"\x00" * 10 + b"\xff\xff"


def varint(value: int) -> bytes:
    """``value`` (not negative) as a protobuf base-128 varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(key: bytes, data: bytes) -> bytes:
    """A length-delimited field: its key, the length, the bytes."""
    return key + varint(len(data)) + data


def _stamp(sec_key: bytes, nsec_key: bytes, ns: int) -> bytes:
    sec, nsec = divmod(ns, 1_000_000_000)
    return sec_key + varint(sec) + nsec_key + _FIXED32.pack(nsec)


def address(host: str) -> tuple[int, bytes]:
    """(socket family, address bytes) of a peer's address as text; an IPv4 client seen
    on an IPv6 socket (``::ffff:a.b.c.d``) is an IPv4 client."""
    if ":" in host:
        packed = socket.inet_pton(socket.AF_INET6, host.partition("%")[0])
        if packed.startswith(_V4_MAPPED):
            return INET, packed[12:]
        return INET6, packed
    return INET, socket.inet_pton(socket.AF_INET, host)


def peer_head(tcp: bool, host: str, port: int) -> bytes:
    """The fields a query and its response share: family, protocol, the client's
    address and port (the Message fields 2, 3, 4 and 6)."""
    family, packed = address(host)
    return (_M_FAMILY + varint(family) + _M_PROTOCOL + varint(TCP if tcp else UDP)
            + _field(_M_QUERY_ADDRESS, packed) + _M_QUERY_PORT + varint(port))


def query_message(head: bytes, query_ns: int, query: bytes) -> bytes:
    """An AUTH_QUERY Message: ``head`` (peer_head), when the query came, its bytes."""
    return (_M_TYPE + varint(AUTH_QUERY) + head + _stamp(_M_QUERY_SEC, _M_QUERY_NSEC, query_ns)
            + _field(_M_QUERY_MESSAGE, query))


def response_message(head: bytes, query_ns: int, response_ns: int, response: bytes) -> bytes:
    """An AUTH_RESPONSE Message: the query's time (so a reader can pair the two and
    see the delay) and the response's time and bytes."""
    return (_M_TYPE + varint(AUTH_RESPONSE) + head
            + _stamp(_M_QUERY_SEC, _M_QUERY_NSEC, query_ns)
            + _stamp(_M_RESPONSE_SEC, _M_RESPONSE_NSEC, response_ns)
            + _field(_M_RESPONSE_MESSAGE, response))


def preamble(identity: bytes, version: bytes) -> bytes:
    """The fields of every Dnstap this server sends before its message (1 and 2)."""
    return ((_field(_D_IDENTITY, identity) if identity else b"")
            + (_field(_D_VERSION, version) if version else b""))


def dnstap(preamble_bytes: bytes, message: bytes) -> bytes:
    """A whole ``Dnstap`` of type MESSAGE around ``message``."""
    return preamble_bytes + _field(_D_MESSAGE, message) + _D_TYPE + varint(DNSTAP_MESSAGE)


_LENGTH = struct.Struct("!I")
# varint(n) of every n below 2**14 (a DNS message over UDP, its Message and Dnstap are
# shorter): a list look-up instead of the loop. Built by the first Encoder (~0.6 MiB).
_VARINTS: list[bytes] = []
_TABLE = 1 << 14


class Encoder:
    """An answer's two data frames, as pieces appended to the caller's list (joined
    once a batch): the same bytes as data_frame(dnstap(preamble, query_message(...)))
    and its response_message twin. Every length is worked out from the pieces' lengths,
    so nothing is copied before the batch's one join (the sender encodes every answer:
    this is its cost)."""

    __slots__ = ("_pre", "_sec", "_sec_bytes", "_tail")

    def __init__(self, preamble_bytes: bytes) -> None:
        if not _VARINTS:
            _VARINTS.extend(varint(n) for n in range(_TABLE))
        self._pre = preamble_bytes + b"\x72"  # ... then the Message's length and bytes
        # the last second written and its varint: always each other's (a time of 0 is 0)
        self._sec, self._sec_bytes = 0, varint(0)

    @staticmethod
    def heads(head: bytes) -> tuple[bytes, bytes]:
        """The starts of a query's and a response's Message from peer_head()'s bytes."""
        return b"\x08\x01" + head, b"\x08\x02" + head

    def _seconds(self, sec: int) -> bytes:
        if sec != self._sec:  # most answers of a batch share their second
            self._sec, self._sec_bytes = sec, varint(sec)
        return self._sec_bytes

    def frames(self, out: list[bytes], heads: tuple[bytes, bytes], query_ns: int, query: bytes,
               response_ns: int, response: bytes | None) -> None:
        """Appends AUTH_QUERY's frame, then (unless ``response`` is None) AUTH_RESPONSE's;
        ``heads``: :meth:`heads` of the client."""
        pre, pack, table, length = self._pre, _FIXED32.pack, _VARINTS, _LENGTH.pack
        qhead, rhead = heads
        qsec, qnsec = divmod(query_ns, 1_000_000_000)
        stamp = b"\x40" + self._seconds(qsec) + b"\x4d" + pack(qnsec)
        n = len(query)
        vq = table[n] if n < _TABLE else varint(n)
        # the Message: its head, the time, field 10 (key, length, bytes)
        m = len(qhead) + len(stamp) + 1 + len(vq) + n
        vm = table[m] if m < _TABLE else varint(m)
        out += (length(len(pre) + len(vm) + m + 2), pre, vm, qhead, stamp, b"\x52", vq, query,
                b"\x78\x01")
        if response is None:
            return
        rsec, rnsec = divmod(response_ns, 1_000_000_000)
        rstamp = b"\x60" + self._seconds(rsec) + b"\x6d" + pack(rnsec)
        n = len(response)
        vr = table[n] if n < _TABLE else varint(n)
        m = len(rhead) + len(stamp) + len(rstamp) + 1 + len(vr) + n
        vm = table[m] if m < _TABLE else varint(m)
        out += (length(len(pre) + len(vm) + m + 2), pre, vm, rhead, stamp, rstamp, b"\x72", vr,
                response, b"\x78\x01")


def data_frame(payload: bytes) -> bytes:
    return _U32.pack(len(payload)) + payload


def control_frame(kind: int, content_type: bytes | None = CONTENT_TYPE) -> bytes:
    """A control frame (escape, length, type[, CONTENT_TYPE field])."""
    body = _U32.pack(kind)
    if content_type is not None:
        body += _U32.pack(FIELD_CONTENT_TYPE) + _U32.pack(len(content_type)) + content_type
    return b"\x00\x00\x00\x00" + _U32.pack(len(body)) + body


class ProtocolError(Exception):
    """The collector's side of the handshake is not what Frame Streams says."""


def parse_control(body: bytes) -> tuple[int, list[bytes]]:
    """(type, content types) of a control frame's body (after escape and length)."""
    if len(body) < 4:
        raise ProtocolError(f"control frame of {len(body)} bytes")
    kind = _U32.unpack_from(body)[0]
    types: list[bytes] = []
    at = 4
    while at < len(body):
        if at + 8 > len(body):
            raise ProtocolError("truncated control frame field")
        field, length = struct.unpack_from("!II", body, at)
        at += 8
        if at + length > len(body):
            raise ProtocolError("control frame field longer than the frame")
        if field == FIELD_CONTENT_TYPE:
            types.append(body[at:at + length])
        at += length
    return kind, types
