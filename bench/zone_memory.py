"""Where the memory of a settled zone goes, and what a cold endpoint name costs.

    python bench/zone_memory.py [--scale 1] [--queries 20000]

In process, no API server: the objects bench/kube_scale.py writes (``--scale`` 1:
10,000 ClusterSetIP imports + 1,000 Headless x 100 endpoints), converted as the
watch converts them and applied in one update, once with endpoint names answered on
first use (the server's way) and once with every answer encoded (``Cache(lazy=False)``),
one after the other in this process. For each: the CPU seconds of the update, the
bytes it allocated (tracemalloc), and those bytes by structure (each object counted
once, in the order listed); then the time of a first query for ``--queries``
distinct endpoint names (Handler.handle, no EDNS: a miss of every memory), and of the
``_http._tcp`` SRV name of every Headless service, against the same queries on the
encoded zone, in the same run.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

# This checkout's clusterset_dns and testkit, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, ReplaceImports, ReplaceSlices, SetSynced
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, ServiceImport
from clusterset_dns_testkit.bench.apiload import objects

ZONE = "clusterset.local"


def deep(obj: Any, seen: set[int]) -> int:
    """Bytes of ``obj`` and what it holds, less what ``seen`` already counted."""
    total, stack = 0, [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen or o is None or isinstance(o, type):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, bytes | str | int | float | bool | range):
            continue
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, tuple | list | set | frozenset):
            stack.extend(o)
        else:
            for cls in type(o).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    stack.append(getattr(o, slot, None))
            if hasattr(o, "__dict__"):
                stack.append(vars(o))
    return total


def model(scale: float) -> tuple[dict[ObjectKey, ServiceImport], dict[ObjectKey, EndpointSlice]]:
    imports: dict[ObjectKey, ServiceImport] = {}
    slices: dict[ObjectKey, EndpointSlice] = {}
    for _, obj in objects(int(10_000 * scale), int(1_000 * scale), 100):
        if convert.is_service_import(obj):
            imports[convert.key_of(obj)] = convert.service_import(obj)
        else:
            piece = convert.endpoint_slice(obj)
            assert piece is not None
            slices[convert.key_of(obj)] = piece
    return imports, slices


def build(lazy: bool, imports: dict[ObjectKey, ServiceImport],
          slices: dict[ObjectKey, EndpointSlice]) -> tuple[Cache, float, int]:
    gc.collect()
    tracemalloc.start()
    start = time.process_time()
    cache = Cache(ZoneNames(ZONE), 5, lazy=lazy)
    cache.apply([ReplaceImports(dict(imports)), ReplaceSlices(dict(slices)), SetSynced(True)])
    cpu = time.process_time() - start
    gc.collect()
    allocated = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return cache, cpu, allocated


def breakdown(cache: Cache) -> list[tuple[str, int]]:
    zone, seen = cache.zone, set[int]()
    seen.update(id(o) for o in (*cache.imports.values(), *cache.slices.values()))
    per_endpoint = {k: v for k, v in zone.answers.items() if k.startswith(b"\x05pod-")
                    or k.startswith(b"\x06pod-")}
    rows = [("endpoint names: stored answers (key, Answer, body)", deep(per_endpoint, seen)),
            ("endpoint names: compact index (Zone.hosts)", deep(zone.hosts, seen)),
            ("service-level answers (A/AAAA/SRV/TXT, apex)", deep(zone.answers, seen)),
            ("_port._proto SRV from the service's (Zone.derived)", deep(zone.derived, seen)),
            ("truncation plans (Zone.cuts)", deep(zone.cuts, seen)),
            ("empty non-terminals (Zone.names)", deep(zone.names, seen)),
            ("EDE reasons (Zone.explained)", deep(zone.explained, seen)),
            ("per-service footprints (Cache._built)", deep(cache._built, seen)),
            ("states, times, admission", deep((cache.states, cache.changed_at,
                                               cache.admission), seen))]
    return rows


def first_queries(cache: Cache, count: int, srv: bool = False) -> float:
    """Microseconds per first query of ``count`` distinct endpoint names (A, over UDP)
    or, ``srv``, of the ``_http._tcp`` SRV name of each Headless service (over TCP:
    a hundred targets do not fit UDP)."""
    handler = Handler(cache.zone, 1232)
    headless = [(imp.namespace, imp.name) for imp in cache.imports.values()
                if imp.type.value == "Headless"]
    packets = []
    for i in range(min(count, len(headless)) if srv else count):
        ns, svc = headless[i % len(headless)]
        name = (f"_http._tcp.{svc}.{ns}.svc.{ZONE}" if srv else
                f"pod-{(i // len(headless)) % 100}.cluster-0.{svc}.{ns}.svc.{ZONE}")
        wire_name = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
        packets.append(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + wire_name
                       + (b"\x00\x21\x00\x01" if srv else b"\x00\x01\x00\x01"))
    # CPU time: what a first query costs the process, whatever else the machine runs.
    start = time.process_time()
    for packet in packets:
        handler.handle(packet, srv)
    elapsed = time.process_time() - start
    return elapsed / len(packets) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=20_000)
    args = parser.parse_args()
    imports, slices = model(args.scale)
    seen: set[int] = set()
    endpoints = sum(len(piece.endpoints) for piece in slices.values())
    model_bytes = deep((imports, slices), seen)
    print(f"{len(imports):,} imports, {endpoints:,} endpoints; model (imports, slices): "
          f"{model_bytes / 2**20:.1f} MiB, {model_bytes / endpoints:.0f} B an endpoint")
    figures, srv = {}, {}
    for lazy in (False, True):
        cache, cpu, allocated = build(lazy, imports, slices)
        label = "first use" if lazy else "encoded"
        print(f"\n{label}: update {cpu:.1f} CPU s, {allocated / 2**20:.1f} MiB allocated "
              f"({allocated / endpoints:.0f} B an endpoint)")
        for what, size in breakdown(cache):
            print(f"  {what:50s} {size / 2**20:7.1f} MiB {size / endpoints:6.0f} B/endpoint")
        figures[lazy] = first_queries(cache, args.queries)
        srv[lazy] = first_queries(cache, args.queries, srv=True)
        del cache
    print(f"\nfirst query of a distinct endpoint name: {figures[True]:.2f} us on first use, "
          f"{figures[False]:.2f} us encoded ({figures[True] / figures[False]:.2f}x)")
    print(f"first query of a Headless service's _http._tcp SRV (TCP): {srv[True]:.2f} us on "
          f"first use, {srv[False]:.2f} us encoded ({srv[True] / srv[False]:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
