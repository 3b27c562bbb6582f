"""Metrics.exposition on an injected clock: SCRAPE_BURST fresh bodies at once, then one
per 1/SCRAPE_RATE seconds to the instant; in between the last body again (a /metrics
flood from any pod costs a copy, not a body worked out on the DNS loop each time)."""

from __future__ import annotations

from clusterset_dns.base import metrics
from clusterset_dns.base.metrics import SCRAPE_BURST, SCRAPE_RATE, Metrics


def sent(body: bytes) -> float:
    for line in body.decode().splitlines():
        if line.startswith('clusterset_dns_notify_total{result="sent"}'):
            return float(line.split()[-1])
    raise AssertionError("no notify_total sample")


def test_bodies_are_fresh_up_to_the_rate_then_the_last_one() -> None:
    now = [100.0]
    meters = Metrics(lambda: now[0])
    notified = meters.notifies.labels("sent")
    for n in range(1, SCRAPE_BURST + 1):  # the burst: each body fresh
        notified.inc()
        assert sent(meters.exposition()[1]) == n
    notified.inc()  # now SCRAPE_BURST + 1
    assert sent(meters.exposition()[1]) == SCRAPE_BURST  # the last body
    now[0] += 1 / SCRAPE_RATE - 1e-6  # not quite one token
    assert sent(meters.exposition()[1]) == SCRAPE_BURST
    now[0] += 1e-6  # one token, to the instant
    assert sent(meters.exposition()[1]) == SCRAPE_BURST + 1
    notified.inc()
    assert sent(meters.exposition()[1]) == SCRAPE_BURST + 1
    now[0] += 60  # a quiet minute: the burst again, no more
    for n in range(SCRAPE_BURST + 3, 2 * SCRAPE_BURST + 3):
        notified.inc()
        assert sent(meters.exposition()[1]) == n
    notified.inc()
    assert sent(meters.exposition()[1]) == 2 * SCRAPE_BURST + 2
    assert meters.exposition()[0] == metrics.CONTENT_TYPE_LATEST
