"""The counters the DNS path bumps: plain integers, turned into metrics at scrape time.

A worker process reports its ``Stats`` to the parent; the parent folds the counters of
a worker that is gone into one ``Stats`` with :meth:`Stats.add`, so that a counter never
goes back when a worker restarts.
"""

from __future__ import annotations

from bisect import bisect_left

# The request counter is one flat list: index = slot(type, transport, EDE) * RCODES + rcode.
# The DNS path adds a precomputed base to the rcode (see handler.Handler); the metrics
# module folds the list into labelled families at scrape time.
TYPES = ("A", "AAAA", "SRV", "TXT", "SOA", "NS", "ANY", "AXFR", "IXFR", "other")
TYPE_NUMBERS = (1, 28, 33, 16, 6, 2, 255, 252, 251)  # TYPES but "other", same order
TRANSPORTS = ("udp", "tcp")
EDE_CODES = (None, 0, 14, 24)  # none, Other, Not Ready, Invalid Data (wire.EDE_*)
RCODES = 24  # index = rcode (16 = BADVERS)
# qtype (below 256) -> its index in TYPES; a type of 256 or more is "other" too.
TYPE_SLOT = [len(TYPES) - 1] * 256
for _slot, _number in enumerate(TYPE_NUMBERS):
    TYPE_SLOT[_number] = _slot
SLOTS = len(TYPES) * len(TRANSPORTS) * len(EDE_CODES)


def base(type_slot: int, tcp: bool, ede_slot: int = 0) -> int:
    """Where the rcodes of one (type, transport, EDE) start in ``Stats.requests``."""
    return ((type_slot * 2 + tcp) * len(EDE_CODES) + ede_slot) * RCODES


def slot_of(index: int) -> tuple[str, str, int | None, int]:
    """(type, transport, EDE code, rcode) of an index into ``Stats.requests``."""
    rest, rcode = divmod(index, RCODES)
    rest, ede = divmod(rest, len(EDE_CODES))
    type_slot, tcp = divmod(rest, 2)
    return TYPES[type_slot], TRANSPORTS[tcp], EDE_CODES[ede], rcode


# Answer durations (clusterset_dns_request_duration_seconds): upper bounds of the
# buckets, 31.25 us doubling to 4.096 s (CoreDNS's start at 250 us, where every answer
# here would fall into the first one).
DURATION_BUCKETS = tuple(0.00003125 * 2**k for k in range(18))
SAMPLE_EVERY = 64  # the default of --duration-sample


class Durations:
    """A histogram of sampled answer durations per transport: plain lists, folded into
    a metric family at scrape time."""

    __slots__ = ("counts", "sums")

    def __init__(self) -> None:
        # counts[tcp][i]: samples no longer than DURATION_BUCKETS[i] and longer than the
        # bucket before; the last slot: longer than every bound.
        self.counts = [[0] * (len(DURATION_BUCKETS) + 1) for _ in TRANSPORTS]
        self.sums = [0.0 for _ in TRANSPORTS]

    def record(self, tcp: bool, seconds: float, samples: int = 1) -> None:
        self.counts[tcp][bisect_left(DURATION_BUCKETS, seconds)] += samples
        self.sums[tcp] += seconds * samples

    def add(self, more: Durations) -> None:
        for mine, theirs in zip(self.counts, more.counts, strict=True):
            for index, count in enumerate(theirs):
                mine[index] += count
        for index, total in enumerate(more.sums):
            self.sums[index] += total


class Sampler:
    """Picks 1 in ``every`` answers of one transport to time, by counting them (not at
    random: the count is exact and costs a subtraction). ``left``: answers until the
    next sampled one; the transports subtract what they answered and time the answer
    (or the UDP batch) that brings it to zero or below."""

    __slots__ = ("durations", "every", "left", "tcp")

    def __init__(self, every: int, durations: Durations, tcp: bool) -> None:
        self.every = self.left = every
        self.durations = durations
        self.tcp = tcp

    def timed(self, seconds: float) -> None:
        """The answers that reached the sample (one, or more in a batch) took
        ``seconds``; the count starts again."""
        samples = 1 + (-self.left) // self.every
        self.left += samples * self.every
        self.durations.record(self.tcp, seconds, samples)


class Stats:
    """Plain counters; the metrics module reads them at scrape time."""

    __slots__ = ("dnstap_dropped", "dnstap_sent", "dropped", "durations", "query_log_dropped",
                 "requests", "tcp_aborted", "tcp_open", "tcp_refused", "transfers", "truncated")
    # Fields that say how things are now, not how often something happened: add()
    # leaves them out (a worker that is gone has no open connection).
    GAUGES = frozenset({"tcp_open"})

    def __init__(self) -> None:
        # Answers sent, by (type, transport, EDE, rcode): see base().
        self.requests = [0] * (SLOTS * RCODES)
        self.truncated = 0  # UDP answers sent with TC set
        self.dropped = 0
        # Kept by server.DNSServer; here so that workers report them too.
        self.tcp_open = self.tcp_refused = self.tcp_aborted = 0
        self.transfers: dict[tuple[str, str], int] = {}  # (type, result) -> count, see xfr
        # dnstap frames written to the collector's connection, and dropped (process.dnstap).
        self.dnstap_sent = self.dnstap_dropped = 0
        self.query_log_dropped = 0  # query log lines over --query-log-rate (process.querylog)
        self.durations = Durations()  # sampled answer durations, kept by server.DNSServer

    def add(self, more: Stats) -> None:
        """Adds every counter of ``more`` to this one's (not the gauges)."""
        for index, count in enumerate(more.requests):
            if count:
                self.requests[index] += count
        self.truncated += more.truncated
        self.dropped += more.dropped
        self.tcp_refused += more.tcp_refused
        self.tcp_aborted += more.tcp_aborted
        self.dnstap_sent += more.dnstap_sent
        self.dnstap_dropped += more.dnstap_dropped
        self.query_log_dropped += more.query_log_dropped
        self.durations.add(more.durations)
        for key, count in more.transfers.items():
            self.transfers[key] = self.transfers.get(key, 0) + count

    @property
    def rcodes(self) -> list[int]:
        """Answers sent by rcode alone (a copy, summed over the other labels)."""
        out = [0] * RCODES
        for index, count in enumerate(self.requests):
            if count:
                out[index % RCODES] += count
        return out
