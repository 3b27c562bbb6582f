"""The request counter's flat index (serving/stats.py): every (type, transport, EDE,
rcode) has its own slot and reads back as itself; sums accumulate; a fresh Stats counts
nothing; a transfer counter new to the sum starts from 0. Written for the survivors of
``scripts/mutate clusterset_dns/serving/stats.py``."""

from __future__ import annotations

import itertools

from clusterset_dns.serving import stats
from clusterset_dns.serving.stats import Durations, Stats


def test_every_slot_is_its_own_and_reads_back() -> None:
    seen = set()
    for t, tcp, e, rcode in itertools.product(range(len(stats.TYPES)), (False, True),
                                              range(len(stats.EDE_CODES)),
                                              range(stats.RCODES)):
        index = stats.base(t, tcp, e) + rcode
        assert isinstance(index, int) and 0 <= index < stats.SLOTS * stats.RCODES
        assert stats.slot_of(index) == (stats.TYPES[t], stats.TRANSPORTS[tcp],
                                        stats.EDE_CODES[e], rcode)
        seen.add(index)
    assert len(seen) == stats.SLOTS * stats.RCODES
    assert stats.base(3, True) == stats.base(3, True, 0)  # no EDE unless told


def test_sums_accumulate() -> None:
    durations = Durations()
    durations.record(True, 0.25, 2)
    durations.record(True, 0.125)
    assert durations.sums == [0.0, 0.625]


def test_a_fresh_stats_counts_nothing() -> None:
    fresh = Stats()
    assert set(fresh.requests) == {0} and len(fresh.requests) == stats.SLOTS * stats.RCODES
    assert (fresh.truncated, fresh.dropped, fresh.tcp_open, fresh.tcp_refused,
            fresh.tcp_aborted, fresh.dnstap_sent, fresh.dnstap_dropped,
            fresh.query_log_dropped, fresh.transfers) == (0, 0, 0, 0, 0, 0, 0, 0, {})


def test_a_transfer_counter_new_to_the_sum() -> None:
    total, worker = Stats(), Stats()
    worker.transfers[("AXFR", "ok")] = 3
    total.add(worker)
    total.add(worker)
    assert total.transfers == {("AXFR", "ok"): 6}
