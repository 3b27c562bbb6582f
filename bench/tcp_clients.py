"""What TCP clients cost the server: RSS per idle connection, and RSS growth under
clients that pipeline queries and never read (back-pressure).

    python bench/tcp_clients.py                       # 5,000 idle, 24 and 200 non-reading
    python bench/tcp_clients.py --idle 1000 --non-reading 50 --seconds 3

Runs `python -m clusterset_dns serve --manifests examples` (idle) and
`--manifests tests/conformance/objects/core` (non-reading: queries for the 1 KB
answer of big.bulk) on loopback; RSS is VmRSS of /proc/PID/status.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import socket
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, whatever else is installed

import dns.message  # noqa: E402

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for  # noqa: E402


def idle(count: int) -> None:
    with ServerProcess("--manifests", str(ROOT / "examples"), "--tcp-idle-timeout", "300",
                       "--max-tcp-connections", str(4 * (count + 10))) as server:
        server.wait_ready()
        base = server.rss_kib()
        clients = [socket.create_connection((server.host, server.port)) for _ in range(count)]
        wait_for(lambda: server.metric("clusterset_dns_tcp_connections") == count, 60,
                 "every connection to be accepted")
        grown = server.rss_kib() - base
        print(f"{count} idle connections: RSS +{grown / 1024:.1f} MiB, "
              f"{grown * 1024 / count:,.0f} bytes each")
        for c in clients:
            c.close()


def non_reading(count: int, seconds: float) -> None:
    message = dns.message.make_query("big.bulk.svc.clusterset.local.", "A", use_edns=False)
    wire = message.to_wire()
    chunk = (struct.pack("!H", len(wire)) + wire) * 2000
    core = ROOT / "tests" / "conformance" / "objects" / "core"
    with ServerProcess("--manifests", str(core), "--tcp-idle-timeout", "60",
                       "--max-tcp-connections", str(4 * (count + 10))) as server:
        server.wait_ready()
        base = server.rss_kib()
        clients = [socket.create_connection((server.host, server.port)) for _ in range(count)]
        for c in clients:
            c.setblocking(False)
        sent, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            for c in clients:
                with contextlib.suppress(BlockingIOError):
                    sent += c.send(chunk)
            time.sleep(0.01)
        grown = server.rss_kib() - base
        print(f"{count} clients that never read sent {sent >> 20} MiB of queries in "
              f"{seconds:g} s: RSS +{grown / 1024:.1f} MiB")
        for c in clients:
            c.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=5000)
    parser.add_argument("--non-reading", type=int, nargs="*", default=[24, 200])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(args.idle, *args.non_reading) + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    if args.idle:
        idle(args.idle)
    for count in args.non_reading:
        non_reading(count, args.seconds)


if __name__ == "__main__":
    main()
