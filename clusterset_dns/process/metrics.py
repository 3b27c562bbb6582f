"""Prometheus metrics. The DNS path only bumps plain integers (stats.Stats);
they are turned into metric families here, at scrape time."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from clusterset_dns import __version__
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone.cache import NO_ENDPOINT, REJECTED, SERVED, Cache

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          16: "BADVERS"}

# The kind label of invalid_objects_total is the Kubernetes kind, whoever counts: the
# cache (IMPORT, SLICE), a manifest or a watch event (the object's kind), a list item
# (it carries no kind: the watch names its resource, "import", "slice" or "property").
INVALID_KINDS = {"import": "ServiceImport", "slice": "EndpointSlice",
                 "property": "ClusterProperty"}


class Metrics:
    """The instruments of one server: its own registry, so that each server (two in one
    process, or one started again) exposes its own /metrics and counts from zero."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.invalid_objects = Counter(
            "clusterset_dns_invalid_objects_total",
            "API objects skipped because they are invalid for DNS", ["kind"], registry=registry)
        self.watch_restarts = Counter(
            "clusterset_dns_watch_restarts_total",
            "Watch streams restarted, by resource and reason", ["resource", "reason"],
            registry=registry)
        self.manifest_errors = Counter(
            "clusterset_dns_manifest_errors_total",
            "Manifest files that could not be used (once per change of the file) and failed "
            "directory walks, by reason", ["reason"], registry=registry)
        self.relists = Counter(
            "clusterset_dns_relists_total",
            "Full lists of a resource, by why: initial, gone (410), rv-backwards, periodic, bug",
            ["resource", "reason"], registry=registry)
        self.relist_drift = Counter(
            "clusterset_dns_relist_drift_total",
            "Objects a relist found added, removed or changed that the watch had not "
            "delivered (repaired by that relist)", ["resource", "change"], registry=registry)
        self.last_event = Gauge(
            "clusterset_dns_last_event_timestamp_seconds", "When the last watch event arrived",
            ["resource"], registry=registry)
        self.worker_restarts = Counter(
            "clusterset_dns_worker_restarts_total",
            "Worker processes restarted, by reason: exited (killed, or failed and exited), "
            "stalled (stopped reporting or applying)", ["reason"], registry=registry)
        self.udp_io = Gauge(
            "clusterset_dns_udp_io",
            "1 for the UDP I/O path in use: recvmmsg/sendmmsg (batched) or recvfrom/sendto",
            ["mode"], registry=registry)
        self.update_seconds = Histogram(
            "clusterset_dns_update_seconds", "Time to rebuild answers for one batch of changes",
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
            registry=registry)
        self.http_evicted = Counter(
            "clusterset_dns_http_connections_closed_total",
            "/health, /ready, /metrics connections closed at the cap (the oldest one without "
            "a request, or the new one)", registry=registry)
        # CoreDNS's kubernetes plugin exports the same measure (its
        # coredns_kubernetes_dns_programming_duration_seconds); buckets from 1 ms to 5 min.
        self.programming = Histogram(
            "clusterset_dns_dns_programming_duration_seconds",
            "From an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the "
            "moment its answers are served, by the service kind of its import (ClusterSetIP, "
            "Headless)", ["service_kind"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                     120, 300), registry=registry)
        build_info = Gauge("clusterset_dns_build_info", "1, labelled with the version and Python",
                           ["version", "python"], registry=registry)
        build_info.labels(__version__, platform.python_version()).set(1)
        self.notifies = Counter(
            "clusterset_dns_notify_total",
            "NOTIFY messages to --notify targets: sent (each try), acknowledged, failed (no "
            "acknowledgement after every retry)", ["result"], registry=registry)

    def invalid(self, kind: str) -> None:
        """One invalid object of ``kind`` (see INVALID_KINDS)."""
        self.invalid_objects.labels(INVALID_KINDS.get(kind, kind) or "unknown").inc()

    def exposition(self) -> tuple[str, bytes]:
        """Content type and body of /metrics."""
        return CONTENT_TYPE_LATEST, generate_latest(self.registry)


class ServerCollector(Collector):
    """Reads the counters of this process and of its workers (``extra_stats``)."""

    def __init__(self, cache: Cache, stats: Stats,
                 extra_stats: Callable[[], list[Stats]] = list,
                 workers_missing: Callable[[], int] = lambda: 0,
                 journal_records: Callable[[], int] = lambda: 0) -> None:
        self.journal_records = journal_records
        self.cache = cache
        self.stats = stats
        self.extra_stats = extra_stats
        self.workers_missing = workers_missing

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
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
        yield GaugeMetricFamily("clusterset_dns_workers_missing",
                                "Worker processes that should serve and do not (restarting)",
                                value=self.workers_missing())
        transfers = CounterMetricFamily(
            "clusterset_dns_transfers", "Zone transfers asked for, by type (axfr, ixfr; "
            "signed: a TSIG-signed query that is not a transfer) and result (full, "
            "incremental, uptodate, refused, notauth, formerr, busy, udp-truncated, "
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

