"""One server measured: throughput and CPU, then latency at half its rate; rounds combined."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from clusterset_dns_testkit.bench.common import CLK_TCK, SERVER_CORES_2, Skip, log
from clusterset_dns_testkit.bench.dnsperf import idle_spinners, run_dnsperf
from clusterset_dns_testkit.bench.probes import verify
from clusterset_dns_testkit.bench.procs import (
    process_tree,
    system_cpu,
    tree_cpu_seconds,
    tree_memory_mib,
)
from clusterset_dns_testkit.bench.servers import Context, Server


def bench_server(ctx: Context, key: str, label: str, starter: Callable[[], Server],
                 nx_share: float, common_rate: float | None = None,
                 reference: bool = False) -> dict[str, Any]:
    """Full speed, then half that rate, then (``common_rate``) the rate every server of
    the round is measured at; for the ``reference``, that is its own half rate."""
    a = ctx.args
    row: dict[str, Any] = {"key": key, "server": label, "notes": [], "warnings": []}
    log(f"=== {label}")
    try:
        srv = starter()
    except Skip as e:
        row["skipped"] = str(e)
        log(f"skip {label}: {e}")
        return row
    except Exception as e:
        row["error"] = str(e)
        log(f"ERROR {label}: {e}")
        return row
    try:
        row["version"] = srv.version
        row["cores"] = srv.cores
        row["notes"] += srv.notes
        problems = verify(srv, ctx.probes)
        row["verified"] = not problems
        if problems:
            row["error"] = "wrong answers: " + "; ".join(problems[:6])
            log(f"ERROR {label} fails the answer checks, not measured:\n  "
                + "\n  ".join(problems))
            return row
        log(f"answers verified ({len(ctx.probes)} probes x udp+edns, udp, tcp)")
        srv.remember_tree()

        row["load_before_pct"] = wait_quiet(a.wait_quiet)
        # warm-up (not measured)
        run_dnsperf(ctx, srv.port, a.warmup, ctx.tmp / f"{key}-warmup.txt")

        # 1. saturation: throughput and CPU
        sys0 = system_cpu()
        cpu0, t0 = tree_cpu_seconds(srv.pid), time.time()
        sat = run_dnsperf(ctx, srv.port, a.duration, ctx.tmp / f"{key}-max.txt")
        cpu1, t1 = tree_cpu_seconds(srv.pid), time.time()
        sys1 = system_cpu()
        note_foreign_load(row, sys0, sys1, (cpu1 - cpu0) + sat["dnsperf_cpu_s"],
                          set(process_tree(srv.pid)), "full-speed run")
        srv.remember_tree()
        rss, pss, nproc = tree_memory_mib(srv.pid)
        cpu = cpu1 - cpu0
        answered = sat["completed"] or 0
        row["max"] = sat
        row["qps"] = sat["qps"]
        row["server_cpu_s"] = cpu
        row["cpu_s_per_100k"] = cpu / answered * 100_000 if answered else None
        row["server_busy_pct"] = 100 * cpu / (t1 - t0) / (2 if srv.cores == SERVER_CORES_2 else 1)
        row["server_cpu_pct_of_one_core"] = 100 * cpu / (t1 - t0)
        row["dnsperf_busy_pct"] = 100 * sat["dnsperf_cpu_s"] / sat["wall"]
        row["rss_mib"] = rss
        row["pss_mib"] = pss
        row["processes"] = nproc
        check_run(row, sat, nx_share, "full-speed run")
        log(f"max {sat['qps']:,.0f} q/s, server CPU {cpu:.2f} s "
            f"({row['cpu_s_per_100k']:.3f} s/100k), dnsperf core busy "
            f"{row['dnsperf_busy_pct']:.0f}%, RSS {rss:.1f} MiB")

        # 2. half the measured max rate: latency percentiles
        rate = sat["qps"] / 2
        lat = latency_run(ctx, srv, row, f"{key}-half", rate, nx_share, "half-rate run")
        row["half"] = lat
        row["p50_ms"], row["p99_ms"] = lat["p50_ms"], lat["p99_ms"]
        row["avg_ms"] = lat["avg_latency_ms"]
        # 3. the same offered load for every server (the reference's half rate): a
        # faster server's own half rate is more load, so only this compares latency
        if reference:
            common_rate = rate
        if common_rate:
            if abs(common_rate - rate) > 0.01 * rate:
                lat = latency_run(ctx, srv, row, f"{key}-common", common_rate, nx_share,
                                  "common-rate run")
            row["common"] = lat
            row["common_rate"] = common_rate
            row["p50_common_ms"], row["p99_common_ms"] = lat["p50_ms"], lat["p99_ms"]
            row["avg_common_ms"] = lat["avg_latency_ms"]
            row["cpu_common_s_per_100k"] = lat.get("cpu_s_per_100k")
        if srv.proc.poll() is not None:
            row["warnings"].append(f"server exited during the run ({srv.proc.returncode})")
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"
        log(f"ERROR {label}: {row['error']}")
    finally:
        for final in srv.finals:
            try:
                row.update(final())
            except Exception as e:  # a figure missing, not the row
                row["warnings"].append(f"could not read the final figures: {e}")
        srv.stop()
    return row


def latency_run(ctx: Context, srv: Server, row: dict[str, Any], tag: str, rate: float,
                nx_share: float, what: str) -> dict[str, Any]:
    """``ctx.args.duration`` seconds at ``rate`` q/s, cores kept from idling: latency
    percentiles and the server's CPU."""
    a = ctx.args
    with idle_spinners(a.spin_idle) as spinners:
        sys0 = system_cpu()
        cpu0 = tree_cpu_seconds(srv.pid)
        lat = run_dnsperf(ctx, srv.port, a.duration, ctx.tmp / f"{tag}.txt",
                          qps_limit=rate, verbose=True)
        cpu1 = tree_cpu_seconds(srv.pid)
        sys1 = system_cpu()
    spun = sum(sys1["procs"].get(p, ("", 0))[1] - sys0["procs"].get(p, ("", 0))[1]
               for p in spinners) / CLK_TCK
    note_foreign_load(row, sys0, sys1, (cpu1 - cpu0) + lat["dnsperf_cpu_s"] + spun,
                      set(process_tree(srv.pid)) | spinners, what)
    lat["target_qps"] = rate
    lat["server_cpu_s"] = cpu1 - cpu0
    lat["cpu_s_per_100k"] = ((cpu1 - cpu0) / lat["completed"] * 100_000
                             if lat["completed"] else None)
    if lat["qps"] < 0.95 * rate:
        row["warnings"].append(f"{what} reached only {lat['qps']:,.0f} of {rate:,.0f} q/s")
    check_run(row, lat, nx_share, what)
    log(f"{what} at {lat['qps']:,.0f} q/s: p50 {lat['p50_ms']:.3f} ms, "
        f"p99 {lat['p99_ms']:.3f} ms, average {lat['avg_latency_ms']:.3f} ms")
    return lat


def note_foreign_load(row: dict[str, Any], s0: dict[str, Any], s1: dict[str, Any],
                      ours: float, exclude: set[int], what: str) -> None:
    """CPU used on the machine by anything but the server and dnsperf during a run.

    Another busy process (a compiler, a test suite) disturbs the figures; so
    does a hypervisor stealing time.  Busy time of the machine minus the
    server's and dnsperf's own CPU time (which include the loopback softirq
    work charged to them); the busiest other processes are named.
    """
    wall = s1["t"] - s0["t"]
    residual = (s1["busy"] - s0["busy"]) - ours
    steal = s1["steal"] - s0["steal"]
    me = os.getpid()
    deltas = sorted(
        ((ticks - s0["procs"].get(pid, ("", 0))[1], f"{comm}[{pid}]")
         for pid, (comm, ticks) in s1["procs"].items() if pid not in exclude and pid != me),
        reverse=True)
    named = sum(t for t, _ in deltas if t > 0) / CLK_TCK
    top = ", ".join(f"{name} {100 * t / CLK_TCK / wall:.0f}%" for t, name in deltas[:3] if t > 0)
    unattributed = residual - named
    row.setdefault("foreign_cpu", {})[what] = {
        "other_processes_pct_of_a_core": 100 * named / wall,
        "busiest_others": top,
        # machine busy time nobody running at the end was charged for: softirq
        # work done in idle context (about 5% here), processes that came and went
        "unattributed_pct_of_a_core": 100 * unattributed / wall,
        "steal_pct_of_a_core": 100 * steal / wall,
        "irq_softirq_pct_of_a_core": 100 * (s1["irq"] - s0["irq"]) / wall,
    }
    disturbed = ": figures disturbed, run again on a quiet machine"
    if named > 0.05 * wall:
        pct = 100 * named / wall
        row["warnings"].append(f"{what}: other processes used {pct:.0f}% of a core meanwhile "
                               f"({top}){disturbed if pct > 15 else ''}")
    if unattributed > 0.15 * wall:
        row["warnings"].append(f"{what}: {100 * unattributed / wall:.0f}% of a core used by "
                               f"short-lived processes or the kernel{disturbed}")
    if steal > 0.05 * wall:
        row["warnings"].append(f"{what}: the hypervisor stole {100 * steal / wall:.0f}% of a core")


def wait_quiet(limit: float, threshold_pct: float = 10.0) -> float | None:
    """Wait (at most ``limit`` s) until other processes use < threshold of a core
    over a 1 s sample.  Returns the last sample's load in % of a core, or None
    when no wait was asked for."""
    if limit <= 0:
        return None
    deadline = time.time() + limit
    waited = False
    while True:
        s0 = system_cpu()
        time.sleep(1)
        s1 = system_cpu()
        load = float(100 * (s1["busy"] - s0["busy"]) / (s1["t"] - s0["t"]))
        if load < threshold_pct or time.time() >= deadline:
            if waited or load >= threshold_pct:
                log(f"machine load now {load:.0f}% of a core"
                    + ("" if load < threshold_pct else f" (gave up waiting after {limit:.0f} s)"))
            return load
        if not waited:
            log(f"machine busy ({load:.0f}% of a core used by other processes): waiting up to "
                f"{limit:.0f} s for it to calm down")
            waited = True


def check_run(row: dict[str, Any], r: dict[str, Any], nx_share: float, what: str) -> None:
    """Flag load runs whose answers do not look like the query mix."""
    done = r["completed"] or 0
    if not done:
        row["warnings"].append(f"{what}: no answers")
        return
    codes = r["rcodes"]
    odd = {c: n for c, n in codes.items() if c not in ("NOERROR", "NXDOMAIN")}
    if sum(odd.values()) > done * 0.001:
        row["warnings"].append(f"{what}: unexpected rcodes {odd}")
    nx = codes.get("NXDOMAIN", 0) / done
    if abs(nx - nx_share) > 0.01:
        row["warnings"].append(f"{what}: NXDOMAIN {nx:.1%} of answers, expected {nx_share:.1%}")
    if r["lost"] and r["lost"] > 0.01 * (r["sent"] or 1):
        row["warnings"].append(f"{what}: {r['lost']:.0f} of {r['sent']:.0f} queries lost")


MEDIAN_FIELDS = ("qps", "p50_ms", "p99_ms", "avg_ms", "cpu_s_per_100k", "rss_mib", "pss_mib",
                 "server_busy_pct", "dnsperf_busy_pct", "common_rate", "p50_common_ms",
                 "p99_common_ms", "avg_common_ms", "cpu_common_s_per_100k", "dnstap_sent",
                 "dnstap_dropped")


def combine_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row per server: the median of each figure over the measured rounds."""
    if len(rounds) == 1:
        return rounds[0]
    ok = [r for r in rounds if r.get("qps")]
    if not ok:
        return rounds[0]
    by_qps = sorted(ok, key=lambda r: r["qps"])
    row = dict(by_qps[len(by_qps) // 2])
    for f in MEDIAN_FIELDS:
        vals = sorted(r[f] for r in ok if r.get(f) is not None)
        if vals:
            n = len(vals)
            row[f] = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    row["rounds"] = [{k: r.get(k) for k in (*MEDIAN_FIELDS, "error")} for r in rounds]
    per_round = ", ".join(f"{r['qps']:,.0f}" if r.get("qps") else "failed" for r in rounds)
    row["notes"] = [*row.get("notes", []), f"median of {len(ok)} rounds (of {len(rounds)}); "
                    f"queries/s per round: {per_round}"]
    row["warnings"] = [f"round {i + 1}: {w}" for i, r in enumerate(rounds)
                       for w in r.get("warnings", [])]
    row["warnings"] += [f"round {i + 1}: {r['error']}" for i, r in enumerate(rounds)
                        if r.get("error")]
    row.pop("error", None)
    return row


