"""What one change costs: p50/p99 of ``Cache.apply`` for a readiness flip of one endpoint
in one Headless service, and for one added import in a large zone.

    python bench/change_cost.py [--flip-sizes 500,5000,50000] [--import-sizes 10000,100000]
                                [--changes 200] [--budget 60] [--baseline CHECKOUT]

Each size runs in a fresh process (clusterset_dns_testkit/bench/change_cost.py) with
the server's garbage-collector settings; ``--baseline`` runs the same against another
checkout's clusterset_dns, side by side. ``--budget``: seconds of changes per size at
most (a slow checkout then measures fewer, at least 4). Nothing here is a test:
figures go to docs/benchmark.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402

MEASURE = ROOT / "clusterset_dns_testkit" / "bench" / "change_cost.py"


def run(checkout: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``checkout``'s clusterset_dns, one process per size."""
    out: dict[str, Any] = {"flip": [], "add_import": []}
    for kind, sizes in (("flip", spec["flip_sizes"]), ("add_import", spec["import_sizes"])):
        for size in sizes:
            one = dict(spec, flip_sizes=[size] if kind == "flip" else [],
                       import_sizes=[size] if kind == "add_import" else [])
            done = subprocess.run([sys.executable, str(MEASURE), json.dumps(one)], cwd=checkout,
                                  env=dict(os.environ, PYTHONPATH=str(checkout)),
                                  capture_output=True, text=True, timeout=3600, check=True)
            out[kind] += json.loads(done.stdout)[kind]
    return out


def table(name: str, figures: dict[str, Any]) -> list[str]:
    return [f"| {name} | {change} | {f[unit]:,} {unit} | {f['changes']} | {f['p50_ms']:.3f} | "
            f"{f['p99_ms']:.3f} | {f['cpu_p50_ms']:.3f} | {f['cpu_p99_ms']:.3f} |"
            for kind, change, unit in (("flip", "flip one endpoint", "endpoints"),
                                       ("add_import", "add one import", "imports"))
            for f in figures[kind]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flip-sizes", default="500,5000,50000")
    parser.add_argument("--import-sizes", default="10000,100000")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--budget", type=float, default=60)
    parser.add_argument("--baseline", type=Path, help="another checkout, measured the same")
    parser.add_argument("--results", type=Path, default=bench_results.RESULTS,
                        help="where the result is written (bench/results)")
    args = parser.parse_args()
    spec = {"flip_sizes": [int(s) for s in args.flip_sizes.split(",") if s],
            "import_sizes": [int(s) for s in args.import_sizes.split(",") if s],
            "changes": args.changes, "budget_s": args.budget}
    data: dict[str, Any] = {"spec": spec, "ours": run(ROOT, spec)}
    if args.baseline is not None:
        data["baseline"] = run(args.baseline, spec)
        data["baseline_version"] = bench_results.git_version(args.baseline)
    print("| code | change | size | changes | p50 ms | p99 ms | CPU p50 ms | CPU p99 ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in ("ours", "baseline"):
        if name in data:
            print("\n".join(table(name, data[name])))
    quick = (spec["flip_sizes"] != [500, 5000, 50000]
             or spec["import_sizes"] != [10000, 100000])
    envelope = bench_results.envelope("change_cost", data, quick=quick)
    print(f"wrote {bench_results.write(envelope, args.results)}; regenerate the page with "
          "python bench/report.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
