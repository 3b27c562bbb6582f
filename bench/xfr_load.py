"""Other clients' answers while zone transfers run, and what an open transfer costs.

    python bench/xfr_load.py [--services 70 --endpoints 500] [--transfers 16]
                             [--seconds 10] [--repo PATH] [--baseline PATH]

Writes ``--services`` headless services of ``--endpoints`` endpoints each (70 x 500:
an AXFR of about 6 MB, some 37,000 answer keys) as manifests, starts the server from
``--repo`` (default this checkout) with ``--allow-transfer 127.0.0.0/8``, and asks one
unrelated name over UDP back to back from one thread:

1. ``idle``: nothing else runs (the baseline);
2. ``axfr``: ``--transfers`` ``dig AXFR`` clients at once, each started again when it
   ends, for ``--seconds``;
3. ``udp_ixfr_flood``: 3,000 UDP IXFR datagrams for a serial not in the journal, sent
   as fast as a socket takes them from an allowed address, then ``--seconds`` more of
   asking (at most 120 s in all): the longest time without an answer is the stall.

First (on the fresh process) the memory of open transfers: the server's RSS before
and after 1, then ``--transfers``, AXFRs whose clients never read (4 KiB receive
buffers), and after one more transfer of the next version of the zone while they
stay open. Printed: p50, p99 and max of the answers per
phase, timeouts, the longest gap, and the RSS steps. Nothing here is a test: figures go
to docs/operations.md. ``--baseline PATH``: another checkout measured in the same run.
Loopback only; every wait is bounded.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rrset

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import cli, net  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.peers import free_port  # noqa: E402

ZONE = "clusterset.local"
PROBE = f"probe.bench.svc.{ZONE}."
FLOOD = 3000


def headless(name: str, addresses: list[str]) -> str:
    endpoints = "\n".join(f'  - addresses: ["{a}"]\n    conditions: {{ready: true}}'
                          for a in addresses)
    return f"""apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceImport
metadata: {{name: {name}, namespace: bench}}
spec: {{type: Headless, ports: [{{name: http, protocol: TCP, port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-east
  namespace: bench
  labels: {{multicluster.kubernetes.io/service-name: {name},
           multicluster.kubernetes.io/source-cluster: east}}
addressType: IPv4
ports: [{{name: http, protocol: TCP, port: 80}}]
endpoints:
{endpoints}
"""


def write_zone(root: Path, services: int, each: int) -> None:
    for i in range(services):
        addresses = [f"10.{i // 200}.{(i % 200)}.{j % 250 + 1}" if j < 250 else
                     f"11.{i // 200}.{(i % 200)}.{j % 250 + 1}" for j in range(each)]
        (root / f"s{i}.yaml").write_text(headless(f"s{i}", addresses))
    (root / "probe.yaml").write_text(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\n"
        "metadata: {name: probe, namespace: bench}\n"
        "spec: {type: ClusterSetIP, ips: [10.255.0.1], ports: [{port: 80, protocol: TCP}]}\n")


class Prober:
    """Asks PROBE back to back over UDP (5 s timeout) while running; keeps latencies
    and the arrival time of every answer."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.latencies: list[float] = []
        self.arrivals: list[float] = []
        self.timeouts = 0
        self.running = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        wire = dns.message.make_query(PROBE, "A").to_wire()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.port))
        while self.running.is_set():
            sent = time.perf_counter()
            sock.send(wire[:0] + os.urandom(2) + wire[2:])
            try:
                sock.recv(4096)
            except TimeoutError:
                self.timeouts += 1
                continue
            now = time.perf_counter()
            self.latencies.append((now - sent) * 1000)
            self.arrivals.append(now)
        sock.close()

    def __enter__(self) -> Prober:
        self.running.set()
        self.start = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running.clear()
        self.thread.join(10)
        self.end = time.perf_counter()

    def figures(self) -> dict[str, float]:
        lat = sorted(self.latencies)
        points = [self.start, *self.arrivals, self.end]
        gap = max(b - a for a, b in itertools.pairwise(points))
        return {"answers": len(lat), "timeouts": self.timeouts,
                "p50_ms": round(statistics.median(lat), 3) if lat else -1,
                "p99_ms": round(lat[int(len(lat) * 0.99)], 3) if lat else -1,
                "max_ms": round(lat[-1], 1) if lat else -1,
                "longest_gap_s": round(gap, 3)}


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(match.group(1)) if match else -1


def serial_of(port: int) -> int:
    reply = dns.query.udp(dns.message.make_query(ZONE, "SOA"), "127.0.0.1", port=port,
                          timeout=2)
    return int(reply.answer[0][0].serial)


def answer_keys(metrics: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30) as r:
        text = r.read().decode()
    match = re.search(r'^clusterset_dns_objects\{kind="answers"\} (\S+)$', text, re.M)
    return int(float(match.group(1))) if match else -1


def axfr_phase(port: int, transfers: int, seconds: float) -> dict[str, Any]:
    command = ["dig", "@127.0.0.1", "-p", str(port), ZONE, "AXFR", "+noall", "+stats",
               "+time=60"]
    done = 0
    size = 0
    stop = time.monotonic() + seconds
    # Client i asks from 127.0.0.(2 + i): one address runs at most a quarter of the
    # server's transfers at once.
    def start(i: int) -> tuple[int, subprocess.Popen[str]]:
        return i, subprocess.Popen([*command, "-b", f"127.0.0.{2 + i}"],
                                   stdout=subprocess.PIPE, text=True)

    with Prober(port) as prober:
        running = [start(i) for i in range(transfers)]
        while running:
            still = []
            for i, proc in running:
                if proc.poll() is None:
                    still.append((i, proc))
                    continue
                out = proc.stdout.read() if proc.stdout else ""
                match = re.search(r"XFR size: \d+ records \(messages \d+, bytes (\d+)\)", out)
                if match:
                    done += 1
                    size = int(match.group(1))
                if time.monotonic() < stop:
                    still.append(start(i))
            running = still
            if time.monotonic() > stop + 300:
                for _, proc in running:
                    proc.kill()
                break
            time.sleep(0.01)
    return prober.figures() | {"transfers_completed": done, "axfr_bytes": size}


def flood_phase(port: int, seconds: float) -> dict[str, Any]:
    serial = serial_of(port)
    datagrams = []
    for i in range(FLOOD):
        query = dns.message.make_query(ZONE, "IXFR", use_edns=True, payload=1232)
        query.id = i
        query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                                   f". . {serial - 100000} 0 0 0 0"))
        datagrams.append(query.to_wire())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    with Prober(port) as prober:
        time.sleep(0.2)
        sent_at = time.perf_counter()
        for datagram in datagrams:
            for _ in range(100):
                try:
                    sock.sendto(datagram, ("127.0.0.1", port))
                    break
                except BlockingIOError:
                    time.sleep(0.0005)
        send_seconds = time.perf_counter() - sent_at
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.1)
            recent = [a for a in prober.arrivals[-50:] if a > sent_at]
            if time.perf_counter() - sent_at > seconds and len(recent) >= 50:
                break
    sock.close()
    return prober.figures() | {"datagrams": FLOOD, "send_seconds": round(send_seconds, 3)}


def stalled_axfr(port: int, i: int = 0) -> socket.socket:
    """A client that never reads, from 127.0.0.(2 + i) (see axfr_phase)."""
    query = dns.message.make_query(ZONE, "AXFR").to_wire()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((f"127.0.0.{2 + i}", 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(len(query).to_bytes(2, "big") + query)
    return sock


def memory_phase(pid: int, port: int, objects: Path, transfers: int) -> dict[str, Any]:
    time.sleep(1)
    base = rss_kib(pid)
    held = [stalled_axfr(port)]
    time.sleep(2)
    one = rss_kib(pid)
    held += [stalled_axfr(port, i) for i in range(1, transfers)]
    time.sleep(3)
    many = rss_kib(pid)
    before = serial_of(port)
    (objects / "probe.yaml").write_text(
        (objects / "probe.yaml").read_text().replace("10.255.0.1", "10.255.0.2"))
    deadline = time.monotonic() + 30
    while serial_of(port) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    held.append(stalled_axfr(port))  # a transfer of the new version, beside the old ones
    time.sleep(3)
    changed = rss_kib(pid)
    for sock in held:
        sock.close()
    return {"rss_kib_before": base, "first_transfer_kib": one - base,
            "each_further_transfer_kib": round((many - one) / max(1, transfers - 1), 1),
            f"rss_kib_{transfers}_open": many,
            "a_transfer_of_the_next_version_kib": changed - many}


def measure(repo: Path, services: int, each: int, transfers: int,
            seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xfr-load-") as tmp:
        objects = Path(tmp) / "objects"
        objects.mkdir()
        write_zone(objects, services, each)
        port, metrics = free_port(), free_port()
        env = dict(os.environ, PYTHONPATH=str(repo.resolve()))
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterset_dns", "serve", "--listen", f"127.0.0.1:{port}",
             "--health-listen", "off", "--ready-listen", "off",
             "--metrics-listen", f"127.0.0.1:{metrics}",
             "--lameduck", "0", "--manifests", str(objects), "--poll-interval", "0.5",
             "--allow-transfer", "127.0.0.0/8", "--tcp-idle-timeout", "60"],
            cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            net.wait_answer(port, PROBE, 300)
            time.sleep(2)
            out: dict[str, Any] = {"answer_keys": answer_keys(metrics)}
            # First, on a fresh process: memory freed by earlier phases would hide it.
            out["memory"] = memory_phase(proc.pid, port, objects, transfers)
            print("  memory:", out["memory"], flush=True)
            with Prober(port) as prober:
                time.sleep(seconds)
            out["idle"] = prober.figures()
            print("  idle:", out["idle"], flush=True)
            out["axfr"] = axfr_phase(port, transfers, seconds)
            print("  axfr:", out["axfr"], flush=True)
            out["udp_ixfr_flood"] = flood_phase(port, seconds)
            print("  udp_ixfr_flood:", out["udp_ixfr_flood"], flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return out


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--services", type=int, default=70)
    parser.add_argument("--endpoints", type=int, default=500)
    parser.add_argument("--transfers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    cli.add_checkouts(parser)
    args = parser.parse_args()
    data: dict[str, Any] = {"services": args.services, "endpoints": args.endpoints,
                            "transfers": args.transfers, "seconds": args.seconds}
    cli.checkouts(args, data, lambda repo: measure(repo, args.services, args.endpoints,
                                                   args.transfers, args.seconds))
    cli.publish(args, bench_results.envelope("xfr_load", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
