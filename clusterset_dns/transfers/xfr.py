"""AXFR (RFC 5936) and IXFR (RFC 1995), with optional TSIG (RFC 8945): over TCP,
and an IXFR over UDP when its whole answer fits one message.

The TCP transport hands each complete message to :meth:`Transfers.start`, which
returns None at once for anything but a transfer (the handler answers that) or a
coroutine that sends the transfer's messages through the connection; an IXFR over
UDP runs the same coroutine through :meth:`Transfers.udp` into one message (or TC).
The snapshot of the zone is taken in the coroutine's first step, synchronously, so
no update mixes into it; between messages the coroutine waits for the client to
read (flow control) and yields to the loop, so a transfer never holds up answers to
others. Messages are packed by :mod:`packing` (names compressed, 64 KiB at most);
dnspython reads the query and computes the TSIG MACs (:mod:`tsig`); :mod:`limits`
bounds what transfers cost others.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Coroutine, Iterable, Iterator
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
from clusterset_dns.transfers import packing, tsig, zonedata
from clusterset_dns.transfers.journal import Diff, Journal
from clusterset_dns.transfers.limits import (
    MAX_SOURCES,
    UDP_BURST,
    UDP_RATE,
    UDP_TOTAL_BURST,
    UDP_TOTAL_RATE,
    RateLimit,
    Turns,
)
from clusterset_dns.transfers.packing import CHUNK, MessageWriter, with_serial
from clusterset_dns.transfers.zonedata import Snapshot
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.table import Zone

log = logging.getLogger(__name__)

# Packing, TSIG and the limits have modules of their own (packing, tsig, limits); their
# names stay importable from here, where callers have always found them.
__all__ = ["CHUNK", "MAX_SOURCES", "UDP_BURST", "UDP_RATE", "UDP_TOTAL_BURST",
           "UDP_TOTAL_RATE", "Counts", "MessageWriter", "RateLimit", "Sender", "Transfers",
           "Turns", "transfer_qtype", "with_serial"]

MAX_MESSAGE = 65535
TSIG_ROOM = 512  # kept free in every signed message for the TSIG record
MAX_TRANSFERS = 16  # concurrent transfers (with --workers N, 1/N a process); more: SERVFAIL
# Slow readers (each reading just enough never to be idle) must not hold every slot:
# one client address runs at most a quarter of them, and the last slot is only for an
# address running none; each transfer lasts at most --xfr-timeout in all.
PER_CLIENT_SHARE = 4
TIMEOUT = 300.0  # --xfr-timeout's default: 16 AXFRs of 200 MB at once take about 100 s
# A transfer's turn on the loop (see Transfers._send_zone): measured, 16 concurrent
# AXFRs of a 6 MB zone then add about a turn to other answers' wait.
STEP_SECONDS = 0.0005
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
        self.room = tsig.size(key) if key is not None else 0
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
        error = tsig.precheck(self.key, message)
        if error == dns.rcode.FORMERR:
            self.counts.add(kind, "formerr")
            log.info("%s from %s rejected: TSIG MAC size out of bounds", kind.upper(), peer)
            return packing.error(message, dns.rcode.FORMERR)
        if error == tsig.BADKEY:
            self.counts.add(kind, "notauth")
            log.info("%s from %s rejected: TSIG: our key name with another algorithm",
                     kind.upper(), peer)
            return packing.error(message, dns.rcode.NOTAUTH,
                                 tsig.error_record(message, tsig.BADKEY))
        try:
            return dns.message.from_wire(message, keyring=self.keyring)
        except tsig.FAILURES as exc:
            self.counts.add(kind, "notauth")
            log.info("%s from %s rejected: TSIG: %s", kind.upper(), peer,
                     exc or type(exc).__name__)
            code = tsig.ERRORS.get(type(exc))
            return packing.error(message, dns.rcode.NOTAUTH,
                          tsig.error_record(message, code) if code else b"")
        except dns.exception.DNSException:
            self.counts.add(kind, "formerr")
            return packing.error(message, dns.rcode.FORMERR)

    def _check(self, message: bytes, qtype: int, peer: str) -> dns.message.Message | bytes:
        """The transfer query, allowed and verified; or the error answer to send."""
        kind = _QTYPES[qtype]
        if not self.allowed(peer):
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not in --allow-transfer", kind.upper(), peer)
            return packing.error(message, dns.rcode.REFUSED)
        query = self._verified(message, kind, peer)
        if isinstance(query, bytes):
            return query
        if self.key is not None and not query.had_tsig:
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not signed with the TSIG key", kind.upper(), peer)
            return packing.error(message, dns.rcode.REFUSED)
        qname = query.question[0].name
        if qname != self.apex or query.question[0].rdclass != dns.rdataclass.IN:
            self.counts.add(kind, "notauth")
            return packing.error(message, dns.rcode.NOTAUTH)
        if qtype == wire.IXFR and _client_serial(query) is None:
            self.counts.add(kind, "formerr")
            return packing.error(message, dns.rcode.FORMERR)
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
            return packing.error(message, dns.rcode.NOTAUTH), None
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
            if self.zone.count() * MIN_RECORD > room:
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
            await sender.send(packing.error(message, dns.rcode.SERVFAIL))
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
        turns, clock = self.turns, self.clock
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
                deadline = clock.monotonic() + STEP_SECONDS
                for message in messages:
                    if message:
                        ready.append(message)
                    if clock.monotonic() > deadline:
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
                for finished in writer.add_rrsets(record.pairs()):
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
        """Every message of the transfer signed (RFC 8945 5.3.1) when the query was."""
        key = self.key
        if key is None or not query.had_tsig:
            return message, None
        return tsig.sign(message, key, query, ctx, int(self.clock.time()))


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
