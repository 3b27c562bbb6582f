#!/usr/bin/env python3
"""clusterset-dns next to CoreDNS's own multicluster answers, on the same API server.

    python bench/compare_coredns.py            # ~1-2 minutes, writes docs/coredns-comparison.md
    python bench/compare_coredns.py --no-write # print only

One command:

1. starts etcd + kube-apiserver (``clusterset_dns_testkit.peers``) with the mcs-api
   v0.5.0 CRDs (v1alpha1 and v1beta1 served, v1beta1 stored) and applies the
   conformance objects an API server accepts (``00-namespaces.yaml``, ``core/``,
   ``extended/``; the v1alpha2 ServiceImports of ``extended/layouts.yaml`` are
   skipped: no v0.5.0 CRD version can store them, only our file source reads them);
2. starts CoreDNS v1.14.7 (``kubernetes cluster.local clusterset.local {
   multicluster clusterset.local }``) and clusterset-dns (``--kubeconfig``) on it,
   and waits until both answer for the objects;
3. asks both servers every name/type the objects define plus the special names
   (apex, dns-version, empty non-terminals, dotted cluster ids, NXDOMAIN, NODATA,
   ANY, class CH, outside the zone, AXFR) and compares rcode + answer set
   (TTLs dropped, SOA serial normalised);
4. asks a second clusterset-dns that knows its cluster (``--cluster-id east``) and the
   same CoreDNS the local-first cases (``trafficDistribution: PreferClose``: an opt-in
   deviation, CoreDNS ignores the field);
5. asks a second pair of servers that can never sync (a token without RBAC
   rights) what they answer before the first sync;
6. runs the dig-based conformance suite (``--objects api -m "not own_server"``)
   against both servers;
7. writes a Markdown report (``docs/coredns-comparison.md``) and prints it.

The comparison itself is ``clusterset_dns_testkit.compare``; the known differences and
their one-line reasons are in ``clusterset_dns_testkit/compare/known.py``.
``tests/coredns/test_compare.py`` runs the same comparison and fails on any
difference not listed there.

Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

# This checkout's clusterset_dns_testkit, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns_testkit import compare


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-write", action="store_true", help=f"do not write {compare.REPORT}")
    ap.add_argument("--no-suite", action="store_true", help="skip the conformance suite runs")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = ap.parse_args(argv)
    cmp = compare.run_comparison(suites=not args.no_suite)
    text = compare.render(cmp)
    print(text)
    if not args.no_write:
        compare.REPORT.parent.mkdir(parents=True, exist_ok=True)
        compare.REPORT.write_text(text + "\n")
        compare.log(f"wrote {compare.REPORT.relative_to(compare.REPO)} ({cmp.seconds:.0f}s)")
    if args.json:
        args.json.write_text(json.dumps(
            [{"case": r.case.id, "ours": [r.ours.rcode, *r.ours.records],
              "coredns": [r.coredns.rcode, *r.coredns.records], "same": r.same}
             for r in cmp.all_rows], indent=1))
    bad = compare.unexplained_rows(cmp.all_rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
