"""The dnstap benchmark's servers: clusterset-dns and Knot (its mod-dnstap) each sending
every answer to a collector, golang-dnstap's reader (built by ``scripts/build-peers
dnstap``) on dnsperf's core, writing the frames it reads to /dev/null."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.bench.common import CLIENT_CORE, LOOPBACK, Skip, log
from clusterset_dns_testkit.bench.knot import start_knot
from clusterset_dns_testkit.bench.servers import Context, Server, spawn, start_ours
from clusterset_dns_testkit.dnsserver import metric_sum
from clusterset_dns_testkit.peers import cache_dir, free_port


def reader_binary() -> Path:
    path = cache_dir() / "bin" / "dnstap"
    if not path.is_file():
        raise Skip(f"{path} missing: run `scripts/build-peers dnstap`")
    return path


def start_collector(ctx: Context, name: str) -> tuple[Path, subprocess.Popen[bytes]]:
    """The reader listening on a new Unix socket: (its path, the process)."""
    sock = ctx.tmp / f"{name}.sock"
    sock.unlink(missing_ok=True)
    proc = spawn(["taskset", "-c", CLIENT_CORE, str(reader_binary()), "-u", str(sock),
                  "-w", "/dev/null"], ctx.tmp / f"{name}.log")
    deadline = time.monotonic() + 10
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the dnstap reader did not listen on {sock}: "
                               f"{(ctx.tmp / f'{name}.log').read_text(errors='replace')}")
        time.sleep(0.05)
    return sock, proc


def _stopper(proc: subprocess.Popen[bytes]) -> Any:
    def stop() -> None:
        proc.kill()
        proc.wait(5)
    return stop


def start_ours_dnstap(ctx: Context) -> Server:
    sock, collector = start_collector(ctx, "ours-dnstap")
    metrics = free_port()
    try:
        srv = start_ours(ctx, 1, extra=("--dnstap", f"unix:{sock}", "--metrics-listen",
                                        f"{LOOPBACK}:{metrics}"), tag="dnstap")
    except BaseException:
        _stopper(collector)()
        raise
    srv.cleanup.append(_stopper(collector))

    def counters() -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{metrics}/metrics", timeout=5) as r:
            text = r.read().decode()
        sent = metric_sum(text, "clusterset_dns_dnstap_frames_sent_total")
        dropped = metric_sum(text, "clusterset_dns_dnstap_dropped_total")
        log(f"dnstap frames sent {sent:,.0f}, dropped {dropped:,.0f}")
        return {"dnstap_sent": sent, "dnstap_dropped": dropped}

    srv.finals.append(counters)
    srv.notes.append("--dnstap to golang-dnstap's reader on core 1 (-w /dev/null)")
    return srv


def start_knot_dnstap(ctx: Context) -> Server:
    if not list(Path("/usr/lib").glob("*/knot/modules-*/dnstap.so")):
        raise Skip("Knot's dnstap module is not installed (apt-get install knot-module-dnstap)")
    sock, collector = start_collector(ctx, "knot-dnstap")
    try:
        srv = start_knot(ctx, dnstap=sock)
    except BaseException:
        _stopper(collector)()
        raise
    srv.cleanup.append(_stopper(collector))
    srv.notes.append("mod-dnstap to golang-dnstap's reader on core 1 (-w /dev/null)")
    return srv
