"""The counters the DNS path bumps: plain integers, turned into metrics at scrape time.

A worker process reports its ``Stats`` to the parent; the parent folds the counters of
a worker that is gone into one ``Stats`` with :meth:`Stats.add`, so that a counter never
goes back when a worker restarts.
"""

from __future__ import annotations


class Stats:
    """Plain counters; the metrics module reads them at scrape time."""

    __slots__ = ("dropped", "rcodes", "tcp_aborted", "tcp_open", "tcp_refused", "transfers",
                 "truncated")
    # Fields that say how things are now, not how often something happened: add()
    # leaves them out (a worker that is gone has no open connection).
    GAUGES = frozenset({"tcp_open"})

    def __init__(self) -> None:
        self.rcodes = [0] * 24  # index = rcode (16 = BADVERS)
        self.truncated = 0  # UDP answers sent with TC set
        self.dropped = 0
        # Kept by server.DNSServer; here so that workers report them too.
        self.tcp_open = self.tcp_refused = self.tcp_aborted = 0
        self.transfers: dict[tuple[str, str], int] = {}  # (type, result) -> count, see xfr

    def add(self, more: Stats) -> None:
        """Adds every counter of ``more`` to this one's (not the gauges)."""
        for code, count in enumerate(more.rcodes):
            self.rcodes[code] += count
        self.truncated += more.truncated
        self.dropped += more.dropped
        self.tcp_refused += more.tcp_refused
        self.tcp_aborted += more.tcp_aborted
        for key, count in more.transfers.items():
            self.transfers[key] = self.transfers.get(key, 0) + count
