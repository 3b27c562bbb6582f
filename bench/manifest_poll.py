"""Answers while the file source polls many unchanged manifest files.

    python bench/manifest_poll.py [--files 20000] [--seconds 10] [--repo PATH]

Writes ``--files`` one-import manifest files (100 per directory), starts the server
from ``--repo`` (default this checkout; point it at another checkout to compare) with
``--manifests DIR --poll-interval 0.5`` and asks one name over UDP back to back from
one thread for ``--seconds``. Nothing changes: every poll is a walk and a stat per
file. Printed: p50, p99 and max of the answers, and how many took over 50 ms. Nothing
here is a test: figures go to docs/benchmark.md. ``--baseline PATH``: another
checkout measured in the same run.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dns.message

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import cli, net  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.peers import free_port  # noqa: E402

IMPORT = """apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {{name: s{i}, namespace: poll}}
spec: {{type: ClusterSetIP, ips: [10.{a}.{b}.{c}]}}
"""


def write_files(root: Path, count: int) -> None:
    for i in range(count):
        directory = root / f"d{i // 100}"
        if i % 100 == 0:
            directory.mkdir()
        (directory / f"s{i}.yaml").write_text(
            IMPORT.format(i=i, a=i >> 16 & 255, b=i >> 8 & 255, c=i & 255))


def measure(repo: Path, files: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="manifest-poll-") as tmp:
        objects = Path(tmp) / "objects"
        objects.mkdir()
        write_files(objects, files)
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(repo.resolve()))
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterset_dns", "serve", "--listen", f"127.0.0.1:{port}",
             "--health-listen", "off", "--ready-listen", "off", "--metrics-listen", "off",
             "--lameduck", "0", "--manifests", str(objects), "--poll-interval", "0.5"],
            cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            name = f"s{files - 1}.poll.svc.clusterset.local."
            net.wait_answer(port, name, 300, pause=0.1)
            wire = dns.message.make_query(name, "A").to_wire()
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.settimeout(5)
            sock.connect(("127.0.0.1", port))
            latencies: list[float] = []
            timeouts = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                sent = time.perf_counter()
                sock.send(wire)
                try:
                    sock.recv(4096)
                except TimeoutError:
                    timeouts += 1
                    continue
                latencies.append((time.perf_counter() - sent) * 1000)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    latencies.sort()
    slow = [x for x in latencies if x > 50]
    return {"answers": len(latencies), "timeouts": timeouts,
            "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
            "max_ms": round(latencies[-1], 3), "over_50ms": len(slow),
            "seconds_in_answers_over_50ms": round(sum(slow) / 1000, 2)}


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=10.0)
    cli.add_checkouts(parser)
    args = parser.parse_args()
    data: dict[str, object] = {"files": args.files, "seconds": args.seconds,
                               "poll_interval": 0.5}
    cli.checkouts(args, data, lambda repo: measure(repo, args.files, args.seconds))
    cli.publish(args, bench_results.envelope("manifest_poll", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
