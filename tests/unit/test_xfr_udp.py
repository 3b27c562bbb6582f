"""Transfers to the byte and to the count: a UDP IXFR answer that fits the client's size
exactly is sent and a byte less is TC, the records counted before anything is encoded
bounded at the exact MIN_RECORD boundary, every answer counted by its result, the rate
kept per source, the flags of a signed TC, RFC 1982 serial order, and the snapshot
shared while a transfer holds it. dnspython reads what is sent."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import dns.tsig
import pytest

from clusterset_dns.transfers import tsig, xfr, zonedata
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import Cache

from .fakeclock import FakeClock
from .test_xfr_limits import (
    ALLOWED,
    KEY,
    SOA_QUERY,
    ZONE,
    Collect,
    Unlimited,
    big_cache,
    headless,
    ixfr_query,
    raw_tsig,
    soa_serials,
)

KEYRING = {KEY.name: KEY}


def transfers(cache: Cache, journal: Journal, key: dns.tsig.Key | None = None,
              limit: xfr.RateLimit | None = None) -> xfr.Transfers:
    # the clock fixed: a signed answer is the same bytes twice
    return xfr.Transfers(cache.zone, journal, ALLOWED, key, xfr.Counts({}),
                         limit=limit or Unlimited(), clock=FakeClock())


def signed(query: dns.message.Message) -> dns.message.Message:
    query.use_tsig(KEYRING, keyname=KEY.name)
    return query


def changed(cache: Cache, addresses: int = 1) -> int:
    """A change journaled; the serial before it."""
    old = cache.zone.serial
    cache.apply(headless("new", [f"10.98.0.{i + 1}" for i in range(addresses)]))
    return old


def answer_records(messages: list[bytes]) -> list[str]:
    out = []
    for message in messages:
        read = dns.message.from_wire(message, xfr=True, one_rr_per_rrset=True, keyring=False)
        out += [rrset.to_text() for rrset in read.answer]
    return out


def tcp_transfer(t: xfr.Transfers, query: dns.message.Message) -> list[bytes]:
    out = Collect()
    coro = t.start(query.to_wire(), "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    return out.messages


def truncated(reply: bytes | None, keyed: bool) -> bool:
    """TC: None for the handler to answer, or for a signed query TC signed here."""
    if not keyed:
        return reply is None
    assert reply
    read = dns.message.from_wire(reply, keyring=False)
    return bool(read.flags & dns.flags.TC) and not read.answer and read.had_tsig


class Counting:
    """MessageWriter.add counted: how many records were encoded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.added = 0
        real = xfr.MessageWriter.add

        def add(writer: xfr.MessageWriter, record: rrs.Record) -> bytes | None:
            self.added += 1
            return real(writer, record)

        monkeypatch.setattr(xfr.MessageWriter, "add", add)


# -- every answer counted by its result ------------------------------------------------------

@pytest.mark.parametrize("result", ["uptodate", "incremental", "full"])
def test_a_udp_ixfr_is_counted_by_its_result_and_is_what_tcp_sends(result: str) -> None:
    cache, journal = big_cache(1, 1)
    t = transfers(cache, journal)
    serial = (cache.zone.serial if result == "uptodate" else changed(cache)
              if result == "incremental" else 12345)
    query = ixfr_query(serial, 4096)
    reply = t.udp(query.to_wire(), "127.0.0.1", 4096)
    assert reply is not None and reply != b""
    assert t.counts.by == {("ixfr", result): 1}
    assert answer_records([reply]) == answer_records(tcp_transfer(t, query))
    assert t.counts.by == {("ixfr", result): 2}
    serials = soa_serials([reply])
    assert serials[0] == serials[-1] == cache.zone.serial
    assert len(serials) == {"uptodate": 1, "incremental": 4, "full": 2}[result]


def test_an_axfr_is_counted_full() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal)
    messages = tcp_transfer(t, dns.message.make_query(ZONE, "AXFR"))
    assert soa_serials(messages) == [cache.zone.serial] * 2
    assert t.counts.by == {("axfr", "full"): 1}


# -- the client's size, to the byte ------------------------------------------------------------

@pytest.mark.parametrize("keyed", [False, True])
def test_a_udp_ixfr_answer_of_exactly_the_size_is_sent_a_byte_more_is_tc(keyed: bool) -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, KEY if keyed else None)
    old = changed(cache, 3)
    query = ixfr_query(old, 4096)
    data = (signed(query) if keyed else query).to_wire()
    whole = t.udp(data, "127.0.0.1", 4096)
    assert whole
    assert t.udp(data, "127.0.0.1", len(whole)) == whole
    assert truncated(t.udp(data, "127.0.0.1", len(whole) - 1), keyed)
    assert t.counts.by == {("ixfr", "incremental"): 2, ("ixfr", "udp-truncated"): 1}


def test_an_error_answer_of_exactly_the_size_is_sent_a_byte_more_is_tc() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal)
    data = ixfr_query(1).to_wire()
    refused = t.udp(data, "10.1.1.1", 4096)  # not in --allow-transfer
    assert refused and dns.message.from_wire(refused).rcode() == dns.rcode.REFUSED
    assert t.udp(data, "10.1.1.1", len(refused)) == refused
    assert t.udp(data, "10.1.1.1", len(refused) - 1) is None


@pytest.mark.parametrize("keyed", [False, True])
def test_records_are_counted_before_encoding_to_the_exact_bound(
        keyed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A difference of N records (each SOA too) takes at least N * MIN_RECORD bytes: at
    a room (the size less a TSIG record's) of exactly that it is encoded (and then too
    big: TC), a byte less is TC before any record is encoded."""
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, KEY if keyed else None)
    old = changed(cache, 20)
    diffs = journal.since(old, cache.zone.serial)
    assert diffs
    least = sum(len(d.removed) + len(d.added) + 2 for d in diffs) * xfr.MIN_RECORD
    size = least + (tsig.size(KEY) if keyed else 0)
    query = ixfr_query(old, 4096)
    data = (signed(query) if keyed else query).to_wire()
    counting = Counting(monkeypatch)
    assert truncated(t.udp(data, "127.0.0.1", size), keyed)
    assert counting.added > 0
    counting.added = 0
    assert truncated(t.udp(data, "127.0.0.1", size - 1), keyed)
    assert counting.added == 0
    assert t.counts.by == {("ixfr", "udp-truncated"): 2}


@pytest.mark.parametrize("keyed", [False, True])
def test_a_zone_is_counted_before_it_is_taken_to_the_exact_bound(
        keyed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not in the journal (AXFR form): a zone of N records takes at least N *
    MIN_RECORD bytes; a room of exactly that takes the snapshot, a byte less does not."""
    cache, journal = big_cache(1, 20)
    t = transfers(cache, journal, KEY if keyed else None)
    taken = 0
    real = zonedata.take

    def counting(zone: Any) -> zonedata.Snapshot:
        nonlocal taken
        taken += 1
        return real(zone)

    monkeypatch.setattr(zonedata, "take", counting)
    size = cache.zone.count() * xfr.MIN_RECORD + (tsig.size(KEY) if keyed else 0)
    query = ixfr_query(12345, 4096)
    data = (signed(query) if keyed else query).to_wire()
    assert truncated(t.udp(data, "127.0.0.1", size), keyed)
    assert taken == 1
    assert truncated(t.udp(data, "127.0.0.1", size - 1), keyed)
    assert taken == 1


def test_an_answer_split_in_two_is_tc_never_its_first_part() -> None:
    """Few records but long ones: the count lets it be encoded, and it takes two
    messages of the client's size."""
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal)
    old = changed(cache, 20)
    diffs = journal.since(old, cache.zone.serial)
    assert diffs
    least = sum(len(d.removed) + len(d.added) + 2 for d in diffs) * xfr.MIN_RECORD
    data = ixfr_query(old, 4096).to_wire()
    whole = t.udp(data, "127.0.0.1", 4096)
    assert whole and least < len(whole) - 1
    assert t.udp(data, "127.0.0.1", least) is None
    assert t.counts.by == {("ixfr", "incremental"): 1, ("ixfr", "udp-truncated"): 1}


@pytest.mark.parametrize(("asked", "copied"), [
    (dns.flags.RD | dns.flags.CD, dns.flags.RD | dns.flags.CD),
    (dns.flags.AD, 0),
    (0, 0),
])
def test_a_signed_tc_has_qr_aa_tc_and_the_querys_rd_cd(asked: int, copied: int) -> None:
    cache, journal = big_cache()
    t = transfers(cache, journal, KEY)
    query = ixfr_query(12345)
    query.flags = asked
    reply = t.udp(signed(query).to_wire(), "127.0.0.1", 1232)
    assert reply
    read = dns.message.from_wire(reply, keyring=False)
    assert read.flags == dns.flags.QR | dns.flags.AA | dns.flags.TC | copied


# -- the rate, per source ----------------------------------------------------------------------

def test_the_udp_rate_is_kept_per_source() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, limit=xfr.RateLimit(rate=0.001, burst=1))
    data = ixfr_query(cache.zone.serial).to_wire()
    assert t.udp(data, "127.0.0.1", 1232)
    assert t.udp(data, "127.0.0.1", 1232) == b""
    assert t.udp(data, "127.0.0.2", 1232)  # another source: its own bucket
    assert t.counts.by == {("ixfr", "uptodate"): 2, ("ixfr", "udp-limited"): 1}


def test_signed_queries_are_rate_limited_per_source_and_counted() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, KEY, limit=xfr.RateLimit(rate=0.001, burst=1))
    data = signed(dns.message.make_query(ZONE, "SOA")).to_wire()
    assert t.verify(data, "127.0.0.1")[0] is None
    assert t.verify(data, "127.0.0.1") == (b"", None)
    error, context = t.verify(data, "127.0.0.2")
    assert error is None and context.had_tsig
    assert all(t.verify(data, None)[0] is None for _ in range(3))  # TCP: no rate
    assert t.counts.by == {("signed", "signed"): 5, ("signed", "limited"): 1}


def test_an_unsigned_query_given_to_verify_is_notauth() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, KEY)
    query = dns.message.make_query(ZONE, "SOA")
    error, context = t.verify(query.to_wire(), None)
    assert error and context is None
    read = dns.message.from_wire(error)
    assert (read.rcode(), read.id, read.question) == (dns.rcode.NOTAUTH, query.id,
                                                      query.question)
    assert t.counts.by == {}


@pytest.mark.parametrize(("peer", "named"), [("127.0.0.9", "127.0.0.9"), (None, "TCP")])
def test_a_rejected_signed_query_is_counted_and_logged_with_its_sender(
        peer: str | None, named: str, caplog: pytest.LogCaptureFixture) -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal, KEY)
    bad = raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 32)
    with caplog.at_level(logging.INFO, "clusterset_dns.transfers.xfr"):
        error, _ = t.verify(bad, peer)
    assert error and dns.message.from_wire(error, keyring=False).rcode() == dns.rcode.NOTAUTH
    assert t.counts.by == {("signed", "notauth"): 1}
    assert [r.getMessage().split(": ")[0] for r in caplog.records] == [
        f"SIGNED from {named} rejected"]


# -- serials and the query's SOA ---------------------------------------------------------------

@pytest.mark.parametrize(("client", "ours", "newer"), [
    (5, 5, False),
    (6, 5, True),
    (4, 5, False),
    (0, 2**32 - 1, True),  # across the wrap
    (2**32 - 1, 0, False),
    (5 + 2**31 - 1, 5, True),  # the farthest ahead
    (5 + 2**31, 5, False),  # half the circle: undefined (RFC 1982 3.2), not newer
    (5 + 2**31 + 5, 5, False),
])
def test_a_newer_serial_is_rfc_1982_order(client: int, ours: int, newer: bool) -> None:
    assert xfr._newer(client, ours) is newer


def test_the_clients_serial_is_its_soa_among_other_authority_records() -> None:
    query = ixfr_query(77)
    query.authority.insert(0, dns.rrset.from_text(ZONE + ".", 0, "IN", "NS", "ns1.example."))
    assert xfr._client_serial(query) == 77
    query.authority.pop()
    assert xfr._client_serial(query) is None


# -- the shared snapshot -----------------------------------------------------------------------

def test_the_snapshot_is_shared_until_the_last_transfer_gives_it_up() -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal)
    first = t._take()
    assert t._take() is first
    t._untake(first)
    assert t._shared is first  # one transfer still holds it
    t._untake(first)
    assert t._shared is None


@pytest.mark.parametrize("moved", ["generation", "serial"])
def test_a_new_snapshot_once_the_zone_moved(moved: str) -> None:
    cache, journal = big_cache(1, 3)
    t = transfers(cache, journal)
    first = t._take()
    if moved == "generation":
        cache.zone.changed()
    else:
        cache.zone.serial += 1
    assert t._take() is not first
