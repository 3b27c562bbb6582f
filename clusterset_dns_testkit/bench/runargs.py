"""The options of bench/run.py's measurement, shared with the scripts that run the same
measurement with other variants (bench/observe_cost.py)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from clusterset_dns_testkit.bench import dataset, shipped
from clusterset_dns_testkit.bench import results as bench_results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="clusterset-dns benchmark (see bench/README.md)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 5 s phases, small data set, 10k queries")
    p.add_argument("--benchmark", choices=("run", "dnstap"), default=None,
                   help="the results folder and page section (bench/dnstap.py: dnstap)")
    p.add_argument("--duration", type=float, help="seconds per load phase (15; quick 5)")
    p.add_argument("--warmup", type=float, default=None, help="warm-up seconds (2; quick 1)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every server this many times, interleaved, and report "
                        "the median of each figure (1)")
    p.add_argument("--servers", default="ours1,ours2,knot,coredns",
                   help="comma list of ours1, ours2, ours1-plain (recvfrom/sendto UDP), knot, "
                   "coredns, ours1-dnstap and knot-dnstap (each sending every answer to "
                   "golang-dnstap's reader) (default: ours1,ours2,knot,coredns)")
    p.add_argument("--python", default="image", help=shipped.HELP)
    p.add_argument("--ours-cmd", default=None,
                   help="command that runs clusterset-dns (default: --python's interpreter "
                        "-m clusterset_dns)")
    p.add_argument("--ttl", type=int, default=5)
    p.add_argument("--clients", type=int, default=16, help="dnsperf -c (16)")
    p.add_argument("--threads", type=int, default=1, help="dnsperf -T (1)")
    p.add_argument("--outstanding", type=int, default=200, help="dnsperf -q (200)")
    p.add_argument("--ready-timeout", type=float, default=300.0,
                   help="seconds a server may take to load and answer (300)")
    p.add_argument("--wait-quiet", type=float, default=None,
                   help="before each server, wait up to this many seconds for other processes "
                        "to leave the CPUs idle (120; quick 10; 0 = don't)")
    p.add_argument("--spin-idle", action=argparse.BooleanOptionalAction, default=True,
                   help="keep both cores from idling (SCHED_IDLE busy loops) during the "
                        "half-rate latency run, so that VM wake-up delays stay out of the "
                        "percentiles (on)")
    p.add_argument("--results", type=Path, default=bench_results.RESULTS,
                   help="where the JSON result is written (bench/results; --quick runs are "
                        "marked so and left out of docs/benchmark.md)")
    p.add_argument("--keep-tmp", action="store_true",
                   help="keep the temp dir (logs, dnsperf output)")
    p.add_argument("--imports", type=int)
    p.add_argument("--headless", type=int)
    p.add_argument("--endpoints", type=int)
    p.add_argument("--clusters", type=int, default=2)
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--queries", type=int)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mix", default="standard",
                   help="comma list of query mixes, each measured for every server, "
                        f"interleaved per round: {', '.join(dataset.MIXES)} (standard)")
    a = p.parse_args(argv)
    q = a.quick
    for name, full, quick in (("duration", 15.0, 5.0), ("warmup", 2.0, 1.0),
                              ("wait_quiet", 120.0, 10.0),
                              ("imports", 1000, 100), ("headless", 100, 10),
                              ("endpoints", 10, 10), ("queries", 100_000, 10_000)):
        if getattr(a, name) is None:
            setattr(a, name, quick if q else full)
    if a.ours_cmd is None:
        a.ours_cmd = f"{shlex.quote(shipped.prepare(a.python))} -m clusterset_dns"
    return a
