"""The counters behind /metrics. Stats.add: the parent folds a gone worker's counters in
with it, so every counter must be in it (a field it forgets drops from /metrics when a
worker restarts). The kind label of invalid_objects_total: one vocabulary."""

from __future__ import annotations

import pytest

from clusterset_dns.base import metrics
from clusterset_dns.serving.stats import Durations, Stats


def filled(base: int) -> Stats:
    """A Stats with a distinct value in every field."""
    stats = Stats()
    for i, name in enumerate(sorted(Stats.__slots__)):
        value = base + i
        current = getattr(stats, name)
        if isinstance(current, list):
            setattr(stats, name, [value + code for code in range(len(current))])
        elif isinstance(current, dict):
            setattr(stats, name, {("axfr", "full"): value, (f"t{i}", "r"): value})
        elif isinstance(current, Durations):
            for tcp, counts in enumerate(current.counts):
                counts[:] = [value + tcp + k for k in range(len(counts))]
            current.sums[:] = [value * 0.5, value * 0.25]
        else:
            setattr(stats, name, value)
    return stats


def test_add_sums_every_counter_and_no_gauge() -> None:
    into, more = filled(100), filled(1000)
    into.add(more)
    fresh, other = filled(100), filled(1000)
    for name in Stats.__slots__:
        got, mine, theirs = getattr(into, name), getattr(fresh, name), getattr(other, name)
        if name in Stats.GAUGES:
            assert got == mine, name
        elif isinstance(mine, list):
            assert got == [a + b for a, b in zip(mine, theirs, strict=True)], name
        elif isinstance(mine, dict):
            assert got == {k: mine.get(k, 0) + theirs.get(k, 0) for k in mine | theirs}, name
        elif isinstance(mine, Durations):
            assert got.counts == [[a + b for a, b in zip(x, y, strict=True)]
                                  for x, y in zip(mine.counts, theirs.counts, strict=True)]
            assert got.sums == [a + b for a, b in zip(mine.sums, theirs.sums, strict=True)]
        else:
            assert got == mine + theirs, name


def test_gauges_are_fields() -> None:
    assert set(Stats.__slots__) >= Stats.GAUGES


@pytest.mark.parametrize(("reported", "label"), [
    ("import", "ServiceImport"),  # a list item, named by the watch's resource
    ("slice", "EndpointSlice"),
    ("property", "ClusterProperty"),
    ("ServiceImport", "ServiceImport"),  # the cache, a watch event, a manifest
    ("EndpointSlice", "EndpointSlice"),
    ("", "unknown"),  # a manifest document without a kind
])
def test_invalid_objects_have_one_kind_vocabulary(reported: str, label: str) -> None:
    meters = metrics.Metrics()

    def count() -> float:
        value = meters.registry.get_sample_value("clusterset_dns_invalid_objects_total",
                                                 {"kind": label})
        return value or 0.0

    meters.invalid(reported)
    assert count() == 1
