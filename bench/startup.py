"""Start-up at scale, checkouts side by side against one loaded API server.

    python bench/startup.py [--checkout DIR ...] [--coredns] [--rounds 3]
                            [--imports 10000 --headless 1000 --endpoints 100]

Loads a real etcd + kube-apiserver (with its watch cache, as clusters run it) once
with ``kube_scale.py``'s objects (``clusterset_dns_testkit/bench/apiload.py``), then
starts each server in turn, ``--rounds`` times, interleaved (so a slower moment of
the machine hits every server alike): every ``--checkout`` (default: this one)
with ``python -m clusterset_dns serve --kubeconfig ...`` run from that directory,
and CoreDNS (the ``kubernetes`` plugin with ``multicluster``) with ``--coredns``.
Each start waits for a quiet API server (``apiload.settle``). For each start:
seconds from process start to ``/ready`` (ours), to the first
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
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import apiload, cli, shipped  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.peers import KubeAPI  # noqa: E402


def start_checkout(api: KubeAPI, args: argparse.Namespace, checkout: Path) -> dict[str, float]:
    proc, _, figures = apiload.start_ours(api, args, checkout)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    return figures


def start_coredns(api: KubeAPI, args: argparse.Namespace) -> dict[str, float]:
    coredns, theirs = apiload.start_coredns(api, args)
    coredns.close()
    return theirs


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--checkout", type=Path, action="append",
                        help="a clusterset-dns checkout to start (repeatable; default: this one)")
    parser.add_argument("--coredns", action="store_true", help="also start CoreDNS")
    parser.add_argument("--rounds", type=int, default=3)
    cli.add_dataset(parser, updates=False)
    parser.add_argument("--python", default="image", help=shipped.HELP)
    parser.add_argument("--no-watch-cache", dest="watch_cache", action="store_false",
                        help="run the API server without its watch cache (every list from "
                             "etcd; clusters run with it, as the results with "
                             "'watch_cache': true were measured)")
    args = parser.parse_args()
    servers: list[str] = [str(c.resolve()) for c in (args.checkout or [ROOT])]
    args.python_exe = shipped.prepare(args.python, tuple(Path(s) for s in servers))
    if args.coredns:
        servers.append("coredns")
    results: dict[str, list[dict[str, float]]] = {server: [] for server in servers}
    with KubeAPI(watch_cache=args.watch_cache) as api:
        args.workdir = api.dir  # the servers' logs
        api.install_crds(["mcs-api-v0.5.0"])
        loaded = apiload.load(api, args.imports, args.headless, args.endpoints)
        print(f"loaded {args.imports + args.headless} imports, "
              f"{args.headless * args.endpoints} endpoints in {loaded:.1f}s", flush=True)
        for round_ in range(args.rounds):
            for server in servers:
                apiload.settle(api)  # every start finds the API server as quiet
                figures = (start_coredns(api, args) if server == "coredns"
                           else start_checkout(api, args, Path(server)))
                results[server].append(figures)
                print(f"round {round_ + 1} {server}: "
                      + ", ".join(f"{k} {v:.3f}" for k, v in figures.items())
                      + f" (load average {os.getloadavg()[0]:.2f})", flush=True)
    print("\nmedians:")
    for server, runs in results.items():
        medians: dict[str, Any] = {key: statistics.median(run[key] for run in runs)
                                   for key in runs[0]}
        print(f"  {server}: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    # Checkouts are named by their version, not by where they sit on this machine.
    named = {("CoreDNS" if server == "coredns" else
              f"clusterset-dns {bench_results.git_version(Path(server))}"): runs
             for server, runs in results.items()}
    cli.publish(args, bench_results.envelope(
        "startup", {"rounds": args.rounds, "watch_cache": args.watch_cache, "servers": named},
        quick=cli.smaller(args),
        versions=bench_results.peer_versions("kube-apiserver", "etcd", "coredns")
        | {"python": shipped.describe(args.python_exe)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
