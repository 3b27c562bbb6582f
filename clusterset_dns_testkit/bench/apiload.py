"""A loaded kube-apiserver for the benchmarks at scale (bench/kube_scale.py,
startup.py, xfr_scale.py): the objects, the writes, a server's start against it, and
propagation from an API write to a DNS answer. Every loop is bounded in time; loopback
only."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dnslib import DNSRecord

from clusterset_dns_testkit.bench.common import REPO
from clusterset_dns_testkit.bench.procs import tree_memory_mib
from clusterset_dns_testkit.fat import memory_kib
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import
from clusterset_dns_testkit.peers import CoreDNS, KubeAPI, free_port, kubernetes_corefile

IMPORTS = "/apis/multicluster.x-k8s.io/v1beta1/namespaces/{ns}/serviceimports"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
NAMESPACES = 10


class Writer:
    """One keep-alive HTTPS connection per thread (the harness opens one per request)."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self.local = threading.local()
        context = ssl.create_default_context(cafile=str(api.ca_file))
        self.context = context

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection("127.0.0.1", self.api.port, context=self.context,
                                               timeout=30)
            self.local.conn = conn
        return conn

    def send(self, method: str, path: str, body: Any) -> dict[str, Any]:
        for attempt in range(3):
            conn = self._conn()
            try:
                conn.request(method, path, body=json.dumps(body), headers={
                    "Authorization": f"Bearer {self.api.token}",
                    "Content-Type": "application/merge-patch+json" if method == "PATCH"
                    else "application/json"})
                response = conn.getresponse()
                data = response.read()
                if response.status >= 300:
                    raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
                return json.loads(data)  # type: ignore[no-any-return]
            except (http.client.HTTPException, OSError):
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def ip4(n: int, base: int = 10) -> str:
    return f"{base}.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def objects(imports: int, headless: int, endpoints: int) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(imports):
        ns = f"ns-{i % NAMESPACES}"
        out.append((IMPORTS.format(ns=ns), service_import(f"svc-{i}", ns, ips=[ip4(i)],
                                                          ports=[HTTP])))
    for h in range(headless):
        ns = f"ns-{h % NAMESPACES}"
        out.append((IMPORTS.format(ns=ns), service_import(f"hl-{h}", ns, "Headless",
                                                          ports=[HTTP])))
        for start in range(0, endpoints, 100):
            cluster = f"cluster-{(start // 100) % 2}"
            eps = [endpoint(ip4(h * endpoints + e, 11), hostname=f"pod-{e}", ready=True)
                   for e in range(start, min(start + 100, endpoints))]
            out.append((SLICES.format(ns=ns), endpoint_slice(
                f"hl-{h}-{start}", f"hl-{h}", ns, cluster, endpoints=eps, ports=[HTTP])))
    return out


def load(api: KubeAPI, imports: int, headless: int, endpoints: int) -> float:
    start = time.monotonic()
    for i in range(NAMESPACES):
        api.ensure_namespace(f"ns-{i}")
    writer = Writer(api)
    items = objects(imports, headless, endpoints)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: writer.send("POST", item[0], item[1]), items))
    return time.monotonic() - start


def dns_a(port: int, name: str, sock: socket.socket) -> set[str]:
    query = DNSRecord.question(name, "A")
    sock.sendto(bytes(query.pack()), ("127.0.0.1", port))
    try:
        data = sock.recv(65535)
    except TimeoutError:
        return set()
    return {str(rr.rdata) for rr in DNSRecord.parse(data).rr}


# How long one probe of wait_answer waits for its reply: a server not listening yet
# loses the query, so this is the resolution of a start-up time (a late reply is read
# by the next probe: it says what the server answered, only later).
PROBE_S = 0.02


def wait_answer(port: int, name: str, want: str, timeout: float,
                alive: Callable[[], bool] = lambda: True) -> float:
    """Seconds until ``port`` answers ``name`` with ``want`` among its A records;
    RuntimeError as soon as ``alive()`` says the server is gone."""
    start = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(PROBE_S)
        while time.monotonic() - start < timeout:
            if want in dns_a(port, name, sock):
                return time.monotonic() - start
            if not alive():
                raise RuntimeError(f"the server exited before answering {name}")
            time.sleep(0.01)
    raise RuntimeError(f"{name} never answered {want} within {timeout}s")


# Every object of each resource, as a client's first list asks (served by the API
# server's watch cache): what list_floor times.
FIRST_LISTS = ("/apis/multicluster.x-k8s.io/v1beta1/serviceimports?resourceVersion=0",
               "/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0")


def list_floor(api: KubeAPI, paths: tuple[str, ...] = FIRST_LISTS) -> dict[str, float]:
    """The time the API server takes to send both first lists, in JSON, to a client that
    only counts their bytes (fetched at once, as a server's reflectors do; no
    compression asked): no JSON client's first answer can come sooner. Seconds, bytes
    and the API server's and etcd's CPU for them."""
    def fetch(path: str) -> int:
        conn = api._conn(600)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {api.token}",
                                               "Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}")
            total = 0
            while chunk := resp.read(1 << 20):
                total += len(chunk)
            return total
        finally:
            conn.close()

    procs = [p.popen.pid for p in (api.apiserver, api.etcd) if p is not None]
    before = sum(map(cpu_seconds, procs))
    start = time.monotonic()
    with ThreadPoolExecutor(len(paths)) as pool:
        sizes = list(pool.map(fetch, paths))
    return {"seconds": time.monotonic() - start, "bytes": float(sum(sizes)),
            "api_cpu_s": sum(map(cpu_seconds, procs)) - before}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(api: KubeAPI, quiet: float = 0.1, window: float = 1.0, limit: float = 60.0,
           cpu: Callable[[int], float] = cpu_seconds,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> float:
    """Waits until kube-apiserver and etcd together use less than ``quiet`` of a core
    over ``window`` seconds, at most ``limit`` seconds; returns the seconds waited.

    After the objects are written (and after a server stops: its watches end), the
    API server goes on working for seconds (its garbage collection, etcd's), on the
    core a starting server lists from: a server started at once found it busier than
    one started later, so every start waits for this first."""
    pids = [p.pid for p in (api.apiserver, api.etcd) if p is not None]
    return until_quiet(pids, quiet, window, limit, cpu, clock, sleep)


def until_quiet(pids: list[int], quiet: float, window: float, limit: float,
                cpu: Callable[[int], float] = cpu_seconds,
                clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> float:
    """Waits until ``pids`` together use less than ``quiet`` of a core over ``window``
    seconds, at most ``limit`` seconds; returns the seconds waited."""
    start = clock()
    before = sum(cpu(pid) for pid in pids)
    while clock() - start < limit:
        sleep(window)
        now = sum(cpu(pid) for pid in pids)
        if now - before < quiet * window:
            break
        before = now
    return clock() - start


# Our server answers once its model is whole and builds the answers after (zone/pending.py):
# its settled memory is read once that build is done, which it shows by going quiet.
BUILT_QUIET, BUILT_WINDOW, BUILT_LIMIT = 0.05, 0.5, 600.0


def start_ours(api: KubeAPI, args: argparse.Namespace, checkout: Path = REPO
               ) -> tuple[subprocess.Popen[bytes], int, dict[str, float]]:
    """Starts ``checkout``'s clusterset-dns against ``api``; returns once it answers the
    last import and has gone quiet (its answers built), with the time to /ready, to
    that answer and to quiet (``built_s``), the RSS and peak then, and the CPU seconds
    it had used at /ready."""
    port, ready = free_port(), free_port()
    log = open(args.workdir / "clusterset-dns.log", "wb")  # noqa: SIM115 - lives with the process
    t0 = time.monotonic()
    python = getattr(args, "python_exe", sys.executable)  # shipped.interpreter's choice
    proc = subprocess.Popen(
        [python, "-m", "clusterset_dns", "serve", "--kubeconfig", str(api.kubeconfig),
         "--listen", f"127.0.0.1:{port}", "--health-listen", "off",
         "--ready-listen", f"127.0.0.1:{ready}", "--metrics-listen", "off",
         "--startup-timeout", "120", "--log-level", "warning", "--lameduck", "0"],
        cwd=checkout, env=dict(os.environ, PYTHONPATH=str(checkout)),  # that checkout's code
        stdout=log, stderr=subprocess.STDOUT)
    deadline = t0 + 180
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", ready), timeout=1) as conn:
                conn.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
                if b" 200 " in conn.recv(100):
                    break
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("clusterset-dns exited; see its log")
        time.sleep(0.05)
    ready_s = time.monotonic() - t0
    cpu_s = cpu_seconds(proc.pid)
    last = f"svc-{args.imports - 1}.ns-{(args.imports - 1) % NAMESPACES}.svc.clusterset.local"
    answer_s = ready_s + wait_answer(port, last, ip4(args.imports - 1), 60,
                                     lambda: proc.poll() is None)
    built_s = answer_s + until_quiet([proc.pid], BUILT_QUIET, BUILT_WINDOW, BUILT_LIMIT)
    return proc, port, {"ready_s": ready_s, "first_answer_s": answer_s, "built_s": built_s,
                        "rss_mib": tree_memory_mib(proc.pid)[0],
                        "peak_mib": memory_kib(proc.pid)["VmHWM"] / 1024,  # the list's peak
                        "cpu_s": cpu_s}


def start_coredns(api: KubeAPI, args: argparse.Namespace) -> tuple[CoreDNS, dict[str, float]]:
    coredns = CoreDNS(kubernetes_corefile(api.kubeconfig), start=False)
    t0 = time.monotonic()
    # Not CoreDNS.start's own wait: its probes wait 0.5 s each while nothing listens,
    # which measured CoreDNS up to 0.7 s late (0.71-0.76 or exactly 1.416 s at 100,000
    # endpoints); the last import's answer is watched for from the process's start.
    coredns.start(wait=False)
    assert coredns.proc is not None
    last = f"svc-{args.imports - 1}.ns-{(args.imports - 1) % NAMESPACES}.svc.clusterset.local"
    try:
        answer_s = time.monotonic() - t0 + wait_answer(
            coredns.port, last, ip4(args.imports - 1), 180, coredns.proc.alive)
    except RuntimeError as exc:
        error = coredns.proc.fail(str(exc))  # with its log's tail, before close removes it
        coredns.close()
        raise error from exc
    time.sleep(2)  # let its informers settle before reading the memory
    return coredns, {"first_answer_s": answer_s, "rss_mib": tree_memory_mib(coredns.proc.pid)[0],
                     "peak_mib": memory_kib(coredns.proc.pid)["VmHWM"] / 1024}


def api_memory_mib(api: KubeAPI) -> float:
    """RSS of kube-apiserver and etcd together (what the loaded API costs the machine)."""
    procs = [p for p in (api.apiserver, api.etcd) if p is not None]
    return sum(tree_memory_mib(p.pid)[0] for p in procs)


def paced_writes(writer: Writer, args: argparse.Namespace, pending: Mapping[str, Any],
                 lock: threading.Lock, begin: Callable[[str, str], None]) -> None:
    """``args.updates`` ServiceImport IP changes at ``args.rate`` a second, spread over
    the imports; ``begin(name, ip)`` is called under ``lock`` just before each write. A
    name still in ``pending`` (its last write not yet seen) is not written again until
    it is gone, so each measurement is unambiguous."""
    interval = 1.0 / args.rate
    next_at = time.monotonic()
    for n in range(args.updates):
        i = (n * 7919) % args.imports
        ns = f"ns-{i % NAMESPACES}"
        name = f"svc-{i}.{ns}.svc.clusterset.local"
        while True:
            with lock:
                if name not in pending:
                    break
            time.sleep(0.001)
        want = ip4(n + 1, 12)
        now = time.monotonic()
        if now < next_at:
            time.sleep(next_at - now)
        next_at += interval
        with lock:
            begin(name, want)
        writer.send("PATCH", IMPORTS.format(ns=ns) + f"/svc-{i}", {"spec": {"ips": [want]}})


def propagation(api: KubeAPI, port: int, args: argparse.Namespace) -> dict[str, float]:
    """Writes at a fixed rate; a checker thread measures when DNS shows each write."""
    pending: dict[str, tuple[str, float]] = {}
    latencies: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def check() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.2)
            while not done.is_set() or pending:
                with lock:
                    items = list(pending.items())
                for name, (want, started) in items:
                    if want in dns_a(port, name, sock):
                        with lock:
                            latencies.append(time.monotonic() - started)
                            del pending[name]
                    elif time.monotonic() - started > 30:
                        with lock:
                            del pending[name]  # counted as lost below
                if not items:
                    time.sleep(0.0005)

    def begin(name: str, want: str) -> None:
        pending[name] = (want, time.monotonic())

    checker = threading.Thread(target=check, daemon=True)
    checker.start()
    paced_writes(Writer(api), args, pending, lock, begin)
    done.set()
    checker.join(60)
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
    return {"updates": args.updates, "rate_per_s": args.rate, "seen": len(lat),
            "p50_ms": q[49] * 1e3, "p90_ms": q[89] * 1e3, "p99_ms": q[98] * 1e3,
            "max_ms": lat[-1] * 1e3 if lat else float("nan")}
