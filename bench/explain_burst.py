"""Answers of an unrelated name while clients ask /explain back to back on the health port.

    python bench/explain_burst.py [--endpoints 20000] [--clients 8] [--seconds 5]
                                  [--rounds 3] [--baseline PATH]

Writes a Headless import ``big`` of ``--endpoints`` endpoints (its A answer is the
largest one message holds, 4,092 records) and a ClusterSetIP import ``quiet``, starts the
server from ``--repo`` (default this checkout) with ``--manifests`` and asks ``quiet`` A
over UDP once a millisecond, whatever the answers do (open loop: a stall delays every
query sent meanwhile, as it does real clients'; latency from when the query was due).
Phases alternate, ``--rounds`` times each, on the same server, 2 s apart: no explain
request (the control), ``--clients`` processes asking ``/health`` back to back (what any
client of the port costs, the reference), then as many asking ``/explain?name=big...`` back
to back (a 429 is asked again at once, as an attacker would), then volleys of 62
requests at once, one a second, then as many asking ``/metrics`` back to back (the
metrics port is open to every pod too). A thread probes ``/ready`` every 0.25 s with the
kubelet's 1 s timeout. Printed: p50, p99 and max of the answers in each phase, their
ratios to the control's, the queries never answered, the failed probes and the explain
statuses. Nothing here is a test: figures go to docs/benchmark.md and
docs/reliability.md. ``--baseline PATH``: another checkout measured in the same run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import dns.message

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import cli, net  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.objects import (  # noqa: E402
    HTTP,
    endpoint,
    endpoint_slice,
    service_import,
)
from clusterset_dns_testkit.peers import free_port  # noqa: E402

NS = "burst"
BIG = f"big.{NS}.svc.clusterset.local."
QUIET = f"quiet.{NS}.svc.clusterset.local."
SETTLE = 2.0  # seconds between two phases
INTERVAL = 0.001  # seconds between two queries of the unrelated name


def write_objects(where: Path, count: int) -> None:
    eps = [endpoint(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}", hostname=f"h{i}")
           for i in range(count)]
    items = [service_import("big", NS, "Headless", ports=[HTTP]),
             service_import("quiet", NS, "ClusterSetIP", ips=["10.99.0.1"], ports=[HTTP]),
             *(endpoint_slice(f"big-{j}", "big", NS, "east", endpoints=eps[j:j + 1000],
                              ports=[HTTP]) for j in range(0, count, 1000))]
    (where / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": items}))


EXPLAIN = f"/explain?name={BIG}&type=A"


def get(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def read_status(sock: socket.socket) -> str:
    """The response's status code, read to the end (the server closes); "closed" when
    it closed without a byte."""
    head = sock.recv(64)
    while sock.recv(65536):
        pass
    return head.split(b" ")[1].decode() if head else "closed"


def explain_client(port: int, until: float, out: Any, target: str = "") -> None:
    """One client: /explain (or ``target``) back to back until ``until`` (time.time());
    its statuses."""
    statuses: Counter[str] = Counter()
    request = get(target or EXPLAIN)
    while time.time() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request)
                statuses[read_status(sock)] += 1
        except OSError:
            statuses["error"] += 1
    out.put(dict(statuses))


def health_client(port: int, until: float, out: Any) -> None:
    """The reference: /health back to back, what any client of the port can cost."""
    explain_client(port, until, out, "/health")


def metrics_client(port: int, until: float, out: Any) -> None:
    """/metrics back to back (``port``: the metrics port)."""
    explain_client(port, until, out, "/metrics")


def volleys(port: int, until: float, out: Any, size: int = 62) -> None:
    """``size`` requests at once (with /ready, the HTTP cap of 64), once a second."""
    statuses: Counter[str] = Counter()
    request = get(EXPLAIN)
    while time.time() < until:
        started = time.time()
        socks = []
        for _ in range(size):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(request)
                socks.append(sock)
            except OSError:
                statuses["error"] += 1
        for sock in socks:
            try:
                with sock:
                    statuses[read_status(sock)] += 1
            except OSError:
                statuses["error"] += 1
        time.sleep(max(0.0, started + 1 - time.time()))
    out.put(dict(statuses))


def probe_ready(url: str, stop: threading.Event, failed: list[int]) -> None:
    """The kubelet's readiness probe: every 0.25 s here, 1 s timeout; failures counted."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                ok = response.status == 200
        except (urllib.error.URLError, OSError):
            ok = False
        failed[0] += 0 if ok else 1
        failed[1] += 1
        stop.wait(0.25)


def ask(port: int, seconds: float) -> tuple[list[float], int]:
    """``quiet`` A every INTERVAL seconds, whatever the answers do (open loop: a stalled
    server delays every query sent meanwhile, as it does real clients); each latency from
    the moment its query was due. The latencies in ms, and the queries never answered."""
    wire = bytearray(dns.message.make_query(QUIET, "A").to_wire())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.2)
    sock.connect(("127.0.0.1", port))
    due: dict[int, float] = {}
    latencies: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while not done.is_set():
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            at = due.pop(struct.unpack_from("!H", data)[0], None)
            if at is not None:
                latencies.append((time.perf_counter() - at) * 1000)

    receiver = threading.Thread(target=receive)
    receiver.start()
    start = time.perf_counter()
    for i in range(int(seconds / INTERVAL)):
        at = start + i * INTERVAL
        delay = at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        struct.pack_into("!H", wire, 0, i & 0xFFFF)
        due[i & 0xFFFF] = at
        sock.send(wire)
    deadline = time.perf_counter() + 5  # the stragglers
    while due and time.perf_counter() < deadline:
        time.sleep(0.01)
    done.set()
    receiver.join()
    sock.close()
    return latencies, len(due)


def summary(latencies: list[float], timeouts: int, failed: list[int]) -> dict[str, Any]:
    latencies = sorted(latencies)
    return {"answers": len(latencies), "timeouts": timeouts,
            "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
            "max_ms": round(latencies[-1], 1), "ready_failed": failed[0],
            "ready_probes": failed[1]}


def phase(port: int, seconds: float, ready_url: str,
          clients: int, health: int, load: Any = explain_client) -> dict[str, Any]:
    queue: Any = multiprocessing.get_context("fork").Queue()
    until = time.time() + seconds
    procs = [multiprocessing.get_context("fork").Process(
        target=load, args=(health, until, queue)) for _ in range(clients)]
    for proc in procs:
        proc.start()
    stop, failed = threading.Event(), [0, 0]
    prober = threading.Thread(target=probe_ready, args=(ready_url, stop, failed))
    prober.start()
    latencies, timeouts = ask(port, seconds)
    stop.set()
    prober.join()
    statuses: Counter[str] = Counter()
    for _ in procs:
        statuses.update(queue.get(timeout=60))
    for proc in procs:
        proc.join(timeout=30)
    out = summary(latencies, timeouts, failed)
    out["explain"] = dict(sorted(statuses.items()))
    # What is still in progress (accepted requests) ends before the next phase starts.
    time.sleep(SETTLE)
    return out


def measure(repo: Path, endpoints: int, clients: int, seconds: float,
            rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="explain-burst-") as tmp:
        objects = Path(tmp)
        write_objects(objects, endpoints)
        port, health, ready, metrics = free_port(), free_port(), free_port(), free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterset_dns", "serve", "--listen", f"127.0.0.1:{port}",
             "--health-listen", f"127.0.0.1:{health}", "--ready-listen", f"127.0.0.1:{ready}",
             "--metrics-listen", f"127.0.0.1:{metrics}", "--lameduck", "0",
             "--manifests", str(objects)],
            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo.resolve())),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            net.wait_answer(port, QUIET, 120)
            url = f"http://127.0.0.1:{ready}/ready"
            runs: dict[str, list[dict[str, Any]]] = {"control": [], "health": [], "burst": [],
                                                     "volleys": [], "metrics": []}
            for _ in range(rounds):  # interleaved: the machine's load falls on every phase
                runs["control"].append(phase(port, seconds, url, 0, health))
                runs["health"].append(phase(port, seconds, url, clients, health,
                                            health_client))
                runs["burst"].append(phase(port, seconds, url, clients, health))
                runs["volleys"].append(phase(port, seconds, url, 1, health, volleys))
                runs["metrics"].append(phase(port, seconds, url, clients, metrics,
                                             metrics_client))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    return {"runs": runs, **ratios(runs)}


def ratios(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each load's p50 and p99 (medians over its rounds) over the control's. The control
    is the median of its rounds that lost no query: a round in which the machine stalled
    the server with no request at all (seconds, seen on a loaded shared machine) says
    nothing of explain; it is still listed."""
    clean = [r for r in runs["control"] if r["timeouts"] == 0] or runs["control"]
    control = {key: statistics.median(r[f"{key}_ms"] for r in clean) for key in ("p50", "p99")}
    return {**{f"{load}_{key}_ratio": round(statistics.median(r[f"{key}_ms"] for r in runs[load])
                                            / control[key], 2)
               for load in ("health", "burst", "volleys", "metrics")
               for key in ("p50", "p99")},
            "control_rounds_used": len(clean),
            "ready_failed": sum(r["ready_failed"] for load in ("burst", "volleys")
                                for r in runs[load])}


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--endpoints", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    cli.add_checkouts(parser)
    args = parser.parse_args()
    data: dict[str, Any] = {"endpoints": args.endpoints, "clients": args.clients,
                            "seconds": args.seconds, "rounds": args.rounds}
    cli.checkouts(args, data, lambda repo: measure(repo, args.endpoints, args.clients,
                                                   args.seconds, args.rounds))
    cli.publish(args, bench_results.envelope("explain_burst", data,
                                             quick=args.endpoints != 20000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
