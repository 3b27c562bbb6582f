"""How long a ClusterProperty change takes to reach the answers, against the time an
EndpointSlice change takes, measured in the same run.

    python bench/locality.py [--rounds 20] [--timeout 10]

A real etcd + kube-apiserver (``scripts/build-peers``) with the mcs-api v0.5.0 and
about-api CRDs holds a PreferClose headless import ``near`` (one endpoint in
``east``, one in ``west``) and a plain headless import ``ref``. clusterset-dns
(this checkout, ``--kubeconfig``) watches them. Each round, interleaved:

- the ClusterProperty ``cluster.clusterset.k8s.io`` is switched east <-> west and
  ``near`` A is asked over UDP until it holds only the new cluster's address;
- ``ref``'s slice gets a new address and ``ref`` A is asked until it has it
  (the reference: the ordinary watch -> rebuild -> answer path).

Printed: median and p90 of both, from the write's return to the first changed
answer, and their ratio. Each wait is bounded by ``--timeout``. Nothing here is a
test: figures go to docs/benchmark.md.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's testkit, whatever else is installed

from clusterset_dns_testkit.bench import cli  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.dnsserver import ServerProcess  # noqa: E402
from clusterset_dns_testkit.objects import (  # noqa: E402
    HTTP,
    cluster_property,
    endpoint,
    endpoint_slice,
    service_import,
)
from clusterset_dns_testkit.peers import KubeAPI  # noqa: E402

NS = "locality"
ZONE = "svc.clusterset.local."


def slice_of(name: str, service: str, cluster: str, address: str) -> dict[str, Any]:
    return endpoint_slice(name, service, NS, cluster, endpoints=[endpoint(address)])


def headless(name: str, prefer_close: bool) -> dict[str, Any]:
    return service_import(name, NS, "Headless", ports=[HTTP],
                          traffic_distribution="PreferClose" if prefer_close else None)


def addresses(server: ServerProcess, name: str) -> set[str]:
    query = dns.message.make_query(name, "A")
    try:
        reply = dns.query.udp(query, server.host, port=server.port, timeout=1)
    except dns.exception.Timeout:
        return set()
    return {rr.address for rrset in reply.answer for rr in rrset}


def time_until(write: Callable[[], None], done: Callable[[], bool], timeout: float) -> float:
    write()
    start = time.perf_counter()
    deadline = start + timeout
    while not done():
        if time.perf_counter() > deadline:
            raise SystemExit(f"no change within {timeout}s")
        time.sleep(0.001)
    return time.perf_counter() - start


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return {"median_ms": statistics.median(ordered) * 1000, "p90_ms": p90 * 1000}


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms"


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0", "about-api"])
        api.ensure_namespace(NS)
        api.apply(cluster_property("east"))
        api.apply(headless("near", True))
        api.apply(slice_of("near-east", "near", "east", "10.60.0.1"))
        api.apply(slice_of("near-west", "near", "west", "10.60.1.1"))
        api.apply(headless("ref", False))
        api.apply(slice_of("ref-east", "ref", "east", "10.61.0.1"))
        server = ServerProcess("--kubeconfig", str(api.kubeconfig)).start()
        try:
            server.wait_ready()
            near, ref = f"near.{NS}.{ZONE}", f"ref.{NS}.{ZONE}"
            own = {"east": "10.60.0.1", "west": "10.60.1.1"}
            time_until(lambda: None, lambda: addresses(server, near) == {own["east"]},
                       args.timeout)
            prop: list[float] = []
            slices: list[float] = []
            for i in range(args.rounds):
                cluster = "west" if i % 2 == 0 else "east"
                prop.append(time_until(lambda c=cluster: api.apply(cluster_property(c)),
                                       lambda c=cluster: addresses(server, near) == {own[c]},
                                       args.timeout))
                new = f"10.61.{1 + i // 250}.{1 + i % 250}"
                slices.append(time_until(
                    lambda n=new: api.apply(slice_of("ref-east", "ref", "east", n)),
                    lambda n=new: addresses(server, ref) == {n}, args.timeout))
        finally:
            server.stop()
    print(f"ClusterProperty write -> answer: {summary(prop)}")
    print(f"EndpointSlice write -> answer (reference): {summary(slices)}")
    ratio = statistics.median(prop) / statistics.median(slices)
    print(f"ratio of medians: {ratio:.2f}")
    cli.publish(args, bench_results.envelope(
        "locality", {"rounds": args.rounds, "property": figures(prop),
                     "slice": figures(slices), "ratio": ratio},
        versions=bench_results.peer_versions("kube-apiserver", "etcd")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
