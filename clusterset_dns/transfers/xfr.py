"""AXFR (RFC 5936) and IXFR (RFC 1995), with optional TSIG (RFC 8945): over TCP,
and an IXFR over UDP when its whole answer fits one message.

The TCP transport hands each complete message to :meth:`Transfers.start`, which
returns None at once for anything but a transfer (the handler answers that) or a
coroutine that sends the transfer's messages through the connection; an IXFR over
UDP runs the same coroutine through :meth:`Transfers.udp` into one message (or TC).
The snapshot of the zone is taken in the coroutine's first step, synchronously, so
no update mixes into it; between messages the coroutine waits for the client to
read (flow control) and yields to the loop, so a transfer never holds up answers to
others. Messages are packed here (:class:`MessageWriter`: names compressed, 64 KiB
at most); dnspython reads the query and computes the TSIG MACs.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any, Protocol

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Network
from clusterset_dns.transfers import zonedata
from clusterset_dns.transfers.journal import Diff, Journal
from clusterset_dns.transfers.zonedata import Snapshot
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import Zone

log = logging.getLogger(__name__)

MAX_MESSAGE = 65535
TSIG_ROOM = 512  # kept free in every signed message for the TSIG record
FUDGE = 300
MAX_TRANSFERS = 16  # concurrent transfers (with --workers N, 1/N a process); more: SERVFAIL
# Slow readers (each reading just enough never to be idle) must not hold every slot:
# one client address runs at most a quarter of them, and the last slot is only for an
# address running none; each transfer lasts at most --xfr-timeout in all.
PER_CLIENT_SHARE = 4
TIMEOUT = 300.0  # --xfr-timeout's default: 16 AXFRs of 200 MB at once take about 100 s
# A transfer's turn on the loop (see Transfers._send_zone): measured, 16 concurrent
# AXFRs of a 6 MB zone then add about a turn to other answers' wait.
STEP_SECONDS = 0.0005
CHUNK = 32  # records between two looks at the clock
# UDP requests that need dnspython (IXFR, TSIG): per source and in all, a second.
UDP_RATE, UDP_BURST = 10.0, 20.0
UDP_TOTAL_RATE, UDP_TOTAL_BURST = 100.0, 200.0
MAX_SOURCES = 4096
MIN_RECORD = 12  # the smallest record a transfer sends: a pointer, the fixed part, no rdata
Item = rrs.Record | Snapshot  # what a transfer sends: a record, or a zone's records
_QTYPES = {wire.AXFR: "axfr", wire.IXFR: "ixfr"}
_QR, _AA, _TC = 0x8000, 0x0400, 0x0200


class Sender(Protocol):
    async def send(self, message: bytes) -> None:
        """Writes one message; returns once the client has read enough to go on."""


class Counts:
    """Transfers by (type, result), kept in stats.Stats.transfers so that a worker's
    reach the parent's metrics with its other counters."""

    def __init__(self, into: dict[tuple[str, str], int]) -> None:
        self.by = into

    def add(self, qtype: str, result: str) -> None:
        self.by[qtype, result] = self.by.get((qtype, result), 0) + 1


def transfer_qtype(message: bytes) -> int:
    """AXFR or IXFR when ``message`` is a query with one such question, else 0."""
    if len(message) < 17 or message[2] & 0xF8 or message[4:6] != b"\x00\x01":
        return 0
    walked = wire.walk_name(message, 12)
    if walked is None or walked[1] + 4 > len(message):
        return 0
    qtype = (message[walked[1]] << 8) | message[walked[1] + 1]
    return qtype if qtype in _QTYPES else 0


def _name(owner: bytes) -> dns.name.Name:
    return dns.name.from_wire(owner, 0)[0]


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
                mname, after = _split_name(rdata, 0)
                rname, after = _split_name(rdata, after)
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

    def add_rrsets(self, keys: list[bytes], answers: list[wire.Answer]) -> Iterator[bytes]:
        """Adds the answer-section records of every stored answer (``answers[i]``
        answers question ``keys[i]``; the SOA's are left out); yields each message this
        finishes, and b"" every CHUNK answers (the caller may pause there)."""
        table: dict[bytes, int] = self.table
        parts = self.parts
        limit, reach, owner_pointer = self.limit, _REACH, _OWNER
        for n, (key, answer) in enumerate(zip(keys, answers, strict=True), 1):
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




def _split_name(data: bytes, at: int) -> tuple[bytes, int]:
    """An uncompressed name at ``at`` and the offset after it."""
    start = at
    while data[at]:
        at += data[at] + 1
    return data[start : at + 1], at + 1


def with_serial(soa: rrs.Record, serial: int) -> rrs.Record:
    """The SOA record with another serial (the first of its five numbers)."""
    rdata = soa.rdata
    at = len(rdata) - 20
    return soa._replace(rdata=rdata[:at] + serial.to_bytes(4, "big") + rdata[at + 4 :])


class RateLimit:
    """Token buckets for UDP requests that need dnspython (IXFR, TSIG): one per source
    address and one for all. A source's bucket starts full; the table of sources is
    bounded (full: it starts over, and the total still holds)."""

    def __init__(self, rate: float = UDP_RATE, burst: float = UDP_BURST,
                 total_rate: float = UDP_TOTAL_RATE, total_burst: float = UDP_TOTAL_BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self.total_rate, self.total_burst = total_rate, total_burst
        self.clock = clock
        self.sources: dict[str, tuple[float, float]] = {}  # source -> (tokens, when)
        self.total = (total_burst, clock())

    def allow(self, source: str) -> bool:
        now = self.clock()
        tokens, when = self.total
        total = min(self.total_burst, tokens + (now - when) * self.total_rate)
        found = self.sources.get(source)
        mine = self.burst if found is None else min(
            self.burst, found[0] + (now - found[1]) * self.rate)
        if total < 1 or mine < 1:
            self.total = (total, now)
            if found is not None:
                self.sources[source] = (mine, now)
            return False
        if found is None and len(self.sources) >= MAX_SOURCES:
            self.sources.clear()
        self.total = (total - 1, now)
        self.sources[source] = (mine - 1, now)
        return True


class Turns:
    """At most one transfer step per iteration of the event loop, in FIFO order.

    A step that finds the loop's turn taken waits; the next iteration (after the loop
    has polled its sockets, so queries got their turn) hands it to the first waiter.
    A plain lock would not do: a task that slept between steps finds it free and
    runs in the same iteration as the others."""

    def __init__(self) -> None:
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.taken = False

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        if not self.taken and not self.waiters:
            self.taken = True
            loop.call_soon(self._next)
            return
        waiter = loop.create_future()
        self.waiters.append(waiter)
        await waiter  # _next has marked the turn taken for us

    def _next(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():  # (a cancelled transfer's)
                waiter.set_result(None)
                asyncio.get_running_loop().call_soon(self._next)
                return
        self.taken = False


class Transfers:
    def __init__(self, zone: Zone, journal: Journal, allow: tuple[Network, ...],
                 key: dns.tsig.Key | None, counts: Counts,
                 max_transfers: int = MAX_TRANSFERS, limit: RateLimit | None = None,
                 timeout: float = TIMEOUT, clock: Clock = SYSTEM) -> None:
        """``timeout``: seconds a transfer may last in all (--xfr-timeout); then it
        raises TimeoutError, and the transport closes the connection."""
        self.zone = zone
        self.journal = journal
        self.allow = allow
        self.key = key
        self.keyring = {key.name: key} if key is not None else None
        self.counts = counts
        self.max_transfers = max_transfers
        self.per_client = max(1, max_transfers // PER_CLIENT_SHARE)
        self.active = 0
        self.running: dict[str, int] = {}  # client address -> its transfers running
        self.timeout = timeout
        self.clock = clock
        self.apex = _name(zone.apex_wire)
        self.limit = limit if limit is not None else RateLimit()
        # Bytes a TSIG record of our key takes in an answer (handler.Signer).
        self.room = _tsig_size(key) if key is not None else 0
        self.turns = Turns()  # see _send_zone
        self._shared: Snapshot | None = None  # the snapshot running transfers share
        self._sharing = 0

    def start(self, message: bytes, peer: str, sender: Sender
              ) -> Coroutine[Any, Any, None] | None:
        qtype = transfer_qtype(message)
        if not qtype:
            return None
        return self._run(message, qtype, peer, sender)

    def allowed(self, peer: str) -> bool:
        address = _address(peer)
        return address is not None and any(address in network for network in self.allow)

    def _slot(self, mine: int) -> bool:
        """Whether a client running ``mine`` transfers may start one more."""
        active, most = self.active, self.max_transfers
        return mine < self.per_client and (active < most - 1 or (active < most and not mine))

    # -- checks shared by TCP and UDP ------------------------------------------------------

    def _verified(self, message: bytes, kind: str, peer: str
                  ) -> dns.message.Message | bytes:
        """The query parsed, its TSIG verified; or the error answer to send."""
        error = self._tsig_error(message)
        if error == dns.rcode.FORMERR:
            self.counts.add(kind, "formerr")
            log.info("%s from %s rejected: TSIG MAC size out of bounds", kind.upper(), peer)
            return _error(message, dns.rcode.FORMERR)
        if error == BADKEY:
            self.counts.add(kind, "notauth")
            log.info("%s from %s rejected: TSIG: our key name with another algorithm",
                     kind.upper(), peer)
            return _error(message, dns.rcode.NOTAUTH, _tsig_error_record(message, BADKEY))
        try:
            return dns.message.from_wire(message, keyring=self.keyring)
        except _TSIG_FAILURES as exc:
            self.counts.add(kind, "notauth")
            log.info("%s from %s rejected: TSIG: %s", kind.upper(), peer,
                     exc or type(exc).__name__)
            code = _TSIG_ERRORS.get(type(exc))
            return _error(message, dns.rcode.NOTAUTH,
                          _tsig_error_record(message, code) if code else b"")
        except dns.exception.DNSException:
            self.counts.add(kind, "formerr")
            return _error(message, dns.rcode.FORMERR)

    def _tsig_error(self, message: bytes) -> int | None:
        """RFC 8945 5.2.1 and 5.2.2.1, checked before the MAC (dnspython takes a known
        key name with another algorithm, or a MAC of the wrong size, for a bad MAC):
        BADKEY, FORMERR, or None when neither applies."""
        key = self.key
        if key is None:
            return None
        try:
            query = dns.message.from_wire(message, keyring=False)  # read, not verified
        except dns.exception.DNSException:
            return None
        if query.tsig is None or query.tsig.name != key.name:
            return None
        rdata = query.tsig[0]
        if rdata.algorithm != key.algorithm:
            return BADKEY
        digest = _DIGEST_SIZE.get(key.algorithm, 0)
        if digest and not max(10, digest // 2) <= len(rdata.mac) <= digest:
            return dns.rcode.FORMERR
        return None

    def _check(self, message: bytes, qtype: int, peer: str) -> dns.message.Message | bytes:
        """The transfer query, allowed and verified; or the error answer to send."""
        kind = _QTYPES[qtype]
        if not self.allowed(peer):
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not in --allow-transfer", kind.upper(), peer)
            return _error(message, dns.rcode.REFUSED)
        query = self._verified(message, kind, peer)
        if isinstance(query, bytes):
            return query
        if self.key is not None and not query.had_tsig:
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not signed with the TSIG key", kind.upper(), peer)
            return _error(message, dns.rcode.REFUSED)
        qname = query.question[0].name
        if qname != self.apex or query.question[0].rdclass != dns.rdataclass.IN:
            self.counts.add(kind, "notauth")
            return _error(message, dns.rcode.NOTAUTH)
        if qtype == wire.IXFR and _client_serial(query) is None:
            self.counts.add(kind, "formerr")
            return _error(message, dns.rcode.FORMERR)
        return query

    # -- TSIG-signed queries that are not transfers (handler.Signer) -----------------------

    def verify(self, message: bytes, peer: str | None) -> tuple[bytes | None, Any]:
        """(None, the context for :meth:`sign`) for a query signed with our key, else
        (the error answer, None); (b"", None): drop it (a UDP source over its rate).
        ``peer`` None: over TCP, not rate-limited."""
        if peer is not None and not self.limit.allow(peer):
            self.counts.add("signed", "limited")
            return b"", None
        query = self._verified(message, "signed", peer or "TCP")
        if isinstance(query, bytes):
            return query, None
        if not query.had_tsig:  # no key of ours: _verified raised already
            return _error(message, dns.rcode.NOTAUTH), None
        self.counts.add("signed", "signed")
        return None, query

    def sign(self, response: bytes, context: Any) -> bytes:
        """RFC 8945 5.3: the answer to a signed query, signed with the query's MAC."""
        return self._sign(response, context, None)[0]

    # -- UDP: one message, bounded work ----------------------------------------------------

    def udp(self, message: bytes, peer: str, limit: int) -> bytes | None:
        """An IXFR over UDP: the answer when it is one message of at most ``limit``
        bytes (an error, up to date, or a small difference), None when it is not (the
        handler answers TC and the client asks again over TCP), b"" to drop it (the
        source or all sources over their rate). Same checks as over TCP.

        The work is bounded by ``limit``, never by the zone: before anything is
        encoded, the records are counted, and more than ``limit`` bytes' worth (each
        takes at least MIN_RECORD) is TC at once."""
        if not self.limit.allow(peer):
            self.counts.add("ixfr", "udp-limited")
            return b""
        query = self._check(message, wire.IXFR, peer)
        if isinstance(query, bytes):
            return query if len(query) <= limit else None
        room = limit - (self.room if self.key is not None else 0)
        client = _client_serial(query)
        assert client is not None  # _check
        serial = self.zone.serial
        soa = zonedata.soa(self.zone)
        diffs = [] if _newer(client, serial) else self.journal.since(client, serial)
        records: list[rrs.Record]
        if diffs is None:
            # AXFR form: only a zone of a few records could fit (never a snapshot here).
            if len(self.zone.answers) * MIN_RECORD > room:
                return self._udp_truncated(query)
            records = [soa, *zonedata.take(self.zone).records(), soa]
        elif not diffs:
            records = [soa]
        else:
            if sum(len(d.removed) + len(d.added) + 2 for d in diffs) * MIN_RECORD > room:
                return self._udp_truncated(query)
            records = [soa, *_ixfr_body(soa, diffs), soa]
        messages = [m for m in self._messages(query, records, room) if m]
        if len(messages) != 1 or len(messages[0]) > limit:
            return self._udp_truncated(query)
        result = "full" if diffs is None else "incremental" if diffs else "uptodate"
        self.counts.add("ixfr", result)
        return messages[0]

    def _udp_truncated(self, query: dns.message.Message) -> bytes | None:
        """None (the handler answers TC); for a signed query TC signed here: RFC 8945
        5.3 signs the answer to a verified request, and a client that expects a TSIG
        drops an unsigned one, so it would never learn to ask again over TCP."""
        self.counts.add("ixfr", "udp-truncated")
        if not query.had_tsig:
            return None
        flags = _QR | _AA | _TC | (query.flags & (dns.flags.RD | dns.flags.CD))
        message = (struct.pack("!HH", query.id, flags) + wire.COUNTS.pack(1, 0, 0, 0)
                   + _question(query))
        return self._sign(message, query, None)[0]

    # -- TCP -----------------------------------------------------------------------------

    async def _run(self, message: bytes, qtype: int, peer: str, sender: Sender) -> None:
        kind = _QTYPES[qtype]
        query = self._check(message, qtype, peer)
        if isinstance(query, bytes):
            await sender.send(query)
            return
        client = str(_address(peer) or peer)
        mine = self.running.get(client, 0)
        if not self._slot(mine):
            self.counts.add(kind, "busy")
            await sender.send(_error(message, dns.rcode.SERVFAIL))
            return
        self.active += 1
        self.running[client] = mine + 1
        # The transfer runs in this task (nothing of it outlives the connection); a
        # timer on the injected clock cancels it at --xfr-timeout.
        task = asyncio.current_task()
        assert task is not None
        expired: list[bool] = []

        async def expire() -> None:
            await self.clock.sleep(self.timeout)
            expired.append(True)
            task.cancel()

        timer = asyncio.ensure_future(expire())
        try:
            await self._send_zone(query, kind, sender)
        except asyncio.CancelledError:
            if not expired:
                raise
            task.uncancel()
            self.counts.add(kind, "timeout")
            log.info("%s to %s cut: not done within --xfr-timeout %gs", kind.upper(), peer,
                     self.timeout)
            raise TimeoutError(f"{kind.upper()} not done within {self.timeout:g}s") from None
        finally:
            timer.cancel()
            self.active -= 1
            left = self.running.pop(client) - 1
            if left:
                self.running[client] = left

    def _take(self) -> Snapshot:
        """The snapshot of the zone as it is now, shared by every transfer that runs
        on this version (one copy of the answer table, not one per transfer)."""
        shared = self._shared
        zone = self.zone
        if (shared is None or shared.generation != zone.generation
                or shared.serial != zone.serial):
            shared = self._shared = zonedata.take(zone)
            self._sharing = 0
        self._sharing += 1
        return shared

    def _untake(self, snap: Snapshot) -> None:
        if snap is self._shared:
            self._sharing -= 1
            if self._sharing <= 0:
                self._shared = None  # the old answers it holds can go

    async def _send_zone(self, query: dns.message.Message, kind: str, sender: Sender) -> None:
        """Transfers take turns (:class:`Turns`) to encode at most STEP_SECONDS of their
        answers, one turn per iteration of the loop, so the loop polls for queries
        between any two steps of any transfers: 16 transfers add one step to an
        answer's wait, not sixteen 64 KiB messages."""
        turns = self.turns
        diffs: list[Diff] | None = None
        await turns.turn()
        # The snapshot and the journal's chain are taken here, in one step.
        snap = self._take()
        try:
            soa = snap.soa
            if kind == "ixfr":
                client = _client_serial(query)
                assert client is not None  # _check
                diffs = ([] if _newer(client, snap.serial)
                         else self.journal.since(client, snap.serial))
            if diffs is None:
                result = "full"
                records: Iterable[Item] = [soa, snap, soa]
            elif not diffs:
                result = "uptodate"
                records = [soa]
            else:
                result = "incremental"
                records = _chain([soa], _ixfr_body(soa, diffs), [soa])
            sent = 0
            messages = self._messages(query, records)
            done = False
            while not done:
                ready: list[bytes] = []
                await turns.turn()
                deadline = time.perf_counter() + STEP_SECONDS
                for message in messages:
                    if message:
                        ready.append(message)
                    if time.perf_counter() > deadline:
                        break
                else:
                    done = True
                for message in ready:
                    await sender.send(message)
                    sent += len(message)
        finally:
            self._untake(snap)
        self.counts.add(kind, result)
        log.info("%s of serial %d: %s, %d bytes", kind.upper(), snap.serial, result, sent)

    def _messages(self, query: dns.message.Message, records: Iterable[Item],
                  limit: int = 0) -> Iterator[bytes]:
        """The messages of the answer; with ``limit`` 0 the TCP size less the TSIG room.
        Yields b"" between records now and then (about every CHUNK records): a chance
        for the caller to stop encoding for a while."""
        flags = _QR | _AA | (query.flags & dns.flags.RD)
        if not limit:
            limit = MAX_MESSAGE - (TSIG_ROOM if self.key is not None else 0)
        writer = MessageWriter(struct.pack("!HH", query.id, flags), _question(query), limit)
        ctx: Any = None
        for count, record in enumerate(records, 1):
            if isinstance(record, Snapshot):
                for finished in writer.add_rrsets(record.keys, record.answers):
                    if finished:
                        finished, ctx = self._sign(finished, query, ctx)
                    yield finished
            else:
                done = writer.add(record)
                if done is not None:
                    message, ctx = self._sign(done, query, ctx)
                    yield message
            if count % CHUNK == 0:
                yield b""
        message, ctx = self._sign(writer.finish(), query, ctx)
        yield message

    def _sign(self, message: bytes, query: dns.message.Message, ctx: Any) -> tuple[bytes, Any]:
        """RFC 8945 5.3.1: every message of the transfer signed, each MAC chained to the
        previous one (dnspython's multi-message context) and the first to the query's."""
        key = self.key
        if key is None or not query.had_tsig:
            return message, None
        tsig = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm,
                                         0, FUDGE, b"", query.id, 0, b"")
        tsig, ctx = dns.tsig.sign(message, key, tsig, int(time.time()),
                                  query.mac if ctx is None else None, ctx, True)
        rdata = tsig.to_wire()
        record = (_wire_name(key.name)
                  + wire.RR_HEAD.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata))
                  + rdata)
        arcount = struct.unpack_from("!H", message, 10)[0] + 1
        return message[:10] + arcount.to_bytes(2, "big") + message[12:] + record, ctx


def _address(peer: str) -> IPv4Address | IPv6Address | None:
    """The client's address (an IPv4-mapped one as IPv4), None when not one."""
    try:
        address = ip_address(peer.split("%")[0])
    except ValueError:
        return None
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _question(query: dns.message.Message) -> bytes:
    """The question as asked (its case kept), for the first message of the answer."""
    q = query.question[0]
    return bytes(q.name.to_wire() or b"") + struct.pack("!HH", q.rdtype, q.rdclass)


def _newer(client: int, ours: int) -> bool:
    """Whether the client's serial is after ours (RFC 1982): RFC 1995 2 then wants our
    SOA alone, not the whole zone."""
    return 0 < (client - ours) % 2**32 < 2**31


def _tsig_size(key: dns.tsig.Key) -> int:
    """The bytes of a TSIG record of ``key`` with a full MAC and no other data."""
    name = len(_wire_name(key.name))
    algorithm = len(_wire_name(key.algorithm))
    return name + 10 + algorithm + 6 + 2 + 2 + _DIGEST_SIZE.get(key.algorithm, 64) + 6


def _wire_name(name: dns.name.Name) -> bytes:
    return name.canonicalize().to_digestable()  # uncompressed wire form, lower case


def _chain(*parts: Iterable[Item]) -> Iterator[Item]:
    for part in parts:
        yield from part


def _ixfr_body(soa: rrs.Record, diffs: list[Diff]) -> Iterator[rrs.Record]:
    """Each difference: the old SOA, what left, the new SOA, what joined (RFC 1995 4)."""
    for diff in diffs:
        yield with_serial(soa, diff.old_serial)
        yield from diff.removed  # sorted by the journal
        yield with_serial(soa, diff.new_serial)
        yield from diff.added


def _client_serial(query: dns.message.Message) -> int | None:
    for rrset in query.authority:
        if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
            return int(rrset[0].serial)
    return None


# RFC 8945 5.2: the TSIG error a bad request gets, in an unsigned TSIG record (BADTIME
# wants a signed answer: it gets a plain NOTAUTH instead).
BADSIG, BADKEY = 16, 17
_TSIG_ERRORS: dict[type[Exception], int] = {dns.tsig.BadSignature: BADSIG,
                                            dns.message.UnknownTSIGKey: BADKEY,
                                            dns.tsig.BadKey: BADKEY,
                                            dns.tsig.BadAlgorithm: BADKEY}
_TSIG_FAILURES = (dns.tsig.PeerError, dns.tsig.BadSignature, dns.message.UnknownTSIGKey,
                  dns.tsig.BadTime, dns.tsig.BadKey, dns.tsig.BadAlgorithm)
_DIGEST_SIZE = {dns.tsig.HMAC_SHA256: 32}


def _tsig_error_record(message: bytes, error: int) -> bytes:
    """The request's TSIG record turned into the error answer's: same key name,
    algorithm and time, no MAC, ``error``; b"" when the request's cannot be found."""
    try:
        query = dns.message.from_wire(message, keyring=False)  # False: read, not verified
    except dns.exception.DNSException:
        return b""
    if query.tsig is None:
        return b""
    request = query.tsig[0]
    rdata = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG,
                                      request.algorithm, request.time_signed, request.fudge,
                                      b"", request.original_id, error, b"").to_wire() or b""
    name = query.tsig.name.to_wire() or b""
    return name + wire.RR_HEAD.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata)) + rdata


def _error(message: bytes, rcode: int, tsig: bytes = b"") -> bytes:
    """A response without records (but ``tsig``, an error TSIG record): the query's
    header bits, its question, ``rcode``."""
    walked = wire.walk_name(message, 12) if len(message) >= 12 else None
    question = message[12 : walked[1] + 4] if walked is not None else b""
    if len(question) < 5:
        question = b""
    flags = _QR | (((message[2] << 8) | message[3]) & 0x0110) | rcode  # RD, CD
    return (message[:2] + wire.HEADER.pack(flags, 1 if question else 0, 0, 0, 1 if tsig else 0)
            + question + tsig)
