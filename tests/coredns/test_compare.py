"""clusterset-dns next to CoreDNS v1.14.7's own ``multicluster`` answers, both
watching one real kube-apiserver that holds the conformance objects.

The comparison is ``clusterset_dns_testkit.compare`` (``python
bench/compare_coredns.py`` writes the same table to docs/coredns-comparison.md).
Every difference must be one of the documented ones of
``clusterset_dns_testkit/compare/known.py`` (``KNOWN_DIFFERENCES``,
``KNOWN_SUITE_DIFFERENCES``, ``KNOWN_SUITE_FAILURES_BOTH``), each with its
one-line reason, and every documented one must still occur.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from clusterset_dns_testkit.peers import KubeAPI

pytestmark = pytest.mark.coredns

ZONE = "clusterset.local"


@pytest.fixture(scope="module")
def comparison(compare: ModuleType, kube_api: KubeAPI) -> Any:
    return compare.run_comparison(api=kube_api)


def row_text(row: Any) -> str:
    return f"| `{row.case.id}` | {row.ours.brief(100)} | {row.coredns.brief(100)} |"


def test_every_answer_difference_is_documented(compare: ModuleType, comparison: Any) -> None:
    bad = compare.unexplained_rows(comparison.all_rows)
    assert not bad, (
        "differences from CoreDNS not in KNOWN_DIFFERENCES (clusterset_dns_testkit/compare/"
        "known.py); "
        "decide from docs/dns-behaviour.md whether ours is wrong or document the deviation:\n"
        "| case | clusterset-dns | CoreDNS |\n" + "\n".join(row_text(r) for r in bad))


def test_every_documented_answer_difference_still_occurs(compare: ModuleType,
                                                          comparison: Any) -> None:
    stale = compare.unused_known(comparison.all_rows)
    assert not stale, "KNOWN_DIFFERENCES entries that match no differing row:\n" + "\n".join(
        f"{k.patterns}: {k.reason}" for k in stale)


def test_the_comparison_covers_the_objects(comparison: Any) -> None:
    """Sanity: both servers answered the bulk of the questions the same way, and the
    mcs-api conformance DNS cases (objects/core) identically."""
    rows = {r.case.id: r for r in comparison.rows}
    same = sum(r.same for r in comparison.rows)
    assert len(rows) > 200 and same > len(rows) * 0.7, f"{same} of {len(rows)} the same"
    for qname, rdtype in [
        (f"hello.conf.svc.{ZONE}.", "A"), (f"hello.conf.svc.{ZONE}.", "AAAA"),
        (f"db.conf.svc.{ZONE}.", "A"), (f"db-0.east.db.conf.svc.{ZONE}.", "A"),
        (f"db-1.east.db.conf.svc.{ZONE}.", "A"), (f"10-2-0-1.west.db.conf.svc.{ZONE}.", "A"),
        (f"10-2-0-2.west.db.conf.svc.{ZONE}.", "A"), (f"10-2-0-4.west.db.conf.svc.{ZONE}.", "A"),
        (f"big.bulk.svc.{ZONE}.", "AAAA"), (f"{ZONE}.", "SOA"),
        (f"nosuch.conf.svc.{ZONE}.", "A"),
    ]:
        row = rows[f"{qname} {rdtype}"]
        assert row.same and row.ours.rcode != "TIMEOUT", row_text(row)


def test_objects_only_our_file_source_reads_are_the_v1alpha2_layouts(comparison: Any) -> None:
    skipped = sorted(o for o, _why in comparison.loaded.skipped)
    assert skipped == sorted(
        f"multicluster.x-k8s.io/v1alpha2 ServiceImport ext/{n}"
        for n in ("root", "status", "root-hl", "status-hl", "near-root")), skipped


def test_before_the_first_sync_both_answer_servfail_for_service_names(comparison: Any) -> None:
    rows = {r.case.id: r for r in comparison.unsynced_rows}
    for name in (f"hello.conf.svc.{ZONE}. A", f"nosuch.conf.svc.{ZONE}. A"):
        assert rows[name].ours.rcode == rows[name].coredns.rcode == "SERVFAIL", row_text(
            rows[name])
    assert rows[f"{ZONE}. SOA"].same, row_text(rows[f"{ZONE}. SOA"])


def test_conformance_suite_differences_are_documented(compare: ModuleType,
                                                      comparison: Any) -> None:
    ours, core = comparison.suites["ours"], comparison.suites["coredns"]
    assert ours.outcomes and core.outcomes, "no conformance results"
    assert set(ours.outcomes) == set(core.outcomes)
    bad = compare.unexplained_suite_differences(ours, core)
    assert not bad, "conformance tests without a documented reason:\n" + "\n".join(
        f"{t}: {why}\n    {(core.messages.get(t) or ours.messages.get(t) or '')[:600]}"
        for t, why in bad.items())
    differing = compare.suite_differences(ours, core)
    stale = compare.stale_patterns(differing, compare.KNOWN_SUITE_DIFFERENCES)
    stale += compare.stale_patterns(compare.failing_on_both(ours, core),
                                    compare.KNOWN_SUITE_FAILURES_BOTH)
    assert not stale, f"documented suite differences that no longer occur: {stale}"


def test_our_only_conformance_failures_are_objects_the_api_server_cannot_hold(
        compare: ModuleType, comparison: Any) -> None:
    ours = comparison.suites["ours"]
    failed = [t for t, o in ours.outcomes.items() if o in ("failed", "error")]
    unexpected = [t for t in failed
                  if compare.reason_for(t, compare.KNOWN_SUITE_FAILURES_BOTH) is None]
    assert not unexpected, "\n".join(f"{t}\n{ours.messages.get(t, '')[:2000]}"
                                     for t in unexpected)


def test_local_first_answers_are_an_opt_in_deviation(comparison: Any) -> None:
    """With --cluster-id east, a PreferClose import answers A with east's endpoints and
    SRV with east's at priority 0, west's at 1, while CoreDNS (which ignores
    trafficDistribution) answers with every cluster's; endpoint names, an import
    without the field, or with nothing ready in east: both answer alike."""
    rows = {r.case.id: r for r in comparison.local_rows}
    name = f"near.ext.svc.{ZONE}."
    near = rows[f"{name} A"]
    assert sorted(near.ours.records) == [f"{name} A 10.47.0.{i}" for i in (1, 2)], \
        row_text(near)
    assert sorted(near.coredns.records) == [
        f"{name} A 10.47.0.1", f"{name} A 10.47.0.2", f"{name} A 10.47.1.1"], row_text(near)
    srv = rows[f"{name} SRV"]
    assert sorted(srv.ours.records) == [
        f"{name} SRV 0 50 80 10-47-0-1.east.{name}", f"{name} SRV 0 50 80 web-1.east.{name}",
        f"{name} SRV 1 100 80 10-47-1-1.west.{name}"], row_text(srv)
    # Another cluster's endpoint names resolve, as CoreDNS's do (issue 20).
    for same in (f"10-47-1-1.west.near.ext.svc.{ZONE}. A", f"near-down.ext.svc.{ZONE}. A",
                 f"hello.conf.svc.{ZONE}. A"):
        assert rows[same].same, row_text(rows[same])
    # In the main table (no cluster id) the PreferClose import answers as CoreDNS does.
    assert {r.case.id: r for r in comparison.rows}[f"near.ext.svc.{ZONE}. A"].same


def test_axfr_rows_show_coredns_endpoint_names_without_clusterid(comparison: Any) -> None:
    """CoreDNS's AXFR of the multicluster zone names headless endpoints
    ``host.svc.ns.svc.<zone>``, without the ``<clusterid>`` label its own answers
    (and ours) have: a secondary fed by it would serve other names."""
    x = comparison.axfr
    assert x is not None and not x.ours.error and not x.coredns.error, (x.ours.error,
                                                                       x.coredns.error)
    missing = x.endpoint_names_without_clusterid()
    assert missing, "CoreDNS's AXFR now has the <clusterid> label: update the comparison"
    for short, full in missing:
        assert short not in {line.split()[0] for line in x.ours.records}
        assert full not in {line.split()[0] for line in x.coredns.records}


def test_our_axfr_holds_every_name_we_answer(comparison: Any) -> None:
    from clusterset_dns_testkit.compare.axfr import below_svc

    x = comparison.axfr
    assert x is not None
    endpoint_owners = {o for o in x.ours.owners("A") | x.ours.owners("AAAA") if below_svc(o) == 4}
    assert endpoint_owners  # host.<clusterid>.svc.ns: the names our answers use
    assert not {o for o in x.ours.owners("A") if below_svc(o) == 3}
