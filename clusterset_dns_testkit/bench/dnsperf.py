"""dnsperf: the load, its output, latency percentiles."""

from __future__ import annotations

import contextlib
import re
import resource
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.bench.common import CLIENT_CORE, LOOPBACK, SERVER_CORE
from clusterset_dns_testkit.bench.servers import Context


def dnsperf_version() -> str:
    out = subprocess.run(["dnsperf", "-h"], capture_output=True, text=True)
    m = re.search(r"Version (\S+)", out.stdout + out.stderr)
    return m.group(1) if m else "?"


def parse_dnsperf(text: str) -> dict[str, Any]:
    def num(pattern: str) -> float | None:
        m = re.search(pattern, text)
        return float(m.group(1)) if m else None

    r: dict[str, Any] = {
        "sent": num(r"Queries sent:\s+(\d+)"),
        "completed": num(r"Queries completed:\s+(\d+)"),
        "lost": num(r"Queries lost:\s+(\d+)"),
        "run_time": num(r"Run time \(s\):\s+([\d.]+)"),
        "qps": num(r"Queries per second:\s+([\d.]+)"),
        "avg_latency_ms": None,
        "stddev_ms": None,
        "rcodes": {},
    }
    a = num(r"Average Latency \(s\):\s+([\d.]+)")
    s = num(r"Latency StdDev \(s\):\s+([\d.]+)")
    r["avg_latency_ms"] = a * 1000 if a is not None else None
    r["stddev_ms"] = s * 1000 if s is not None else None
    m = re.search(r"Response codes:\s+(.*)", text)
    if m:
        for code, n in re.findall(r"(\w+) (\d+) \(", m.group(1)):
            r["rcodes"][code] = int(n)
    m = re.search(r"Average packet size:\s+request (\d+), response (\d+)", text)
    if m:
        r["avg_request_bytes"], r["avg_response_bytes"] = int(m.group(1)), int(m.group(2))
    if r["qps"] is None:
        raise RuntimeError("dnsperf output not understood:\n" + text[-2000:])
    return r


def run_dnsperf(ctx: Context, port: int, seconds: float, out_path: Path,
                qps_limit: float | None = None, verbose: bool = False) -> dict[str, Any]:
    a = ctx.args
    cmd = ["taskset", "-c", CLIENT_CORE, "dnsperf", "-s", LOOPBACK, "-p", str(port),
           "-B", "-d", str(ctx.queries_bin), "-l", f"{seconds:g}",
           "-c", str(a.clients), "-T", str(a.threads), "-q", str(a.outstanding),
           "-t", "2"]
    if qps_limit:
        cmd += ["-Q", str(int(qps_limit))]
    if verbose:
        cmd += ["-v"]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    with open(out_path, "wb") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 60)
    wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out_path.read_text(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"dnsperf failed ({p.returncode}): {shlex.join(cmd)}\n{text[-2000:]}")
    stats_at = text.find("Statistics:")
    r = parse_dnsperf(text[stats_at:] if stats_at >= 0 else text)
    r["command"] = shlex.join(cmd)
    r["wall"] = wall
    r["dnsperf_cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if verbose:
        r.update(latency_percentiles(text))
    return r


def latency_percentiles(text: str) -> dict[str, Any]:
    """From dnsperf -v lines: '> RCODE binary input LATENCY' (or '> T ...' on timeout)."""
    lat: list[float] = []
    timeouts = 0
    for line in text.splitlines():
        if not line.startswith("> "):
            continue
        f = line.split()
        if f[1] == "T":
            timeouts += 1
            continue
        try:
            lat.append(float(f[-1]))
        except ValueError:
            continue
    lat.sort()

    def pct(q: float) -> float | None:
        if not lat:
            return None
        return lat[min(len(lat) - 1, int(q / 100 * len(lat)))] * 1000

    return {"samples": len(lat), "timeouts_verbose": timeouts,
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "p999_ms": pct(99.9),
            "max_ms": lat[-1] * 1000 if lat else None}


@contextlib.contextmanager
def idle_spinners(enabled: bool, cores: tuple[str, ...] = (SERVER_CORE, CLIENT_CORE)
                  ) -> Iterator[set[int]]:
    """Busy loops at SCHED_IDLE priority, one per core, while the block runs.

    On a VM an idle vCPU halts, and waking it again (an exit to the host and
    back, or the host's scheduler) puts milliseconds into the latency tail of
    a half-loaded server: measured here, Knot's p99 at 10,000 q/s was 2.3 ms
    with idle cores and 0.4 ms with these loops.  A SCHED_IDLE task yields
    the CPU at once to any normal task (server, dnsperf), so it takes no time
    from them; its CPU is left out of the foreign-load figures.
    """
    procs: list[subprocess.Popen[bytes]] = []
    if enabled and shutil.which("chrt"):
        for c in cores:
            procs.append(subprocess.Popen(
                ["chrt", "--idle", "0", "taskset", "-c", c, "sh", "-c", "while :; do :; done"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield {p.pid for p in procs}
    finally:
        for p in procs:
            p.kill()
            p.wait()


