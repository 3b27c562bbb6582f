"""Where the CPU of a first list goes, in process (no API server, no TLS, no HTTP).

    python bench/first_list.py [--imports 10000 --headless 1000 --endpoints 100] [--eager]

``kube_scale.py``'s objects as the API server lists them (JSON pages of 500, the
imports, then the slices), each stage timed in CPU seconds of this process, with the
cyclic collector off as during the server's start-up: decoding (``kube.decode_page``),
converting (``convert``), applying page by page to a ``Cache`` (the server's:
``defer=True``, the answers built after the sync; ``--eager``: every answer built as
each page is applied, as before) and, deferred, the build after the sync in the
server's slices (``sink.BUILD_SLICE``). Also the part of applying that is building
answers (``RecordBuilder.service``). Prints one line; writes no result.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import sink
from clusterset_dns.sources import convert, kube
from clusterset_dns.zone import records
from clusterset_dns.zone.cache import Cache, Op, PutImport, PutSlice, SetSynced
from clusterset_dns_testkit.bench import apiload

PAGE = 500


def pages(items: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps({"metadata": {"resourceVersion": "1"}, "items": items[i : i + PAGE]}
                       ).encode() for i in range(0, len(items), PAGE)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imports", type=int, default=10_000)
    parser.add_argument("--headless", type=int, default=1_000)
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--eager", action="store_true", help="build every answer at once")
    args = parser.parse_args()
    imports: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    for n, (path, obj) in enumerate(apiload.objects(args.imports, args.headless,
                                                    args.endpoints)):
        obj["metadata"].update(uid=f"uid-{n}", resourceVersion=str(n + 1))
        (imports if path.endswith("serviceimports") else slices).append(obj)
    bodies = pages(imports) + pages(slices)
    building = [0.0]
    service = records.RecordBuilder.service

    def timed(self: records.RecordBuilder, *a: Any, **k: Any) -> records.Built:
        start = time.process_time()
        try:
            return service(self, *a, **k)
        finally:
            building[0] += time.process_time() - start

    records.RecordBuilder.service = timed  # type: ignore[method-assign]
    cache = Cache(ZoneNames("clusterset.local"), 5, defer=not args.eager)
    spent = {"decode": 0.0, "convert": 0.0, "apply": 0.0}
    gc.disable()

    def ignore(_: str) -> None:
        pass

    for body in bodies:
        start = time.process_time()
        items = kube.decode_page(body, PAGE)["items"]
        decoded = time.process_time()
        ops: list[Op] = []
        for obj in items:
            key = convert.key_of(obj)
            if convert.is_service_import(obj):
                ops.append(PutImport(key, convert.service_import(obj, ignore)))
            else:
                ops.append(PutSlice(key, convert.endpoint_slice(obj, ignore)))
        converted = time.process_time()
        cache.apply(ops)
        spent["decode"] += decoded - start
        spent["convert"] += converted - decoded
        spent["apply"] += time.process_time() - converted
    start = time.process_time()
    cache.apply([SetSynced(True)])
    spent["apply"] += time.process_time() - start
    ready, built_by_then = sum(spent.values()), building[0]
    start = time.process_time()
    cost, slices_built = sink.slice_cost(cache), 0
    while cache.pending:
        cache.pending.build_some(sink.BUILD_SLICE, cost)
        slices_built += 1
    after = time.process_time() - start
    gc.enable()
    print(f"{'eager' if args.eager else 'deferred'}: to the sync {ready:.2f} s CPU "
          f"(decode {spent['decode']:.2f}, convert {spent['convert']:.2f}, apply "
          f"{spent['apply']:.2f}, of which building answers {built_by_then:.2f}); built "
          f"after the sync {after:.2f} s in {slices_built} slices "
          f"({1000 * after / max(1, slices_built):.1f} ms each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
