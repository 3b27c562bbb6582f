"""Zone transfers at scale, through a real kube-apiserver, with Knot as the secondary.

    python bench/xfr_scale.py [--imports 10000 --headless 1000 --endpoints 100]
                              [--updates 1000 --rate 100] [--out FILE]

1. etcd + kube-apiserver with the objects of ``bench/kube_scale.py`` (same
   generator); clusterset-dns with ``--allow-transfer 127.0.0.1/32 --notify``
   pointing at a Knot secondary (clusterset_dns_testkit.secondary).
2. AXFR: wall time of ``dig AXFR`` from our server, its bytes and messages; the
   same from Knot once it holds the zone (the reference, measured in this run).
3. IXFR for one changed endpoint: one EndpointSlice patched (one address);
   once the serial moves, ``dig IXFR=<old serial>``: time and bytes.
4. API write -> answer on the Knot secondary: ``--updates`` ServiceImport IP
   changes at ``--rate`` per second (kube_scale's propagation loop, asking Knot).

Every wait is bounded. Loopback only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns_testkit.bench import cli
from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.apiload import NAMESPACES, SLICES, Writer, ip4, load, propagation
from clusterset_dns_testkit.peers import KubeAPI, free_port
from clusterset_dns_testkit.secondary import KnotSecondary, serial_at

ROOT = Path(__file__).resolve().parent.parent
ZONE = "clusterset.local"
XFR_SIZE = re.compile(r"XFR size: (\d+) records \(messages (\d+), bytes (\d+)\)")


def dig_xfr(port: int, kind: str) -> dict[str, float]:
    t0 = time.monotonic()
    out = subprocess.run(["dig", "@127.0.0.1", "-p", str(port), ZONE, kind, "+noall",
                          "+answer", "+stats"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    seconds = time.monotonic() - t0
    match = XFR_SIZE.search(out)
    if match is None:
        raise RuntimeError(f"dig {kind}: no transfer:\n{out[-2000:]}")
    records, messages, size = (int(g) for g in match.groups())
    return {"seconds": seconds, "records": records, "messages": messages, "bytes": size}


def wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s: {what}")


def knot_version() -> dict[str, str]:
    try:
        out = subprocess.run(["knotd", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {"knot": out.strip().rsplit("version", 1)[-1].strip()} if out else {}


def main() -> int:
    parser = cli.parser(__doc__)
    cli.add_dataset(parser)
    cli.add_out(parser)
    args = parser.parse_args()
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "objects": {"imports": args.imports, "headless": args.headless,
                                           "endpoints_per_headless": args.endpoints}}
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        results["load_s"] = load(api, args.imports, args.headless, args.endpoints)
        print(f"loaded in {results['load_s']:.1f}s", flush=True)
        port, ready, knot_port = free_port(), free_port(), free_port()
        log = open(api.dir / "clusterset-dns.log", "wb")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterset_dns", "serve", "--kubeconfig",
             str(api.kubeconfig), "--listen", f"127.0.0.1:{port}", "--health-listen", "off",
             "--ready-listen", f"127.0.0.1:{ready}", "--metrics-listen", "off",
             "--startup-timeout", "120", "--lameduck", "0", "--allow-transfer", "127.0.0.1/32",
             "--notify", f"127.0.0.1:{knot_port}", "--journal-changes", "2000"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait(lambda: serial_at("127.0.0.1", port), 180, "clusterset-dns to answer")
            time.sleep(2)  # the first full sync's release of memory
            results["axfr_ours"] = dig_xfr(port, "AXFR")
            print(f"AXFR from clusterset-dns: {results['axfr_ours']}", flush=True)
            with KnotSecondary(port, port=knot_port, tmp=api.dir) as knot:
                t0 = time.monotonic()
                wait(lambda: knot.serial() == serial_at("127.0.0.1", port), 300,
                     "Knot to load the zone")
                results["knot_load_s"] = time.monotonic() - t0
                results["axfr_knot"] = dig_xfr(knot.port, "AXFR")
                print(f"AXFR from Knot (reference): {results['axfr_knot']}", flush=True)
                # One endpoint changes: one address of one slice.
                old = serial_at("127.0.0.1", port)
                writer = Writer(api)
                # The slice as kube_scale wrote it, one address changed (a merge patch
                # replaces the whole list).
                eps = [{"addresses": ["11.250.0.1" if e == 0 else ip4(e, 11)],
                        "hostname": f"pod-{e}", "conditions": {"ready": True}}
                       for e in range(min(100, args.endpoints))]
                writer.send("PATCH", SLICES.format(ns="ns-0") + "/hl-0-0", {"endpoints": eps})
                wait(lambda: serial_at("127.0.0.1", port) != old, 30, "the serial to move")
                results["ixfr_one_endpoint"] = dig_xfr(port, f"IXFR={old}")
                print(f"IXFR, one endpoint: {results['ixfr_one_endpoint']}", flush=True)
                results["propagation_to_knot"] = propagation(api, knot.port, args)
                print(f"API write -> Knot answer: {results['propagation_to_knot']}",
                      flush=True)
                refreshes = knot.ixfr_refreshes()
                results["knot_ixfr_refreshes"] = len(refreshes)
        finally:
            proc.terminate()
            proc.wait(10)
    cli.publish(args, bench_results.envelope(
        "xfr_scale", results, quick=cli.smaller(args),
        versions=bench_results.peer_versions("kube-apiserver", "etcd") | knot_version()))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    assert NAMESPACES
    raise SystemExit(main())
