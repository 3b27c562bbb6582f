"""The scrape-time collector: turns the plain counters of the DNS path (serving.stats)
and the cache's state into metric families when /metrics is read."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from clusterset_dns.base.clock import SYSTEM
from clusterset_dns.base.metrics import RCODES
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import NO_ENDPOINT, REJECTED, SERVED, Cache

log = logging.getLogger(__name__)

# BIND 9.18.28 and later refuse a zone with an RRset of more records than this by
# default (max-records-per-type): the whole transfer fails.
BIND_MAX_RECORDS_PER_TYPE = 100


class Largest:
    """The largest RRset of the zone (rrs.largest_rrset), worked out again when the
    serial moved, but no sooner than 100 times what the last reading took (at most
    ``interval`` seconds): it reads every answer (about 0.1 s at 430,000), which a scrape
    must not do every time on a large zone that changes all the time. A small zone is
    read again at once."""

    def __init__(self, cache: Cache, interval: float = 60.0,
                 clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.cache, self.interval, self.clock = cache, interval, clock
        self.serial: tuple[int, int] | None = None  # (serial, services still to build)
        self.at = self.wait = 0.0
        self.found = (0, b"")

    def get(self) -> tuple[int, bytes]:
        """(records, question key) of the largest RRset; (0, b"") for none."""
        # The answers built after the sync (zone/pending.py) change it without a serial.
        serial = (self.cache.zone.serial, len(self.cache.pending))
        if serial != self.serial:
            start = self.clock()
            if self.serial is None or start - self.at >= self.wait:
                self.found = rrs.largest_rrset(self.cache.zone.answers)
                end = self.clock()
                self.wait = min(self.interval, 100 * (end - start))
                self.serial, self.at = serial, end
        return self.found


def warn_large_rrsets(cache: Cache) -> None:
    """Logs a warning when the zone holds an RRset larger than BIND secondaries take by
    default (called once, at the first sync, when zone transfers are served)."""
    count, key = rrs.largest_rrset(cache.zone.answers)
    if count > BIND_MAX_RECORDS_PER_TYPE:
        log.warning("the largest RRset served, %s, has %d records: BIND 9.18.28 and later "
                    "refuse a zone transfer with an RRset of over %d records by default "
                    "(max-records-per-type); raise that limit on BIND secondaries, see "
                    "docs/operations.md", rrs.key_text(key), count, BIND_MAX_RECORDS_PER_TYPE)


class ServerCollector(Collector):
    """Reads the counters of this process and of its workers (``extra_stats``)."""

    def __init__(self, cache: Cache, stats: Stats,
                 extra_stats: Callable[[], list[Stats]] = list,
                 workers_missing: Callable[[], int] = lambda: 0,
                 journal_records: Callable[[], int] = lambda: 0,
                 largest: Largest | None = None) -> None:
        self.journal_records = journal_records
        self.largest = largest or Largest(cache)
        self.cache = cache
        self.stats = stats
        self.extra_stats = extra_stats
        self.workers_missing = workers_missing

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily
                                  | HistogramMetricFamily]:
        every = [self.stats, *self.extra_stats()]
        responses = CounterMetricFamily("clusterset_dns_responses", "DNS responses sent, by rcode",
                                        labels=["rcode"])
        for code, name in RCODES.items():
            responses.add_metric([name], sum(s.rcodes[code] for s in every))
        yield responses
        requests = CounterMetricFamily(
            "clusterset_dns_requests", "DNS queries answered, by query type, transport "
            "(udp, tcp) and rcode", labels=["type", "proto", "rcode"])
        ede = CounterMetricFamily("clusterset_dns_answers_ede",
                                  "Answers that carried an Extended DNS Error (RFC 8914), by "
                                  "INFO-CODE", labels=["code"])
        folded: dict[tuple[str, str, str], int] = {}
        by_code: dict[int, int] = {}
        for s in every:
            for index, count in enumerate(s.requests):
                if count:
                    qtype, proto, info, rcode = counters.slot_of(index)
                    label = (qtype, proto, RCODES.get(rcode, str(rcode)))
                    folded[label] = folded.get(label, 0) + count
                    if info is not None:
                        by_code[info] = by_code.get(info, 0) + count
        for label, count in sorted(folded.items()):
            requests.add_metric(list(label), count)
        yield requests
        for info in sorted(c for c in counters.EDE_CODES if c is not None):
            ede.add_metric([str(info)], by_code.get(info, 0))
        yield ede
        yield durations(every)
        yield CounterMetricFamily("clusterset_dns_truncated", "UDP responses sent with TC set",
                                  value=sum(s.truncated for s in every))
        yield GaugeMetricFamily("clusterset_dns_tcp_connections", "Open TCP connections",
                                value=sum(s.tcp_open for s in every))
        yield CounterMetricFamily("clusterset_dns_tcp_refused",
                                  "TCP connections closed at once: --max-tcp-connections reached",
                                  value=sum(s.tcp_refused for s in every))
        yield CounterMetricFamily("clusterset_dns_tcp_aborted",
                                  "TCP connections aborted by the idle timeout with answers "
                                  "unsent (the client did not read)",
                                  value=sum(s.tcp_aborted for s in every))
        yield CounterMetricFamily("clusterset_dns_answers_cut",
                                  "Answers built larger than one DNS message can carry, cut to "
                                  "the records that fit (sent with TC)",
                                  value=self.cache.builder.cut)
        yield CounterMetricFamily("clusterset_dns_dropped",
                                  "Packets not answered (no header, or a response)",
                                  value=sum(s.dropped for s in every))
        yield CounterMetricFamily("clusterset_dns_dnstap_frames_sent",
                                  "dnstap frames written to the collector's connection "
                                  "(--dnstap; two an answer)",
                                  value=sum(s.dnstap_sent for s in every))
        yield CounterMetricFamily("clusterset_dns_dnstap_dropped",
                                  "dnstap frames dropped: the queue was full (the collector "
                                  "absent, gone or slow; two an answer)",
                                  value=sum(s.dnstap_dropped for s in every))
        yield CounterMetricFamily("clusterset_dns_query_log_dropped",
                                  "Query log lines not written: over --query-log-rate",
                                  value=sum(s.query_log_dropped for s in every))
        yield GaugeMetricFamily("clusterset_dns_workers_missing",
                                "Worker processes that should serve and do not (restarting)",
                                value=self.workers_missing())
        transfers = CounterMetricFamily(
            "clusterset_dns_transfers", "Zone transfers asked for, by type (axfr, ixfr; "
            "signed: a TSIG-signed query that is not a transfer) and result (full, "
            "incremental, uptodate, refused, notauth, formerr, busy, timeout, udp-truncated, "
            "udp-limited, signed, limited)",
            labels=["type", "result"])
        totals: dict[tuple[str, str], int] = {}
        for s in every:
            for key, count in s.transfers.items():
                totals[key] = totals.get(key, 0) + count
        for (qtype, result), count in sorted(totals.items()):
            transfers.add_metric([qtype, result], count)
        yield transfers
        yield GaugeMetricFamily("clusterset_dns_journal_records",
                                "Records held by the IXFR journal (this process)",
                                value=self.journal_records())
        zone = self.cache.zone
        yield GaugeMetricFamily("clusterset_dns_synced", "1 once both resources were listed",
                                value=1 if zone.synced else 0)
        yield GaugeMetricFamily("clusterset_dns_zone_serial", "SOA serial", value=zone.serial)
        yield GaugeMetricFamily("clusterset_dns_largest_rrset_records",
                                "Records of the largest RRset served (BIND secondaries refuse "
                                "more than 100 by default); after a change of a large zone, "
                                "up to a minute late", value=self.largest.get()[0])
        yield GaugeMetricFamily("clusterset_dns_unknown_traffic_distribution",
                                "ServiceImports whose trafficDistribution is not understood "
                                "(answered without a preference; each logged once)",
                                value=len(self.cache.unknown_traffic))
        objects = GaugeMetricFamily("clusterset_dns_objects", "Objects in the cache",
                                    labels=["kind"])
        for kind, count in self.cache.counts().items():
            objects.add_metric([kind], count)
        yield objects
        states = GaugeMetricFamily("clusterset_dns_imports", "ServiceImports by state: served "
                                   "(answers something), no_endpoint (no ready endpoint, or no "
                                   "usable IP), rejected (never converted)", labels=["state"])
        found = {SERVED: 0, NO_ENDPOINT: 0, REJECTED: 0}
        for state in self.cache.states.values():
            found[state] += 1
        for state, count in found.items():
            states.add_metric([state], count)
        yield states



def durations(every: list[Stats]) -> HistogramMetricFamily:
    """clusterset_dns_request_duration_seconds: the sampled answers' durations."""
    family = HistogramMetricFamily(
        "clusterset_dns_request_duration_seconds",
        "Time to answer, from the query's read to its response (over batched UDP: from "
        "its batch's read to the batch's send), by transport; sampled: 1 in "
        "--duration-sample answers, so the count is of sampled answers", labels=["proto"])
    for tcp, proto in enumerate(counters.TRANSPORTS):
        total, buckets = 0, []
        for bound, index in zip(counters.DURATION_BUCKETS, range(len(counters.DURATION_BUCKETS)),
                                strict=True):
            total += sum(s.durations.counts[tcp][index] for s in every)
            buckets.append((repr(bound), total))
        total += sum(s.durations.counts[tcp][-1] for s in every)
        buckets.append(("+Inf", total))
        family.add_metric([proto], buckets, sum(s.durations.sums[tcp] for s in every))
    return family
