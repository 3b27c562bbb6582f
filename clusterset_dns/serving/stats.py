"""The counters the DNS path bumps: plain integers, turned into metrics at scrape time.

A worker process reports its ``Stats`` to the parent; the parent folds the counters of
a worker that is gone into one ``Stats`` with :meth:`Stats.add`, so that a counter never
goes back when a worker restarts.
"""

from __future__ import annotations

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


class Stats:
    """Plain counters; the metrics module reads them at scrape time."""

    __slots__ = ("dnstap_dropped", "dnstap_sent", "dropped", "query_log_dropped", "requests",
                 "tcp_aborted", "tcp_open", "tcp_refused", "transfers", "truncated")
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
