#!/usr/bin/env python3
"""The clusterset-dns benchmark: one command, bounded in time.

    python bench/run.py            # full run (15 s per load phase)
    python bench/run.py --quick    # smoke test (5 s phases, small data set)

For every server in turn (clusterset-dns with 1 worker, with 2 workers, Knot,
CoreDNS when available): start it pinned to core 0, check that it answers the
probe questions correctly, run dnsperf pinned to core 1 at full speed for the
throughput and CPU figures, then again at half that server's measured rate
for latency percentiles.  Prints the tables and writes the JSON result to
``bench/results/run/<UTC time>.json``; ``python bench/report.py`` makes
docs/benchmark.md and the README's table of it.  See bench/README.md.

Only 127.0.0.1 is ever sent traffic.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This checkout's clusterset_dns_testkit, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns_testkit.bench import dataset, page, shipped
from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.common import REPO, log
from clusterset_dns_testkit.bench.coredns import start_coredns
from clusterset_dns_testkit.bench.dnstap import start_knot_dnstap, start_ours_dnstap
from clusterset_dns_testkit.bench.knot import start_knot
from clusterset_dns_testkit.bench.measure import bench_server, combine_rounds
from clusterset_dns_testkit.bench.procs import system_cpu
from clusterset_dns_testkit.bench.report import machine_meta, render
from clusterset_dns_testkit.bench.runargs import parse_args
from clusterset_dns_testkit.bench.servers import Context, Server, ours_version, start_ours


def main(argv: list[str] | None = None, benchmark: str = "run") -> int:
    """``benchmark``: the results folder and page section (bench/dnstap.py: dnstap)."""
    a = parse_args(argv)
    benchmark = a.benchmark or benchmark
    t_start = time.time()
    missing = [t for t in ("dnsperf", "taskset", "dig") if not shutil.which(t)]
    if missing:
        print(f"missing tools: {missing}: apt-get install -y dnsperf bind9-dnsutils knot "
              f"util-linux", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("needs 2 cores (server on core 0, dnsperf on core 1)", file=sys.stderr)
        return 2
    wanted = [s.strip() for s in a.servers.split(",") if s.strip()]
    mixes = [m.strip() for m in a.mix.split(",") if m.strip()]
    if not mixes or any(m not in dataset.MIXES for m in mixes):
        print(f"--mix {a.mix!r}: known mixes are {', '.join(dataset.MIXES)}", file=sys.stderr)
        return 2
    runs = a.rounds * len(wanted) * len(mixes)
    per_server = a.warmup + 2 * a.duration + 10
    worst = per_server + 2 * 60 + a.ready_timeout + a.wait_quiet + 60
    log(f"plan: {a.rounds} round(s) x {len(mixes)} mix(es) x {len(wanted)} servers x "
        f"~{per_server:.0f} s (+ start/load time); bounded by {runs * worst:.0f} s at worst")

    s0 = system_cpu()
    time.sleep(1)
    s1 = system_cpu()
    busy = 100 * (s1["busy"] - s0["busy"]) / (s1["t"] - s0["t"])
    if busy > 10:
        log(f"WARNING: the machine is busy before the start ({busy:.0f}% of a core used by "
            f"other processes): results will be disturbed")

    tmp = Path(tempfile.mkdtemp(prefix="clusterset-dns-bench-"))
    try:
        ds = dataset.Dataset.build(a.imports, a.headless, a.endpoints, a.clusters, a.namespaces)
        info = dataset.write_all(tmp, ds, a.queries, a.seed, tuple(mixes))
        log(f"generated {info['n_objects']:,} objects, {info['n_queries']:,} queries a mix "
            f"({', '.join(mixes)}) in {tmp}")
        ctx = Context(a, tmp, Path(info["objects"]), Path(info["queries_bin"]),
                      json.loads(Path(info["probes"]).read_text()), shlex.split(a.ours_cmd))
        try:
            d = subprocess.run([*ctx.ours_cmd, "dump", "--manifests", str(ctx.objects)],
                               capture_output=True, text=True, cwd=str(REPO), timeout=600)
            if d.returncode == 0:
                ctx.dump_text = d.stdout
                log(f"dump: {len(d.stdout.splitlines()):,} records")
            else:
                tail = (d.stderr or d.stdout).strip().splitlines()
                ctx.dump_error = tail[-1] if tail else f"exit status {d.returncode}"
                log(f"dump failed: {ctx.dump_error}")
        except (OSError, subprocess.TimeoutExpired) as e:
            ctx.dump_error = str(e)

        starters: dict[str, tuple[str, Callable[[], Server]]] = {
            "ours1": ("clusterset-dns, 1 worker", lambda: start_ours(ctx, 1)),
            "ours2": ("clusterset-dns, 2 workers", lambda: start_ours(ctx, 2)),
            "ours1-plain": ("clusterset-dns, 1 worker, plain UDP",
                            lambda: start_ours(ctx, 1, "plain")),
            "knot": ("Knot DNS", lambda: start_knot(ctx)),
            "coredns": ("CoreDNS", lambda: start_coredns(ctx)),
            "ours1-dnstap": ("clusterset-dns, 1 worker, dnstap", lambda: start_ours_dnstap(ctx)),
            "knot-dnstap": ("Knot DNS, dnstap", lambda: start_knot_dnstap(ctx)),
        }
        unknown = [k for k in wanted if k not in starters]
        if unknown:
            print(f"unknown server(s) {unknown}; known: {', '.join(starters)}", file=sys.stderr)
            return 2
        # Every mix of every round measures every server in turn, so that a change in
        # the machine's load moves all of them alike (the ratios vs Knot are the figures).
        per_key: dict[tuple[str, str], list[dict[str, Any]]] = {
            (m, k): [] for m in mixes for k in wanted}
        # Knot goes first in every round: half its max rate is the common rate at which
        # every other server's latency is measured too (the same offered load).
        order = sorted(wanted, key=lambda k: k != "knot")
        for rnd in range(a.rounds):
            for mix in mixes:
                log(f"##### round {rnd + 1} of {a.rounds}, {mix} mix")
                ctx.queries_bin = Path(info["mixes"][mix]["queries_bin"])
                nx_share = info["mixes"][mix]["nx_share"]
                common: float | None = None
                for key in order:
                    done = per_key[mix, key]
                    if done and done[0].get("skipped"):
                        continue  # not available: no point asking again
                    label, starter = starters[key]
                    row = bench_server(ctx, key, label, starter, nx_share, common,
                                       reference=key == "knot")
                    if key == "knot":
                        common = row.get("common_rate")
                    done.append(row)
        rows_by_mix = {m: [combine_rounds(per_key[m, k]) for k in wanted] for m in mixes}
        rows = [r | {"mix": m} for m, mix_rows in rows_by_mix.items() for r in mix_rows]

        now = dt.datetime.now(dt.UTC)
        meta = machine_meta() | {
            "date": now.strftime("%Y-%m-%d %H:%M UTC"),
            "ours_version": ours_version(ctx),
            "ours_cmd": a.ours_cmd,
            "python": shipped.describe(ctx.ours_cmd[0]),  # ours': the image's, as a rule
            "dataset": {k: info[k] for k in ("imports", "headless", "endpoints", "clusters",
                                             "namespaces", "n_objects", "n_queries", "seed")},
            "duration": a.duration,
            "warmup": a.warmup,
            "dnsperf_args": f"-B -c {a.clients} -T {a.threads} -q {a.outstanding} -t 2",
            "quick": a.quick,
            "spin_idle": a.spin_idle,
            "rounds": a.rounds,
            "total_seconds": time.time() - t_start,
        }
        md = "\n".join(render(rows_by_mix[m], meta | {"mix": m, "mix_text": dataset.MIXES[m]})
                       for m in mixes)
        knot = meta["knot"].rsplit("version", 1)[-1].strip() if meta["knot"] else ""
        result = bench_results.envelope(
            benchmark, {"meta": meta, "rows": rows}, quick=a.quick, when=now,
            versions={"dnsperf": meta["dnsperf"], "python": meta["python"]}
            | ({"knot": knot} if knot else {})
            | (bench_results.peer_versions("coredns") if "coredns" in wanted else {})
            | (bench_results.peer_versions("dnstap") if "dnstap" in benchmark else {}))
        path = bench_results.write(result, a.results)
        if benchmark == "run":
            md += "\nREADME rows:\n\n" + "\n".join(page.run_table(result, full=False)) + "\n"
        else:
            md += "\n" + "\n".join(page.SECTION_TABLES[benchmark](result)) + "\n"
        print()
        print(md)
        log(f"wrote {path}; total {time.time() - t_start:.0f} s; regenerate docs/benchmark.md "
            f"and the README's table with python bench/report.py")
        measured = [r for r in rows if r.get("qps")]
        failed = [r for r in rows if r.get("error")]
        return 1 if failed or not measured else 0
    finally:
        if a.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
