#!/usr/bin/env python3
"""Regenerate docs/benchmark.md and the README's performance table from bench/results/.

    python bench/report.py            # rewrite both from the newest full run of each benchmark
    python bench/report.py --check    # exit 1 (and say which) when either is out of date

Every benchmark script writes its JSON result under bench/results/<benchmark>/; commit the
result together with the regenerated page. ``--quick`` smoke runs are left out unless
``--include-quick`` is given (to see the pipeline work).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import page  # noqa: E402
from clusterset_dns_testkit.bench.results import RESULTS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmark.md")
    p.add_argument("--readme", type=Path, default=ROOT / "README.md")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    p.add_argument("--include-quick", action="store_true",
                   help="let --quick smoke runs count as results")
    a = p.parse_args(argv)
    stale = page.regenerate(a.results, a.page, a.readme, a.include_quick, write=not a.check)
    if a.check:
        for path in stale:
            print(f"{path} is not what bench/report.py makes of {a.results}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
