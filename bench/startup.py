"""Start-up at scale, checkouts side by side against one loaded API server.

    python bench/startup.py [--checkout DIR ...] [--coredns] [--rounds 3]
                            [--imports 10000 --headless 1000 --endpoints 100]

Loads a real etcd + kube-apiserver once with ``kube_scale.py``'s objects, then
starts each server in turn, ``--rounds`` times, interleaved (so a slower moment of
the machine hits every server alike): every ``--checkout`` (default: this one)
with ``python -m clusterset_dns serve --kubeconfig ...`` run from that directory,
and CoreDNS (the ``kubernetes`` plugin with ``multicluster``) with ``--coredns``.
For each start: seconds from process start to ``/ready`` (ours), to the first
correct answer for the last import (both), the resident size after it, and our
process's CPU seconds at ``/ready``. Prints one line per start, then the medians.

``bench/kube_scale.py`` measures the same start once per run, on a freshly
loaded API server, plus propagation; this is for comparing changes.
Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import kube_scale  # noqa: E402

from clusterset_dns_testkit.peers import KubeAPI, free_port  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
            return b" 200 " in conn.recv(100)
    except OSError:
        return False


def start_checkout(api: KubeAPI, checkout: Path, last: str, want: str) -> dict[str, float]:
    port, ready = free_port(), free_port()
    cmd = [sys.executable, "-m", "clusterset_dns", "serve", "--kubeconfig", str(api.kubeconfig),
           "--listen", f"127.0.0.1:{port}", "--health-listen", "off",
           "--ready-listen", f"127.0.0.1:{ready}", "--metrics-listen", "off",
           "--startup-timeout", "120", "--log-level", "warning", "--lameduck", "0"]
    env = dict(os.environ, PYTHONPATH=str(checkout))  # that checkout's code
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=checkout, env=env)
    try:
        while not _ready(ready):
            if proc.poll() is not None or time.monotonic() - started > 180:
                raise RuntimeError(f"{checkout}: not ready (exit status {proc.poll()})")
            time.sleep(0.01)
        ready_s = time.monotonic() - started
        cpu = _cpu_seconds(proc.pid)
        answer_s = ready_s + kube_scale.wait_answer(port, last, want, 60)
        return {"ready_s": ready_s, "first_answer_s": answer_s,
                "rss_mib": kube_scale.rss_mib(proc.pid), "cpu_s": cpu}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def start_coredns(api: KubeAPI, imports: int) -> dict[str, float]:
    args = argparse.Namespace(imports=imports)
    coredns, theirs = kube_scale.start_coredns(api, args)
    coredns.close()
    return theirs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, action="append",
                        help="a clusterset-dns checkout to start (repeatable; default: this one)")
    parser.add_argument("--coredns", action="store_true", help="also start CoreDNS")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--imports", type=int, default=10000)
    parser.add_argument("--headless", type=int, default=1000)
    parser.add_argument("--endpoints", type=int, default=100)
    args = parser.parse_args()
    servers: list[str] = [str(c.resolve()) for c in (args.checkout or [ROOT])]
    if args.coredns:
        servers.append("coredns")
    last = (f"svc-{args.imports - 1}.ns-{(args.imports - 1) % kube_scale.NAMESPACES}"
            ".svc.clusterset.local")
    want = kube_scale.ip4(args.imports - 1)
    results: dict[str, list[dict[str, float]]] = {server: [] for server in servers}
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        loaded = kube_scale.load(api, args.imports, args.headless, args.endpoints)
        print(f"loaded {args.imports + args.headless} imports, "
              f"{args.headless * args.endpoints} endpoints in {loaded:.1f}s", flush=True)
        for round_ in range(args.rounds):
            for server in servers:
                figures = (start_coredns(api, args.imports) if server == "coredns"
                           else start_checkout(api, Path(server), last, want))
                results[server].append(figures)
                print(f"round {round_ + 1} {server}: "
                      + ", ".join(f"{k} {v:.3f}" for k, v in figures.items())
                      + f" (load average {os.getloadavg()[0]:.2f})", flush=True)
    print("\nmedians:")
    for server, runs in results.items():
        medians: dict[str, Any] = {key: statistics.median(run[key] for run in runs)
                                   for key in runs[0]}
        print(f"  {server}: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
