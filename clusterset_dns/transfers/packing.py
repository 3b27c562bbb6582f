"""Transfer messages packed (RFC 5936 2.2): records into messages of at most 64 KiB,
names compressed; and the error answers without records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from clusterset_dns.zone import rrs, wire

_QR = 0x8000
CHUNK = 32  # records between two looks at the clock (a transfer's step, xfr.py)


_COMPRESSED_RDATA = (wire.NS, wire.SOA)  # RFC 3597 4: the types whose rdata names may be


class MessageWriter:
    """Packs records into messages of at most ``limit`` bytes, names compressed.

    A zone goes in whole RRsets (:meth:`add_rrsets`): the stored answer's
    answer section is copied, its owner pointers (``C0 0C``, the question's name)
    turned into pointers to the owner written once in this message, so an RRset
    costs a few bytes operations whatever its size. Other records come decoded
    (:mod:`rrs`: names uncompressed) and are packed with a dictionary of name
    suffixes per message. A record that does not fit starts the next message
    (RFC 5936 2.2: a transfer is a sequence of messages); so does an RRset once
    the message is past the 16 KiB that compression pointers reach, which keeps
    every owner compressed."""

    def __init__(self, head: bytes, question: bytes, limit: int) -> None:
        self.head = head  # id and flags
        self.question = question  # in the first message only
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.count = 0
        self.table: dict[bytes, int] = {}
        self.first = True
        self._begin()

    def _begin(self) -> None:
        question = self.question if self.first else b""
        self.parts = [question]
        self.size = 12 + len(question)
        self.count = 0
        self.table = {}

    def _name(self, name: bytes, at: int) -> bytes:
        table = self.table
        i = 0
        while name[i]:
            suffix = name[i:]
            pointer = table.get(suffix)
            if pointer is not None:
                return name[:i] + (0xC000 | pointer).to_bytes(2, "big")
            if at + i < 0x4000:
                table[suffix] = at + i
            i += name[i] + 1
        return name

    def _encode(self, record: rrs.Record) -> bytes:
        owner, rtype, ttl, rdata = record
        at = self.size
        name = self._name(owner, at)
        if rtype in _COMPRESSED_RDATA:
            start = at + len(name) + 10
            if rtype == wire.NS:
                rdata = self._name(rdata, start)
            else:
                middle = wire.skip_name(rdata, 0)  # rrs' names: uncompressed
                after = wire.skip_name(rdata, middle)
                mname, rname = rdata[:middle], rdata[middle:after]
                first = self._name(mname, start)
                second = self._name(rname, start + len(first))
                rdata = first + second + rdata[after:]
        return name + wire.RR_HEAD.pack(rtype, wire.CLASS_IN, ttl, len(rdata)) + rdata

    def add(self, record: rrs.Record) -> bytes | None:
        """Adds ``record``; returns the finished previous message when it had to start
        a new one, else None."""
        data = self._encode(record)
        if self.size + len(data) <= self.limit or not self.count:
            self.parts.append(data)
            self.size += len(data)
            self.count += 1
            return None
        done = self.finish()
        self._begin()
        data = self._encode(record)
        self.parts.append(data)
        self.size += len(data)
        self.count += 1
        return done

    def add_rrsets(self, pairs: Iterable[tuple[bytes, wire.Answer]]) -> Iterator[bytes]:
        """Adds the answer-section records of every (question key, stored answer) of
        ``pairs`` (the SOA's are left out); yields each message this finishes, and b""
        every CHUNK answers (the caller may pause there)."""
        table: dict[bytes, int] = self.table
        parts = self.parts
        limit, reach, owner_pointer = self.limit, _REACH, _OWNER
        for n, (key, answer) in enumerate(pairs, 1):
            if not n % CHUNK:
                yield b""
            rtype = key[-4] << 8 | key[-3]
            if rtype not in _COPYABLE:
                if rtype != wire.SOA:
                    yield from self._add_decoded(key, answer)
                    table, parts = self.table, self.parts
                continue
            heads = answer.heads[0]
            section = answer.body
            glue = answer.glue_at
            if glue >= 0:
                section = section[:glue]
            elif heads[8] or heads[9]:
                section = b""  # an additional section not marked: decode it
            count = heads[4] << 8 | heads[5]
            # The owners: each record's is one C0 0C (the encoder writes the question's
            # name so), so as many as records means none stands anywhere else (an
            # address or a TTL holding those two bytes would make one more).
            if (heads[6] or heads[7] or section[:2] != owner_pointer
                    or section.count(owner_pointer) != count):
                yield from self._add_decoded(key, answer)
                table, parts = self.table, self.parts
                continue
            at = self.size
            if at >= reach and self.count:  # past what a pointer reaches
                yield self.finish()
                self._begin()
                table, parts, at = self.table, self.parts, self.size
            owner = key[:-4]
            data = self._rrset(table, owner, section, at)
            if at + len(data) > limit:
                if self.count:
                    yield self.finish()
                    self._begin()
                    table, parts, at = self.table, self.parts, self.size
                    data = self._rrset(table, owner, section, at)
                if at + len(data) > limit:  # alone too large (the TSIG room)
                    _forget(table, owner, at)
                    yield from self._add_decoded(key, answer)
                    table, parts = self.table, self.parts
                    continue
            parts.append(data)
            self.size = at + len(data)
            self.count += count

    def _add_decoded(self, key: bytes, answer: wire.Answer) -> Iterator[bytes]:
        for record in rrs.answer_records(key, answer):
            done = self.add(record)
            if done is not None:
                yield done

    @staticmethod
    def _rrset(table: dict[bytes, int], owner: bytes, section: bytes, at: int) -> bytes:
        """``section`` (written at ``at``) with its owners pointing at ``owner``, which
        is written first unless the message has it already (its parent then
        compressed when the message has that)."""
        pointer = table.get(owner)
        if pointer is not None:
            return section.replace(_OWNER, _POINTERS[pointer])
        table[owner] = at
        label = owner[0] + 1
        parent = owner[label:]
        parent_at = table.get(parent)
        if parent_at is not None:
            name = owner[:label] + _POINTERS[parent_at]
        else:
            name = owner
            if len(parent) > 1:
                table[parent] = at + label
        return name + section.replace(_OWNER, _POINTERS[at])[2:]

    def finish(self) -> bytes:
        counts = wire.COUNTS.pack(1 if self.first else 0, self.count, 0, 0)
        self.first = False
        return self.head + counts + b"".join(self.parts)


_OWNER = b"\xc0\x0c"  # a pointer to the question's name, where stored answers own records
# Where an RRset starts a new message: its owner (at most 255 bytes) must start within
# the 14 bits of a compression pointer, for every record of it to point there.
_REACH = 0x4000 - 256
# Types whose rdata holds no compressed name (the encoder never compresses an SRV
# target, RFC 2782), so the only pointers of their records are the owners.
_COPYABLE = frozenset({wire.A, wire.AAAA, wire.SRV, wire.TXT, wire.HINFO})
_POINTERS = [(0xC000 | at).to_bytes(2, "big") for at in range(0x4000)]


def _forget(table: dict[bytes, int], owner: bytes, at: int) -> None:
    """Undoes what _rrset noted of an RRset that was not written after all: its owner (and
    its parent) at ``at``, where the records decoded instead start; a name pointing
    there would point at itself."""
    for name in (owner, owner[owner[0] + 1 :]):
        if table.get(name, -1) >= at:
            del table[name]


def with_serial(soa: rrs.Record, serial: int) -> rrs.Record:
    """The SOA record with another serial (the first of its five numbers)."""
    rdata = soa.rdata
    at = len(rdata) - 20
    return soa._replace(rdata=rdata[:at] + serial.to_bytes(4, "big") + rdata[at + 4 :])


def error(message: bytes, rcode: int, tsig: bytes = b"") -> bytes:
    """A response without records (but ``tsig``, an error TSIG record): the query's
    header bits, its question, ``rcode``."""
    walked = wire.walk_name(message, 12) if len(message) >= 12 else None
    question = message[12 : walked[1] + 4] if walked is not None else b""
    if len(question) < 5:
        question = b""
    flags = _QR | (((message[2] << 8) | message[3]) & 0x0110) | rcode  # RD, CD
    return (message[:2] + wire.HEADER.pack(flags, 1 if question else 0, 0, 0, 1 if tsig else 0)
            + question + tsig)
