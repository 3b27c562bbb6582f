"""What one change costs: ``Cache.apply`` of one op, timed in process.

(a) a readiness flip of one endpoint (and the flip back) in one Headless service of
``n`` endpoints (slices of 100, 5 named ports, endpoint names derived from the
addresses), after the sync; (b) one added ClusterSetIP import in a zone of ``n``
imports. Run as a script (``python change_cost.py SPEC_JSON``) it measures the
``clusterset_dns`` on its ``sys.path`` and prints the figures as JSON: so
bench/change_cost.py runs it for this checkout and, with ``--baseline``, for
another one. It imports nothing of the testkit for that reason.

The process is set up as the server sets itself up: the garbage collector's
thresholds raised and the loaded zone frozen out of its sight, and the package's
warnings (an answer cut to one message, logged at every rebuild) formatted and
written to /dev/null.
"""

from __future__ import annotations

import gc
import ipaddress
import json
import logging
import random
import sys
import time
from typing import Any

ENDPOINTS_PER_SLICE = 100
PORTS = 5


def _percentiles(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """Of (wall, CPU) seconds per change. The CPU time is this process's alone: on a
    shared machine the wall time also counts the waits for a core."""
    out: dict[str, Any] = {"changes": len(samples)}
    for name, values in (("", [wall for wall, _ in samples]),
                         ("cpu_", [cpu for _, cpu in samples])):
        ordered = sorted(values)
        out[f"{name}p50_ms"] = ordered[len(ordered) // 2] * 1e3
        out[f"{name}p99_ms"] = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3
        out[f"{name}max_ms"] = ordered[-1] * 1e3
    return out


def _timed(apply: Any, ops: list[Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    apply(ops)
    return time.perf_counter() - wall, time.process_time() - cpu


def _setup() -> None:
    gc.set_threshold(100_000, 50, 100)  # as app._process_setup
    handler = logging.FileHandler("/dev/null")
    logging.getLogger("clusterset_dns").addHandler(handler)
    logging.getLogger("clusterset_dns").propagate = False


def _loaded() -> None:
    gc.collect()  # as app.release_memory after a load
    gc.freeze()


def _as_given(endpoints: tuple[Any, ...]) -> Any:
    """Endpoint objects as a slice's endpoints, addresses as an import's IPs: a checkout
    before the compact model stores them so, a later one packs them (__post_init__)."""
    return endpoints


def flips(endpoints: int, changes: int, budget_s: float, seed: int = 1) -> dict[str, Any]:
    """(a): ``changes`` changes (a flip, then its flip back), or as many as ``budget_s``
    seconds allow (at least 4)."""
    from clusterset_dns.base.names import ZoneNames
    from clusterset_dns.zone.cache import Cache, PutSlice, ReplaceImports, ReplaceSlices, SetSynced
    from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

    ports = tuple(Port(f"p{i}", "tcp", 8000 + i) for i in range(PORTS))
    imp = ServiceImport("bench", "web", ServiceType.HEADLESS, _as_given(()), ports)
    slices = {}
    for s in range(endpoints // ENDPOINTS_PER_SLICE):
        ready = tuple(Endpoint((ipaddress.IPv4Address(0x0A000000 + s * ENDPOINTS_PER_SLICE
                                                      + i),), None)
                      for i in range(ENDPOINTS_PER_SLICE))
        slices[("bench", f"web-{s}")] = EndpointSlice("bench", f"web-{s}", "web", "east",
                                                      _as_given(ready), ports)
    cache = Cache(ZoneNames("clusterset.local"), 5)
    started = time.perf_counter()
    cache.apply([ReplaceImports({("bench", "web"): imp}), ReplaceSlices(slices),
                 SetSynced(True)])
    load_s = time.perf_counter() - started
    _loaded()
    rng = random.Random(seed)

    def flip(key: tuple[str, str]) -> tuple[PutSlice, PutSlice]:
        piece = slices[key]
        up = list(piece.endpoints)
        down = up.pop(rng.randrange(len(up)))
        return (PutSlice(key, EndpointSlice(piece.namespace, piece.name, piece.service,
                                            piece.cluster, _as_given(tuple(up)), ports,
                                            not_ready=_as_given((down,)))),
                PutSlice(key, piece))

    # A first change after the sync, not measured: it rebuilds the service whole (and
    # starts what later changes reuse).
    cache.apply(flip(("bench", "web-0")))
    samples: list[tuple[float, float]] = []
    deadline = time.perf_counter() + budget_s
    keys = list(slices)
    while len(samples) < changes and (len(samples) < 4 or time.perf_counter() < deadline):
        for op in flip(rng.choice(keys)):
            samples.append(_timed(cache.apply, [op]))
    return {"endpoints": endpoints, "load_s": load_s, **_percentiles(samples)}


def added_imports(imports: int, changes: int) -> dict[str, Any]:
    """(b): ``changes`` imports added one at a time to a zone of ``imports``."""
    from clusterset_dns.base.names import ZoneNames
    from clusterset_dns.zone.cache import Cache, PutImport, ReplaceImports, SetSynced
    from clusterset_dns.zone.model import Port, ServiceImport, ServiceType

    ports = (Port("http", "tcp", 80),)

    def make(i: int) -> ServiceImport:
        return ServiceImport(f"ns-{i % 100}", f"svc-{i}", ServiceType.CLUSTER_SET_IP,
                             _as_given((ipaddress.IPv4Address(0x0A000000 + i),)), ports)

    cache = Cache(ZoneNames("clusterset.local"), 5)
    started = time.perf_counter()
    cache.apply([ReplaceImports({(f"ns-{i % 100}", f"svc-{i}"): make(i)
                                 for i in range(imports)}), SetSynced(True)])
    load_s = time.perf_counter() - started
    _loaded()
    samples = []
    for i in range(imports, imports + changes):
        imp = make(i)
        samples.append(_timed(cache.apply, [PutImport((imp.namespace, imp.name), imp)]))
    return {"imports": imports, "load_s": load_s, **_percentiles(samples)}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    _setup()
    out: dict[str, Any] = {"flip": [], "add_import": []}
    for endpoints in spec["flip_sizes"]:
        out["flip"].append(flips(endpoints, spec["changes"], spec["budget_s"]))
        print(f"flip at {endpoints:,} endpoints: {out['flip'][-1]}", file=sys.stderr)
    for imports in spec["import_sizes"]:
        out["add_import"].append(added_imports(imports, spec["changes"]))
        print(f"added import at {imports:,}: {out['add_import'][-1]}", file=sys.stderr)
    return out


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
