"""Instructions per answer, counted by valgrind: revisions compared on a busy machine.

    python bench/instructions.py [--checkout DIR ...] [--mix standard,0x20]
                                 [--queries 5000] [--passes 2] [--rate 1500]

CPU seconds per answer (bench/run.py) move with whatever else the machine runs; the
instructions a process executes do not. Each ``--checkout`` (default: this one)
serves bench/gen.py's data set under ``valgrind --tool=callgrind`` twice per mix:
once answering the mix's first ``--queries`` questions once, once answering them
``1 + --passes`` times (dnsperf at ``--rate`` queries/s over loopback). The
difference, per answer of the extra passes, is the server's steady cost of an
answer: start-up, shutdown and each name's first question (the first-use encoding)
are in both runs and cancel out. The later passes ask the same bytes: the standard
mix's repeats are answered from the remembered responses, as in a long run; the
0x20 mix's names in mixed case never are. The figure counts user space only (the
kernel's side of each system call is not in it) and, at a paced rate, a batch of
the UDP reader holds about one datagram, so per-batch costs count per answer:
compare revisions with it, not servers. Lost queries are reported.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.bench.callgrind import completed, per_answer, queries_in, totals  # noqa: E402
from clusterset_dns_testkit.peers import free_port  # noqa: E402

READY_SECONDS = 600  # under valgrind a start takes 20-60 s here; bounded all the same


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}) before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"not ready in {READY_SECONDS} s: {url}")


def count(checkout: Path, objects: Path, queries: Path, passes: int, rate: int, work: Path
          ) -> tuple[int, int]:
    """(instructions of the whole server process, queries answered) for ``passes``
    passes over ``queries``."""
    port, ready = free_port(), free_port()
    out = work / f"callgrind.{os.getpid()}.{time.monotonic_ns()}"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-P",
           "-m", "clusterset_dns", "serve", "--manifests", str(objects),
           "--listen", f"127.0.0.1:{port}", "--health-listen", "off", "--metrics-listen", "off",
           "--ready-listen", f"127.0.0.1:{ready}", "--workers", "1", "--ttl", "5",
           "--lameduck", "0"]
    with open(work / "server.log", "ab") as log:
        proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(checkout)),
                                stdout=log, stderr=log)
        try:
            wait_ready(f"http://127.0.0.1:{ready}/ready", proc)
            sent = subprocess.run(["dnsperf", "-B", "-d", str(queries), "-s", "127.0.0.1",
                                   "-p", str(port), "-n", str(passes), "-Q", str(rate), "-c", "4",
                                   "-t", "30", "-l", "900"],
                                  capture_output=True, text=True, timeout=1200, check=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(300)
    answered = completed(sent.stdout)
    total = totals(subprocess.run(["callgrind_annotate", str(out)], capture_output=True,
                                  text=True, timeout=300, check=True).stdout)
    if answered is None or total is None:
        raise SystemExit(f"could not read dnsperf's or callgrind's totals ({out})")
    out.unlink()
    return total, answered


def measure(checkout: Path, mix: str, queries: Path, objects: Path, passes: int, rate: int,
            work: Path) -> dict[str, Any]:
    figures: list[tuple[int, int]] = []
    for runs in (1, 1 + passes):
        figures.append(count(checkout, objects, queries, runs, rate, work))
        print(f"  {checkout.name} {mix} {runs} pass(es): {figures[-1][0]:,} instructions, "
              f"{figures[-1][1]:,} answered", flush=True)
    sent = queries_in(queries)
    (small, small_n), (large, large_n) = figures
    return {"mix": mix, "queries": sent, "passes": passes, "answered": [small_n, large_n],
            "instructions": [small, large],
            "lost": sent - small_n + sent * (1 + passes) - large_n,
            "per_answer": per_answer(figures[0], figures[1])}


def valgrind_version() -> str:
    return subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--checkout", type=Path, action="append",
                   help="a clusterset-dns checkout (repeatable; default: this one)")
    p.add_argument("--mix", default="standard,0x20", help="bench/gen.py mixes (standard,0x20)")
    p.add_argument("--queries", type=int, default=5000, help="questions of the mix (5000)")
    p.add_argument("--passes", type=int, default=2,
                   help="passes of the second run beyond the first run's one (2)")
    p.add_argument("--rate", type=int, default=1500, help="dnsperf -Q (1500 queries/s)")
    p.add_argument("--results", type=Path, default=bench_results.RESULTS)
    args = p.parse_args()
    if args.queries < 1 or args.passes < 1:
        raise SystemExit("--queries and --passes must be at least 1")
    mixes = args.mix.split(",")
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="clusterset-dns-instructions-") as tmp:
        work, gen = Path(tmp), Path(tmp) / "gen"
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen.py"), "--mix", args.mix,
                        "--queries", str(args.queries), str(gen)], check=True,
                       stdout=subprocess.DEVNULL)
        for mix in mixes:
            for checkout in checkouts:
                row = measure(checkout, mix, gen / f"queries-{mix}.bin", gen / "objects.json",
                              args.passes, args.rate, work)
                row["checkout"] = bench_results.git_version(checkout)
                rows.append(row)
    print("| mix | checkout | instructions per answer | vs the first checkout | lost |")
    print("| --- | --- | ---: | ---: | ---: |")
    for row in rows:
        first = next(r for r in rows if r["mix"] == row["mix"])
        row["ratio"] = row["per_answer"] / first["per_answer"]
        print(f"| {row['mix']} | {row['checkout']} | {row['per_answer']:,.0f} | "
              f"{row['ratio']:.3f} | {row['lost']} |")
    data = {"rate": args.rate, "rows": rows}
    path = bench_results.write(bench_results.envelope(
        "instructions", data, versions={"valgrind": valgrind_version()}), args.results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
