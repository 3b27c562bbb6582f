"""In-process micro-benchmark of the handler alone: answers per second, no sockets.

    python bench/micro.py [--seconds 3]

Builds the example-sized zone from bench/gen.py's defaults when available,
else from examples/, and times Handler.handle() over a query mix.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from dnslib import EDNS0, QTYPE, DNSRecord

from clusterset_dns.cache import Cache
from clusterset_dns.handler import Handler
from clusterset_dns.manifests import ManifestSource
from clusterset_dns.names import ZoneNames


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--manifests", type=Path, default=Path(__file__).parent.parent / "examples")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    ManifestSource(args.manifests, cache.apply, 0).scan()
    handler = Handler(cache.zone)
    names = sorted({key[:-4] for key in cache.zone.answers})
    rng = random.Random(1)
    shapes = {
        "A, no EDNS": [bytes(DNSRecord.question(n, "A").pack()) for n in _decode(names)],
        "A, EDNS": [_edns(n, "A") for n in _decode(names)],
        "SRV, EDNS": [_edns(n, "SRV") for n in _decode(names)],
        "NXDOMAIN, no EDNS": [bytes(DNSRecord.question("nope" + str(i) + ".demo.svc.clusterset.local",
                                                 "A").pack()) for i in range(50)],
        "NODATA (TXT)": [bytes(DNSRecord.question(n, "TXT").pack()) for n in _decode(names)],
    }
    print(f"{len(cache.zone.answers)} answers; {sys.version.split()[0]}")
    for label, packets in shapes.items():
        rng.shuffle(packets)
        handle = handler.handle
        count, deadline = 0, time.perf_counter() + args.seconds
        start = time.perf_counter()
        while time.perf_counter() < deadline:
            for packet in packets:
                handle(packet, False)
            count += len(packets)
        elapsed = time.perf_counter() - start
        print(f"{label:20s} {count / elapsed / 1e3:8.0f} k answers/s  "
              f"{elapsed / count * 1e6:6.2f} us/answer")
    return 0


def _decode(wire_names: list[bytes]) -> list[str]:
    out = []
    for name in wire_names:
        labels, i = [], 0
        while name[i]:
            labels.append(name[i + 1 : i + 1 + name[i]].decode())
            i += 1 + name[i]
        out.append(".".join(labels) + ".")
    return out


def _edns(name: str, qtype: str) -> bytes:
    record = DNSRecord.question(name, qtype)
    record.add_ar(EDNS0(udp_len=1232))
    assert QTYPE
    return bytes(record.pack())


if __name__ == "__main__":
    raise SystemExit(main())
