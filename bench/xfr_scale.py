"""Zone transfers at scale, through a real kube-apiserver, with Knot as the secondary.

    python bench/xfr_scale.py [--scale 1,3,10] [--imports 10000 --headless 1000
                              --endpoints 100] [--updates 1000 --rate 100] [--out FILE]

For each size (``--scale``: multiples of --imports and --headless, the endpoints per
headless import kept; one fresh etcd + kube-apiserver each):

1. the objects of ``bench/kube_scale.py`` (same generator); clusterset-dns with
   ``--allow-transfer 127.0.0.1/32 --notify`` pointing at a Knot secondary
   (clusterset_dns_testkit.secondary).
2. AXFR: wall time of ``dig AXFR`` from our server, its bytes and messages; the
   same from Knot once it holds the zone (the reference, measured in this run).
3. IXFR for one changed endpoint: one EndpointSlice patched (one address);
   once the serial moves, ``dig IXFR=<old serial>``: time and bytes.
4. API write -> answer on the Knot secondary: ``--updates`` ServiceImport IP
   changes at ``--rate`` per second, each timed where it shows: our answer (the
   write, the watch, the serial's step), the NOTIFY acknowledged and the IXFR
   served (our log), Knot's answer.

Every wait is bounded. Loopback only.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import DNSRecord

from clusterset_dns_testkit.bench import cli
from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.apiload import (
    SLICES,
    Writer,
    dns_a,
    ip4,
    load,
    paced_writes,
)
from clusterset_dns_testkit.peers import KubeAPI, free_port
from clusterset_dns_testkit.secondary import KnotSecondary, serial_at

ROOT = Path(__file__).resolve().parent.parent
ZONE = "clusterset.local"
XFR_SIZE = re.compile(r"XFR size: (\d+) records \(messages (\d+), bytes (\d+)\)")


def dig_xfr(port: int, kind: str) -> dict[str, float]:
    t0 = time.monotonic()
    out = subprocess.run(["dig", "@127.0.0.1", "-p", str(port), ZONE, kind, "+noall",
                          "+answer", "+stats"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    seconds = time.monotonic() - t0
    match = XFR_SIZE.search(out)
    if match is None:
        raise RuntimeError(f"dig {kind}: no transfer:\n{out[-2000:]}")
    records, messages, size = (int(g) for g in match.groups())
    return {"seconds": seconds, "records": records, "messages": messages, "bytes": size}


def wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s: {what}")


def knot_version() -> dict[str, str]:
    try:
        out = subprocess.run(["knotd", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {"knot": out.strip().rsplit("version", 1)[-1].strip()} if out else {}


NOTIFIED = re.compile(r"NOTIFY of serial (\d+) acknowledged")
IXFR_SERVED = re.compile(r"IXFR of serial (\d+): incremental")
STAGES = ("write_to_primary", "write_to_notify", "write_to_ixfr", "write_to_knot")


def soa_serial(port: int, sock: socket.socket) -> int | None:
    sock.sendto(bytes(DNSRecord.question(ZONE, "SOA").pack()), ("127.0.0.1", port))
    try:
        reply = DNSRecord.parse(sock.recv(65535))
    except TimeoutError:
        return None
    times = getattr(reply.rr[0].rdata, "times", None) if reply.rr else None  # a late A reply
    return int(times[0]) if times else None


def server_events(log: Path) -> dict[str, list[tuple[int, float]]]:
    """(serial, unix time) of each NOTIFY acknowledged and IXFR served, from our JSON log."""
    events: dict[str, list[tuple[int, float]]] = {"notify": [], "ixfr": []}
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        for kind, pattern in (("notify", NOTIFIED), ("ixfr", IXFR_SERVED)):
            match = pattern.search(entry["message"])
            if match:
                when: float = calendar.timegm(time.strptime(entry["time"][:19],
                                                            "%Y-%m-%dT%H:%M:%S"))
                when += float(entry["time"][19:-1])  # ".mmm", the Z left out
                events[kind].append((int(match.group(1)), when))
    return events


def first_at_or_after(events: list[tuple[int, float]], serial: int, since: float) -> float | None:
    """When the first event of a serial at or after ``serial`` happened (after ``since``)."""
    times = [when for s, when in events if 0 <= (s - serial) % 2**32 < 2**31 and when >= since]
    return min(times) if times else None


def quantiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {}
    q = statistics.quantiles(values, n=100)
    return {"p50_ms": q[49] * 1e3, "p90_ms": q[89] * 1e3, "p99_ms": q[98] * 1e3,
            "max_ms": max(values) * 1e3}


def propagation(api: Any, port: int, knot_port: int, log: Path,
                args: Any) -> dict[str, Any]:
    """Writes at a fixed rate; a checker thread asks us and Knot until each write shows
    (unix times), and our log says when its serial's NOTIFY and IXFR went out."""
    pending: dict[str, dict[str, Any]] = {}
    done_items: list[dict[str, Any]] = []
    lock = threading.Lock()
    done = threading.Event()

    def check() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.2)
            while not done.is_set() or pending:
                with lock:
                    items = list(pending.items())
                for name, item in items:
                    if "primary" not in item and item["want"] in dns_a(port, name, sock):
                        item["primary"] = time.time()
                        item["serial"] = soa_serial(port, sock)
                    if "primary" in item and item["want"] in dns_a(knot_port, name, sock):
                        item["knot"] = time.time()
                    if "knot" in item or time.time() - item["start"] > 30:
                        with lock:
                            del pending[name]
                            done_items.append(item)
                if not items:
                    time.sleep(0.0005)

    def begin(name: str, want: str) -> None:
        pending[name] = {"want": want, "start": time.time()}

    checker = threading.Thread(target=check, daemon=True)
    checker.start()
    paced_writes(Writer(api), args, pending, lock, begin)
    done.set()
    checker.join(60)
    time.sleep(1)  # the log's last lines
    events = server_events(log)
    seen = [item for item in done_items if "knot" in item]
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for item in seen:
        serial = item.get("serial")
        if serial is None:
            continue
        # From the write: the first NOTIFY of a serial at or after the one read with
        # the changed answer (the NOTIFY goes out at the serial's step, often before
        # the checker sees the answer, so it is not looked for after that), the first
        # IXFR of such a serial after that NOTIFY, Knot's answer. Each is the time from
        # the write, so no stage comes out negative.
        notified = first_at_or_after(events["notify"], serial, item["start"])
        served = (first_at_or_after(events["ixfr"], serial, notified)
                  if notified is not None else None)
        if notified is None or served is None:
            continue
        stages["write_to_primary"].append(item["primary"] - item["start"])
        stages["write_to_notify"].append(notified - item["start"])
        stages["write_to_ixfr"].append(served - item["start"])
        stages["write_to_knot"].append(item["knot"] - item["start"])
    latencies = sorted(item["knot"] - item["start"] for item in seen)
    primary = [item["primary"] - item["start"] for item in seen]
    return {"updates": args.updates, "rate_per_s": args.rate, "seen": len(seen),
            **quantiles(latencies),
            "primary": quantiles(primary),
            "breakdown_p50_ms": {stage: statistics.median(v) * 1e3
                                 for stage, v in stages.items() if v},
            "breakdown_writes": len(stages["write_to_primary"])}


def run_size(args: Any, imports: int, headless: int) -> dict[str, Any]:
    results: dict[str, Any] = {"objects": {"imports": imports, "headless": headless,
                                           "endpoints_per_headless": args.endpoints}}
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        results["load_s"] = load(api, imports, headless, args.endpoints)
        print(f"loaded {imports:,} imports + {headless:,} headless in "
              f"{results['load_s']:.1f}s", flush=True)
        port, ready, knot_port = free_port(), free_port(), free_port()
        log_path = api.dir / "clusterset-dns.log"
        log = open(log_path, "wb")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterset_dns", "serve", "--kubeconfig",
             str(api.kubeconfig), "--listen", f"127.0.0.1:{port}", "--health-listen", "off",
             "--ready-listen", f"127.0.0.1:{ready}", "--metrics-listen", "off",
             "--startup-timeout", "600", "--lameduck", "0", "--allow-transfer", "127.0.0.1/32",
             "--notify", f"127.0.0.1:{knot_port}", "--journal-changes", "2000",
             "--log-level", "info", "--log-format", "json"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait(lambda: serial_at("127.0.0.1", port), 900, "clusterset-dns to answer")
            time.sleep(2)  # the first full sync's release of memory
            results["axfr_ours"] = dig_xfr(port, "AXFR")
            print(f"AXFR from clusterset-dns: {results['axfr_ours']}", flush=True)
            with KnotSecondary(port, port=knot_port, tmp=api.dir) as knot:
                t0 = time.monotonic()
                wait(lambda: knot.serial() == serial_at("127.0.0.1", port), 900,
                     "Knot to load the zone")
                results["knot_load_s"] = time.monotonic() - t0
                results["axfr_knot"] = dig_xfr(knot.port, "AXFR")
                print(f"AXFR from Knot (reference): {results['axfr_knot']}", flush=True)
                results["axfr_ours_again"] = dig_xfr(port, "AXFR")  # both orders
                print(f"AXFR from clusterset-dns again: {results['axfr_ours_again']}",
                      flush=True)
                # One endpoint changes: one address of one slice.
                old = serial_at("127.0.0.1", port)
                writer = Writer(api)
                # The slice as kube_scale wrote it, one address changed (a merge patch
                # replaces the whole list).
                eps = [{"addresses": ["11.250.0.1" if e == 0 else ip4(e, 11)],
                        "hostname": f"pod-{e}", "conditions": {"ready": True}}
                       for e in range(min(100, args.endpoints))]
                writer.send("PATCH", SLICES.format(ns="ns-0") + "/hl-0-0", {"endpoints": eps})
                wait(lambda: serial_at("127.0.0.1", port) != old, 30, "the serial to move")
                results["ixfr_one_endpoint"] = dig_xfr(port, f"IXFR={old}")
                print(f"IXFR, one endpoint: {results['ixfr_one_endpoint']}", flush=True)
                results["propagation_to_knot"] = propagation(api, port, knot.port, log_path,
                                                             args)
                print(f"API write -> Knot answer: {results['propagation_to_knot']}",
                      flush=True)
                results["knot_ixfr_refreshes"] = len(knot.ixfr_refreshes())
        finally:
            proc.terminate()
            proc.wait(10)
    return results


def main() -> int:
    parser = cli.parser(__doc__)
    cli.add_dataset(parser)
    parser.add_argument("--scale", default="1",
                        help="comma list of sizes, multiples of --imports and --headless "
                             "(e.g. 1,3,10); each in a fresh API server")
    cli.add_out(parser)
    args = parser.parse_args()
    scales = [float(x) for x in args.scale.split(",") if x.strip()]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "load_average": os.getloadavg()[0], "sizes": []}
    for scale in scales:
        size = run_size(args, round(args.imports * scale), round(args.headless * scale))
        size["scale"] = scale
        size["load_average"] = os.getloadavg()[0]
        results["sizes"].append(size)
    full = not cli.smaller(args) and min(scales) >= 1
    cli.publish(args, bench_results.envelope(
        "xfr_scale", results, quick=not full,
        versions=bench_results.peer_versions("kube-apiserver", "etcd") | knot_version()))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
