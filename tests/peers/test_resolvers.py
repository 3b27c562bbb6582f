"""Resolvers outside the cluster in front of our server, each its real program:
Unbound (``stub-zone``), dnsmasq (``server=/clusterset.local/``) and BIND (a
``forward only`` zone). Each answers every name of the zone as we do, keeps a negative
answer for no longer than our SOA says and answers it again from its cache (while our
server is stopped), and completes an answer larger than 1232 bytes (the
120-endpoint service) over TCP."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from clusterset_dns_testkit import peers
from clusterset_dns_testkit.daemon import Daemon, ask
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.peers import PeerError
from clusterset_dns_testkit.resolvers import BindForwarder, DnsmasqResolver, UnboundResolver
from clusterset_dns_testkit.secondaries import bind_default_max_records

from .peerlib import BIG, BIG_NAME, ZONE, largest_rrset, make_objects, questions, server, zone_of

pytestmark = pytest.mark.peers

# Our TTL, of records and of negative answers (the SOA's TTL and minimum): long enough
# that the second query of a test comes well within it however slow the machine.
TTL = 60
STARTERS: dict[str, Callable[[int, int], Daemon]] = {
    "unbound": lambda upstream, largest: UnboundResolver(upstream),
    "dnsmasq": lambda upstream, largest: DnsmasqResolver(upstream),
    "bind": lambda upstream, largest: BindForwarder(upstream, max_records=largest),
}
Answer = tuple[str, set[tuple[str, str, frozenset[str]]]]


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    objects = make_objects(tmp_path_factory.mktemp("resolvers"))
    with server(objects, "--ttl", str(TTL), "--allow-transfer", "127.0.0.1/32") as srv:
        yield srv


@pytest.fixture(params=list(STARTERS))
def resolver(request: pytest.FixtureRequest, ours: ServerProcess) -> Iterator[Daemon]:
    largest = largest_rrset(zone_of(ours))
    with STARTERS[request.param](ours.port, largest) as peer:
        yield peer


def requests(srv: ServerProcess, **labels: str) -> float:
    """Queries our server has answered (all of them, or those with ``labels``)."""
    return srv.metric("clusterset_dns_requests_total", **labels)


def answer(reply: dns.message.Message, ttl_at_most: dict[tuple[str, str], int]) -> Answer:
    """The rcode and answer RRsets without their TTLs; each TTL is checked against
    ``ttl_at_most`` (a cache counts TTLs down) or recorded there (ours)."""
    rrsets = set()
    for rrset in reply.answer:
        key = (rrset.name.to_text().lower(), dns.rdatatype.to_text(rrset.rdtype))
        limit = ttl_at_most.setdefault(key, rrset.ttl)
        assert 0 <= rrset.ttl <= limit, (key, rrset.ttl, limit)
        rrsets.add((*key, frozenset(rdata.to_text().lower() for rdata in rrset)))
    return dns.rcode.to_text(reply.rcode()), rrsets


def test_same_answers_as_ours(ours: ServerProcess, resolver: Daemon) -> None:
    names = [*questions(zone_of(ours)), (f"nothing.demo.svc.{ZONE}", "A"),
             (f"web.demo.svc.{ZONE}", "TXT")]
    differ = []
    for name, rdtype in names:
        ttls: dict[tuple[str, str], int] = {}
        want = answer(ask(ours.port, name, rdtype), ttls)
        got = answer(resolver.ask(name, rdtype, recurse=True), ttls)
        if got != want:
            differ.append(f"{name} {rdtype}: ours {want}, {resolver.program_name} {got}")
    assert differ == []


@pytest.mark.parametrize(("name", "rdtype", "rcode"), [
    (f"absent.demo.svc.{ZONE}", "A", "NXDOMAIN"),
    # NODATA: every getaddrinfo of an IPv4-only service asks AAAA too
    (f"web.demo.svc.{ZONE}", "AAAA", "NOERROR"),
])
def test_negative_answer_cached_for_our_soa_minimum(
        ours: ServerProcess, resolver: Daemon, name: str, rdtype: str, rcode: str) -> None:
    soa = ask(ours.port, ZONE, "SOA").answer[0]
    negative_ttl = min(soa.ttl, soa[0].minimum)  # RFC 2308 5
    assert negative_ttl == TTL
    before = requests(ours)
    first = resolver.ask(name, rdtype, tcp=False, recurse=True)
    assert dns.rcode.to_text(first.rcode()) == rcode and not first.answer
    assert requests(ours) > before, "the first query never reached our server"
    # The second is asked while our server is stopped (SIGSTOP): only the resolver's
    # cache can answer it. (Counting our queries around it could not tell: a resolver
    # that retransmitted the first query, our answer being slow, is counted late.)
    assert ours.proc is not None
    os.kill(ours.proc.pid, signal.SIGSTOP)
    try:
        second = resolver.ask(name, rdtype, tcp=False, recurse=True, timeout=5)
    finally:
        os.kill(ours.proc.pid, signal.SIGCONT)
    assert dns.rcode.to_text(second.rcode()) == rcode and not second.answer, second
    cached = [rrset for rrset in second.authority if rrset.rdtype == dns.rdatatype.SOA]
    assert cached, f"no SOA with the cached negative answer:\n{second}"
    assert 0 < cached[0].ttl <= negative_ttl


@pytest.mark.parametrize("rdtype", ["A", "SRV"])
def test_large_answer_completed_over_tcp(ours: ServerProcess, resolver: Daemon,
                                         rdtype: str) -> None:
    tcp_before = requests(ours, proto="tcp", type=rdtype)
    reply = resolver.ask(BIG_NAME, rdtype, tcp=False, recurse=True, payload=1232)
    if reply.flags & dns.flags.TC:  # the resolver's own answer is too large for UDP
        reply = resolver.ask(BIG_NAME, rdtype, recurse=True)
    assert dns.rcode.to_text(reply.rcode()) == "NOERROR", reply
    ttls: dict[tuple[str, str], int] = {}
    want = answer(ask(ours.port, BIG_NAME, rdtype), ttls)
    assert len(next(iter(want[1]))[2]) == BIG
    assert answer(reply, ttls) == want
    # our UDP answer could not hold it: the resolver asked again over TCP
    assert requests(ours, proto="tcp", type=rdtype) > tcp_before


def test_bind_forwarder_default_limit_fails_a_headless_service_over_100_endpoints(
        ours: ServerProcess) -> None:
    """BIND's ``max-records-per-type`` bounds its cache too: with the default (100
    since 9.18.28) the 120-endpoint service answers SERVFAIL through it."""
    default = bind_default_max_records()
    with BindForwarder(ours.port) as bind:
        reply = bind.ask(BIG_NAME, "A", recurse=True)
        expected = "NOERROR" if default is None or default >= BIG else "SERVFAIL"
        assert dns.rcode.to_text(reply.rcode()) == expected
        assert bind.ask(f"web.demo.svc.{ZONE}", "A", recurse=True).answer


def test_a_launcher_that_fails_leaves_no_process_and_no_directory(
        ours: ServerProcess) -> None:
    """dnsmasq on a port someone holds exits at once: the launcher's error names it,
    and nothing of it is left (the caller never got an object to stop)."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    dirs = set(Path(tempfile.gettempdir()).glob("dnsmasq-*"))
    try:
        with pytest.raises(PeerError, match="dnsmasq"):
            DnsmasqResolver(ours.port, port=taken.getsockname()[1])
    finally:
        taken.close()
    assert not [proc for proc in peers._live if proc.name == "dnsmasq"]
    assert set(Path(tempfile.gettempdir()).glob("dnsmasq-*")) <= dirs
