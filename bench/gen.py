#!/usr/bin/env python3
"""Generate benchmark inputs for clusterset-dns: objects.json, queries.bin,
queries.txt and probes.json in OUTDIR (described in
``clusterset_dns_testkit/bench/dataset.py``); deterministic for given options.

Usage: ``python bench/gen.py OUTDIR [--imports 1000 --headless 100 --endpoints 10]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# This checkout's clusterset_dns_testkit, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns_testkit.bench.dataset import (
    MIXES,
    add_dataset_args,
    dataset_from_args,
    write_all,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", type=Path)
    add_dataset_args(p)
    p.add_argument("--mix", default="standard",
                   help="comma list of query mixes also written as queries-<mix>.bin/.txt "
                        f"({', '.join(MIXES)}; standard)")
    a = p.parse_args()
    mixes = tuple(m.strip() for m in a.mix.split(",") if m.strip())
    info = write_all(a.outdir, dataset_from_args(a), a.queries, a.seed, mixes)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
