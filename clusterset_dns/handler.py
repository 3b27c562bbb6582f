"""The per-packet path: query bytes in, response bytes out. Synchronous, no I/O.

The common query (one question, no EDNS or an option-less OPT, class IN) is
answered by one dict look-up keyed by the lower-cased question bytes; that
costs a few byte copies and no parsing of the name. Everything else takes
:meth:`Handler._slow`, which still builds no DNS objects: it walks the packet,
classifies the name against the zone and splices a ready-made answer.
Nothing here raises: a malformed packet gets FORMERR or is dropped.
"""

from __future__ import annotations

import struct

from clusterset_dns import wire
from clusterset_dns.cache import Zone
from clusterset_dns.records import has_records
from clusterset_dns.wire import AA, QR, TC, Answer

_ONE_QUESTION = b"\x00\x01\x00\x00\x00\x00\x00\x00"
_ONE_QUESTION_OPT = b"\x00\x01\x00\x00\x00\x00\x00\x01"
_OPT_HEAD = b"\x00\x00\x29"
_NO_RDATA = b"\x00\x00"
_HEADER = struct.Struct("!HHHHH")
_RR_HEAD = struct.Struct("!HHIH")
_BADVERS_HIGH = 1  # extended rcode 16 = BADVERS: upper 8 bits in the OPT
_MAX_TAILS = 1024  # distinct OPT tails remembered (bounded: they come from clients)
_TCP_MAX = 65535  # a TCP message's 2-byte length prefix; larger answers get TC
_SLOW_TYPES = frozenset({wire.ANY, wire.AXFR, wire.IXFR})  # all below 256


class Stats:
    """Plain counters; the metrics module reads them at scrape time."""

    __slots__ = ("dropped", "rcodes", "tcp_aborted", "tcp_open", "tcp_refused", "truncated")

    def __init__(self) -> None:
        self.rcodes = [0] * 24  # index = rcode (16 = BADVERS)
        self.truncated = 0
        self.dropped = 0
        # Kept by server.DNSServer; here so that workers report them too.
        self.tcp_open = self.tcp_refused = self.tcp_aborted = 0


class Handler:
    def __init__(self, zone: Zone, udp_payload_cap: int) -> None:
        self.zone = zone
        self.answers = zone.answers  # same dict object for the process's life
        self.cap = max(512, udp_payload_cap)
        self.stats = Stats()
        self._opt = (self._opt_rr(False), self._opt_rr(True))
        # The last 11 bytes of a query whose only extra record is an option-less OPT
        # -> (UDP size limit, our OPT). Clients send a handful of distinct ones, so
        # this replaces parsing the OPT with one look-up.
        self._tails: dict[bytes, tuple[int, bytes]] = {}

    def _learn(self, tail: bytes) -> tuple[int, bytes] | None:
        if (tail[:3] != _OPT_HEAD or tail[6] != 0 or tail[9:] != _NO_RDATA
                or len(self._tails) >= _MAX_TAILS):  # version 0, no options
            return None
        limit = max(512, min((tail[3] << 8) | tail[4], self.cap))
        self._tails[tail] = found = (limit, self._opt[tail[7] >> 7])
        return found

    def _opt_rr(self, do: bool, high_rcode: int = 0) -> bytes:
        return _OPT_HEAD + struct.pack("!HBBH", self.cap, high_rcode, 0, 0x8000 if do else 0) \
            + _NO_RDATA

    # -- the fast path ------------------------------------------------------------------

    def handle(self, data: bytes, tcp: bool) -> bytes | None:
        """The response to ``data``, or None when nothing must be sent."""
        size = len(data)
        if size > 16 and not data[2] & 0xF8:  # a query (QR=0), opcode QUERY
            counts = data[4:12]
            if counts == _ONE_QUESTION:
                question = data[12:]
                ans = self.answers.get(question.lower())
                if ans is not None:
                    if ans.size <= (_TCP_MAX if tcp else 512):
                        self.stats.rcodes[0] += 1
                        return (data[:2] + ans.heads[(data[2] & 1) | ((data[3] & 0x10) >> 3)]
                                + question + ans.body)
                else:
                    ans = self._negative(question)
                    if ans is not None and ans.size + len(question) <= (
                            _TCP_MAX if tcp else 512):
                        self.stats.rcodes[ans.rcode] += 1
                        return (data[:2] + ans.heads[(data[2] & 1) | ((data[3] & 0x10) >> 3)]
                                + question + ans.body)
            elif counts == _ONE_QUESTION_OPT:
                tail = data[size - 11 :]
                edns = self._tails.get(tail) or self._learn(tail)
                if edns is not None:  # an option-less OPT of EDNS version 0
                    question = data[12 : size - 11]
                    ans = self.answers.get(question.lower())
                    if ans is None:
                        ans = self._negative(question)
                        extra = 11 + len(question)  # negative answers are sized without it
                    else:
                        extra = 11
                    if ans is not None and ans.size + extra <= (_TCP_MAX if tcp else edns[0]):
                        self.stats.rcodes[ans.rcode] += 1
                        return (data[:2] + ans.heads[4 | (data[2] & 1) | ((data[3] & 0x10) >> 3)]
                                + question + ans.body + edns[1])
        try:
            return self._slow(data, tcp)
        except Exception:  # a bug must cost one answer, never the server
            self.stats.dropped += 1
            return None

    def _negative(self, question: bytes) -> Answer | None:
        """NXDOMAIN or NODATA for a question that missed the answers, or None to let
        the slow path decide (not a well-formed IN question, ANY, a transfer, outside
        the zone, or not synced yet). Costs one walk over the labels."""
        size = len(question)
        root = size - 5  # where the name's terminating zero byte must be
        if root < 0 or question[root] != 0 or question[size - 2 :] != b"\x00\x01":
            return None  # malformed, or a class other than IN
        if question[size - 4] == 0 and question[size - 3] in _SLOW_TYPES:
            return None
        offset, starts = 0, []
        while offset < root:
            length = question[offset]
            if length == 0 or length > 63:
                return None
            starts.append(offset)
            offset += length + 1
        if offset != root or root >= 255:
            return None
        name = question[: root + 1].lower()
        zone = self.zone
        if has_records(self.answers, name) or name in zone.names:
            return zone.nodata
        apex = zone.apex_wire
        boundary = len(name) - len(apex)
        if zone.synced and name.endswith(apex) and (boundary in starts or boundary == root):
            return zone.nxdomain
        return None

    # -- everything else ------------------------------------------------------------------

    def _slow(self, data: bytes, tcp: bool) -> bytes | None:
        size = len(data)
        if size < 12:
            self.stats.dropped += 1
            return None  # not even a header: nobody to answer
        flags = (data[2] << 8) | data[3]
        if flags & QR:
            self.stats.dropped += 1
            return None  # never answer a response (no reflection loops)
        request_bits = flags & (wire.RD | wire.CD)
        opcode_bits = flags & 0x7800
        qdcount, ancount, nscount, arcount = struct.unpack_from("!HHHH", data, 4)
        found = self._question(data) if qdcount == 1 else None
        if opcode_bits:
            # The question goes back too: a forwarder (CoreDNS) drops a reply without it.
            return self._error(data[:2], opcode_bits | request_bits, wire.NOTIMP,
                               found[0] if found else b"")
        if found is None:
            return self._error(data[:2], request_bits, wire.FORMERR, b"")
        question, labels_at = found
        name_end = 12 + len(question) - 4
        qtype, qclass = struct.unpack_from("!HH", data, name_end)
        # The other sections: skip answers/authority, find one OPT in additional.
        offset = name_end + 4
        edns: tuple[int, int, int] | None = None  # (payload, version, do)
        for index in range(ancount + nscount + arcount):
            parsed = self._skip_rr(data, offset)
            if parsed is None:
                return self._error(data[:2], request_bits, wire.FORMERR, question)
            rtype, rclass, ttl, end, root_owner = parsed
            if rtype == wire.OPT:
                if index < ancount + nscount or edns is not None or not root_owner:
                    return self._error(data[:2], request_bits, wire.FORMERR, question)
                edns = (rclass, (ttl >> 16) & 0xFF, (ttl >> 15) & 1)
            offset = end
        if edns is not None and edns[1] != 0:
            return self._error(data[:2], request_bits, 0, question, edns, badvers=True)
        if tcp:
            limit = _TCP_MAX
        elif edns is None:
            limit = 512
        else:
            limit = max(512, min(edns[0], self.cap))
        if qclass != wire.CLASS_IN or qtype in (wire.AXFR, wire.IXFR):
            return self._error(data[:2], request_bits, wire.REFUSED, question, edns)
        name = question[:-4].lower()
        zone = self.zone
        ans = self.answers.get(question.lower())
        if ans is None:
            if has_records(self.answers, name):
                # RFC 8482: ANY gets one synthesized record, never the whole node.
                ans = zone.any_answer if qtype == wire.ANY else zone.nodata
            elif name in zone.names:
                ans = zone.nodata  # an empty non-terminal: no records, not even for ANY
            elif self._in_zone(name, labels_at):
                if not zone.synced:
                    return self._error(data[:2], request_bits, wire.SERVFAIL, question, edns)
                ans = zone.nxdomain
            else:
                return self._error(data[:2], request_bits, wire.REFUSED, question, edns)
            assert ans is not None
        return self._splice(data[:2], request_bits, question, ans, edns, limit)

    @staticmethod
    def _question(data: bytes) -> tuple[bytes, list[int]] | None:
        """The question's bytes and its labels' offsets; None when it is malformed.
        No compression: there is nothing before the question to point at."""
        size = len(data)
        offset, labels_at = 12, []
        while True:
            if offset >= size:
                return None
            length = data[offset]
            if length == 0:
                break
            if length > 63 or offset + length + 1 > size:
                return None
            labels_at.append(offset)
            offset += length + 1
        name_end = offset + 1
        if name_end + 4 > size or name_end - 12 > 255:
            return None
        return data[12 : name_end + 4], labels_at

    def _in_zone(self, name: bytes, labels_at: list[int]) -> bool:
        apex = self.zone.apex_wire
        start = len(name) - len(apex)
        # The apex must start on a label boundary of the question, not inside a label.
        return start >= 0 and name.endswith(apex) and (start + 12 in labels_at or apex == b"\x00")

    @staticmethod
    def _skip_rr(data: bytes, offset: int) -> tuple[int, int, int, int, bool] | None:
        """(type, class, ttl, end offset, owner is root) of the record at ``offset``."""
        size = len(data)
        start = offset
        while True:
            if offset >= size:
                return None
            length = data[offset]
            if length & 0xC0 == 0xC0:
                offset += 2
                break
            if length > 63:
                return None
            offset += length + 1
            if length == 0:
                break
        if offset + 10 > size:
            return None
        rtype, rclass, ttl, rdlength = _RR_HEAD.unpack_from(data, offset)
        end = offset + 10 + rdlength
        if end > size:
            return None
        return rtype, rclass, ttl, end, offset - start == 1

    def _splice(self, qid: bytes, request_bits: int, question: bytes, ans: Answer,
                edns: tuple[int, int, int] | None, limit: int) -> bytes:
        index = (1 if request_bits & wire.RD else 0) | (2 if request_bits & wire.CD else 0)
        opt = b""
        if edns is not None:
            index |= 4
            opt = self._opt[edns[2]]
        if 12 + len(question) + len(ans.body) + len(opt) > limit:
            # Too big for this UDP client: header and question only, TC set (RFC 2181 9).
            self.stats.truncated += 1
            self.stats.rcodes[ans.rcode] += 1
            head = _HEADER.pack(QR | AA | TC | request_bits | ans.rcode, 1, 0, 0, 1 if opt else 0)
            return qid + head + question + opt
        self.stats.rcodes[ans.rcode] += 1
        return qid + ans.heads[index] + question + ans.body + opt

    def _error(self, qid: bytes, bits: int, rcode: int, question: bytes,
               edns: tuple[int, int, int] | None = None, badvers: bool = False) -> bytes:
        """A response with no records (rcode other than NOERROR/NXDOMAIN, or BADVERS)."""
        self.stats.rcodes[16 if badvers else rcode] += 1
        opt = b""
        if edns is not None:
            opt = self._opt_rr(bool(edns[2]), _BADVERS_HIGH if badvers else 0)
        head = _HEADER.pack(QR | bits | rcode, 1 if question else 0, 0, 0, 1 if opt else 0)
        return qid + head + question + opt
