"""Prometheus metric declarations of one server (its own registry). The DNS path only
bumps plain integers (serving.stats); process.collector turns them into metric
families at scrape time."""

from __future__ import annotations

import platform
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from clusterset_dns import __version__
from clusterset_dns.base.clock import SYSTEM

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          16: "BADVERS"}

# The kind label of invalid_objects_total is the Kubernetes kind, whoever counts: the
# cache (IMPORT, SLICE), a manifest or a watch event (the object's kind), a list item
# (it carries no kind: the watch names its resource, "import", "slice" or "property").
INVALID_KINDS = {"import": "ServiceImport", "slice": "EndpointSlice",
                 "property": "ClusterProperty"}


# Bodies of /metrics worked out at most this many a second on average, and as many at
# once: one costs about 4 ms of the loop that answers DNS, and the port is open to every
# pod. A scraper asks every few seconds, a test polling every 0.05 s under 20 times a
# second: each gets a fresh body; a flood gets the last one, at most 0.05 s old.
SCRAPE_RATE = 20.0
SCRAPE_BURST = 20


class Metrics:
    """The instruments of one server: its own registry, so that each server (two in one
    process, or one started again) exposes its own /metrics and counts from zero."""

    def __init__(self, clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        # exposition's bucket of fresh bodies (SCRAPE_RATE, SCRAPE_BURST)
        self.clock = clock
        self.tokens, self.stamp = float(SCRAPE_BURST), clock()
        self.body = b""
        # The standard process_* and python_* families every Prometheus client exports
        # (CPU, memory, descriptors, start time; Python version; garbage collection).
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
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
        self.explain_refused = Counter(
            "clusterset_dns_explain_refused_total",
            "/explain requests answered 429: beyond the requests in progress (busy) or the "
            "rate (rate)", ["reason"], registry=registry)
        for reason in ("busy", "rate"):
            self.explain_refused.labels(reason)  # 0 until the first, so alerts see the series
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
        """Content type and body of /metrics: worked out afresh, or the last one when
        more are asked for than SCRAPE_RATE a second (a token bucket)."""
        now = self.clock()
        self.tokens = min(float(SCRAPE_BURST), self.tokens + (now - self.stamp) * SCRAPE_RATE)
        self.stamp = now
        if self.tokens >= 1.0 - 1e-9 or not self.body:  # float slack: 0.05 s is not exact
            self.tokens = max(0.0, self.tokens - 1.0)
            self.body = generate_latest(self.registry)
        return CONTENT_TYPE_LATEST, self.body
