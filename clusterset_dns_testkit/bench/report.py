"""The Markdown report and the machine's description."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any

from clusterset_dns_testkit.bench.common import CLIENT_CORE, SERVER_CORE, SERVER_CORES_2
from clusterset_dns_testkit.bench.dnsperf import dnsperf_version
from clusterset_dns_testkit.bench.results import cpu_model


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    knot = next((r for r in rows if r["key"] == "knot" and r.get("qps")), None)
    lines = [
        f"# clusterset-dns benchmark, {meta['date']}, {meta.get('mix', 'standard')} mix",
        "",
        f"- machine: {meta['cpu_model']}, {meta['cpus']} CPUs, kernel {meta['kernel']}",
        f"- dnsperf {meta['dnsperf']}, {meta['knot'] or 'knotd not installed'}, "
        f"Python {meta['python']}, clusterset-dns {meta['ours_version']}",
        f"- data: {meta['dataset']['imports']:,} ClusterSetIP imports, "
        f"{meta['dataset']['headless']:,} headless x {meta['dataset']['endpoints']} endpoints "
        f"over {meta['dataset']['clusters']} clusters, {meta['dataset']['namespaces']} namespaces "
        f"({meta['dataset']['n_objects']:,} objects)",
        f"- queries: {meta['dataset']['n_queries']:,} "
        f"({meta.get('mix_text', '80% A, 5% AAAA, 10% SRV, 5% NXDOMAIN')}; "
        f"half with EDNS0), looped; dnsperf {meta['dnsperf_args']} on core {CLIENT_CORE}; "
        f"server on core {SERVER_CORE} (2 workers: cores {SERVER_CORES_2})",
        f"- {meta['duration']:g} s at full speed, then {meta['duration']:g} s at half that "
        f"server's max rate for latency"
        + (" (cores kept from idling: `--spin-idle`)" if meta.get("spin_idle") else "")
        + (f"; median of {meta['rounds']} rounds" if meta.get("rounds", 1) > 1 else ""),
        "",
        "| server | queries/s | p50 ms | p99 ms | p50 / p99 ms at Knot's half rate "
        "| CPU s / 100k answers | RSS MiB "
        "| q/s vs Knot | CPU vs Knot | server core busy | dnsperf core busy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if not r.get("qps"):
            why = r.get("skipped") or r.get("error") or "not measured"
            text = why.strip().splitlines()
            # the first line says what failed, the last one (a log's) why
            short = text[0] if len(text) < 2 else f"{text[0]} ... {text[-1]}"
            short = " ".join(short.split()).replace("|", "/")[:300]
            lines.append(f"| {r['server']} | {'skipped' if r.get('skipped') else 'FAILED'}: "
                         f"{short} | | | | | | | | | |")
            continue
        qr = r["qps"] / knot["qps"] if knot else None
        cr = (r["cpu_s_per_100k"] / knot["cpu_s_per_100k"]
              if knot and r["cpu_s_per_100k"] and knot["cpu_s_per_100k"] else None)
        lines.append(
            f"| {r['server']} | {r['qps']:,.0f} | {fmt(r['p50_ms'], '.3f')} | "
            f"{fmt(r['p99_ms'], '.3f')} | {fmt(r.get('p50_common_ms'), '.3f')} / "
            f"{fmt(r.get('p99_common_ms'), '.3f')} | {fmt(r['cpu_s_per_100k'], '.3f')} | "
            f"{r['rss_mib']:.1f} | {fmt(qr, '.2f')} | {fmt(cr, '.2f')} | "
            f"{r['server_busy_pct']:.0f}% | {r['dnsperf_busy_pct']:.0f}% |")
    lines += ["", "Notes:", ""]
    for r in rows:
        for n in r.get("notes", []):
            lines.append(f"- {r['server']}: {n}")
        for w in r.get("warnings", []):
            lines.append(f"- **{r['server']}: {w}**")
        if r.get("qps") and r["dnsperf_busy_pct"] > 90 and r["server_busy_pct"] < 90:
            lines.append(f"- {r['server']}: dnsperf's core was the limit "
                         f"({r['dnsperf_busy_pct']:.0f}% busy, server "
                         f"{r['server_busy_pct']:.0f}%): its queries/s is a lower bound; "
                         f"compare CPU s / 100k answers")
    lines += [
        "",
        "p50/p99: from dnsperf -v per-query latencies at half the server's own max rate; "
        "then at Knot's half rate (Knot is measured first in each round), the same offered "
        "load for every server: a server with a higher max carries more load at its own half "
        "rate, so only the second pair compares latency. "
        "CPU: utime+stime of the server's whole process tree during the full-speed run. "
        "RSS: sum of VmRSS of the tree after load (forked workers share pages; PSS in the JSON). "
        "Ratios: this server / Knot (q/s higher is better, CPU lower is better).",
        f"Total bench time: {meta['total_seconds']:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def machine_meta() -> dict[str, Any]:
    knot = ""
    if shutil.which("knotd"):
        knot = subprocess.run(["knotd", "-V"], capture_output=True, text=True).stdout.strip()
    return {"kernel": platform.release(), "cpu_model": cpu_model(), "cpus": os.cpu_count(),
            "dnsperf": dnsperf_version(), "knot": knot, "python": platform.python_version()}
