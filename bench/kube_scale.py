"""Scale and propagation through a real kube-apiserver.

    python bench/kube_scale.py [--imports 10000 --headless 1000 --endpoints 100]
                               [--updates 1000 --rate 100] [--coredns] [--out FILE]
                               [--scale 1,3,10]

1. Starts etcd + kube-apiserver (clusterset_dns_testkit.peers, binaries from
   scripts/build-peers) with its watch cache, as clusters run it (``--no-watch-cache``:
   every list read from etcd, as the results without a ``watch_cache`` field were
   measured), installs the mcs-api v0.5.0 CRDs and writes the objects:
   ``--imports`` ClusterSetIP ServiceImports and ``--headless`` headless ones with
   ``--endpoints`` endpoints each (one EndpointSlice of at most 100 endpoints per
   cluster and 100 endpoints).
2. Start-up: once the API server is quiet (less than a tenth of a core for a second,
   waited for at most a minute: it goes on working after the load), starts
   clusterset-dns with --kubeconfig and measures the time from
   process start to /ready (and to the first correct answer), its RSS, and the
   same for CoreDNS (kubernetes plugin with multicluster) with ``--coredns``
   (after propagation, on a quiet API server again).
3. Propagation: ``--updates`` writes, at ``--rate`` writes per second, each
   giving one ServiceImport a new IP; for each, the time from the start of the
   API write until a DNS query over UDP sees the new IP (polled every 0.5 ms).
   Reports p50/p90/p99/max.

``--scale 1,3,10``: the curve. One run per multiple of the data set (``--imports``
and ``--headless`` times each number; 10 is 100,000 imports + 10,000 headless x 100,
1.1 million endpoints), each on a freshly loaded API server, each measuring both
servers' time to first answer, settled RSS (ours: once the answers it builds after
the sync are built, which it shows by going quiet) and peak RSS (VmHWM).

Every loop is bounded in time. Loopback only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

# This checkout's clusterset_dns_testkit, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns_testkit.bench import cli, shipped
from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.apiload import (
    api_memory_mib,
    cpu_seconds,
    list_floor,
    load,
    propagation,
    settle,
    start_coredns,
    start_ours,
)
from clusterset_dns_testkit.peers import KubeAPI

CRDS = "mcs-api-v0.5.0"


def one_run(args: argparse.Namespace, scale: int | None = None) -> dict[str, Any]:
    """One load of a fresh API server, our start, propagation, CoreDNS's start;
    ``scale``: that multiple of ``--imports`` and ``--headless``."""
    if scale is not None:
        args = argparse.Namespace(**{**vars(args), "imports": args.imports * scale,
                                     "headless": args.headless * scale})
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "objects": {"imports": args.imports, "headless": args.headless,
                                           "endpoints_per_headless": args.endpoints}}
    if scale is not None:
        results["scale"] = scale
    if args.crds != CRDS:
        results["crds"] = args.crds
    results["watch_cache"] = args.watch_cache
    with KubeAPI(watch_cache=args.watch_cache) as api:
        args.workdir = api.dir
        api.install_crds([args.crds])
        results["load_s"] = load(api, args.imports, args.headless, args.endpoints)
        results["apiserver_etcd_rss_mib"] = api_memory_mib(api)
        print(f"loaded {args.imports + args.headless} imports, "
              f"{args.headless * args.endpoints} endpoints in {results['load_s']:.1f}s; "
              f"kube-apiserver + etcd {results['apiserver_etcd_rss_mib']:.0f} MiB", flush=True)
        settle(api)
        # the floor: the API server sending both lists to a client that only reads them
        results["list_floor"] = list_floor(api)
        print(f"the first lists alone: {results['list_floor']}", flush=True)
        results["settle_s"] = [settle(api)]  # each server starts on a quiet API server
        before = api_cpu(api)
        proc, port, ours = start_ours(api, args)
        ours["api_cpu_s"] = api_cpu(api) - before  # the API server's and etcd's, to the answer
        results["clusterset_dns"] = ours
        print(f"clusterset-dns: {ours}", flush=True)
        try:
            results["propagation"] = propagation(api, port, args)
            print(f"propagation: {results['propagation']}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
        if args.coredns:
            results["settle_s"].append(settle(api))
            before = api_cpu(api)
            coredns, theirs = start_coredns(api, args)
            theirs["api_cpu_s"] = api_cpu(api) - before
            coredns.close()
            results["coredns"] = theirs
            print(f"coredns: {theirs}", flush=True)
    return results


def api_cpu(api: KubeAPI) -> float:
    """CPU seconds kube-apiserver and etcd have used so far."""
    assert api.apiserver is not None and api.etcd is not None
    return sum(cpu_seconds(proc.popen.pid) for proc in (api.apiserver, api.etcd))


def sizes(text: str) -> list[int]:
    values = sorted({int(v) for v in text.split(",") if v.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: positive integers, comma-separated")
    return values


def main() -> int:
    parser = cli.parser(__doc__)
    cli.add_dataset(parser)
    parser.add_argument("--coredns", action="store_true", help="also measure CoreDNS")
    cli.add_out(parser)
    parser.add_argument("--runs", type=int, default=1,
                        help="measure this many times, each on a freshly loaded API server (1)")
    parser.add_argument("--crds", default=CRDS,
                        help="the mcs-api CRD set to install: a released set's name or a "
                             f"directory of CRD files ({CRDS})")
    parser.add_argument("--no-watch-cache", dest="watch_cache", action="store_false",
                        help="run the API server without its watch cache (every list from "
                             "etcd; clusters run with it)")
    parser.add_argument("--scale", type=sizes,
                        help="comma-separated multiples of --imports and --headless (1,3,10): "
                             "--runs runs of each, smallest first")
    parser.add_argument("--python", default="image", help=shipped.HELP)
    args = parser.parse_args()
    args.python_exe = shipped.prepare(args.python)
    runs = [one_run(args, scale) for scale in args.scale or [None] for _ in range(args.runs)]
    versions = bench_results.peer_versions("kube-apiserver", "etcd")
    versions["python"] = shipped.describe(args.python_exe)  # ours'
    if args.coredns:
        versions |= bench_results.peer_versions("coredns")
    cli.publish(args, bench_results.envelope("kube_scale", {"runs": runs}, versions=versions,
                                             quick=cli.smaller(args) or (
                                                 args.scale is not None and 1 not in args.scale)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
