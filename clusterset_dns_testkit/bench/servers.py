"""The servers measured: what they share, and clusterset-dns itself."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.bench.common import (
    CLIENT_CORE,
    LOOPBACK,
    REPO,
    SERVER_CORE,
    SERVER_CORES_2,
    log,
)
from clusterset_dns_testkit.bench.net import dns_rcode
from clusterset_dns_testkit.bench.procs import process_tree, start_time
from clusterset_dns_testkit.bench.results import git_version
from clusterset_dns_testkit.peers import free_port


@dataclass
class Context:
    args: argparse.Namespace
    tmp: Path
    objects: Path
    queries_bin: Path
    probes: list[dict[str, Any]]
    ours_cmd: list[str]
    dump_text: str | None = None
    dump_error: str | None = None


@dataclass
class Server:
    label: str
    proc: subprocess.Popen[bytes]
    port: int
    cores: str
    log_path: Path
    version: str = ""
    notes: list[str] = field(default_factory=list)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    # Figures read from the running server once measured (before stop): merged into its row.
    finals: list[Callable[[], dict[str, Any]]] = field(default_factory=list)
    _seen: dict[int, str | None] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def remember_tree(self) -> None:
        for p in process_tree(self.pid):
            self._seen.setdefault(p, start_time(p))

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        self.remember_tree()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        # forked workers that outlived their parent: only the exact processes
        # this run started (pid + start time match)
        deadline = time.time() + 5
        for pid, started in self._seen.items():
            while start_time(pid) == started and started is not None and time.time() < deadline:
                time.sleep(0.1)
            if start_time(pid) == started and started is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        for fn in self.cleanup:
            with contextlib.suppress(Exception):
                fn()


def spawn(cmd: list[str], log_path: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log(f"start: {shlex.join(cmd)}")
    f = open(log_path, "wb")  # noqa: SIM115 - kept open for the child's lifetime
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=str(REPO), env=env)


def wait_until(srv: Server, timeout: float, ready_url: str | None = None) -> None:
    """Until /ready says 200 (when given) and the zone SOA answers NOERROR."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.label} exited with {srv.proc.returncode}:\n{srv.log_tail()}")
        ok = True
        if ready_url:
            try:
                with urllib.request.urlopen(ready_url, timeout=1) as r:
                    ok = r.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
        if ok and dns_rcode(srv.port) == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{srv.label} not answering after {timeout:.0f} s:\n{srv.log_tail()}")


def start_ours(ctx: Context, workers: int, udp_io: str = "auto", extra: tuple[str, ...] = (),
               tag: str = "") -> Server:
    """clusterset-dns on the bench data; ``udp_io`` picks the UDP path (``plain``: one
    recvfrom/sendto per datagram, the fallback where recvmmsg/sendmmsg are missing);
    ``extra``: more flags (a variant, named ``tag``)."""
    port, rport = free_port(), free_port()
    cores = SERVER_CORE if workers == 1 else SERVER_CORES_2
    cmd = ["taskset", "-c", cores, *ctx.ours_cmd, "serve",
           "--manifests", str(ctx.objects),
           "--listen", f"{LOOPBACK}:{port}",
           "--health-listen", "off",
           "--ready-listen", f"{LOOPBACK}:{rport}",
           "--metrics-listen", "off",
           "--workers", str(workers),
           "--udp-io", udp_io,
           "--ttl", str(ctx.args.ttl),
           "--lameduck", "0",  # no lame-duck wait when a run stops it
           *extra]
    label = f"clusterset-dns, {workers} worker{'s' if workers > 1 else ''}"
    if udp_io != "auto":
        label += f", {udp_io} UDP"
    if tag:
        label += f", {tag}"
    logfile = ctx.tmp / f"ours-{workers}-{udp_io}{'-' + tag if tag else ''}.log"
    srv = Server(label, spawn(cmd, logfile), port, cores, logfile, version=ours_version(ctx))
    if workers > 1:
        srv.notes.append(f"{workers} workers pinned to cores {cores}: they share core "
                         f"{CLIENT_CORE} with dnsperf")
    try:
        t0 = time.time()
        wait_until(srv, ctx.args.ready_timeout, f"http://{LOOPBACK}:{rport}/ready")
        srv.notes.append(f"ready in {time.time() - t0:.1f} s")
    except BaseException:
        srv.stop()
        raise
    return srv


def ours_version(ctx: Context) -> str:
    version = git_version(REPO)
    return "" if version == "?" else version


