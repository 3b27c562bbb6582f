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

import base64
import logging
import struct
import time
from collections.abc import Coroutine, Iterable, Iterator
from ipaddress import ip_address
from pathlib import Path
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

from clusterset_dns import rrs, wire, zonedata
from clusterset_dns.cache import Zone
from clusterset_dns.config import ConfigError, Network
from clusterset_dns.handler import walk_name
from clusterset_dns.journal import Diff, Journal

log = logging.getLogger(__name__)

MAX_MESSAGE = 65535
TSIG_ROOM = 512  # kept free in every signed message for the TSIG record
FUDGE = 300
MAX_TRANSFERS = 16  # concurrent transfers per process; more are answered SERVFAIL
_QTYPES = {wire.AXFR: "axfr", wire.IXFR: "ixfr"}
_HEADER = struct.Struct("!HHHHH")  # flags and counts
_QR, _AA = 0x8000, 0x0400


class Sender(Protocol):
    async def send(self, message: bytes) -> None:
        """Writes one message; returns once the client has read enough to go on."""


def load_key(path: Path) -> dns.tsig.Key:
    """``[hmac-sha256:]NAME:BASE64SECRET`` (the form of ``dig -y``), one line."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"--transfer-tsig-key {path}: {exc.strerror}") from None
    parts = text.split(":")
    if len(parts) == 2:
        parts.insert(0, "hmac-sha256")
    if len(parts) != 3 or parts[0].lower() != "hmac-sha256":
        raise ConfigError(f"--transfer-tsig-key {path}: want [hmac-sha256:]NAME:BASE64SECRET "
                          "(only HMAC-SHA256 is accepted)")
    try:
        secret = base64.b64decode(parts[2], validate=True)
        return dns.tsig.Key(parts[1], secret, dns.tsig.HMAC_SHA256)
    except (ValueError, dns.exception.DNSException) as exc:
        raise ConfigError(f"--transfer-tsig-key {path}: {exc}") from None


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
    walked = walk_name(message, 12)
    if walked is None or walked[1] + 4 > len(message):
        return 0
    qtype = (message[walked[1]] << 8) | message[walked[1] + 1]
    return qtype if qtype in _QTYPES else 0


def _name(owner: bytes) -> dns.name.Name:
    return dns.name.from_wire(owner, 0)[0]


_COMPRESSED_RDATA = (wire.NS, wire.SOA)  # RFC 3597 4: the types whose rdata names may be


class MessageWriter:
    """Packs records into messages of at most ``limit`` bytes, names compressed.

    The records come decoded (:mod:`rrs`: names uncompressed), so packing is a
    dictionary of name suffixes per message; a record that does not fit starts the
    next message (RFC 5936 2.2: a transfer is a sequence of messages). dnspython
    took about 50 microseconds a record here (16,000 records: 0.83 s), this under one
    (11 ms)."""

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
        return name + _RR.pack(rtype, wire.CLASS_IN, ttl, len(rdata)) + rdata

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

    def finish(self) -> bytes:
        counts = _COUNTS.pack(1 if self.first else 0, self.count, 0, 0)
        self.first = False
        return self.head + counts + b"".join(self.parts)


_RR = struct.Struct("!HHIH")
_COUNTS = struct.Struct("!HHHH")


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


class Transfers:
    def __init__(self, zone: Zone, journal: Journal, allow: tuple[Network, ...],
                 key: dns.tsig.Key | None, counts: Counts,
                 max_transfers: int = MAX_TRANSFERS) -> None:
        self.zone = zone
        self.journal = journal
        self.allow = allow
        self.key = key
        self.keyring = {key.name: key} if key is not None else None
        self.counts = counts
        self.max_transfers = max_transfers
        self.active = 0
        self.apex = _name(zone.apex_wire)

    def start(self, message: bytes, peer: str, sender: Sender
              ) -> Coroutine[Any, Any, None] | None:
        qtype = transfer_qtype(message)
        if not qtype:
            return None
        return self._run(message, qtype, peer, sender)

    def udp(self, message: bytes, peer: str, limit: int) -> bytes | None:
        """An IXFR over UDP: the answer when it is one message of at most ``limit``
        bytes (an error, up to date, or a small difference), else None (the handler
        answers TC and the client asks again over TCP). Same checks as over TCP."""
        collect = _Collect(limit)
        run = self._run(message, wire.IXFR, peer, collect)
        try:
            run.send(None)  # the collector never suspends: this runs it to the end
        except StopIteration:
            pass
        except _TooBig:
            self.counts.add("ixfr", "udp-truncated")
            return None
        else:
            run.close()
            return None
        return collect.messages[0] if len(collect.messages) == 1 else None

    def allowed(self, peer: str) -> bool:
        try:
            address = ip_address(peer.split("%")[0])
        except ValueError:
            return False
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.allow)

    async def _run(self, message: bytes, qtype: int, peer: str, sender: Sender) -> None:
        kind = _QTYPES[qtype]
        if not self.allowed(peer):
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not in --allow-transfer", kind.upper(), peer)
            await sender.send(_error(message, dns.rcode.REFUSED))
            return
        try:
            query = dns.message.from_wire(message, keyring=self.keyring)
        except (dns.tsig.PeerError, dns.tsig.BadSignature, dns.message.UnknownTSIGKey,
                dns.tsig.BadTime) as exc:
            self.counts.add(kind, "notauth")
            log.info("%s from %s rejected: TSIG: %s", kind.upper(), peer, exc)
            error = _TSIG_ERRORS.get(type(exc))
            await sender.send(_error(message, dns.rcode.NOTAUTH,
                                     _tsig_error(message, error) if error else b""))
            return
        except dns.exception.DNSException:
            self.counts.add(kind, "formerr")
            await sender.send(_error(message, dns.rcode.FORMERR))
            return
        if self.key is not None and not query.had_tsig:
            self.counts.add(kind, "refused")
            log.info("%s from %s refused: not signed with the TSIG key", kind.upper(), peer)
            await sender.send(_error(message, dns.rcode.REFUSED))
            return
        qname = query.question[0].name
        if qname != self.apex or query.question[0].rdclass != dns.rdataclass.IN:
            self.counts.add(kind, "notauth")
            await sender.send(_error(message, dns.rcode.NOTAUTH))
            return
        if self.active >= self.max_transfers:
            self.counts.add(kind, "busy")
            await sender.send(_error(message, dns.rcode.SERVFAIL))
            return
        self.active += 1
        try:
            await self._send_zone(query, kind, sender)
        finally:
            self.active -= 1

    async def _send_zone(self, query: dns.message.Message, kind: str, sender: Sender) -> None:
        # The snapshot and the journal's chain are taken here, in one step.
        snap = zonedata.take(self.zone)
        soa = snap.soa
        diffs: list[Diff] | None = None
        if kind == "ixfr":
            client = _client_serial(query)
            if client is None:
                self.counts.add(kind, "formerr")
                await sender.send(_error(query.to_wire(), dns.rcode.FORMERR))
                return
            diffs = self.journal.since(client, snap.serial)
        if diffs is None:
            result = "full"
            records: Iterable[rrs.Record] = _chain([soa], snap.records(), [soa])
        elif not diffs:
            result = "uptodate"
            records = [soa]
        else:
            result = "incremental"
            records = _chain([soa], _ixfr_body(soa, diffs), [soa])
        sent = 0
        for message in self._messages(query, records):
            await sender.send(message)
            sent += len(message)
        self.counts.add(kind, result)
        log.info("%s of serial %d: %s, %d bytes", kind.upper(), snap.serial, result, sent)

    def _messages(self, query: dns.message.Message,
                  records: Iterable[rrs.Record]) -> Iterator[bytes]:
        flags = _QR | _AA | (query.flags & dns.flags.RD)
        limit = MAX_MESSAGE - (TSIG_ROOM if self.key is not None else 0)
        q = query.question[0]
        # The question as asked (its case kept), in the first message.
        question = bytes(q.name.to_wire() or b"") + struct.pack("!HH", q.rdtype, q.rdclass)
        writer = MessageWriter(struct.pack("!HH", query.id, flags), question, limit)
        ctx: Any = None
        for record in records:
            done = writer.add(record)
            if done is not None:
                message, ctx = self._sign(done, query, ctx)
                yield message
        message, ctx = self._sign(writer.finish(), query, ctx)
        yield message

    def _sign(self, message: bytes, query: dns.message.Message, ctx: Any) -> tuple[bytes, Any]:
        """RFC 8945 5.3.1: every message of the transfer signed, each MAC chained to the
        previous one (dnspython's multi-message context) and the first to the query's."""
        key = self.key
        if key is None:
            return message, None
        tsig = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm,
                                         0, FUDGE, b"", query.id, 0, b"")
        tsig, ctx = dns.tsig.sign(message, key, tsig, int(time.time()),
                                  query.mac if ctx is None else None, ctx, True)
        rdata = tsig.to_wire()
        record = (_wire_name(key.name) + _RR.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0,
                                                len(rdata)) + rdata)
        arcount = struct.unpack_from("!H", message, 10)[0] + 1
        return message[:10] + arcount.to_bytes(2, "big") + message[12:] + record, ctx


class _TooBig(Exception):
    """An IXFR over UDP grew past one message of the client's limit."""


class _Collect:
    """A Sender for UDP: keeps the one message that fits, stops the transfer otherwise."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.messages: list[bytes] = []

    async def send(self, message: bytes) -> None:
        if self.messages or len(message) > self.limit:
            raise _TooBig
        self.messages.append(message)


def _wire_name(name: dns.name.Name) -> bytes:
    return name.canonicalize().to_digestable()  # uncompressed wire form, lower case


def _chain(*parts: Iterable[rrs.Record]) -> Iterator[rrs.Record]:
    for part in parts:
        yield from part


def _ixfr_body(soa: rrs.Record, diffs: list[Diff]) -> Iterator[rrs.Record]:
    """Each difference: the old SOA, what left, the new SOA, what joined (RFC 1995 4)."""
    for diff in diffs:
        yield with_serial(soa, diff.old_serial)
        yield from sorted(diff.removed)
        yield with_serial(soa, diff.new_serial)
        yield from sorted(diff.added)


def _client_serial(query: dns.message.Message) -> int | None:
    for rrset in query.authority:
        if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
            return int(rrset[0].serial)
    return None


# RFC 8945 5.2: the TSIG error a bad request gets, in an unsigned TSIG record (BADTIME
# wants a signed answer: it gets a plain NOTAUTH instead).
_TSIG_ERRORS: dict[type[Exception], int] = {dns.tsig.BadSignature: 16,
                                            dns.message.UnknownTSIGKey: 17}


def _tsig_error(message: bytes, error: int) -> bytes:
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
    return name + _RR.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata)) + rdata


def _error(message: bytes, rcode: int, tsig: bytes = b"") -> bytes:
    """A response without records (but ``tsig``, an error TSIG record): the query's
    header bits, its question, ``rcode``."""
    walked = walk_name(message, 12) if len(message) >= 12 else None
    question = message[12 : walked[1] + 4] if walked is not None else b""
    if len(question) < 5:
        question = b""
    flags = _QR | (((message[2] << 8) | message[3]) & 0x0110) | rcode  # RD, CD
    return (message[:2] + _HEADER.pack(flags, 1 if question else 0, 0, 0, 1 if tsig else 0)
            + question + tsig)
