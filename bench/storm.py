"""Latency of an unrelated name while one large EndpointSlice is updated in a storm.

    python bench/storm.py [--seconds 10] [--endpoints 1000] [--ports 5] [--repo PATH]

A real etcd + kube-apiserver (``scripts/build-peers``) holds a headless
ServiceImport ``big`` with one EndpointSlice of ``--endpoints`` endpoints and
``--ports`` named ports, and a ClusterSetIP import ``quiet``. clusterset-dns
(started from ``--repo``, default this checkout: point it at another checkout to
compare) watches them. One thread asks ``quiet`` A over UDP back to back; first
for ``--seconds`` with no writes (baseline), then for ``--seconds`` while two
writers replace the slice's addresses as fast as the API server takes them; then
``--burst`` updates that arrive together: the server is paused (SIGSTOP) while
they are written, as if it had been busy, and resumed (only questions sent after
the resume count). Printed: p50, p99, max and timeouts of the ``quiet`` answers
in each phase, the number of slice updates written, and how long after the
resume the last burst update was answered. Nothing here is a test: figures go to
docs/benchmark.md.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query

ROOT = Path(__file__).resolve().parents[1]
# This checkout's clusterset_dns_testkit, whatever else is installed.
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import cli  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import  # noqa: E402
from clusterset_dns_testkit.peers import KubeAPI, free_port  # noqa: E402

NS = "storm"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/storm/endpointslices"


def numbered_ports(count: int) -> list[dict[str, Any]]:
    return [port(8000 + p, "TCP", f"p{p}") for p in range(count)]


def big_slice(endpoints: int, ports: int, generation: int) -> dict[str, Any]:
    return endpoint_slice(
        "big-1", "big", NS, "east", ports=numbered_ports(ports),
        endpoints=[endpoint(f"10.{generation % 250}.{i // 250}.{i % 250}", hostname=f"h{i}",
                            ready=True) for i in range(endpoints)])


class Writer:
    """A persistent HTTPS connection that replaces the slice's endpoints."""

    def __init__(self, api: KubeAPI) -> None:
        url = urllib.parse.urlsplit(api.url)
        assert api.ca_file is not None
        self.conn = HTTPSConnection(url.hostname or "127.0.0.1", url.port, timeout=60,
                                    context=ssl.create_default_context(cafile=str(api.ca_file)))
        self.headers = {"Authorization": f"Bearer {api.token}",
                        "Content-Type": "application/merge-patch+json"}

    def patch(self, body: dict[str, Any]) -> None:
        self.conn.request("PATCH", f"{SLICES}/big-1", body=json.dumps(body),
                          headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"PATCH: HTTP {response.status}")


def ask_loop(port: int, stop: threading.Event, name: str,
             after: list[float] | None = None) -> tuple[list[float], int]:
    """Latencies (ms) and timeouts of back-to-back questions; with ``after``, only the
    questions sent once ``after`` holds a (perf_counter) time count."""
    latencies: list[float] = []
    timeouts = 0
    query = dns.message.make_query(name, "A")
    while not stop.is_set():
        started = time.perf_counter()
        counts = after is None or (bool(after) and started >= after[0])
        try:
            dns.query.udp(query, "127.0.0.1", port=port, timeout=5)
            if counts:
                latencies.append((time.perf_counter() - started) * 1000)
        except dns.exception.Timeout:
            timeouts += counts
        time.sleep(0.001)
    return latencies, timeouts


def measure(port: int, seconds: float, name: str, during: Any = None,
            after: list[float] | None = None) -> tuple[list[float], int, int]:
    stop = threading.Event()
    result: list[tuple[list[float], int]] = []
    asker = threading.Thread(target=lambda: result.append(ask_loop(port, stop, name, after)))
    asker.start()
    writes = during(stop) if during is not None else time.sleep(seconds) or 0
    stop.set()
    asker.join()
    return result[0][0], result[0][1], writes


def phase(label: str, latencies: list[float], timeouts: int) -> dict[str, Any]:
    ordered = sorted(latencies)
    if not ordered:
        return {"phase": label, "answers": 0, "p50_ms": None, "p99_ms": None,
                "max_ms": None, "timeouts": timeouts}
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"phase": label, "answers": len(ordered), "p50_ms": statistics.median(ordered),
            "p99_ms": p99, "max_ms": ordered[-1], "timeouts": timeouts}


def summary(p: dict[str, Any]) -> str:
    if not p["answers"]:
        return f"| {p['phase']} | 0 | - | - | - | {p['timeouts']} |"
    return (f"| {p['phase']} | {p['answers']} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} | "
            f"{p['max_ms']:.1f} | {p['timeouts']} |")


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--endpoints", type=int, default=1000)
    parser.add_argument("--ports", type=int, default=5)
    parser.add_argument("--burst", type=int, default=30)
    cli.add_checkouts(parser, baseline=False)
    args = parser.parse_args()
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        api.ensure_namespace(NS)
        api.apply(service_import("big", NS, "Headless", ports=numbered_ports(args.ports)))
        api.apply(service_import("quiet", NS, ips=["10.99.0.1"], ports=numbered_ports(1)))
        api.apply(big_slice(args.endpoints, args.ports, 0))
        port, ready = free_port(), free_port()
        log = Path(tempfile.mkdtemp(prefix="storm-")) / "server.log"
        with open(log, "wb") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "clusterset_dns", "serve", "--kubeconfig",
                 str(api.kubeconfig), "--listen", f"127.0.0.1:{port}", "--health-listen", "off",
                 "--metrics-listen", "off", "--ready-listen", f"127.0.0.1:{ready}"],
                cwd=args.repo, stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(args.repo)))
        try:
            name = f"quiet.{NS}.svc.clusterset.local."
            deadline = time.monotonic() + 60
            while True:
                try:
                    reply = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1",
                                          port=port, timeout=1)
                    if reply.answer:
                        break
                except (dns.exception.Timeout, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"server not answering; log {log}")
                time.sleep(0.2)
            base, base_timeouts, _ = measure(port, args.seconds, name)

            def storm(stop: threading.Event) -> int:
                count = [0]
                end = time.monotonic() + args.seconds

                def write(offset: int) -> None:
                    writer = Writer(api)
                    generation = offset
                    while time.monotonic() < end:
                        generation += 2
                        writer.patch({"endpoints": big_slice(args.endpoints, args.ports,
                                                             generation)["endpoints"]})
                        count[0] += 1

                threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                return count[0]

            during, storm_timeouts, writes = measure(port, args.seconds, name, storm)
            resumed: list[float] = []
            caught_up: list[float] = []
            last_ip = f"10.{(10_000 + args.burst) % 250}.0.0"

            def burst(stop: threading.Event) -> int:
                writer = Writer(api)
                server.send_signal(signal.SIGSTOP)
                try:
                    for generation in range(10_001, 10_001 + args.burst):
                        writer.patch({"endpoints": big_slice(args.endpoints, args.ports,
                                                             generation)["endpoints"]})
                    time.sleep(0.5)  # the events are on their way into the paused server
                finally:
                    resumed.append(time.perf_counter())
                    server.send_signal(signal.SIGCONT)
                host = f"h0.east.big.{NS}.svc.clusterset.local."
                while True:
                    reply = dns.query.udp(dns.message.make_query(host, "A"), "127.0.0.1",
                                          port=port, timeout=5)
                    if any(str(rd) == last_ip for rrset in reply.answer for rd in rrset):
                        caught_up.append(time.perf_counter())
                        break
                    time.sleep(0.01)
                time.sleep(1)
                return args.burst

            burst_lat, burst_timeouts, _ = measure(port, 0, name, burst, resumed)
        finally:
            server.terminate()
            server.wait(10)
    print(f"server: {args.repo}; slice: {args.endpoints} endpoints x {args.ports} ports; "
          f"{writes} slice updates in {args.seconds:g}s")
    print("| phase | answers | p50 ms | p99 ms | max ms | timeouts (5 s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    phases = [phase("no updates", base, base_timeouts),
              phase(f"updates as fast as the API server takes them ({writes} in "
                    f"{args.seconds:g} s)", during, storm_timeouts),
              phase(f"{args.burst} updates arriving together (server paused while written)",
                    burst_lat, burst_timeouts)]
    for p in phases:
        print(summary(p))
    last_ms = (caught_up[0] - resumed[0]) * 1000
    print(f"last of the {args.burst} updates answered {last_ms:.0f} ms after the resume")
    cli.publish(args, bench_results.envelope(
        "storm", {"endpoints": args.endpoints, "ports": args.ports, "burst": args.burst,
                  "seconds": args.seconds, "writes": writes, "phases": phases,
                  "last_burst_answered_ms": last_ms},
        versions=bench_results.peer_versions("kube-apiserver", "etcd")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
