"""The metric families base.metrics declares are the ones docs/metrics.md names, with the
label names it gives them and the kind (histogram) it says: a family renamed, a label
dropped or added, a histogram made a gauge, fails here without a running server (the
families the scrape-time collector adds, and the other direction, are checked against a
running server's /metrics by tests/testkit/test_metric_docs.py)."""

from __future__ import annotations

import platform
import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from clusterset_dns import __version__
from clusterset_dns.base.metrics import INVALID_KINDS, RCODES, Metrics
from tests.unit.fakeclock import FakeClock

ROOT = Path(__file__).resolve().parents[2]
_FAMILY = re.compile(r"`(clusterset_dns_[a-z0-9_]+)(?:\{([a-z_,]+)\})?`( \(histogram)?")


def documented() -> dict[str, tuple[tuple[str, ...], bool]]:
    """name -> (label names, documented as a histogram), from the Metrics section."""
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Metrics\n"):]
    section = section[:section.index("\n## ", 1)]
    out: dict[str, tuple[tuple[str, ...], bool]] = {}
    for name, labels, histogram in _FAMILY.findall(section):
        out[name] = (tuple(labels.split(",")) if labels else (), bool(histogram))
    return out


def declared() -> dict[str, tuple[tuple[str, ...], bool]]:
    """name -> (label names, is a histogram), of what Metrics() registers itself (the
    standard process_*, python_* collectors left out)."""
    metrics = Metrics(clock=FakeClock().monotonic)
    out: dict[str, tuple[tuple[str, ...], bool]] = {}
    for family in metrics.registry.collect():
        if family.name.startswith(("process_", "python_")):
            continue  # the standard collectors
        name = family.name + ("_total" if family.type == "counter" else "")
        collector = metrics.registry._names_to_collectors[name]
        out[name] = (tuple(getattr(collector, "_labelnames", ())), family.type == "histogram")
    return out


def test_every_declared_family_is_documented_with_its_labels_and_kind() -> None:
    docs = documented()
    for name, shape in declared().items():
        assert docs.get(name) == shape, name


def documented_buckets() -> dict[str, list[float]]:
    """name -> the bucket bounds docs/metrics.md lists after "buckets, seconds:"."""
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    found = re.findall(r"`(clusterset_dns_[a-z0-9_]+)(?:\{[a-z_,]+\})?` \(histogram[^)]*?"
                       r"buckets, seconds:\s*`([0-9. ]+)`", text)
    return {name: [float(bound) for bound in bounds.split()] for name, bounds in found}


def test_histogram_buckets_are_the_documented_ones() -> None:
    metrics = Metrics(clock=FakeClock().monotonic)
    docs = documented_buckets()
    histograms = [family for family in metrics.registry.collect() if family.type == "histogram"]
    assert sorted(family.name for family in histograms) == sorted(docs)
    for family in histograms:
        bounds = [float(s.labels["le"]) for s in family.samples
                  if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]
        if not bounds:  # a labelled histogram has no series before its first label
            bounds = list(metrics.registry._names_to_collectors[family.name]._upper_bounds[:-1])
        assert bounds == docs[family.name], family.name


def test_the_build_info_series_carries_the_version_and_python() -> None:
    metrics = Metrics(clock=FakeClock().monotonic)
    text = metrics.exposition()[1].decode()
    line = next(line for line in text.splitlines() if line.startswith("clusterset_dns_build_info{"))
    assert line == (f'clusterset_dns_build_info{{python="{platform.python_version()}",'
                    f'version="{__version__}"}} 1.0')


def test_the_standard_process_and_python_families_are_exposed() -> None:
    text = Metrics(clock=FakeClock().monotonic).exposition()[1].decode()
    for family in ("process_resident_memory_bytes", "python_info",
                   "python_gc_objects_collected_total"):
        assert f"# TYPE {family} " in text, family


def test_explain_refusals_exist_at_zero_for_both_reasons() -> None:
    text = Metrics(clock=FakeClock().monotonic).exposition()[1].decode()
    for reason in ("busy", "rate"):
        assert f'clusterset_dns_explain_refused_total{{reason="{reason}"}} 0.0' in text


def test_invalid_kinds_are_the_kubernetes_kinds() -> None:
    metrics = Metrics(clock=FakeClock().monotonic)
    for short in INVALID_KINDS:
        metrics.invalid(short)
    metrics.invalid("")
    metrics.invalid("Other")
    text = metrics.exposition()[1].decode()
    for kind in ("ServiceImport", "EndpointSlice", "ClusterProperty", "unknown", "Other"):
        assert f'clusterset_dns_invalid_objects_total{{kind="{kind}"}} 1.0' in text


def test_rcode_names_are_the_iana_mnemonics() -> None:
    # RFC 1035 4.1.1, RFC 2136, RFC 6891 (BADVERS shares 16 with BADSIG)
    assert RCODES == {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP",
                      5: "REFUSED", 16: "BADVERS"}


def test_every_instrument_of_metrics_is_registered_in_its_own_registry() -> None:
    """Each instrument Metrics holds is one of its registry's families (an instrument left
    out of the registry would count and never show)."""
    metrics = Metrics(clock=FakeClock().monotonic)
    state = {"registry", "clock", "tokens", "stamp", "body"}
    instruments = {name: value for name, value in vars(metrics).items() if name not in state}
    assert len(instruments) >= 10
    registered = metrics.registry._collector_to_names
    for name, value in instruments.items():
        assert isinstance(value, MetricWrapperBase), name
        assert value in registered, name
