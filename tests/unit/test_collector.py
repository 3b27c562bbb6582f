"""collector.ServerCollector: every family /metrics shows, its samples exactly, from two
processes' counters (this one's and a worker's) each given its own numbers, and from the
cache's state (objects, imports by state, sync, serial, the largest RRset, imports of an
unknown trafficDistribution). Written for the survivors of scripts/mutate on
process/collector.py."""

from __future__ import annotations

from typing import Any

from clusterset_dns.process.collector import Largest, ServerCollector
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone.cache import IMPORT, Cache, PutRejected
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

from .helpers import build_cache

A, SRV, OTHER = (counters.TYPE_SLOT[n] for n in (1, 33, 0))
NOERROR, SERVFAIL, NXDOMAIN = 0, 2, 3

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def samples(collector: ServerCollector) -> Samples:
    """sample name -> (its labels, sorted) -> value, for every family collected."""
    out: Samples = {}
    for family in collector.collect():
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            assert labels not in out.setdefault(sample.name, {}), sample
            out[sample.name][labels] = sample.value
    return out


def one(value: float) -> dict[tuple[tuple[str, str], ...], float]:
    return {(): value}


def process_stats(first: int) -> Stats:
    """The plain counters numbered from ``first`` (each counter its own number)."""
    stats = Stats()
    (stats.truncated, stats.tcp_open, stats.tcp_refused, stats.tcp_aborted, stats.dropped,
     stats.dnstap_sent, stats.dnstap_dropped, stats.query_log_dropped) = range(first, first + 8)
    return stats


def cache_of_every_state() -> Cache:
    """served: web (an IP) and big (3 ready endpoints: the largest RRset); no_endpoint:
    down (none ready) and odd (unknown trafficDistribution, no slice); rejected: bad."""
    cache = build_cache(
        [service_import("web", ips=["10.9.0.1"]), service_import("big", type_="Headless"),
         service_import("down", type_="Headless"),
         service_import("odd", type_="Headless", traffic_distribution="Sideways")],
        [endpoint_slice("big-a", "big", cluster="east",
                        endpoints=[endpoint(f"10.1.0.{i}", ready=True) for i in (1, 2, 3)]),
         endpoint_slice("down-a", "down", cluster="east",
                        endpoints=[endpoint("10.2.0.1", ready=False)])])
    cache.apply([PutRejected(IMPORT, ("prod", "bad"), ("prod", "bad"), "a bad port")])
    return cache


def test_every_family_from_two_processes_and_the_cache() -> None:
    mine, worker = process_stats(1), process_stats(101)
    mine.requests[counters.base(A, False) + NOERROR] = 3
    mine.requests[counters.base(A, True) + NXDOMAIN] = 5
    mine.requests[counters.base(SRV, False, 2) + NOERROR] = 7  # EDE 14
    worker.requests[counters.base(A, False) + NOERROR] = 11
    worker.requests[counters.base(OTHER, False, 1) + SERVFAIL] = 13  # EDE 0
    worker.requests[counters.base(A, False, 3) + 23] = 17  # EDE 24, an rcode with no name
    mine.transfers = {("axfr", "full"): 1, ("ixfr", "uptodate"): 2}
    worker.transfers = {("axfr", "full"): 3}
    cache = cache_of_every_state()
    cache.builder.cut = 19
    collector = ServerCollector(cache, mine, lambda: [worker], workers_missing=lambda: 2,
                                journal_records=lambda: 29)
    got = samples(collector)
    got.pop("clusterset_dns_request_duration_seconds_bucket")  # test_durations' own
    got.pop("clusterset_dns_request_duration_seconds_count")
    got.pop("clusterset_dns_request_duration_seconds_sum")
    assert got.pop("clusterset_dns_zone_serial") == one(cache.zone.serial)
    rcodes = {"NOERROR": 21, "FORMERR": 0, "SERVFAIL": 13, "NXDOMAIN": 5, "NOTIMP": 0,
              "REFUSED": 0, "BADVERS": 0}
    expected: dict[str, Any] = {
        "clusterset_dns_responses_total": {(("rcode", k),): v for k, v in rcodes.items()},
        "clusterset_dns_requests_total": {
            (("proto", "udp"), ("rcode", "NOERROR"), ("type", "A")): 14,
            (("proto", "tcp"), ("rcode", "NXDOMAIN"), ("type", "A")): 5,
            (("proto", "udp"), ("rcode", "NOERROR"), ("type", "SRV")): 7,
            (("proto", "udp"), ("rcode", "SERVFAIL"), ("type", "other")): 13,
            (("proto", "udp"), ("rcode", "23"), ("type", "A")): 17},
        "clusterset_dns_answers_ede_total": {(("code", "0"),): 13, (("code", "14"),): 7,
                                             (("code", "24"),): 17},
        "clusterset_dns_truncated_total": one(1 + 101),
        "clusterset_dns_tcp_connections": one(2 + 102),
        "clusterset_dns_tcp_refused_total": one(3 + 103),
        "clusterset_dns_tcp_aborted_total": one(4 + 104),
        "clusterset_dns_dropped_total": one(5 + 105),
        "clusterset_dns_dnstap_frames_sent_total": one(6 + 106),
        "clusterset_dns_dnstap_dropped_total": one(7 + 107),
        "clusterset_dns_query_log_dropped_total": one(8 + 108),
        "clusterset_dns_answers_cut_total": one(19),
        "clusterset_dns_workers_missing": one(2),
        "clusterset_dns_transfers_total": {(("result", "full"), ("type", "axfr")): 4,
                                           (("result", "uptodate"), ("type", "ixfr")): 2},
        "clusterset_dns_journal_records": one(29),
        "clusterset_dns_synced": one(1),
        "clusterset_dns_largest_rrset_records": one(3),
        "clusterset_dns_unknown_traffic_distribution": one(1),
        "clusterset_dns_objects": {(("kind", k),): v for k, v in cache.counts().items()},
        "clusterset_dns_imports": {(("state", "served"),): 2, (("state", "no_endpoint"),): 2,
                                   (("state", "rejected"),): 1},
    }
    assert got == expected
    assert cache.counts()["imports"] == 4 and cache.counts()["slices"] == 2


def test_the_order_of_the_labelled_samples() -> None:
    """Requests and transfers sorted by their labels; the EDE codes in number order."""
    stats = Stats()
    for slot, rcode in ((SRV, NOERROR), (A, NXDOMAIN), (A, NOERROR)):
        stats.requests[counters.base(slot, False) + rcode] = 1
    stats.transfers = {("ixfr", "full"): 1, ("axfr", "refused"): 1, ("axfr", "full"): 1}
    order: dict[str, list[tuple[str, ...]]] = {}
    for family in ServerCollector(build_cache(), stats).collect():
        order[family.name] = [tuple(s.labels.values()) for s in family.samples]
    assert order["clusterset_dns_requests"] == [("A", "udp", "NOERROR"), ("A", "udp", "NXDOMAIN"),
                                                ("SRV", "udp", "NOERROR")]
    assert order["clusterset_dns_transfers"] == [("axfr", "full"), ("axfr", "refused"),
                                                 ("ixfr", "full")]
    assert order["clusterset_dns_answers_ede"] == [("0",), ("14",), ("24",)]


def test_not_synced_and_nothing_counted() -> None:
    got = samples(ServerCollector(build_cache(synced=False), Stats()))
    assert got["clusterset_dns_synced"] == one(0)
    assert "clusterset_dns_requests_total" not in got
    assert "clusterset_dns_transfers_total" not in got
    assert got["clusterset_dns_imports"] == {(("state", "served"),): 0,
                                             (("state", "no_endpoint"),): 0,
                                             (("state", "rejected"),): 0}
    assert got["clusterset_dns_workers_missing"] == one(0)
    assert got["clusterset_dns_journal_records"] == one(0)
    assert got["clusterset_dns_largest_rrset_records"] == one(1)  # the apex's NS


def test_the_durations_histogram_folds_every_process() -> None:
    """Cumulative buckets per transport, each bound's label its repr, a sample at a
    bound counted in it, one a hair above in the next, one past every bound only in
    +Inf; the count and sum of both processes."""
    mine, worker = Stats(), Stats()
    first = counters.DURATION_BUCKETS[0]
    mine.durations.record(False, first, 2)
    worker.durations.record(False, first * 1.001, 1)
    worker.durations.record(True, 100.0, 3)
    got = samples(ServerCollector(build_cache(), mine, lambda: [worker]))
    bounds = [repr(b) for b in counters.DURATION_BUCKETS] + ["+Inf"]
    expected = {(("le", b), ("proto", "udp")): 2 if i == 0 else 3 for i, b in enumerate(bounds)}
    expected |= {(("le", b), ("proto", "tcp")): 3 if b == "+Inf" else 0 for b in bounds}
    assert got["clusterset_dns_request_duration_seconds_bucket"] == expected
    assert got["clusterset_dns_request_duration_seconds_count"] == {
        (("proto", "udp"),): 3, (("proto", "tcp"),): 3}
    assert got["clusterset_dns_request_duration_seconds_sum"] == {
        (("proto", "udp"),): 2 * first + first * 1.001, (("proto", "tcp"),): 300.0}


def test_every_family_has_a_help_text() -> None:
    """Each family /metrics shows says what it counts (# HELP): a text, not None."""
    families = list(ServerCollector(build_cache(), Stats()).collect())
    assert len(families) == 22
    for family in families:
        assert isinstance(family.documentation, str) and family.documentation.strip(), \
            family.name


def test_the_largest_rrset_is_read_again_at_most_a_minute_later_by_default() -> None:
    """A reading that takes a second would wait 100 s: by default the wait is 60 s."""
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # the reading took a second (from one clock reading to the next)
        return now[0]

    largest = Largest(build_cache(), clock=clock)
    largest.get()
    assert largest.wait == 60.0
