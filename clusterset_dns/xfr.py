"""AXFR (RFC 5936) and IXFR (RFC 1995) over TCP, with optional TSIG (RFC 8945).

The TCP transport hands each complete message to :meth:`Transfers.start`,
which returns None at once for anything but a transfer (the handler answers
that) or a coroutine that sends the transfer's messages through the
connection. The snapshot of the zone is taken in the coroutine's first step,
synchronously, so no update mixes into it; between messages the coroutine
waits for the client to read (flow control) and yields to the loop, so a
transfer never holds up answers to others. TSIG and message rendering (name
compression, the 64 KiB limit) are dnspython's.
"""

from __future__ import annotations

import base64
import logging
import struct
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
import dns.renderer
import dns.rrset
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
    """Transfers by (type, result), kept in handler.Stats.transfers so that a worker's
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


def _rrsets(records: Iterable[rrs.Record]) -> Iterator[dns.rrset.RRset]:
    """Consecutive records of one owner and type as one RRset."""
    current: dns.rrset.RRset | None = None
    last: tuple[bytes, int] | None = None
    for owner, rtype, ttl, rdata in records:
        if current is None or last != (owner, rtype):
            if current is not None:
                yield current
            current = dns.rrset.RRset(_name(owner), dns.rdataclass.IN,
                                      dns.rdatatype.RdataType(rtype))
            last = (owner, rtype)
        current.add(dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.RdataType(rtype),
                                        rdata, 0, len(rdata)), ttl)
    if current is not None:
        yield current


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
            await sender.send(_error(message, dns.rcode.NOTAUTH))
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
        soa = next(iter(_rrsets([snap.soa])))
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
            rrsets: Iterable[dns.rrset.RRset] = _chain([soa], _rrsets(snap.records()), [soa])
        elif not diffs:
            result = "uptodate"
            rrsets = [soa]
        else:
            result = "incremental"
            rrsets = _chain([soa], _ixfr_body(soa, diffs), [soa])
        sent = 0
        for message in self._messages(query, rrsets):
            await sender.send(message)
            sent += len(message)
        self.counts.add(kind, result)
        log.info("%s of serial %d: %s, %d bytes", kind.upper(), snap.serial, result, sent)

    def _messages(self, query: dns.message.Message,
                  rrsets: Iterable[dns.rrset.RRset]) -> Iterator[bytes]:
        flags = _QR | _AA | (query.flags & dns.flags.RD)
        limit = MAX_MESSAGE - (TSIG_ROOM if self.key is not None else 0)
        ctx: Any = None
        first = True
        renderer = self._renderer(query, flags, limit, first)
        count = 0
        for rrset in rrsets:
            try:
                renderer.add_rrset(dns.renderer.ANSWER, rrset)
                count += 1
                continue
            except dns.exception.TooBig:
                pass
            if count:
                message, ctx = self._finish(renderer, query, ctx)
                yield message
                first = False
                renderer = self._renderer(query, flags, limit, first)
                count = 0
            # An RRset too big for an empty message goes one record a message (the
            # server cut every answer to fit one, so this is the SOA-framing corner).
            for rdata in rrset:
                single = dns.rrset.RRset(rrset.name, rrset.rdclass, rrset.rdtype)
                single.add(rdata, rrset.ttl)
                try:
                    renderer.add_rrset(dns.renderer.ANSWER, single)
                except dns.exception.TooBig:
                    message, ctx = self._finish(renderer, query, ctx)
                    yield message
                    renderer = self._renderer(query, flags, limit, False)
                    renderer.add_rrset(dns.renderer.ANSWER, single)
                count += 1
        message, ctx = self._finish(renderer, query, ctx)
        yield message

    @staticmethod
    def _renderer(query: dns.message.Message, flags: int, limit: int,
                  first: bool) -> dns.renderer.Renderer:
        renderer = dns.renderer.Renderer(query.id, flags, limit)
        if first:  # RFC 5936 2.2: the question in the first message only
            q = query.question[0]
            renderer.add_question(q.name, q.rdtype, q.rdclass)
        return renderer

    def _finish(self, renderer: dns.renderer.Renderer, query: dns.message.Message,
                ctx: Any) -> tuple[bytes, Any]:
        renderer.write_header()
        if self.key is not None:
            ctx = renderer.add_multi_tsig(ctx, self.key.name, self.key, FUDGE, query.id, 0, b"",
                                          query.mac if ctx is None else b"",
                                          self.key.algorithm)
        return renderer.get_wire(), ctx


def _chain(*parts: Iterable[dns.rrset.RRset]) -> Iterator[dns.rrset.RRset]:
    for part in parts:
        yield from part


def _ixfr_body(soa: dns.rrset.RRset, diffs: list[Diff]) -> Iterator[dns.rrset.RRset]:
    """Each difference: the old SOA, what left, the new SOA, what joined (RFC 1995 4)."""
    rdata = soa[0]
    for diff in diffs:
        for serial, records in ((diff.old_serial, diff.removed), (diff.new_serial, diff.added)):
            framing = dns.rrset.RRset(soa.name, soa.rdclass, soa.rdtype)
            framing.add(rdata.replace(serial=serial), soa.ttl)
            yield framing
            yield from _rrsets(sorted(records))


def _client_serial(query: dns.message.Message) -> int | None:
    for rrset in query.authority:
        if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
            return int(rrset[0].serial)
    return None


def _error(message: bytes, rcode: int) -> bytes:
    """A response without records: the query's header bits, its question, ``rcode``."""
    walked = walk_name(message, 12) if len(message) >= 12 else None
    question = message[12 : walked[1] + 4] if walked is not None else b""
    if len(question) < 5:
        question = b""
    flags = _QR | (((message[2] << 8) | message[3]) & 0x0110) | rcode  # RD, CD
    return message[:2] + _HEADER.pack(flags, 1 if question else 0, 0, 0, 0) + question
