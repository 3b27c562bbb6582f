"""Large API objects for memory tests and benchmarks: EndpointSlices carrying
annotations near the API's 256 KiB limit (as last-applied-configuration and
managedFields get), written to a real kube-apiserver, and the same slices without
them for the reference: the zone both give is the same.

Memory is read from /proc: VmHWM (the peak resident size) and VmRSS."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from clusterset_dns_testkit.bench import procs
from clusterset_dns_testkit.objects import HTTP, endpoint_slice, ready_endpoints, service_import
from clusterset_dns_testkit.peers import KubeAPI

SERVICES = 20


def fat_slice(namespace: str, i: int, annotation_kib: int, generation: int = 0,
              labels: int = 0) -> dict[str, Any]:
    """``labels``: that many more labels (none of them read by the server)."""
    obj = endpoint_slice(f"slice-{i}", f"svc-{i % SERVICES}", namespace, "east", ports=[HTTP],
                         endpoints=ready_endpoints([_address(i, generation)]))
    if labels:
        obj["metadata"]["labels"].update(
            {f"l{k:05d}": f"{(i + k + generation) % 1000}" for k in range(labels)})
    if annotation_kib:
        # Varied text (not one repeated byte): nothing along the way compresses it away.
        filler = "".join(f"{(i * 7919 + k * 104729 + generation) % 1000003:07d}"
                         for k in range(annotation_kib * 1024 // 7))
        obj["metadata"]["annotations"] = {
            "example.com/blob": filler[: annotation_kib * 1024 - 64]}
    return obj


def _address(i: int, generation: int) -> str:
    return f"10.{generation % 200}.{i // 250}.{i % 250 + 1}"


def write_objects(api: KubeAPI, namespace: str, slices: int, annotation_kib: int,
                  generation: int = 0, threads: int = 8, labels: int = 0) -> None:
    """The namespace's ServiceImports (first time) and ``slices`` slices, created or
    replaced (``generation`` > 0: every slice replaced, new address and annotation)."""
    api.ensure_namespace(namespace)
    base = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    if generation == 0:
        for s in range(SERVICES):
            api.create(service_import(f"svc-{s}", namespace, "Headless", ports=[HTTP]))

    def one(i: int) -> None:
        obj = fat_slice(namespace, i, annotation_kib, generation, labels)
        if generation == 0:
            api.request("POST", base, obj, timeout=60)
        else:
            api.request("PUT", f"{base}/slice-{i}", obj, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(slices)))


def memory_kib(pid: int) -> dict[str, int]:
    """VmHWM (peak) and VmRSS of a process, KiB."""
    found = procs.status_kib(pid, "VmHWM", "VmRSS")
    assert len(found) == 2, f"no memory figures for pid {pid} (gone?)"
    return found


def last_address(slices: int, generation: int) -> tuple[str, str]:
    """(the name of the last slice's service, the address it has in ``generation``)."""
    i = slices - 1
    return f"svc-{i % SERVICES}", _address(i, generation)
