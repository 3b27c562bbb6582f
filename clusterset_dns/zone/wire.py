"""DNS wire format: the ready-made answer and the encoder that builds it; the fixed
parts of a message and the walkers that step over its names and records, for every
module that reads messages (the handler, transfers, the record decoder).

An :class:`Answer` is everything of a response after the question, plus the
header words that go with it. The handler answers a query by splicing the
query's ID and question bytes between them, so the client's spelling of the
name comes back unchanged. Names inside the answer are compressed against the
question (which sits at offset 12 in every response and has a fixed length
for a given key), so an owner name equal to the question is the two bytes
``C0 0C`` and takes the client's case for free.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from clusterset_dns.base.names import Labels, to_wire

# Types and classes this server deals in.
A, NS, SOA, TXT, AAAA, SRV, OPT, HINFO = 1, 2, 6, 16, 28, 33, 41, 13
IXFR, AXFR, ANY = 251, 252, 255
CLASS_IN = 1

NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5

# Header flag bits (the 16-bit word after the ID).
QR, AA, TC, RD, RA, CD = 0x8000, 0x0400, 0x0200, 0x0100, 0x0080, 0x0010

# The fixed parts of a message, shared by every module that reads or writes one.
U16 = struct.Struct("!H")  # a length, a count or a compression pointer (0xC000 | offset)
HEADER = struct.Struct("!HHHHH")  # after the ID: flags, qd, an, ns, ar
COUNTS = struct.Struct("!HHHH")  # qd, an, ns, ar
RR_HEAD = struct.Struct("!HHIH")  # after a record's owner: type, class, ttl, rdlength
SRV_FIXED = struct.Struct("!HHH")  # an SRV's rdata before its target: priority, weight, port


TCP_MAX = 65535  # a TCP message's two-byte length prefix (RFC 1035 4.2.2)
OPT_LEN = 11  # our OPT record: root owner, type, payload size, ext. rcode+flags, rdlength 0
MAX_COUNT = 0xFFFF  # a header count is 16 bits
MAX_NAME = 255  # bytes of a name in wire form (RFC 1035 2.3.4)
MAX_QUESTION = MAX_NAME + 4  # the longest name, type and class


def walk_name(data: bytes, offset: int, pointers: bool = False) -> tuple[list[int], int] | None:
    """Walks the name at ``offset``: (offsets of its labels, offset just after it), or
    None when it is malformed (runs off the end, a label over 63 bytes, a name over 255
    bytes) or compressed while ``pointers`` is False. A pointer ends the name and is not
    followed: the callers only need to step over it."""
    size = len(data)
    start = offset
    starts: list[int] = []
    while True:
        if offset >= size:
            return None
        length = data[offset]
        if length == 0:
            offset += 1
            break
        if length & 0xC0 == 0xC0 and pointers:
            offset += 2
            break
        if length > 63:
            return None
        starts.append(offset)
        offset += length + 1
    if offset - start > MAX_NAME or offset > size:
        return None
    return starts, offset


def skip_name(data: bytes, offset: int) -> int:
    """Where the bytes after the name at ``offset`` start (labels ended by the root or a
    pointer), without reading it. For names this server encoded: nothing is checked
    but the end of ``data`` (IndexError)."""
    while True:
        length = data[offset]
        if length >= 0xC0:
            return offset + 2
        offset += length + 1
        if length == 0:
            return offset


def read_name(data: bytes, offset: int) -> bytes:
    """The uncompressed, lower-case wire form of the name at ``offset``, its pointers
    followed. For names this server encoded (IndexError past the end)."""
    out = bytearray()
    for _ in range(128):  # a pointer loop cannot come from the encoder; bounded anyway
        length = data[offset]
        if length == 0:
            out.append(0)
            return bytes(out).lower()
        if length >= 0xC0:
            offset = U16.unpack_from(data, offset)[0] & 0x3FFF
            continue
        out += data[offset : offset + length + 1]
        offset += length + 1
    raise ValueError("compression loop")


def skip_rr(data: bytes, offset: int) -> tuple[int, int, int, int, bool] | None:
    """(type, class, ttl, end offset, owner is root) of the record at ``offset``; None
    when it does not fit in ``data`` or its owner is malformed."""
    size = len(data)
    walked = walk_name(data, offset, pointers=True)
    if walked is None:
        return None
    after = walked[1]
    if after + 10 > size:
        return None
    rtype, rclass, ttl, rdlength = RR_HEAD.unpack_from(data, after)
    end = after + 10 + rdlength
    if end > size:
        return None
    return rtype, rclass, ttl, end, after - offset == 1


class Answer:
    """A ready-made response, less its ID and question.

    ``heads[i]`` is the flags word and the four counts; ``i`` is built from
    the query: bit 0 = RD, bit 1 = CD, bit 2 = the query had EDNS (one more
    additional record, the OPT). ``size`` is ``len(body)``: the response is
    exactly ``len(query) + size`` bytes long for a query whose only extra
    record is an option-less OPT or nothing at all, so the size check costs
    one addition.

    Every stored answer fits one TCP message, OPT included (see :func:`sized`).
    """

    __slots__ = ("body", "heads", "rcode", "size")
    # Our OPT records with an EDE option (see Explained); None: the plain OPT.
    opts: tuple[bytes, bytes] | None = None
    ede_slot = 0  # no EDE (stats.EDE_CODES)
    # Where the additional section starts in ``body``; -1: there is none. Only
    # WithAdditional answers (SRV, NS) have one, so the millions of address answers
    # do not pay a slot for it.
    glue_at = -1

    def __init__(self, heads: tuple[bytes, ...], body: bytes, rcode: int) -> None:
        self.heads = heads
        self.body = body
        self.size = len(body)
        self.rcode = rcode

    @property
    def cut(self) -> bool:
        """Whether records of the answer section were left out (TC is set)."""
        return bool(self.heads[0][0] << 8 & TC)

    def without_additional(self) -> Answer | None:
        """The same answer less its additional section (RFC 2181 9: dropped first, no
        TC); None when it has none. Made when asked, on the slow path only: keeping it
        would double the memory of every SRV answer."""
        return None


# Extended DNS Errors (RFC 8914): the EDNS option and the INFO-CODEs this server uses.
EDE_OPTION = 15
EDE_OTHER, EDE_NOT_READY, EDE_INVALID_DATA = 0, 14, 24
EDE_TEXT_MAX = 200  # bytes of EXTRA-TEXT: an explained negative answer stays small


def ede(code: int, text: str) -> bytes:
    """The OPT record's RDATA for one EDE option (RDLENGTH first): what follows the
    nine bytes of the OPT record that depend on the server and the query. EXTRA-TEXT
    is UTF-8 without a terminating NUL, cut at EDE_TEXT_MAX bytes on a character
    boundary (RFC 8914 2)."""
    raw = text.encode("utf-8")
    if len(raw) > EDE_TEXT_MAX:
        raw = raw[: EDE_TEXT_MAX - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."
    option = struct.pack("!HHH", EDE_OPTION, 2 + len(raw), code) + raw
    return U16.pack(len(option)) + option


class Explained(Answer):
    """A negative answer (or SERVFAIL) carrying an EDE to EDNS queries. ``opts`` are
    our whole OPT record with the option, for the DO bit clear and set; ``size``
    counts the option too, so that the fast path's one-addition size check stays
    exact for EDNS queries (and errs small for the others, which get no OPT).
    Made by the handler on a first miss and remembered like the plain answer."""

    __slots__ = ("ede_slot", "opts", "plain")

    def __init__(self, plain: Answer, opts: tuple[bytes, bytes], ede_slot: int) -> None:
        super().__init__(plain.heads, plain.body, plain.rcode)
        self.size += len(opts[0]) - OPT_LEN
        self.opts = opts
        self.plain = plain  # the same answer without the option (when it does not fit)
        self.ede_slot = ede_slot  # where its INFO-CODE counts (stats.EDE_CODES)


class WithAdditional(Answer):
    __slots__ = ("glue_at",)

    def __init__(self, heads: tuple[bytes, ...], body: bytes, rcode: int, glue_at: int) -> None:
        super().__init__(heads, body, rcode)
        self.glue_at = glue_at

    def without_additional(self) -> Answer:
        _, _, an, ns, _ = HEADER.unpack(self.heads[0])
        return Answer(heads(self.rcode, an, ns, 0), self.body[: self.glue_at], self.rcode)


_heads_cache: dict[tuple[int, int, int, int], tuple[bytes, ...]] = {}


def heads(rcode: int, an: int, ns: int, ar: int, flags: int = QR | AA, shared: bool = True
          ) -> tuple[bytes, ...]:
    """The eight header variants for one answer shape, shared between answers (not
    ``shared``: made anew, never kept here)."""
    key = (flags | rcode, an, ns, ar)
    found = _heads_cache.get(key) if shared else None
    if found is None:
        found = tuple(
            HEADER.pack(
                flags | rcode | (RD if i & 1 else 0) | (CD if i & 2 else 0),
                1,
                an,
                ns,
                ar + (1 if i & 4 else 0),
            )
            for i in range(8)
        )
        if shared:
            _heads_cache[key] = found
    return found


def sized(question_len: int, rcode: int, body: bytes, counts: tuple[int, int, int],
          additional_at: int, answer_ends: Sequence[int]) -> Answer:
    """The answer to store for ``body`` after a question of ``question_len`` bytes: the
    largest form of it that one TCP message holds with an OPT (RFC 2181 9): whole;
    else without its additional section; else cut to the answer records that fit,
    with TC set. No header count can overflow.

    ``counts`` = (answer, authority, additional) records; the additional section
    starts at ``additional_at``; ``answer_ends`` says where each answer record
    ends (read only when the answer section must be cut)."""
    an, ns, ar = counts
    room = TCP_MAX - 12 - question_len - OPT_LEN  # body bytes one TCP message holds
    if len(body) <= room and max(counts) <= MAX_COUNT:
        if ar:
            return WithAdditional(heads(rcode, an, ns, ar), body, rcode, additional_at)
        return Answer(heads(rcode, an, ns, ar), body, rcode)
    if ar and additional_at <= room and max(an, ns) <= MAX_COUNT:
        return Answer(heads(rcode, an, ns, 0), body[:additional_at], rcode)
    # Not even the required records fit: as many answer records as one message holds.
    kept = 0
    while kept < len(answer_ends) and kept < MAX_COUNT and answer_ends[kept] <= room:
        kept += 1
    cut_at = answer_ends[kept - 1] if kept else 0
    return Answer(heads(rcode, kept, 0, 0, QR | AA | TC), body[:cut_at], rcode)


_POINTER_MAX = 0x3FFF  # a compression pointer's 14-bit offset
_ADDRESS_TYPE = {4: A, 16: AAAA}


def srv_answer(question: Labels, ttl: int,
               targets: Sequence[tuple[bytes, int, int, int]],
               glue: Sequence[tuple[bytes, Sequence[bytes]]]) -> Answer | None:
    """The SRV answer the :class:`Encoder` writes for ``question`` (``targets``: (the
    target's wire form, port, priority, weight), in order; ``glue``: (target's wire form, packed
    addresses) in order), joined in one pass: start-up builds hundreds of thousands of
    these records.

    Only when every record lies within reach of a compression pointer, so that every
    target is remembered where it is first written and each glue owner is a pointer
    to it; None otherwise (the caller uses the Encoder, which handles the rest).
    Names are keyed by their wire form (one per name, its hash cached by Python)."""
    question_wire = to_wire(question)
    question_len = len(question_wire) + 4
    base = 12 + question_len  # where the body starts in the response
    ptrs: dict[bytes, int] = {}
    offset = 0
    for label in question:  # every suffix of the question can be pointed at
        ptrs[question_wire[offset:]] = 12 + offset
        offset += 1 + len(label)
    # Every SRV record is owned by the question (C0 0C); its fixed part depends only on
    # the target's length, the port, priority and weight: built once per combination.
    fixed: dict[tuple[int, int, int, int], bytes] = {}
    parts: list[bytes] = []
    ends: list[int] = []
    position = 0
    for target_wire, port, priority, weight in targets:
        rdlength = 6 + len(target_wire)
        head = fixed.get((rdlength, port, priority, weight))
        if head is None:
            head = fixed[(rdlength, port, priority, weight)] = (
                b"\xc0\x0c" + RR_HEAD.pack(SRV, CLASS_IN, ttl, rdlength)
                + SRV_FIXED.pack(priority, weight, port))
        parts.append(head)
        parts.append(target_wire)
        at = base + position + 18  # 2 (owner) + 10 (record head) + 6 (SRV fields)
        if at >= _POINTER_MAX:
            return None
        if target_wire not in ptrs:
            ptrs[target_wire] = at
        position += 12 + rdlength
        ends.append(position)
    additional_at = position
    count = 0
    address_heads = {size: RR_HEAD.pack(rtype, CLASS_IN, ttl, size)
                     for size, rtype in _ADDRESS_TYPE.items()}
    for target_wire, addresses in glue:
        owner = U16.pack(0xC000 | ptrs[target_wire])
        for packed in addresses:
            parts.append(owner + address_heads[len(packed)] + packed)
            count += 1
    body = b"".join(parts)
    return sized(question_len, NOERROR, body, (len(targets), 0, count), additional_at, ends)


class Encoder:
    """Writes records after a question of known labels, with name compression."""

    __slots__ = ("_additional_at", "_base", "_buf", "_ends", "_ptrs", "_question_len",
                 "counts")

    def __init__(self, question: Labels | None) -> None:
        """``question=None``: a body that follows questions of any length (negative
        answers), so no name in it may be compressed."""
        self._buf = bytearray()
        self._ptrs: dict[Labels, int] = {}
        self._base = -1
        self._ends: list[int] = []  # where each answer record ends (sections come in order)
        self._additional_at = -1
        self._question_len = 0 if question is None else len(to_wire(question)) + 4
        if question is not None:
            offset = 12
            for i, label in enumerate(question):
                self._ptrs[question[i:]] = offset
                offset += 1 + len(label)
            self._base = offset + 1 + 4  # root label, type, class
        self.counts = [0, 0, 0]

    def name(self, labels: Labels, compress: bool = True) -> None:
        buf = self._buf
        for i in range(len(labels)):
            suffix = labels[i:]
            pointer = self._ptrs.get(suffix)
            if pointer is not None and compress:
                buf += U16.pack(0xC000 | pointer)
                return
            offset = self._base + len(buf)
            if pointer is None and self._base >= 0 and offset < 0x3FFF:
                self._ptrs[suffix] = offset
            buf.append(len(labels[i]))
            buf += labels[i]
        buf.append(0)

    def _rr(self, section: int, owner: Labels, rtype: int, ttl: int, rdlength: int = 0) -> int:
        """Writes the record head; returns the offset of the rdlength (to patch when
        it was not known in advance). Sections are written in order."""
        if self.counts[0] > len(self._ends):
            self._ends.append(len(self._buf))  # the previous answer record ends here
        if section == 2 and self._additional_at < 0:
            self._additional_at = len(self._buf)
        self.name(owner)
        at = len(self._buf)
        self._buf += RR_HEAD.pack(rtype, CLASS_IN, ttl, rdlength)
        self.counts[section] += 1
        return at + 8

    def _end(self, at: int) -> None:
        self._buf[at : at + 2] = U16.pack(len(self._buf) - at - 2)

    def address(self, section: int, owner: Labels, ttl: int, packed: bytes) -> None:
        self._rr(section, owner, A if len(packed) == 4 else AAAA, ttl, len(packed))
        self._buf += packed

    def srv(self, section: int, owner: Labels, ttl: int, priority: int, weight: int,
            port: int, target: Labels, target_wire: bytes) -> None:
        """``target_wire`` is ``to_wire(target)``, computed once by the caller."""
        # RFC 2782: the target is never compressed, so it is copied whole. Only the full
        # name is remembered for compression: the glue records after it are owned by it.
        self._rr(section, owner, SRV, ttl, 6 + len(target_wire))
        self._buf += SRV_FIXED.pack(priority, weight, port)
        offset = self._base + len(self._buf)
        if target not in self._ptrs and self._base >= 0 and offset < 0x3FFF:
            self._ptrs[target] = offset
        self._buf += target_wire

    def ns(self, section: int, owner: Labels, ttl: int, target: Labels) -> None:
        at = self._rr(section, owner, NS, ttl)
        self.name(target)
        self._end(at)

    def soa(self, section: int, owner: Labels, ttl: int, mname: Labels, rname: Labels,
            serial: int, minimum: int) -> None:
        at = self._rr(section, owner, SOA, ttl)
        self.name(mname)
        self.name(rname)
        self._buf += struct.pack("!IIIII", serial, 7200, 1800, 86400, minimum)
        self._end(at)

    def text(self, section: int, owner: Labels, rtype: int, ttl: int,
             strings: Iterable[bytes]) -> None:
        """TXT, or HINFO (two character-strings)."""
        at = self._rr(section, owner, rtype, ttl)
        for string in strings:
            self._buf.append(len(string))
            self._buf += string
        self._end(at)

    def finish(self, rcode: int = NOERROR) -> Answer:
        body = bytes(self._buf)
        ends = self._ends
        if self.counts[0] > len(ends):
            ends.append(len(body))
        additional_at = self._additional_at if self._additional_at >= 0 else len(body)
        an, ns, ar = self.counts
        # A body that follows any question (negative answers) is sized for the longest.
        return sized(self._question_len or MAX_QUESTION, rcode, body, (an, ns, ar),
                     additional_at, ends)


def question_key(labels: Labels, qtype: int) -> bytes:
    """The dictionary key of a question: its lower-case wire form, type and class IN."""
    return to_wire(labels) + struct.pack("!HH", qtype, CLASS_IN)
