"""Journal diffs, IXFR selection and message packing, with dnspython as the oracle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from ipaddress import ip_address, ip_network

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.transfers import xfr, zonedata
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import Cache, PutImport, PutSlice, SetSerial, SetSynced
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

HTTP = (Port("http", "tcp", 80),)


def headless(name: str, addresses: list[str]) -> list[PutImport | PutSlice]:
    endpoints = tuple(Endpoint((ip_address(a),), None) for a in addresses)
    return [PutImport(("ns", name), ServiceImport("ns", name, ServiceType.HEADLESS, (), HTTP)),
            PutSlice(("ns", f"{name}-east"),
                     EndpointSlice("ns", f"{name}-east", name, "east", endpoints, HTTP))]


def journaled(limit: int = 10) -> tuple[Cache, Journal]:
    journal = Journal(limit)
    cache = Cache(ZoneNames("clusterset.local"), 5, on_change=journal.record)
    return cache, journal


def texts(records: tuple[rrs.Record, ...] | list[rrs.Record]) -> set[str]:
    return {rrs.record_text(r) for r in records}


def test_serial_is_time_based_and_always_increases() -> None:
    cache, _ = journaled()
    before = cache.zone.serial
    assert before >= int(time.time()) - 5
    for i in range(3):
        cache.apply(headless("web", [f"10.0.0.{i + 1}"]))
    assert cache.zone.serial >= before + 3


def test_set_serial_makes_a_worker_follow_its_parent() -> None:
    parent, _ = journaled()
    worker = Cache(ZoneNames("clusterset.local"), 5)
    ops = [*headless("web", ["10.0.0.1"]), SetSynced(True)]
    parent.apply(ops)
    worker.apply([*ops, SetSerial(parent.zone.serial + 1000)])
    assert worker.zone.serial == parent.zone.serial + 1000
    worker.apply([SetSerial(7)])  # no object changed: the serial still follows
    assert worker.zone.serial == 7
    assert zonedata.take(worker.zone).soa.rdata[-20:-16] == (7).to_bytes(4, "big")


def test_journal_holds_exactly_the_records_that_changed() -> None:
    cache, journal = journaled()
    cache.apply([*headless("web", ["10.0.0.1", "10.0.0.2"]), SetSynced(True)])
    first = cache.zone.serial
    cache.apply(headless("web", ["10.0.0.1", "10.0.0.3"]))
    diff = journal.diffs[-1]
    assert (diff.old_serial, diff.new_serial) == (first, cache.zone.serial)
    removed, added = texts(diff.removed), texts(diff.added)
    assert "10-0-0-2.east.web.ns.svc.clusterset.local. 5 IN A 10.0.0.2" in removed
    assert "10-0-0-3.east.web.ns.svc.clusterset.local. 5 IN A 10.0.0.3" in added
    assert not any("10.0.0.1" in line for line in removed | added)  # unchanged
    assert not any(" SOA " in line for line in removed | added)  # framed by IXFR itself
    # Replaying the diff on the old zone gives the new zone.
    before = set(rrs.zone_records(cache.zone.every_answer())) - set(diff.added) | set(diff.removed)
    assert (before - set(diff.removed)) | set(diff.added) == set(rrs.zone_records(
        dict(cache.zone.every_answer())))


def test_journal_is_bounded_and_chains_serials() -> None:
    cache, journal = journaled(limit=2)
    cache.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])
    serials = [cache.zone.serial]
    for i in range(3):
        cache.apply(headless("web", [f"10.0.1.{i + 1}"]))
        serials.append(cache.zone.serial)
    assert len(journal.diffs) == 2
    assert journal.records == sum(len(d.removed) + len(d.added) for d in journal.diffs)
    now = serials[-1]
    assert journal.since(now, now) == []
    chain = journal.since(serials[1], now)
    assert chain is not None and [d.old_serial for d in chain] == serials[1:3]
    assert journal.since(serials[0], now) is None  # dropped: the whole zone instead
    assert journal.since(12345, now) is None  # not one of ours (another replica's)


def test_a_worker_journal_starts_at_its_parent_serial() -> None:
    """A worker's own start-up serial (the time it started) can equal a serial its
    parent hands out later. Its step back to the parent's serial must not stay in the
    journal: an IXFR from that serial would replay the worker's empty start-up zone."""
    parent = Cache(ZoneNames("clusterset.local"), 5)
    worker, journal = journaled()
    start = worker.zone.serial
    parent.apply([SetSerial(start - 1)])
    worker.apply([SetSerial(parent.zone.serial)])  # the snapshot: a step back
    ops = [*headless("web", ["10.0.0.1"]), SetSynced(True)]
    parent.apply([*ops, SetSerial(start)])  # the parent's load lands on `start`
    worker.apply([*ops, SetSerial(parent.zone.serial)])
    parent.apply(headless("web", ["10.0.0.2"]))
    worker.apply([*headless("web", ["10.0.0.2"]), SetSerial(parent.zone.serial)])
    chain = journal.since(start, worker.zone.serial)
    assert chain is not None and [(d.old_serial, d.new_serial) for d in chain] == [
        (start, worker.zone.serial)]
    assert "web.ns.svc.clusterset.local. 5 IN A 10.0.0.2" in texts(chain[0].added)
    assert "web.ns.svc.clusterset.local. 5 IN A 10.0.0.1" in texts(chain[0].removed)
    # The load (the update completing the first sync) is no difference: from before it,
    # the whole zone.
    assert journal.since(start - 1, worker.zone.serial) is None


def test_a_first_list_page_by_page_keeps_no_history() -> None:
    """The first list comes in page by page, before the zone is synced: those serials
    are half-loaded zones, never worth an IXFR, so the journal keeps none of them (at
    10,000 imports it would otherwise hold the whole zone as differences)."""
    cache, journal = journaled()
    pages = [headless(f"web{i}", [f"10.0.{i}.1", f"10.0.{i}.2"]) for i in range(3)]
    half = []
    for page in pages:
        cache.apply(page)
        half.append(cache.zone.serial)
    assert not journal.diffs and journal.records == 0
    cache.apply([SetSynced(True)])
    synced = cache.zone.serial
    assert journal.since(half[0], synced) is None  # the whole zone
    cache.apply(headless("web0", ["10.0.0.1"]))
    chain = journal.since(synced, cache.zone.serial)
    assert chain is not None and len(chain) == 1
    removed, added = texts(chain[0].removed), texts(chain[0].added)
    assert "10-0-0-2.east.web0.ns.svc.clusterset.local. 5 IN A 10.0.0.2" in removed
    assert not any("web1" in line or "web2" in line for line in removed | added)
    assert chain[0].old_serial == synced


def test_journal_of_zero_keeps_nothing() -> None:
    cache, journal = journaled(limit=0)
    cache.apply(headless("web", ["10.0.0.1"]))
    assert not journal.diffs and journal.since(1, cache.zone.serial) is None


class Collect:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(message)


def transfer(cache: Cache, journal: Journal, query: dns.message.Message,
             peer: str = "127.0.0.1") -> list[dns.message.Message]:
    transfers = xfr.Transfers(cache.zone, journal, (ip_network("127.0.0.0/8"),), None,
                              xfr.Counts({}))
    out = Collect()
    coro = transfers.start(query.to_wire(), peer, out)
    assert coro is not None
    asyncio.run(coro)
    return [dns.message.from_wire(m, xfr=True, one_rr_per_rrset=True) for m in out.messages]


def lines(messages: list[dns.message.Message]) -> list[str]:
    return [f"{r.name} {r.ttl} IN {dns.rdatatype.to_text(r.rdtype)} {rd}"
            for m in messages for r in m.answer for rd in r]


def test_axfr_splits_into_messages_under_64k_each_decoded_by_dnspython() -> None:
    cache, journal = journaled()
    for i in range(8):
        cache.apply(headless(f"s{i}", [f"10.{i}.{j // 250}.{j % 250 + 1}" for j in range(500)]))
    messages = transfer(cache, journal, dns.message.make_query("clusterset.local", "AXFR"))
    assert len(messages) > 1
    assert all(len(m.to_wire()) <= 65535 for m in messages)
    assert len(messages[0].question) == 1 and not messages[1].question
    got = lines(messages)
    assert got[0] == got[-1] and " SOA " in got[0]
    want = {rrs.record_text(r) for r in rrs.zone_records(cache.zone.every_answer())}
    assert {" ".join(line.split()) for line in got} == {" ".join(w.split()) for w in want}
    assert len(got) == len(want) + 1  # every record once, the SOA twice


def test_axfr_copies_stored_answers_and_decodes_only_what_it_must(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The zone's RRsets are copied from the stored answers, their owners compressed;
    only an answer whose bytes hold the owner pointer elsewhere (an address with
    C0 0C in it) and the apex SOA/NS are decoded. dnspython reads the zone back."""
    cache, journal = journaled()
    cache.apply([PutImport(("ns", "odd"), ServiceImport(
        "ns", "odd", ServiceType.CLUSTER_SET_IP, (ip_address("192.12.192.12"),), HTTP))])
    for i in range(4):  # RRsets past a message's 16 KiB, one alone over 16 KiB
        count = 1200 if i == 2 else 300
        cache.apply(headless(f"s{i}", [f"10.{i}.{j // 250}.{j % 250 + 1}"
                                       for j in range(count)]))
    decoded: list[bytes] = []
    real = rrs.answer_records

    def noting(key: bytes, answer: wire.Answer) -> Iterator[rrs.Record]:
        decoded.append(key)
        return real(key, answer)

    monkeypatch.setattr(rrs, "answer_records", noting)
    messages = transfer(cache, journal, dns.message.make_query("clusterset.local", "AXFR"))
    monkeypatch.setattr(rrs, "answer_records", real)
    assert sorted({int.from_bytes(key[-4:-2]) for key in decoded}) == [
        wire.A, wire.NS, wire.SOA]
    assert [key[:-4] for key in decoded if key[-4:-2] == b"\x00\x01"] == [
        b"\x03odd\x02ns\x03svc\x0aclusterset\x05local\x00"]
    got = lines(messages)
    want = {rrs.record_text(r) for r in rrs.zone_records(cache.zone.every_answer())}
    assert {" ".join(line.split()) for line in got} == {" ".join(w.split()) for w in want}
    assert len(got) == len(want) + 1
    sizes = [len(m.to_wire()) for m in messages]
    assert len(messages) > 3 and max(sizes) > 16384 and max(sizes) <= 65535
    raw = sum(len(r.name.to_wire()) + 10 + len(rd.to_wire())
              for m in messages for r in m.answer for rd in r)
    assert sum(sizes) < raw * 0.7  # owners compressed (measured: 0.58)


def test_ixfr_answers_the_difference_and_falls_back_to_axfr_form() -> None:
    cache, journal = journaled()
    cache.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])
    old = cache.zone.serial
    cache.apply(headless("web", ["10.0.0.2"]))
    new = cache.zone.serial
    query = dns.message.make_query("clusterset.local", "IXFR")
    query.authority.append(dns.rrset.from_text("clusterset.local.", 0, "IN", "SOA",
                                               f". . {old} 0 0 0 0"))
    got = lines(transfer(cache, journal, query))
    soas = [int(line.split()[6]) for line in got if " SOA " in line]
    assert soas == [new, old, new, new]
    framing = [i for i, line in enumerate(got) if " SOA " in line]
    removed, added = got[framing[1] + 1 : framing[2]], got[framing[2] + 1 : framing[3]]
    assert any(line.endswith("IN A 10.0.0.1") for line in removed)
    assert any(line.endswith("IN A 10.0.0.2") for line in added)
    assert not any("10.0.0.2" in line for line in removed)
    query.authority[0] = dns.rrset.from_text("clusterset.local.", 0, "IN", "SOA",
                                             ". . 99 0 0 0 0")
    full = lines(transfer(cache, journal, query))
    assert " SOA " not in full[1] and len(full) > 4


@pytest.mark.parametrize("peer", ["10.1.1.1", "::1", "garbage"])
def test_transfer_outside_the_allowed_networks_is_refused(peer: str) -> None:
    cache, journal = journaled()
    messages = transfer(cache, journal, dns.message.make_query("clusterset.local", "AXFR"),
                        peer)
    assert len(messages) == 1 and messages[0].rcode() == dns.rcode.REFUSED


def test_only_transfer_queries_are_taken() -> None:
    cache, journal = journaled()
    transfers = xfr.Transfers(cache.zone, journal, (), None, xfr.Counts({}))
    plain = dns.message.make_query("clusterset.local", "SOA").to_wire()
    assert transfers.start(plain, "127.0.0.1", Collect()) is None
    assert xfr.transfer_qtype(b"\x00" * 5) == 0


class ChangesMidway(Collect):
    """A client during whose transfer the zone changes (after the first message)."""

    def __init__(self, cache: Cache) -> None:
        super().__init__()
        self.cache = cache

    async def send(self, message: bytes) -> None:
        if not self.messages:
            self.cache.apply(headless("s0", ["10.99.0.1"]))  # s0's 500 names go
        await super().send(message)


def test_a_change_during_a_transfer_never_mixes_into_it() -> None:
    cache, journal = journaled()
    for i in range(8):
        cache.apply(headless(f"s{i}", [f"10.{i}.{j // 250}.{j % 250 + 1}" for j in range(500)]))
    before = {" ".join(rrs.record_text(r).split())
              for r in rrs.zone_records(cache.zone.every_answer())}
    transfers = xfr.Transfers(cache.zone, journal, (ip_network("127.0.0.0/8"),), None,
                              xfr.Counts({}))
    out = ChangesMidway(cache)
    coro = transfers.start(dns.message.make_query("clusterset.local", "AXFR").to_wire(),
                           "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    got = lines([dns.message.from_wire(m, xfr=True) for m in out.messages])
    assert len(out.messages) > 2
    assert {" ".join(line.split()) for line in got} == before
    assert not any("10.99.0.1" in line for line in got)
    after = {" ".join(rrs.record_text(r).split())
             for r in rrs.zone_records(cache.zone.every_answer())}
    assert after != before  # the change did happen meanwhile
