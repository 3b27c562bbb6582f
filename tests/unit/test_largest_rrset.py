"""The largest RRset the zone serves: found (rrs.largest_rrset), shown (the gauge, dump,
explain) and warned about when BIND secondaries would refuse it (over 100 records,
max-records-per-type), with the boundary: 100 records pass, 101 warn."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import collector, dump, explain
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import Cache
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

from .helpers import build_cache

BIG = "big.prod.svc.clusterset.local."


def objects(size: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """A ClusterSetIP import and a Headless one of ``size`` ready endpoints (no named
    port: its one large RRset is the service name's A)."""
    return ([service_import("web", "prod", ips=["10.1.0.1"]),
             service_import("big", "prod", "Headless")],
            [endpoint_slice("big-east", "big", "prod", "east",
                            endpoints=[endpoint(f"10.2.{i // 250}.{i % 250 + 1}", ready=True)
                                       for i in range(size)])])


def big_cache(size: int) -> Cache:
    imports, slices = objects(size)
    return build_cache(imports, slices)


def test_the_largest_rrset_is_the_headless_name() -> None:
    cache = big_cache(120)
    count, key = rrs.largest_rrset(cache.zone.answers)
    assert (count, rrs.key_text(key)) == (120, f"{BIG} A")
    assert rrs.largest_rrset({}) == (0, b"")


@pytest.mark.parametrize(("size", "warned"), [(100, False), (101, True)])
def test_the_warning_boundary(size: int, warned: bool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        collector.warn_large_rrsets(big_cache(size))
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if not warned:
        assert lines == []
        return
    [line] = lines
    assert f"{BIG} A, has {size} records" in line
    assert "max-records-per-type" in line and "docs/operations.md" in line


def gauge(cache: Cache, largest: collector.Largest) -> float:
    found = [m for m in collector.ServerCollector(cache, Stats(), largest=largest).collect()
             if m.name == "clusterset_dns_largest_rrset_records"]
    return found[0].samples[0].value


def test_the_gauge_follows_the_zone_no_sooner_than_100_times_its_cost() -> None:
    """Each reading of the clock finds it a quarter second later: a reading of the zone
    took 0.25 s, so the next one waits 25 s after a change."""
    imports, slices = objects(120)
    cache = build_cache(imports, slices)
    now = [1000.0]

    def clock() -> float:
        now[0] += 0.25
        return now[0]

    largest = collector.Largest(cache, 60.0, clock)
    assert gauge(cache, largest) == 120  # read from 1000.25 to 1000.5
    assert largest.wait == 25.0
    smaller = build_cache(*objects(30))  # the zone changes: 30 records now
    cache.zone.answers.clear()
    cache.zone.answers.update(smaller.zone.answers)
    cache.zone.serial += 1
    now[0] += 24.25
    assert gauge(cache, largest) == 120  # asked at 1025.0: 24.5 s after, not read again
    now[0] += 0.25
    assert gauge(cache, largest) == 30  # asked at 1025.5: 25 s after
    before = now[0]
    assert gauge(cache, largest) == 30 and now[0] == before  # no change: not even the clock


def test_the_wait_is_at_most_the_interval() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 10
        return now[0]

    largest = collector.Largest(big_cache(1), 60.0, clock)
    largest.get()
    assert largest.wait == 60.0


def test_dump_ends_with_a_comment_naming_it(tmp_path: Path) -> None:
    imports, slices = objects(120)
    (tmp_path / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": [*imports, *slices]}))
    out = io.StringIO()
    assert dump.dump(Config(manifests=tmp_path), out) == 0
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"; largest RRset: {BIG} A, 120 records"
    assert not any(line.startswith(";") for line in lines[:-1])


def test_explain_shows_it_in_the_zone_summary() -> None:
    cache = big_cache(120)
    result = explain.explain(cache, "web.prod.svc.clusterset.local", "A")
    assert result["zone"]["largestRRset"] == {"records": 120, "rrset": f"{BIG} A"}
    assert f"; largest RRset {BIG} A, 120 records" in explain.text(result)
    given = explain.explain(cache, "web.prod.svc.clusterset.local", "A", (7, b""))
    assert given["zone"]["largestRRset"]["records"] == 7
