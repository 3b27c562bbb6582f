"""With --workers 2, how far back in time a client can see: answers older than one
it already had, because the worker applies an update after the parent.

    python bench/workers_order.py [--seconds 10] [--interval 0.02] [--workers 2]

The file source (one file rewritten every ``--interval`` seconds, its import's
address counting up) and one client asking that name round-robin from 16 UDP sockets
(SO_REUSEPORT spreads sockets over the processes). Printed: answers, how many were
older than one already seen, and the longest such lag: from the first answer of a
version to the last answer of an older one. Nothing here is a test: the figure goes
to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import dns.message

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.dnsserver import ServerProcess  # noqa: E402

IMPORT = """apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {{name: clock, namespace: order}}
spec: {{type: ClusterSetIP, ips: [10.{a}.{b}.{c}]}}
"""
NAME = "clock.order.svc.clusterset.local."


def write(path: Path, n: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(IMPORT.format(a=n >> 16 & 255, b=n >> 8 & 255, c=n & 255))
    os.replace(tmp, path)  # whole files only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "objects" / "clock.yaml"
        path.parent.mkdir()
        write(path, 1)
        server = ServerProcess("--manifests", str(path.parent), "--poll-interval", "0.005",
                               "--workers", str(args.workers))
        with server:
            server.wait_ready()
            stop = threading.Event()

            def writer() -> None:
                n = 1
                while not stop.is_set():
                    n += 1
                    write(path, n)
                    time.sleep(args.interval)

            thread = threading.Thread(target=writer)
            thread.start()
            socks = []
            for _ in range(16):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.settimeout(1)
                s.connect((server.host, server.port))
                socks.append(s)
            wire = dns.message.make_query(NAME, "A").to_wire()
            first_seen: dict[int, float] = {}
            newest, answers, older, lag = 0, 0, 0, 0.0
            end = time.monotonic() + args.seconds
            try:
                while time.monotonic() < end:
                    for s in socks:
                        s.send(wire)
                        try:
                            reply = dns.message.from_wire(s.recv(512))
                        except TimeoutError:
                            continue
                        now = time.monotonic()
                        a, b, c = (int(x) for x in str(reply.answer[0][0]).split(".")[1:])
                        n = a << 16 | b << 8 | c
                        answers += 1
                        first_seen.setdefault(n, now)
                        if n < newest:
                            older += 1
                            lag = max(lag, now - first_seen[newest])
                        newest = max(newest, n)
            finally:
                stop.set()
                thread.join()
    print(f"--workers {args.workers}: {answers} answers, {older} older than one already "
          f"seen; longest lag {lag * 1000:.1f} ms; {newest} versions written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
