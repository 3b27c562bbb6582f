#!/usr/bin/env python3
"""What watching answers costs: CPU per answer of clusterset-dns (1 worker) with the
query log, the duration histogram, and with neither, in the same run.

    python bench/observe_cost.py --rounds 3 [--variants off,default,...] [run.py's options]

Variants (every one with bench/run.py's data, query mix and dnsperf load, measured in
turn in every round, every other round in the opposite order, so that the machine's
load moves them alike):

- ``off``: ``--duration-sample 0``, no query log: nothing watches answers (the reference);
- ``default``: the defaults: 1 in 64 answers timed for the histogram, no query log;
- ``log-denial``: ``--query-log denial``, no rate limit in the way (a mostly positive
  mix: the lines are its NXDOMAINs);
- ``log-all``: ``--query-log all``, no rate limit in the way: a line per answer;
- ``log-all-limited``: ``--query-log all`` at the default ``--query-log-rate`` (1,000
  lines a second): the rest are counted as dropped.

The lines go to a file (the server's log). Figures: answers a second at full speed
and server CPU seconds per 100,000 answers, each as a ratio to ``off`` of the same
round (the median of the rounds). Writes ``bench/results/observe_cost/``; ``python
bench/report.py`` puts it on docs/benchmark.md. Only 127.0.0.1 is sent traffic.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from clusterset_dns_testkit.bench import dataset
from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.common import log
from clusterset_dns_testkit.bench.measure import bench_server
from clusterset_dns_testkit.bench.runargs import parse_args
from clusterset_dns_testkit.bench.servers import Context, ours_version, start_ours

UNLIMITED = ("--query-log-rate", "1000000")
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "off": ("nothing watches answers", ("--duration-sample", "0")),
    "default": ("histogram 1 in 64 (the default)", ()),
    "log-denial": ("query log: denial", ("--query-log", "denial", *UNLIMITED)),
    "log-all": ("query log: all", ("--query-log", "all", *UNLIMITED)),
    "log-all-limited": ("query log: all, 1,000 lines/s", ("--query-log", "all")),
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    wanted = list(VARIANTS)
    if "--variants" in args:
        at = args.index("--variants")
        wanted = [v.strip() for v in args[at + 1].split(",") if v.strip()]
        del args[at : at + 2]
    if "off" not in wanted or any(v not in VARIANTS for v in wanted):
        print(f"--variants: off and any of {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    a = parse_args(args)
    mix = a.mix.split(",")[0]
    t_start = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="clusterset-dns-observe-"))
    try:
        ds = dataset.Dataset.build(a.imports, a.headless, a.endpoints, a.clusters, a.namespaces)
        info = dataset.write_all(tmp, ds, a.queries, a.seed, (mix,))
        ctx = Context(a, tmp, Path(info["objects"]), Path(info["mixes"][mix]["queries_bin"]),
                      json.loads(Path(info["probes"]).read_text()), shlex.split(a.ours_cmd))
        nx_share = info["mixes"][mix]["nx_share"]
        rounds: list[dict[str, dict[str, Any]]] = []
        for rnd in range(a.rounds):
            log(f"##### round {rnd + 1} of {a.rounds}")
            done: dict[str, dict[str, Any]] = {}
            # Every other round in the opposite order: a variant measured right after
            # another (a warmer cache, a change of the machine's load) is not always the
            # same one.
            for key in (wanted if rnd % 2 == 0 else wanted[::-1]):
                label, extra = VARIANTS[key]

                def starter(extra: tuple[str, ...] = extra, key: str = key) -> Any:
                    return start_ours(ctx, 1, extra=extra, tag=key)

                done[key] = bench_server(ctx, key, label, starter, nx_share)
            rounds.append(done)
        rows = []
        for key in wanted:
            runs = [r[key] for r in rounds if r[key].get("qps")]
            ratios_cpu = [r[key]["cpu_s_per_100k"] / r["off"]["cpu_s_per_100k"] for r in rounds
                          if r[key].get("cpu_s_per_100k") and r["off"].get("cpu_s_per_100k")]
            ratios_qps = [r[key]["qps"] / r["off"]["qps"] for r in rounds
                          if r[key].get("qps") and r["off"].get("qps")]
            rows.append({
                "key": key, "variant": VARIANTS[key][0], "args": " ".join(VARIANTS[key][1]),
                "qps": [r["qps"] for r in runs],
                "cpu_s_per_100k": [r["cpu_s_per_100k"] for r in runs],
                "p50_ms": [r.get("p50_ms") for r in runs],
                "cpu_ratio": statistics.median(ratios_cpu) if ratios_cpu else None,
                "cpu_ratios": ratios_cpu,
                "qps_ratio": statistics.median(ratios_qps) if ratios_qps else None,
                "errors": [r[key]["error"] for r in rounds if r[key].get("error")],
            })
        now = dt.datetime.now(dt.UTC)
        result = bench_results.envelope(
            "observe_cost", {"rows": rows, "rounds": a.rounds, "mix": mix,
                             "nx_share": nx_share, "ours_version": ours_version(ctx),
                             "duration": a.duration,
                             "dataset": {k: info[k] for k in ("imports", "headless",
                                                             "endpoints", "n_queries")},
                             "total_seconds": time.time() - t_start},
            quick=a.quick, when=now)
        path = bench_results.write(result, a.results)
        for row in rows:
            log(f"{row['key']:>16}: CPU x{row['cpu_ratio'] or 0:.3f} of off, "
                f"q/s x{row['qps_ratio'] or 0:.3f}")
        log(f"wrote {path}; regenerate docs/benchmark.md with python bench/report.py")
        return 1 if any(row["errors"] for row in rows) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
