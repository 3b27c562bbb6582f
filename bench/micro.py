"""In-process micro-benchmark of the handler alone: answers per second, no sockets.

    python bench/gen.py /tmp/gen && python bench/micro.py --manifests /tmp/gen/objects.json \
        --queries /tmp/gen/queries.txt

Times Handler.handle() over the query file's mix (half the queries with an
option-less EDNS OPT, as dnsperf -e sends) and over a few pure shapes. Then the EDNS
tails table under a flood (docs/dns-behaviour.md §8): a client whose OPT shape is new
(payload size 1400, DO set) after 1,100 distinct payload sizes filled the table,
against the same client on a handler that saw no flood, in the same run (the ratio is
the figure; about 1.0 when the table starts over, 2-4x when a full table sends every
new shape to the slow path). Between the two, the fast path's CPU per answer for
names in mixed case, by kind of answer (mixed_case).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

# This checkout's clusterset_dns, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import EDNS0, DNSRecord

from clusterset_dns.base.config import Config
from clusterset_dns.base.names import ZoneNames, wire_to_text
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone.cache import Cache

ROOT = Path(__file__).resolve().parent.parent


def packet(name: str, qtype: str, edns: bool, qid: int, payload: int = 1232,
           do: bool = False) -> bytes:
    record = DNSRecord.question(name, qtype)
    record.header.id = qid & 0xFFFF
    if edns:
        record.add_ar(EDNS0(udp_len=payload, flags="do" if do else ""))
    return bytes(record.pack())


def spelled(name: str, seed: int) -> str:
    """``name`` in a case pattern of ``seed`` (DNS 0x20: never the same query twice)."""
    return "".join(c.upper() if (seed >> (i % 20)) & 1 else c for i, c in enumerate(name))


def tails_flood(cache: Cache, questions: list[tuple[str, str]], seconds: float) -> None:
    """CPU per answer of a new OPT shape after a flood of shapes, against a control."""
    long_name = ".".join("x" * 100) + ".demo.svc.clusterset.local"  # 100 labels: NXDOMAIN
    cases = {"short name": questions[0], "100-label name": (long_name, "A")}
    print("EDNS tails table: a new OPT shape after a flood of 1,100 payload sizes")
    for label, (name, qtype) in cases.items():
        for kind, packets in (
                ("repeated", [packet(name, qtype, True, 7, 1400, True)] * 1000),
                ("0x20", [packet(spelled(name, i), qtype, True, i, 1400, True)
                          for i in range(1000)])):
            control = Handler(cache.zone, Config().edns_udp_size)
            flooded = Handler(cache.zone, Config().edns_udp_size)
            for size in range(1300, 2400):
                flooded.handle(packet(name, qtype, True, size, size), False)
            # Interleaved halves, so that a change of the machine's load hits both.
            timed = {"control": 0.0, "flooded": 0.0}
            for _ in range(2):
                for which, handler in (("control", control), ("flooded", flooded)):
                    cache.zone.changed()  # the remembered responses start empty for each
                    timed[which] += rate(handler.handle, packets, seconds / 4)[1] / 2
            print(f"  {label:15s} {kind:8s} control {timed['control']:6.2f} us/answer  "
                  f"flooded {timed['flooded']:6.2f} us/answer  "
                  f"ratio {timed['flooded'] / timed['control']:.2f}")


def mixed_case(cache: Cache, handler: Handler, rounds: int = 15) -> None:
    """CPU per answer of the fast path for names asked in mixed case (DNS 0x20: never a
    remembered response), by kind of answer: an endpoint name (remembered on first use),
    a service name (stored), a ``_http._tcp`` SRV name (stored, or shared with its
    service name's and remembered on first use), an NXDOMAIN (a remembered negative).
    CPU time (process_time), the least of ``rounds`` passes of 20 over 500 names."""
    zone = cache.zone
    endpoints = [wire_to_text(label + parent) for parent, labels in zone.hosts.items()
                 for label in labels][:500]
    # Headless services first (bench/gen.py: one named port, so their _http._tcp SRV
    # is shared with the service name's), then ClusterSetIP ones (two named ports).
    services = sorted((wire_to_text(key[:-4]) for key in zone.answers
                       if key.endswith(b"\x00\x01\x00\x01") and b"\x04_tcp" not in key
                       and key.count(b"\x03svc") == 1 and key[1:4] != b"dns"),
                      key=lambda name: not name.startswith("hl-"))[:500]
    ports = [f"_http._tcp.{name}" for name in services]
    shapes = {"endpoint name A": [(n, "A") for n in endpoints],
              "service name A": [(n, "A") for n in services],
              "_http._tcp SRV": [(n, "SRV") for n in ports],
              "NXDOMAIN": [(f"nope-{i}.{n}", "A") for i, n in enumerate(services)]}
    print("mixed case (0x20), CPU per answer:")
    for label, questions in shapes.items():
        packets = [packet(spelled(n, i * 7919 + 1), t, True, i)
                   for i, (n, t) in enumerate(questions)]
        for data in packets:
            handler.handle(data, False)  # the first use, not timed
        best = float("inf")
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(20):
                for data in packets:
                    handler.handle(data, False)
            best = min(best, (time.process_time() - start) / (20 * len(packets)) * 1e6)
        print(f"  {label:16s} {best:6.2f} us/answer ({len(packets)} names)")


def rate(handle: Callable[[bytes, bool], bytes | None], packets: list[bytes],
         seconds: float) -> tuple[float, float]:
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for data in packets:
            handle(data, False)
        count += len(packets)
    elapsed = time.perf_counter() - start
    return count / elapsed, elapsed / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--manifests", type=Path, default=ROOT / "examples")
    parser.add_argument("--queries", type=Path, help="dnsperf query file (name TYPE a line)")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    ManifestSource(args.manifests, cache.apply, 0).scan()
    handler = Handler(cache.zone, Config().edns_udp_size)
    if args.queries:
        lines = args.queries.read_text().split("\n")[:20000]
        questions = [tuple(line.split()[:2]) for line in lines if line.strip()]
    else:
        questions = [("web.demo.svc.clusterset.local", "A"),
                     ("db.demo.svc.clusterset.local", "SRV"),
                     ("nope.demo.svc.clusterset.local", "A")]
    mix = [packet(n, t, i % 2 == 1, i) for i, (n, t) in enumerate(questions)]
    negative_file = args.queries.with_name("queries-negative.txt") if args.queries else None
    if negative_file is not None and negative_file.exists():  # bench/gen.py --mix negative
        lines = negative_file.read_text().split("\n")[:20000]
        negatives = [tuple(line.split()[:2]) for line in lines if line.strip()]
    else:
        negatives = questions
    shapes = {
        "query-file mix": mix,
        "mix, no EDNS": [packet(n, t, False, i) for i, (n, t) in enumerate(questions)],
        "mix, EDNS": [packet(n, t, True, i) for i, (n, t) in enumerate(questions)],
        "negative mix": [packet(n, t, i % 2 == 1, i) for i, (n, t) in enumerate(negatives)],
        "one name, A": [packet(questions[0][0], "A", False, 7)] * 1000,
        "one typo, A": [packet("nope" + questions[0][0], "A", False, 7)] * 1000,
    }
    print(f"{len(cache.zone.answers)} answers, {len(questions)} distinct queries")
    for label, packets in shapes.items():
        per_second, micros = rate(handler.handle, packets, args.seconds)
        print(f"{label:16s} {per_second / 1e3:8.0f} k answers/s  {micros:6.2f} us/answer")
    mixed_case(cache, handler)
    tails_flood(cache, questions, args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
