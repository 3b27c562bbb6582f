"""The per-packet path: query bytes in, response bytes out. Synchronous, no I/O.

The common query (one question, no EDNS or an option-less OPT, class IN) is
answered by one dict look-up keyed by the lower-cased question bytes; that
costs a few byte copies and no parsing of the name. Everything else takes
:meth:`Handler._slow`, which still builds no DNS objects: it walks the packet,
asks the zone whether the name exists and splices a ready-made answer.
Nothing here raises: a malformed packet gets FORMERR or is dropped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.query import Edns, Signer, badkey_record, parse
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone import wire
from clusterset_dns.zone.table import EMPTY, HAS_RECORDS, NEGATIVES_CAP, Zone
from clusterset_dns.zone.truncate import Form
from clusterset_dns.zone.wire import AA, COUNTS, HEADER, OPT_LEN, QR, TC, TCP_MAX, Answer

Explained, walk_name = wire.Explained, wire.walk_name  # one import line less: under 500

_ONE_QUESTION = b"\x00\x01\x00\x00\x00\x00\x00\x00"  # counts: 1 question, nothing else
_ONE_QUESTION_OPT = b"\x00\x01\x00\x00\x00\x00\x00\x01"  # ... and one additional record
_OPT_HEAD = b"\x00\x00\x29"  # root owner, type OPT
_NO_RDATA = b"\x00\x00"
# Masks on single header bytes, for the fast path (byte 2 = QR|opcode|AA|TC|RD,
# byte 3 = RA|Z|AD|CD|rcode).
_QR_OR_OPCODE = 0xF8  # byte 2: a response, or an opcode other than QUERY
_RD_BIT = 0x01  # byte 2 -> bit 0 of the heads index
_CD_BIT = 0x10  # byte 3 -> bit 1 of the heads index (shifted right by 3)
_RD_CD = wire.RD | wire.CD  # the request's bits a response echoes, in the flags word
_EDNS_VARIANT = 4  # bit 2 of the heads index: the answer carries an OPT
_OPCODE = 0x7800  # in the flags word
_BADVERS_HIGH = 1  # extended rcode 16 = BADVERS: upper 8 bits in the OPT
_MAX_TAILS = 1024  # distinct OPT tails remembered (from clients: bounded, then cleared)
_UDP_PLAIN = 512  # a UDP answer to a query without EDNS (RFC 1035 4.2.1)
# The fast path measures a response after its ID against these.
_ID = 2
_TCP_ROOM, _UDP_ROOM = TCP_MAX - _ID, _UDP_PLAIN - _ID
_SLOW_TYPES = frozenset({wire.ANY, wire.AXFR, wire.IXFR})  # all below 256

# The sender of the datagram being answered, from its transport: called only where
# the address matters (an IXFR or a signed query over UDP: access control and rate
# limits), so that a common query decodes none. None over TCP.
Peer = Callable[[], str]
# (query, peer address, UDP size limit) -> the whole IXFR response in one message (or,
# to a signed query, a signed TC), None when it does not fit (TC), DROP to send nothing
# (see xfr.Transfers.udp); the handler returns None for DROP, so no transport ever sees
# an empty response.
UdpTransfer = Callable[[bytes, str, int], "bytes | None"]
DROP = b""
_NOTAUTH = 9

# RFC 8914 texts that do not depend on the data (the rest come with the answers).
NOT_SYNCED = wire.ede(wire.EDE_NOT_READY, "not synced: the first full list of "
                      "ServiceImports and EndpointSlices has not completed yet")
# A name with addresses of one family asked for the other (keyed by the asked type).
OTHER_FAMILY = {
    wire.AAAA: (wire.A, wire.ede(wire.EDE_OTHER, "no IPv6 address: this name has IPv4 "
                                 "addresses only")),
    wire.A: (wire.AAAA, wire.ede(wire.EDE_OTHER, "no IPv4 address: this name has IPv6 "
                                 "addresses only")),
}
_MAX_EXPLAINED_OPTS = 4096  # distinct EDE texts whose OPT records are kept (one per text)
# Where a query's counters start in Stats.requests, by transport (0 UDP, 1 TCP) and the
# low byte of its type (types of 256 and more: _OTHER); add the rcode.
_BASES = tuple(tuple(counters.base(counters.TYPE_SLOT[t], bool(tcp)) for t in range(256))
               for tcp in (0, 1))
_OTHER = tuple(counters.base(len(counters.TYPES) - 1, bool(tcp)) for tcp in (0, 1))
_EDE_STEP = counters.RCODES  # one EDE slot further in Stats.requests
_EDE_SLOT = {code: slot for slot, code in enumerate(counters.EDE_CODES) if code is not None}


def _base(question: bytes, tcp: bool) -> int:
    """Where the counters of ``question`` (with type and class; b"": none) start."""
    if len(question) < 4 or question[-4]:
        return _OTHER[tcp]
    return _BASES[tcp][question[-3]]


def _variant(data: bytes) -> int:
    """The index into ``Answer.heads`` for the query's RD and CD bits (the fast path
    inlines this very expression once, on the bytes after the ID)."""
    return (data[2] & _RD_BIT) | ((data[3] & _CD_BIT) >> 3)


class Handler:
    def __init__(self, zone: Zone, udp_payload_cap: int, stats: Stats | None = None,
                 udp_transfer: UdpTransfer | None = None, signer: Signer | None = None
                 ) -> None:
        """``udp_transfer``: zone transfers are served (over TCP, by xfr); an IXFR over
        UDP gets this answer, or TC so that the client asks again over TCP, where access
        is checked. ``signer``: with a TSIG key; without one a signed query gets
        NOTAUTH, BADKEY. ``stats``: the counters to bump (shared with xfr's)."""
        self.zone = zone
        self.answers = zone.answers  # same dict object for the process's life
        self.negatives = zone.negatives  # the same too: cleared in place on every change
        self._first = zone.first_use.get  # and this one's recent half (firstuse.py)
        self.responses = zone.responses  # and this one (responses.ResponseMemory)
        self._recall = self.responses.get  # one attribute less per answer on the fast path
        self.cap = max(_UDP_PLAIN, udp_payload_cap)
        self.stats = Stats() if stats is None else stats
        self.udp_transfer = udp_transfer
        self.signer = signer
        self._counts = self.stats.requests  # one attribute less per answer on the fast path
        self._opt = (self._opt_rr(False), self._opt_rr(True))
        # The last 11 bytes of a query whose only extra record is an option-less OPT
        # -> (the UDP size limit less the ID, our OPT, DO). Clients send a handful of
        # distinct ones, so this replaces parsing the OPT with one look-up.
        self._tails: dict[bytes, tuple[int, bytes, int]] = {}
        # EDE option -> our two OPT records carrying it (DO clear, DO set).
        self._explained_opts: dict[bytes, tuple[bytes, bytes]] = {}

    def _learn(self, tail: bytes) -> tuple[int, bytes, int] | None:
        if tail[:3] != _OPT_HEAD or tail[6] != 0 or tail[9:] != _NO_RDATA:
            return None  # not an option-less OPT of version 0
        tails = self._tails
        if len(tails) >= _MAX_TAILS:
            # Full (a flood of payload sizes): start over, so that the shapes clients
            # send now are learned, never sent to the slow path for the process's life.
            tails.clear()
        limit = max(_UDP_PLAIN, min((tail[3] << 8) | tail[4], self.cap))
        do = tail[7] >> 7
        tails[tail] = found = (limit - _ID, self._opt[do], do)
        return found

    def _opts(self, ede: bytes) -> tuple[bytes, bytes]:
        """Our OPT records (DO clear, set) carrying the EDE option ``ede``."""
        found = self._explained_opts.get(ede)
        if found is None:
            if len(self._explained_opts) >= _MAX_EXPLAINED_OPTS:
                self._explained_opts.clear()
            found = self._explained_opts[ede] = (self._opt[0][:-2] + ede,
                                                 self._opt[1][:-2] + ede)
        return found

    def _why(self, ans: Answer, key: bytes, name: bytes, exists: bool) -> Answer:
        """``ans`` (NXDOMAIN or NODATA for the lower-case question ``key`` at ``name``)
        with the reason the zone has for it, if any (RFC 8914; §3.8)."""
        zone = self.zone
        ede = zone.explained.get(name)
        if ede is None:
            if exists and key[-4] == 0 and key[-3] in (wire.A, wire.AAAA):
                other, text = OTHER_FAMILY[key[-3]]
                if zone.has(name + struct.pack("!HH", other, wire.CLASS_IN)):
                    ede = text
            if ede is None:
                if zone.synced:
                    return ans
                ede = NOT_SYNCED  # NODATA of a name that exists before the first sync
        return Explained(ans, self._opts(ede), _EDE_SLOT.get(int.from_bytes(ede[6:8]), 1))

    def _opt_rr(self, do: bool, high_rcode: int = 0) -> bytes:
        return _OPT_HEAD + struct.pack("!HBBH", self.cap, high_rcode, 0, 0x8000 if do else 0) \
            + _NO_RDATA

    # -- the fast path ------------------------------------------------------------------

    def handle(self, data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        """The response to ``data``, or None when nothing must be sent."""
        # A query seen before since the last zone change: its response, but for the ID.
        # The key is every byte after the ID, so any difference (flags, case, EDNS
        # payload size) is a different key, worked out by fast().
        rest = data[2:]
        hit = self._recall(rest)
        if hit is not None:
            self._counts[hit[1]] += 1  # the counter's index, worked out when stored
            return data[:2] + hit[0]
        tail = self.fast(rest, tcp)
        if tail is not None:
            return data[:2] + tail
        return self.slow(data, tcp, peer)

    def fast(self, rest: bytes, tcp: bool) -> bytes | None:
        """The fast path, for a query known to miss the remembered responses (the
        batched reader looked it up itself): the response's bytes after the ID for the
        query's bytes after the ID, ``rest``, or None to take :meth:`slow`.

        On this path the response is as long as the query plus ``ans.size`` (the
        query's question and OPT come back, the answer's body is added), so the size
        check is one addition. A larger answer over UDP is cut to what fits (RFC 2181
        9) by :meth:`_splice`, as the slow path would; over TCP it takes the slow path.
        A response sent over UDP is remembered when the question's name is all lower
        case: a name in mixed case (DNS 0x20) is not asked the same way again."""
        size = len(rest)
        if size > 14 and not rest[0] & _QR_OR_OPCODE:  # a query (QR=0), opcode QUERY
            counts = rest[2:10]
            variant = (rest[0] & _RD_BIT) | ((rest[1] & _CD_BIT) >> 3)  # _variant, inlined
            if counts == _ONE_QUESTION:
                question = rest[10:]
                key = question.lower()
                ans = (self.answers.get(key) or self._first(key) or self.negatives.get(key)
                       or self._negative(key))
                if ans is not None:
                    if size + ans.size <= (_TCP_ROOM if tcp else _UDP_ROOM):
                        index = (_BASES[tcp][rest[-3]] if not rest[-4] else _OTHER[tcp]) \
                            + ans.rcode
                        self._counts[index] += 1
                        # One join: a chain of + copies the growing prefix at every step.
                        tail = b"".join((ans.heads[variant], question, ans.body))
                        # A TCP answer may be too large for UDP. The name is in lower case
                        # when the question is, or when only its type's low byte, that of
                        # a capital letter (HTTPS, 65), was lowered.
                        if not tcp and (key == question or (
                                key[-3] != question[-3] and key[:-4] == question[:-4])):
                            self.responses.put(rest, tail, index)
                        return tail
                    if not tcp:
                        # Too large for a client without EDNS (a Headless SRV answer): its
                        # cut form, as the slow path splices it, without walking the whole
                        # message again. A cut form rotates each second, so it is never
                        # remembered: in the 0x20 mix one answer in 50 came this way.
                        return self._splice(b"", variant, ((rest[0] << 8) | rest[1]) & _RD_CD,
                                            question, ans, None, _UDP_PLAIN, False)
            elif counts == _ONE_QUESTION_OPT:
                tail = rest[size - OPT_LEN :]
                edns = self._tails.get(tail) or self._learn(tail)
                if edns is not None:  # an option-less OPT of EDNS version 0
                    question = rest[10 : size - OPT_LEN]
                    key = question.lower()
                    ans = (self.answers.get(key) or self._first(key)
                           or self.negatives.get(key) or self._negative(key))
                    if ans is not None:
                        if size + ans.size <= (_TCP_ROOM if tcp else edns[0]):
                            at = size - OPT_LEN - 4  # the question's type
                            index = (_BASES[tcp][rest[at + 1]] if not rest[at]
                                     else _OTHER[tcp]) + ans.rcode
                            opts = ans.opts  # None but for an explained negative (RFC 8914)
                            if opts is None:
                                opt = edns[1]
                            else:
                                opt = opts[edns[2]]
                                index += ans.ede_slot * _EDE_STEP
                            self._counts[index] += 1
                            tail = b"".join((ans.heads[_EDNS_VARIANT | variant], question,
                                             ans.body, opt))
                            if not tcp and (key == question or (
                                    key[-3] != question[-3] and key[:-4] == question[:-4])):
                                self.responses.put(rest, tail, index)
                            return tail
                        if not tcp:  # too large for this client's UDP size: as above
                            return self._splice(b"", variant,
                                                ((rest[0] << 8) | rest[1]) & _RD_CD, question,
                                                ans, (edns[0], 0, edns[2]), edns[0] + _ID,
                                                False)
        return None

    def slow(self, data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        """The response to ``data`` (a whole message) by the slow path: whatever
        :meth:`fast` does not answer."""
        try:
            return self._slow(data, tcp, peer)
        except Exception:  # a bug must cost one answer, never the server
            self.stats.dropped += 1
            return None

    def _negative(self, key: bytes) -> Answer | None:
        """NXDOMAIN or NODATA for a lower-cased question that missed the answers and
        the remembered negatives, or None to let the slow path decide (not a
        well-formed IN question, ANY, a transfer, outside the zone, or not synced yet).
        What it finds is remembered in ``zone.negatives``, so that the same miss costs
        one look-up next time (a typo repeated by every client's retries and search
        list). A name answered on first use gets its answer from ``Zone.first``,
        remembered in ``zone.first_use`` (changes to other names keep it)."""
        ans = self.zone.first(key)
        if ans is not None:
            return ans
        size = len(key)
        if size < 5 or key[size - 2 :] != b"\x00\x01":
            return None  # malformed, or a class other than IN
        if key[size - 4] == 0 and key[size - 3] in _SLOW_TYPES:
            return None
        walked = walk_name(key, 0)
        if walked is None or walked[1] != size - 4:
            return None
        name = key[: size - 4]
        zone = self.zone
        exists = zone.exists(name)
        if exists:
            ans = zone.nodata
        elif zone.synced and self._in_zone(name, walked[0], 0):
            ans = zone.nxdomain
        else:
            return None
        if ans is None:
            return None  # not before the first serial (never, once Cache is built)
        return self._remember(key, self._why(ans, key, name, exists))

    def _remember(self, key: bytes, ans: Answer) -> Answer:
        negatives = self.negatives
        if len(negatives) >= NEGATIVES_CAP:
            # Full (a flood of random names): start over, so that what is asked now
            # gets remembered rather than what was asked first.
            negatives.clear()
        negatives[key] = ans
        return ans

    # -- everything else ------------------------------------------------------------------

    def _slow(self, data: bytes, tcp: bool, peer: Peer | None = None, reserve: int = 0
              ) -> bytes | None:
        """``reserve``: bytes kept free of the size limit (for a TSIG record)."""
        size = len(data)
        if size < 12:
            self.stats.dropped += 1
            return None  # not even a header: nobody to answer
        flags = (data[2] << 8) | data[3]
        if flags & QR:
            self.stats.dropped += 1
            return None  # never answer a response (no reflection loops)
        qid = data[:2]
        request_bits = flags & (wire.RD | wire.CD)
        qdcount, ancount, nscount, arcount = COUNTS.unpack_from(data, 4)
        # The whole message is walked first, so that every answer to an EDNS query,
        # errors included, carries an OPT (RFC 6891 7).
        found, edns, well_formed, tsig_at = parse(data, qdcount, ancount + nscount,
                                                        arcount)
        question = found[0] if found is not None and qdcount == 1 else b""
        if flags & _OPCODE:
            # The question goes back too: a forwarder (CoreDNS) drops a reply without it.
            return self._error(qid, (flags & _OPCODE) | request_bits, wire.NOTIMP, question,
                               edns, tcp=tcp)
        if not question or not well_formed:
            return self._error(qid, request_bits, wire.FORMERR, question, edns, tcp=tcp)
        assert found is not None
        labels_at = found[1]
        if edns is not None and edns[1] != 0:
            return self._error(qid, request_bits, 0, question, edns, badvers=True, tcp=tcp)
        if tcp:
            limit = TCP_MAX
        elif edns is None:
            limit = _UDP_PLAIN
        else:
            limit = max(_UDP_PLAIN, min(edns[0], self.cap))
        limit -= reserve
        qtype, qclass = struct.unpack_from("!HH", question, len(question) - 4)
        udp_transfer = self.udp_transfer
        if qtype == wire.IXFR and udp_transfer is not None and not tcp \
                and qclass == wire.CLASS_IN:
            # Over UDP only when it fits the client's limit (RFC 1995 2), else TC (also
            # without the sender's address: access could not be checked).
            if peer is not None:
                answer = udp_transfer(data, peer(), limit)
                if answer is not None:
                    return answer or None  # DROP: nothing is sent
            return self._tc(qid, request_bits, question, edns)
        if tsig_at >= 0:
            return self._signed(data, tcp, peer, tsig_at, question, request_bits, edns)
        if qclass != wire.CLASS_IN or qtype in (wire.AXFR, wire.IXFR):
            return self._error(qid, request_bits, wire.REFUSED, question, edns, tcp=tcp)
        zone = self.zone
        key = question.lower()
        ans = self.answers.get(key) or zone.first(key)  # remembered, as on the fast path
        if ans is None:
            name = key[:-4]
            state = zone.lookup(name)
            if state == HAS_RECORDS:
                # RFC 8482: ANY gets one synthesized record, never the whole node.
                if qtype == wire.ANY:
                    ans = zone.any_answer
                else:
                    assert zone.nodata is not None
                    ans = self._why(zone.nodata, key, name, True)
            elif state == EMPTY:
                # An empty non-terminal: no records, not even for ANY.
                assert zone.nodata is not None
                ans = self._why(zone.nodata, key, name, True)
            elif self._in_zone(name, labels_at, 12):
                if not zone.synced:
                    return self._error(qid, request_bits, wire.SERVFAIL, question, edns,
                                       ede=NOT_SYNCED, tcp=tcp)
                assert zone.nxdomain is not None
                ans = self._why(zone.nxdomain, key, name, False)
            else:
                return self._error(qid, request_bits, wire.REFUSED, question, edns, tcp=tcp)
            assert ans is not None
        return self._splice(qid, _variant(data), request_bits, question, ans, edns, limit, tcp)

    def _signed(self, data: bytes, tcp: bool, peer: Peer | None, tsig_at: int,
                question: bytes, request_bits: int, edns: Edns | None) -> bytes | None:
        """A TSIG-signed query that is not a transfer: verified, answered as if
        unsigned within the room left for the TSIG record, the answer signed (RFC 8945
        5.3). Over UDP the sender is asked for first (the signer rate-limits sources);
        without one, TC (the client asks again over TCP)."""
        signer = self.signer
        if signer is None:
            return self._badkey(data, tsig_at, question, request_bits, edns, tcp)
        if not tcp and peer is None:
            return self._tc(data[:2], request_bits, question, edns)
        error, context = signer.verify(data, None if tcp or peer is None else peer())
        if error is not None:
            return error or None  # DROP: nothing is sent
        arcount = COUNTS.unpack_from(data, 4)[3] - 1
        unsigned = data[:10] + arcount.to_bytes(2, "big") + data[12:tsig_at]
        response = self._slow(unsigned, tcp, peer, signer.room)
        return signer.sign(response, context) if response else response

    def _tc(self, qid: bytes, request_bits: int, question: bytes, edns: Edns | None) -> bytes:
        """No records, TC set: the client asks again over TCP."""
        self.stats.truncated += 1
        head = HEADER.pack(QR | AA | TC | request_bits, 1, 0, 0, 1 if edns else 0)
        return qid + head + question + (self._opt[edns[2]] if edns else b"")

    def _badkey(self, data: bytes, tsig_at: int, question: bytes, request_bits: int,
                edns: Edns | None, tcp: bool) -> bytes:
        """NOTAUTH with an unsigned TSIG record carrying BADKEY (RFC 8945 5.2.1): we hold
        no key. The record names the query's key and algorithm, with no MAC; a TSIG
        record this cannot read gets FORMERR."""
        qid = data[:2]
        record = badkey_record(data, tsig_at)
        if record is None:
            return self._error(qid, request_bits, wire.FORMERR, question, edns, tcp=tcp)
        self._counts[_base(question, tcp) + _NOTAUTH] += 1
        opt = self._opt_rr(bool(edns[2])) if edns is not None else b""
        head = HEADER.pack(QR | request_bits | _NOTAUTH, 1 if question else 0, 0, 0,
                            1 + (1 if opt else 0))
        return qid + head + question + opt + record

    def _in_zone(self, name: bytes, labels_at: list[int], base: int) -> bool:
        """Whether ``name`` is the apex or below it; ``labels_at`` are its labels' offsets
        in a buffer where the name starts at ``base``."""
        apex = self.zone.apex_wire
        start = len(name) - len(apex)
        # The apex must start on a label boundary of the question, not inside a label.
        return start >= 0 and name.endswith(apex) and (
            start + base in labels_at or start == len(name) - 1)

    def _splice(self, qid: bytes, variant: int, request_bits: int, question: bytes,
                ans: Answer, edns: Edns | None, limit: int, tcp: bool) -> bytes:
        index = _base(question, tcp) + ans.rcode
        opt = b""
        if edns is not None:
            variant |= _EDNS_VARIANT
            opt = self._opt[edns[2]]
            # The EDE goes along when it fits; a response too large with it loses the
            # option, never records (§3.8).
            if (ans.opts is not None
                    and 12 + len(question) + len(ans.body) + len(ans.opts[0]) <= limit):
                opt = ans.opts[edns[2]]
                index += ans.ede_slot * _EDE_STEP
        if isinstance(ans, Explained):
            ans = ans.plain
        room = limit - 12 - len(question) - len(opt)
        # RFC 2181 9: the additional section goes first; TC only when the answer
        # records themselves do not fit. (Over TCP every stored answer fits: one that
        # cannot be sent whole was cut to what fits when it was built.)
        fitting: Answer | None = ans
        if ans.size > room:
            fitting = ans.without_additional()
            if fitting is not None and fitting.size > room:
                fitting = None
        self._counts[index] += 1
        if fitting is None:
            # Too big for this UDP client: TC set, with the whole records that fit.
            self.stats.truncated += 1
            form = self._cut(question, room)
            if form is not None:
                return qid + form[0][variant] + question + form[1] + opt
            head = HEADER.pack(QR | AA | TC | request_bits | ans.rcode, 1, 0, 0, 1 if opt else 0)
            return qid + head + question + opt
        return qid + fitting.heads[variant] + question + fitting.body + opt

    def _cut(self, question: bytes, room: int) -> Form | None:
        """The truncated form of the answer to ``question`` for ``room`` bytes, in the
        name's rotation of this second (truncate.Rotation); None when it has none
        (nothing fits). Each form is joined once per zone state and client size, then
        looked up."""
        key = question.lower()
        cuts = self.zone.cuts.get(key)
        if cuts is None:
            return None
        index = cuts.rotation.take()
        forms = self.zone.cut_forms
        memo = (key, index, room)
        if memo in forms:
            return forms[memo]
        form = cuts.form(index, room, 12 + len(question))
        forms.put(memo, form)  # bounded in bytes, as the other memories: then starts over
        return form

    def _error(self, qid: bytes, bits: int, rcode: int, question: bytes,
               edns: Edns | None = None, badvers: bool = False, ede: bytes = b"",
               tcp: bool = False) -> bytes:
        """A response with no records (rcode other than NOERROR/NXDOMAIN, or BADVERS);
        ``ede``: an EDE option for an EDNS query (wire.ede)."""
        index = _base(question, tcp) + (16 if badvers else rcode)
        opt = b""
        if edns is not None:
            opt = self._opt_rr(bool(edns[2]), _BADVERS_HIGH if badvers else 0)
            if ede:
                opt = opt[:-2] + ede
                index += _EDE_SLOT.get(int.from_bytes(ede[6:8]), 1) * _EDE_STEP
        self._counts[index] += 1
        head = HEADER.pack(QR | bits | rcode, 1 if question else 0, 0, 0, 1 if opt else 0)
        return qid + head + question + opt
