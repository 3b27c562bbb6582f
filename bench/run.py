#!/usr/bin/env python3
"""The clusterset-dns benchmark: one command, bounded in time.

    python bench/run.py            # full run (15 s per load phase)
    python bench/run.py --quick    # smoke test (5 s phases, small data set)

For every server in turn (clusterset-dns with 1 worker, with 2 workers, Knot,
CoreDNS when available): start it pinned to core 0, check that it answers the
probe questions correctly, run dnsperf pinned to core 1 at full speed for the
throughput and CPU figures, then again at half that server's measured rate
for latency percentiles.  Writes ``bench/results/<UTC time>.md`` and ``.json``
(and ``latest.md`` / ``latest.json``).  See bench/README.md.

Only 127.0.0.1 is ever sent traffic.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import gen  # noqa: E402

ZONE = "clusterset.local"
SERVER_CORE = "0"
SERVER_CORES_2 = "0-1"
CLIENT_CORE = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOOPBACK = "127.0.0.1"


class Skip(Exception):
    """A server column that cannot be measured here (reason printed)."""


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------
# /proc helpers: CPU and memory of a whole process tree
# --------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    # comm may contain spaces/parens: fields after the last ')'
    return s[s.rindex(")") + 2 :].split()


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _stat(int(d))
        if st is not None:
            children.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        if _stat(p) is None:
            continue
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_cpu_seconds(root: int) -> float:
    total = 0
    for pid in process_tree(root):
        st = _stat(pid)
        if st is not None:  # fields 14,15 (utime, stime) -> index 11, 12 here
            total += int(st[11]) + int(st[12])
    return total / CLK_TCK


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory_mib(root: int) -> tuple[float, float, int]:
    """(sum of VmRSS, sum of PSS, number of processes) of the tree."""
    pids = process_tree(root)
    rss = sum(_status_kb(p, "VmRSS") for p in pids)
    pss = sum(_pss_kb(p) for p in pids)
    return rss / 1024, pss / 1024, len(pids)


def system_cpu() -> dict[str, Any]:
    """CPU time of all cores, from /proc/stat, in seconds: busy (any non-idle
    time but steal; irq and softirq included, since processes are charged
    for the ticks they spend there), irq+softirq, steal; and every process's
    own CPU ticks, to name the busy ones."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]  # the aggregate "cpu" line
    user, nice, system, _idle, _iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    procs: dict[int, tuple[str, int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2 :].split()
            procs[int(d)] = (raw[raw.index("(") + 1 : raw.rindex(")")],
                             int(fields[11]) + int(fields[12]))
    return {"busy": (user + nice + system + irq + softirq) / CLK_TCK,
            "irq": (irq + softirq) / CLK_TCK, "steal": steal / CLK_TCK, "t": time.time(),
            "procs": procs}


def start_time(pid: int) -> str | None:
    st = _stat(pid)
    return st[19] if st else None


# --------------------------------------------------------------------------
# small DNS client for readiness
# --------------------------------------------------------------------------
def dns_rcode(port: int, qname: str = ZONE, qtype: str = "SOA", timeout: float = 0.5) -> int | None:
    msg = bytearray(gen.wire_query(qname, qtype, edns=False))
    msg[0:2] = os.urandom(2)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        try:
            s.sendto(bytes(msg), (LOOPBACK, port))
            data = s.recv(65535)
        except OSError:
            return None
    if len(data) < 12 or data[0:2] != msg[0:2]:
        return None
    return data[3] & 0x0F


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.bind((LOOPBACK, 0))
            port = u.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
                try:
                    t.bind((LOOPBACK, port))
                except OSError:
                    continue
        return int(port)
    raise RuntimeError("no free port")


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------
@dataclass
class Context:
    args: argparse.Namespace
    tmp: Path
    objects: Path
    queries_bin: Path
    probes: list[dict[str, Any]]
    ours_cmd: list[str]
    dump_text: str | None = None
    dump_error: str | None = None


@dataclass
class Server:
    label: str
    proc: subprocess.Popen[bytes]
    port: int
    cores: str
    log_path: Path
    version: str = ""
    notes: list[str] = field(default_factory=list)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    _seen: dict[int, str | None] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def remember_tree(self) -> None:
        for p in process_tree(self.pid):
            self._seen.setdefault(p, start_time(p))

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        self.remember_tree()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        # forked workers that outlived their parent: only the exact processes
        # this run started (pid + start time match)
        deadline = time.time() + 5
        for pid, started in self._seen.items():
            while start_time(pid) == started and started is not None and time.time() < deadline:
                time.sleep(0.1)
            if start_time(pid) == started and started is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        for fn in self.cleanup:
            with contextlib.suppress(Exception):
                fn()


def spawn(cmd: list[str], log_path: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log(f"start: {shlex.join(cmd)}")
    f = open(log_path, "wb")  # noqa: SIM115 - kept open for the child's lifetime
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=str(REPO), env=env)


def wait_until(srv: Server, timeout: float, ready_url: str | None = None) -> None:
    """Until /ready says 200 (when given) and the zone SOA answers NOERROR."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.label} exited with {srv.proc.returncode}:\n{srv.log_tail()}")
        ok = True
        if ready_url:
            try:
                with urllib.request.urlopen(ready_url, timeout=1) as r:
                    ok = r.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
        if ok and dns_rcode(srv.port) == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{srv.label} not answering after {timeout:.0f} s:\n{srv.log_tail()}")


def start_ours(ctx: Context, workers: int) -> Server:
    port, rport = free_port(), free_port()
    cores = SERVER_CORE if workers == 1 else SERVER_CORES_2
    cmd = ["taskset", "-c", cores, *ctx.ours_cmd, "serve",
           "--manifests", str(ctx.objects),
           "--listen", f"{LOOPBACK}:{port}",
           "--health-listen", "off",
           "--ready-listen", f"{LOOPBACK}:{rport}",
           "--metrics-listen", "off",
           "--workers", str(workers),
           "--ttl", str(ctx.args.ttl)]
    label = f"clusterset-dns, {workers} worker{'s' if workers > 1 else ''}"
    srv = Server(label, spawn(cmd, ctx.tmp / f"ours-{workers}.log"), port, cores,
                 ctx.tmp / f"ours-{workers}.log", version=ours_version(ctx))
    if workers > 1:
        srv.notes.append(f"{workers} workers pinned to cores {cores}: they share core "
                         f"{CLIENT_CORE} with dnsperf")
    try:
        t0 = time.time()
        wait_until(srv, ctx.args.ready_timeout, f"http://{LOOPBACK}:{rport}/ready")
        srv.notes.append(f"ready in {time.time() - t0:.1f} s")
    except BaseException:
        srv.stop()
        raise
    return srv


def ours_version(ctx: Context) -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return f"git {rev}" if rev else ""


# ---- Knot ---------------------------------------------------------------
_DOMAIN_FIELDS = {"NS": [0], "CNAME": [0], "PTR": [0], "DNAME": [0], "SOA": [0, 1],
                  "MX": [1], "SRV": [3]}


def _abs(name: str, zone: str = ZONE) -> str:
    if name.endswith("."):
        return name
    if name == "@":
        return zone + "."
    if name.lower() == zone or name.lower().endswith("." + zone):
        return name + "."
    return f"{name}.{zone}."


def knot_zone_from_dump(dump: str, zone: str = ZONE) -> tuple[str, list[str]]:
    """Turn ``dump`` output (name ttl IN TYPE rdata) into a zone file for Knot."""
    out = [f"$ORIGIN {zone}.", f"$TTL {5}"]
    notes: list[str] = []
    seen_types: set[str] = set()
    apex_ns: list[str] = []
    owners_with_addr: set[str] = set()
    for raw in dump.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#", "$")):
            continue
        m = re.match(r"(\S+)\s+(?:(\d+)\s+)?(?:IN\s+)?([A-Za-z][A-Za-z0-9]*)\s*(.*)$", line,
                     re.IGNORECASE)
        if not m:
            raise ValueError(f"dump line not understood: {raw!r}")
        name, ttl, rtype, rdata = m.group(1), m.group(2) or "5", m.group(3).upper(), m.group(4)
        owner = _abs(name, zone)
        fields_idx = _DOMAIN_FIELDS.get(rtype)
        if fields_idx:
            f = rdata.split()
            for i in fields_idx:
                if i < len(f):
                    f[i] = _abs(f[i], zone)
            rdata = " ".join(f)
        if rtype == "NS" and owner.lower() == zone + ".":
            apex_ns.append(rdata.split()[0].lower())
        if rtype in ("A", "AAAA"):
            owners_with_addr.add(owner.lower())
        seen_types.add(rtype if owner.lower() != zone + "." else "apex-" + rtype)
        out.append(f"{owner} {ttl} IN {rtype} {rdata}")
    if "apex-SOA" not in seen_types:
        raise ValueError("dump has no apex SOA")
    if "apex-NS" not in seen_types:
        raise ValueError("dump has no apex NS")
    for ns in apex_ns:
        if ns.endswith("." + zone + ".") and ns not in owners_with_addr:
            notes.append(f"in-zone NS {ns} has no address in the dump; Knot logs "
                         f"'missing glue' and serves the zone anyway (no glue added, so both "
                         f"servers hold the same records)")
    return "\n".join(out) + "\n", notes


def start_knot(ctx: Context) -> Server:
    knotd = shutil.which("knotd")
    if not knotd:
        raise Skip("knotd not installed (apt-get install -y knot)")
    if ctx.dump_text is None:
        raise Skip(f"no zone: `dump` failed: {ctx.dump_error}")
    kdir = ctx.tmp / "knot"
    (kdir / "db").mkdir(parents=True, exist_ok=True)
    zone_text, notes = knot_zone_from_dump(ctx.dump_text)
    (kdir / f"{ZONE}.zone").write_text(zone_text)
    port = free_port()
    conf = f"""\
server:
    listen: {LOOPBACK}@{port}
    rundir: {kdir}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
control:
    listen: {kdir}/knot.sock
database:
    storage: {kdir}/db
log:
  - target: stderr
    any: warning
zone:
  - domain: {ZONE}
    storage: {kdir}
    file: {ZONE}.zone
    journal-content: none
    zonefile-sync: -1
    zonefile-load: whole
"""
    (kdir / "knot.conf").write_text(conf)
    version = subprocess.run([knotd, "-V"], capture_output=True, text=True).stdout.strip()
    srv = Server("Knot DNS", spawn(["taskset", "-c", SERVER_CORE, knotd, "-c",
                                    str(kdir / "knot.conf")], kdir / "knot.log"),
                 port, SERVER_CORE, kdir / "knot.log", version=version, notes=notes)
    srv.notes.append("1 UDP worker, 1 TCP worker, 1 background worker; zone file = "
                     "`dump` output")
    try:
        t0 = time.time()
        wait_until(srv, ctx.args.ready_timeout)
        srv.notes.append(f"ready in {time.time() - t0:.1f} s")
    except BaseException:
        srv.stop()
        raise
    return srv


# ---- CoreDNS --------------------------------------------------------------
def coredns_binary() -> Path:
    cache = os.environ.get("CLUSTERSET_DNS_CACHE") or str(Path.home() / ".cache" / "clusterset-dns")
    return Path(cache) / "bin" / "coredns"


def start_coredns(ctx: Context) -> Server:
    """###### HOOK: the CoreDNS column (lead: review / complete) ######

    First version, written against ``tests/support/peers.py``: etcd +
    kube-apiserver from the peers harness, the mcs-api v0.5.0 CRDs, every item
    of ``ctx.objects`` created through the API (CoreDNS's multicluster mode
    reads them as v1alpha1, which v0.5.0 serves too), then the CoreDNS binary
    pinned like the others (``taskset -c 0``, ``GOMAXPROCS=1``) with the
    ``kubernetes`` plugin's ``multicluster clusterset.local``.

    CPU and RSS are those of CoreDNS's own process; the apiserver and etcd
    run beside it (idle during the load, but on the same two cores: the
    foreign-load figures in the JSON show what they used).  CoreDNS answers
    ``dns-version`` with "1.1.0": the probe checks only that a TXT exists.
    Skipped, with the reason printed, when the binary or the harness is
    missing.
    """
    binary = coredns_binary()
    if not binary.is_file():
        raise Skip(f"no CoreDNS binary at {binary}")
    support = REPO / "tests" / "support"
    if not (support / "peers.py").is_file():
        raise Skip("no kube-apiserver harness (tests/support/peers.py)")
    if str(support) not in sys.path:
        sys.path.insert(0, str(support))
    try:
        import peers  # type: ignore[import-not-found]
    except Exception as e:
        raise Skip(f"cannot import tests/support/peers.py: {e}") from e
    try:
        peers.find_binaries()
    except Exception as e:
        raise Skip(str(e)) from e

    t0 = time.time()
    api = peers.KubeAPI()
    try:
        api.start()
        api.install_crds(["mcs-api-v0.5.0"])
        items = json.loads(ctx.objects.read_text())["items"]
        for ns in sorted({o["metadata"]["namespace"] for o in items}):
            api.ensure_namespace(ns)
        for o in items:
            api.create(o)
        log(f"apiserver: {len(items):,} objects created in {time.time() - t0:.0f} s")
        port = free_port()
        cdir = ctx.tmp / "coredns"
        cdir.mkdir(exist_ok=True)
        corefile = cdir / "Corefile"
        corefile.write_text(
            f"{ZONE}:{port} {{\n"
            f"    bind {LOOPBACK}\n"
            f"    errors\n"
            f"    kubernetes cluster.local {ZONE} {{\n"
            f"        kubeconfig {api.kubeconfig}\n"
            f"        multicluster {ZONE}\n"
            f"        ttl {ctx.args.ttl}\n"
            f"    }}\n"
            f"}}\n")
        version = subprocess.run([str(binary), "-version"], capture_output=True,
                                 text=True).stdout.strip().replace("\n", " ")
        env = dict(os.environ, GOMAXPROCS="1")
        srv = Server("CoreDNS", spawn(["taskset", "-c", SERVER_CORE, str(binary), "-conf",
                                       str(corefile)], cdir / "coredns.log", env),
                     port, SERVER_CORE, cdir / "coredns.log", version=version)
    except BaseException:
        api.close()
        raise
    srv.cleanup.append(api.close)
    srv.notes.append("kubernetes plugin, multicluster clusterset.local, reading a "
                     "real kube-apiserver (running beside it); GOMAXPROCS=1")
    try:
        wait_until(srv, ctx.args.ready_timeout)
        # synced: the last objects created answer
        deadline = time.time() + ctx.args.ready_timeout
        last = [p for p in ctx.probes if p["rcode"] == "NOERROR" and p["type"] == "A"]
        while any(dns_rcode(port, p["name"], "A") != 0 for p in last):
            if time.time() > deadline or srv.proc.poll() is not None:
                raise RuntimeError(f"CoreDNS did not sync:\n{srv.log_tail()}")
            time.sleep(0.3)
        srv.notes.append(f"ready in {time.time() - t0:.1f} s (apiserver start and object "
                         f"creation included)")
    except BaseException:
        srv.stop()
        raise
    return srv


# --------------------------------------------------------------------------
# answer checks (dig)
# --------------------------------------------------------------------------
def dig(port: int, name: str, qtype: str, mode: str) -> tuple[str, list[str], list[str], str]:
    """(status, answer rdata of qtype, header flags, raw) with mode edns|noedns|tcp."""
    cmd = ["dig", f"@{LOOPBACK}", "-p", str(port), name, qtype, "+norecurse",
           "+noall", "+comments", "+answer", "+time=2", "+tries=1"]
    cmd += {"edns": ["+bufsize=1232"], "noedns": ["+noedns"], "tcp": ["+tcp"]}[mode]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=15).stdout
    m = re.search(r"status: (\w+)", out)
    status = m.group(1) if m else "NO-ANSWER"
    fm = re.search(r";; flags: ([a-z ]*);", out)
    flags = fm.group(1).split() if fm else []
    rdatas = []
    for line in out.splitlines():
        if not line or line.startswith(";"):
            continue
        f = line.split(None, 4)
        if len(f) == 5 and f[3].upper() == qtype and f[0].lower() == name.lower():
            rdatas.append(f[4])
    return status, rdatas, flags, out


def _norm(qtype: str, rdata: str) -> str:
    if qtype in ("A", "AAAA"):
        return str(ipaddress.ip_address(rdata.strip()))
    if qtype == "SRV":
        f = rdata.split()
        return f"{f[2]} {f[3].lower()}"
    return rdata


def verify(srv: Server, probes: list[dict[str, Any]]) -> list[str]:
    """Problems found (empty: all probes answered as expected)."""
    problems = []
    for p in probes:
        for mode in ("edns", "noedns", "tcp"):
            status, rd, flags, _raw = dig(srv.port, p["name"], p["type"], mode)
            what = f"{p['name']} {p['type']} ({mode})"
            if status != p["rcode"]:
                problems.append(f"{what}: status {status}, expected {p['rcode']}")
                continue
            if "aa" not in flags:
                problems.append(f"{what}: AA flag not set")
            if p["answer"] is None:
                if not rd:
                    problems.append(f"{what}: no {p['type']} record")
                continue
            got = sorted(_norm(p["type"], r) for r in rd)
            want = sorted(p["answer"])
            if got != want:
                problems.append(f"{what}: answer {got[:4]}{'...' if len(got) > 4 else ''} "
                                f"({len(got)}), expected {want[:4]}"
                                f"{'...' if len(want) > 4 else ''} ({len(want)})")
    return problems


# --------------------------------------------------------------------------
# dnsperf
# --------------------------------------------------------------------------
def dnsperf_version() -> str:
    out = subprocess.run(["dnsperf", "-h"], capture_output=True, text=True)
    m = re.search(r"Version (\S+)", out.stdout + out.stderr)
    return m.group(1) if m else "?"


def parse_dnsperf(text: str) -> dict[str, Any]:
    def num(pattern: str) -> float | None:
        m = re.search(pattern, text)
        return float(m.group(1)) if m else None

    r: dict[str, Any] = {
        "sent": num(r"Queries sent:\s+(\d+)"),
        "completed": num(r"Queries completed:\s+(\d+)"),
        "lost": num(r"Queries lost:\s+(\d+)"),
        "run_time": num(r"Run time \(s\):\s+([\d.]+)"),
        "qps": num(r"Queries per second:\s+([\d.]+)"),
        "avg_latency_ms": None,
        "stddev_ms": None,
        "rcodes": {},
    }
    a = num(r"Average Latency \(s\):\s+([\d.]+)")
    s = num(r"Latency StdDev \(s\):\s+([\d.]+)")
    r["avg_latency_ms"] = a * 1000 if a is not None else None
    r["stddev_ms"] = s * 1000 if s is not None else None
    m = re.search(r"Response codes:\s+(.*)", text)
    if m:
        for code, n in re.findall(r"(\w+) (\d+) \(", m.group(1)):
            r["rcodes"][code] = int(n)
    m = re.search(r"Average packet size:\s+request (\d+), response (\d+)", text)
    if m:
        r["avg_request_bytes"], r["avg_response_bytes"] = int(m.group(1)), int(m.group(2))
    if r["qps"] is None:
        raise RuntimeError("dnsperf output not understood:\n" + text[-2000:])
    return r


def run_dnsperf(ctx: Context, port: int, seconds: float, out_path: Path,
                qps_limit: float | None = None, verbose: bool = False) -> dict[str, Any]:
    a = ctx.args
    cmd = ["taskset", "-c", CLIENT_CORE, "dnsperf", "-s", LOOPBACK, "-p", str(port),
           "-B", "-d", str(ctx.queries_bin), "-l", f"{seconds:g}",
           "-c", str(a.clients), "-T", str(a.threads), "-q", str(a.outstanding),
           "-t", "2"]
    if qps_limit:
        cmd += ["-Q", str(int(qps_limit))]
    if verbose:
        cmd += ["-v"]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    with open(out_path, "wb") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 60)
    wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out_path.read_text(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"dnsperf failed ({p.returncode}): {shlex.join(cmd)}\n{text[-2000:]}")
    stats_at = text.find("Statistics:")
    r = parse_dnsperf(text[stats_at:] if stats_at >= 0 else text)
    r["command"] = shlex.join(cmd)
    r["wall"] = wall
    r["dnsperf_cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if verbose:
        r.update(latency_percentiles(text))
    return r


def latency_percentiles(text: str) -> dict[str, Any]:
    """From dnsperf -v lines: '> RCODE binary input LATENCY' (or '> T ...' on timeout)."""
    lat: list[float] = []
    timeouts = 0
    for line in text.splitlines():
        if not line.startswith("> "):
            continue
        f = line.split()
        if f[1] == "T":
            timeouts += 1
            continue
        try:
            lat.append(float(f[-1]))
        except ValueError:
            continue
    lat.sort()

    def pct(q: float) -> float | None:
        if not lat:
            return None
        return lat[min(len(lat) - 1, int(q / 100 * len(lat)))] * 1000

    return {"samples": len(lat), "timeouts_verbose": timeouts,
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "p999_ms": pct(99.9),
            "max_ms": lat[-1] * 1000 if lat else None}


@contextlib.contextmanager
def idle_spinners(enabled: bool, cores: tuple[str, ...] = (SERVER_CORE, CLIENT_CORE)
                  ) -> Iterator[set[int]]:
    """Busy loops at SCHED_IDLE priority, one per core, while the block runs.

    On a VM an idle vCPU halts, and waking it again (an exit to the host and
    back, or the host's scheduler) puts milliseconds into the latency tail of
    a half-loaded server: measured here, Knot's p99 at 10,000 q/s was 2.3 ms
    with idle cores and 0.4 ms with these loops.  A SCHED_IDLE task yields
    the CPU at once to any normal task (server, dnsperf), so it takes no time
    from them; its CPU is left out of the foreign-load figures.
    """
    procs: list[subprocess.Popen[bytes]] = []
    if enabled and shutil.which("chrt"):
        for c in cores:
            procs.append(subprocess.Popen(
                ["chrt", "--idle", "0", "taskset", "-c", c, "sh", "-c", "while :; do :; done"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield {p.pid for p in procs}
    finally:
        for p in procs:
            p.kill()
            p.wait()


# --------------------------------------------------------------------------
# one server
# --------------------------------------------------------------------------
def bench_server(ctx: Context, key: str, label: str, starter: Callable[[], Server],
                 nx_share: float) -> dict[str, Any]:
    a = ctx.args
    row: dict[str, Any] = {"key": key, "server": label, "notes": [], "warnings": []}
    log(f"=== {label}")
    try:
        srv = starter()
    except Skip as e:
        row["skipped"] = str(e)
        log(f"skip {label}: {e}")
        return row
    except Exception as e:
        row["error"] = str(e)
        log(f"ERROR {label}: {e}")
        return row
    try:
        row["version"] = srv.version
        row["cores"] = srv.cores
        row["notes"] += srv.notes
        problems = verify(srv, ctx.probes)
        row["verified"] = not problems
        if problems:
            row["error"] = "wrong answers: " + "; ".join(problems[:6])
            log(f"ERROR {label} fails the answer checks, not measured:\n  "
                + "\n  ".join(problems))
            return row
        log(f"answers verified ({len(ctx.probes)} probes x udp+edns, udp, tcp)")
        srv.remember_tree()

        row["load_before_pct"] = wait_quiet(a.wait_quiet)
        # warm-up (not measured)
        run_dnsperf(ctx, srv.port, a.warmup, ctx.tmp / f"{key}-warmup.txt")

        # 1. saturation: throughput and CPU
        sys0 = system_cpu()
        cpu0, t0 = tree_cpu_seconds(srv.pid), time.time()
        sat = run_dnsperf(ctx, srv.port, a.duration, ctx.tmp / f"{key}-max.txt")
        cpu1, t1 = tree_cpu_seconds(srv.pid), time.time()
        sys1 = system_cpu()
        note_foreign_load(row, sys0, sys1, (cpu1 - cpu0) + sat["dnsperf_cpu_s"],
                          set(process_tree(srv.pid)), "full-speed run")
        srv.remember_tree()
        rss, pss, nproc = tree_memory_mib(srv.pid)
        cpu = cpu1 - cpu0
        answered = sat["completed"] or 0
        row["max"] = sat
        row["qps"] = sat["qps"]
        row["server_cpu_s"] = cpu
        row["cpu_s_per_100k"] = cpu / answered * 100_000 if answered else None
        row["server_busy_pct"] = 100 * cpu / (t1 - t0) / (2 if srv.cores == SERVER_CORES_2 else 1)
        row["server_cpu_pct_of_one_core"] = 100 * cpu / (t1 - t0)
        row["dnsperf_busy_pct"] = 100 * sat["dnsperf_cpu_s"] / sat["wall"]
        row["rss_mib"] = rss
        row["pss_mib"] = pss
        row["processes"] = nproc
        check_run(row, sat, nx_share, "full-speed run")
        log(f"max {sat['qps']:,.0f} q/s, server CPU {cpu:.2f} s "
            f"({row['cpu_s_per_100k']:.3f} s/100k), dnsperf core busy "
            f"{row['dnsperf_busy_pct']:.0f}%, RSS {rss:.1f} MiB")

        # 2. half the measured max rate: latency percentiles
        rate = sat["qps"] / 2
        with idle_spinners(a.spin_idle) as spinners:
            sys0 = system_cpu()
            cpu0 = tree_cpu_seconds(srv.pid)
            lat = run_dnsperf(ctx, srv.port, a.duration, ctx.tmp / f"{key}-half.txt",
                              qps_limit=rate, verbose=True)
            cpu1 = tree_cpu_seconds(srv.pid)
            sys1 = system_cpu()
        spun = sum(sys1["procs"].get(p, ("", 0))[1] - sys0["procs"].get(p, ("", 0))[1]
                   for p in spinners) / CLK_TCK
        note_foreign_load(row, sys0, sys1, (cpu1 - cpu0) + lat["dnsperf_cpu_s"] + spun,
                          set(process_tree(srv.pid)) | spinners, "half-rate run")
        lat["target_qps"] = rate
        lat["server_cpu_s"] = cpu1 - cpu0
        lat["cpu_s_per_100k"] = ((cpu1 - cpu0) / lat["completed"] * 100_000
                                 if lat["completed"] else None)
        row["half"] = lat
        row["p50_ms"], row["p99_ms"] = lat["p50_ms"], lat["p99_ms"]
        if lat["qps"] < 0.95 * rate:
            row["warnings"].append(f"half-rate run reached only {lat['qps']:,.0f} of "
                                   f"{rate:,.0f} q/s")
        check_run(row, lat, nx_share, "half-rate run")
        log(f"half rate {lat['qps']:,.0f} q/s: p50 {lat['p50_ms']:.3f} ms, "
            f"p99 {lat['p99_ms']:.3f} ms")
        if srv.proc.poll() is not None:
            row["warnings"].append(f"server exited during the run ({srv.proc.returncode})")
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"
        log(f"ERROR {label}: {row['error']}")
    finally:
        srv.stop()
    return row


def note_foreign_load(row: dict[str, Any], s0: dict[str, Any], s1: dict[str, Any],
                      ours: float, exclude: set[int], what: str) -> None:
    """CPU used on the machine by anything but the server and dnsperf during a run.

    Another busy process (a compiler, a test suite) disturbs the figures; so
    does a hypervisor stealing time.  Busy time of the machine minus the
    server's and dnsperf's own CPU time (which include the loopback softirq
    work charged to them); the busiest other processes are named.
    """
    wall = s1["t"] - s0["t"]
    residual = (s1["busy"] - s0["busy"]) - ours
    steal = s1["steal"] - s0["steal"]
    me = os.getpid()
    deltas = sorted(
        ((ticks - s0["procs"].get(pid, ("", 0))[1], f"{comm}[{pid}]")
         for pid, (comm, ticks) in s1["procs"].items() if pid not in exclude and pid != me),
        reverse=True)
    named = sum(t for t, _ in deltas if t > 0) / CLK_TCK
    top = ", ".join(f"{name} {100 * t / CLK_TCK / wall:.0f}%" for t, name in deltas[:3] if t > 0)
    unattributed = residual - named
    row.setdefault("foreign_cpu", {})[what] = {
        "other_processes_pct_of_a_core": 100 * named / wall,
        "busiest_others": top,
        # machine busy time nobody running at the end was charged for: softirq
        # work done in idle context (about 5% here), processes that came and went
        "unattributed_pct_of_a_core": 100 * unattributed / wall,
        "steal_pct_of_a_core": 100 * steal / wall,
        "irq_softirq_pct_of_a_core": 100 * (s1["irq"] - s0["irq"]) / wall,
    }
    disturbed = ": figures disturbed, run again on a quiet machine"
    if named > 0.05 * wall:
        pct = 100 * named / wall
        row["warnings"].append(f"{what}: other processes used {pct:.0f}% of a core meanwhile "
                               f"({top}){disturbed if pct > 15 else ''}")
    if unattributed > 0.15 * wall:
        row["warnings"].append(f"{what}: {100 * unattributed / wall:.0f}% of a core used by "
                               f"short-lived processes or the kernel{disturbed}")
    if steal > 0.05 * wall:
        row["warnings"].append(f"{what}: the hypervisor stole {100 * steal / wall:.0f}% of a core")


def wait_quiet(limit: float, threshold_pct: float = 10.0) -> float | None:
    """Wait (at most ``limit`` s) until other processes use < threshold of a core
    over a 1 s sample.  Returns the last sample's load in % of a core, or None
    when no wait was asked for."""
    if limit <= 0:
        return None
    deadline = time.time() + limit
    waited = False
    while True:
        s0 = system_cpu()
        time.sleep(1)
        s1 = system_cpu()
        load = float(100 * (s1["busy"] - s0["busy"]) / (s1["t"] - s0["t"]))
        if load < threshold_pct or time.time() >= deadline:
            if waited or load >= threshold_pct:
                log(f"machine load now {load:.0f}% of a core"
                    + ("" if load < threshold_pct else f" (gave up waiting after {limit:.0f} s)"))
            return load
        if not waited:
            log(f"machine busy ({load:.0f}% of a core used by other processes): waiting up to "
                f"{limit:.0f} s for it to calm down")
            waited = True


def check_run(row: dict[str, Any], r: dict[str, Any], nx_share: float, what: str) -> None:
    """Flag load runs whose answers do not look like the query mix."""
    done = r["completed"] or 0
    if not done:
        row["warnings"].append(f"{what}: no answers")
        return
    codes = r["rcodes"]
    odd = {c: n for c, n in codes.items() if c not in ("NOERROR", "NXDOMAIN")}
    if sum(odd.values()) > done * 0.001:
        row["warnings"].append(f"{what}: unexpected rcodes {odd}")
    nx = codes.get("NXDOMAIN", 0) / done
    if abs(nx - nx_share) > 0.01:
        row["warnings"].append(f"{what}: NXDOMAIN {nx:.1%} of answers, expected {nx_share:.1%}")
    if r["lost"] and r["lost"] > 0.01 * (r["sent"] or 1):
        row["warnings"].append(f"{what}: {r['lost']:.0f} of {r['sent']:.0f} queries lost")


MEDIAN_FIELDS = ("qps", "p50_ms", "p99_ms", "cpu_s_per_100k", "rss_mib", "pss_mib",
                 "server_busy_pct", "dnsperf_busy_pct")


def combine_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row per server: the median of each figure over the measured rounds."""
    if len(rounds) == 1:
        return rounds[0]
    ok = [r for r in rounds if r.get("qps")]
    if not ok:
        return rounds[0]
    by_qps = sorted(ok, key=lambda r: r["qps"])
    row = dict(by_qps[len(by_qps) // 2])
    for f in MEDIAN_FIELDS:
        vals = sorted(r[f] for r in ok if r.get(f) is not None)
        if vals:
            n = len(vals)
            row[f] = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    row["rounds"] = [{k: r.get(k) for k in (*MEDIAN_FIELDS, "error")} for r in rounds]
    per_round = ", ".join(f"{r['qps']:,.0f}" if r.get("qps") else "failed" for r in rounds)
    row["notes"] = [*row.get("notes", []), f"median of {len(ok)} rounds (of {len(rounds)}); "
                    f"queries/s per round: {per_round}"]
    row["warnings"] = [f"round {i + 1}: {w}" for i, r in enumerate(rounds)
                       for w in r.get("warnings", [])]
    row["warnings"] += [f"round {i + 1}: {r['error']}" for i, r in enumerate(rounds)
                        if r.get("error")]
    row.pop("error", None)
    return row


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    knot = next((r for r in rows if r["key"] == "knot" and r.get("qps")), None)
    lines = [
        f"# clusterset-dns benchmark, {meta['date']}",
        "",
        f"- machine: {meta['cpu_model']}, {meta['cpus']} CPUs, kernel {meta['kernel']}",
        f"- dnsperf {meta['dnsperf']}, {meta['knot'] or 'knotd not installed'}, "
        f"Python {meta['python']}, clusterset-dns {meta['ours_version']}",
        f"- data: {meta['dataset']['imports']:,} ClusterSetIP imports, "
        f"{meta['dataset']['headless']:,} headless x {meta['dataset']['endpoints']} endpoints "
        f"over {meta['dataset']['clusters']} clusters, {meta['dataset']['namespaces']} namespaces "
        f"({meta['dataset']['n_objects']:,} objects)",
        f"- queries: {meta['dataset']['n_queries']:,} (80% A, 5% AAAA, 10% SRV, 5% NXDOMAIN; "
        f"half with EDNS0), looped; dnsperf {meta['dnsperf_args']} on core {CLIENT_CORE}; "
        f"server on core {SERVER_CORE} (2 workers: cores {SERVER_CORES_2})",
        f"- {meta['duration']:g} s at full speed, then {meta['duration']:g} s at half that "
        f"server's max rate for latency"
        + (" (cores kept from idling: `--spin-idle`)" if meta.get("spin_idle") else "")
        + (f"; median of {meta['rounds']} rounds" if meta.get("rounds", 1) > 1 else ""),
        "",
        "| server | queries/s | p50 ms | p99 ms | CPU s / 100k answers | RSS MiB "
        "| q/s vs Knot | CPU vs Knot | server core busy | dnsperf core busy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if not r.get("qps"):
            why = r.get("skipped") or r.get("error") or "not measured"
            text = why.strip().splitlines()
            # the first line says what failed, the last one (a log's) why
            short = text[0] if len(text) < 2 else f"{text[0]} ... {text[-1]}"
            short = " ".join(short.split()).replace("|", "/")[:300]
            lines.append(f"| {r['server']} | {'skipped' if r.get('skipped') else 'FAILED'}: "
                         f"{short} | | | | | | | | |")
            continue
        qr = r["qps"] / knot["qps"] if knot else None
        cr = (r["cpu_s_per_100k"] / knot["cpu_s_per_100k"]
              if knot and r["cpu_s_per_100k"] and knot["cpu_s_per_100k"] else None)
        lines.append(
            f"| {r['server']} | {r['qps']:,.0f} | {fmt(r['p50_ms'], '.3f')} | "
            f"{fmt(r['p99_ms'], '.3f')} | {fmt(r['cpu_s_per_100k'], '.3f')} | "
            f"{r['rss_mib']:.1f} | {fmt(qr, '.2f')} | {fmt(cr, '.2f')} | "
            f"{r['server_busy_pct']:.0f}% | {r['dnsperf_busy_pct']:.0f}% |")
    lines += ["", "Notes:", ""]
    for r in rows:
        for n in r.get("notes", []):
            lines.append(f"- {r['server']}: {n}")
        for w in r.get("warnings", []):
            lines.append(f"- **{r['server']}: {w}**")
        if r.get("qps") and r["dnsperf_busy_pct"] > 90 and r["server_busy_pct"] < 90:
            lines.append(f"- {r['server']}: dnsperf's core was the limit "
                         f"({r['dnsperf_busy_pct']:.0f}% busy, server "
                         f"{r['server_busy_pct']:.0f}%): its queries/s is a lower bound; "
                         f"compare CPU s / 100k answers")
    lines += [
        "",
        "p50/p99: from dnsperf -v per-query latencies at half the server's own max rate. "
        "CPU: utime+stime of the server's whole process tree during the full-speed run. "
        "RSS: sum of VmRSS of the tree after load (forked workers share pages; PSS in the JSON). "
        "Ratios: this server / Knot (q/s higher is better, CPU lower is better).",
        f"Total bench time: {meta['total_seconds']:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def machine_meta() -> dict[str, Any]:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    knot = ""
    if shutil.which("knotd"):
        knot = subprocess.run(["knotd", "-V"], capture_output=True, text=True).stdout.strip()
    return {"kernel": platform.release(), "cpu_model": model, "cpus": os.cpu_count(),
            "dnsperf": dnsperf_version(), "knot": knot, "python": platform.python_version()}


# --------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="clusterset-dns benchmark (see bench/README.md)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 5 s phases, small data set, 10k queries")
    p.add_argument("--duration", type=float, help="seconds per load phase (15; quick 5)")
    p.add_argument("--warmup", type=float, default=None, help="warm-up seconds (2; quick 1)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every server this many times, interleaved, and report "
                        "the median of each figure (1)")
    p.add_argument("--servers", default="ours1,ours2,knot,coredns",
                   help="comma list of ours1, ours2, knot, coredns (all)")
    p.add_argument("--ours-cmd", default=f"{shlex.quote(sys.executable)} -m clusterset_dns",
                   help="command that runs clusterset-dns (python -m clusterset_dns)")
    p.add_argument("--ttl", type=int, default=5)
    p.add_argument("--clients", type=int, default=16, help="dnsperf -c (16)")
    p.add_argument("--threads", type=int, default=1, help="dnsperf -T (1)")
    p.add_argument("--outstanding", type=int, default=200, help="dnsperf -q (200)")
    p.add_argument("--ready-timeout", type=float, default=300.0,
                   help="seconds a server may take to load and answer (300)")
    p.add_argument("--wait-quiet", type=float, default=None,
                   help="before each server, wait up to this many seconds for other processes "
                        "to leave the CPUs idle (120; quick 10; 0 = don't)")
    p.add_argument("--spin-idle", action=argparse.BooleanOptionalAction, default=True,
                   help="keep both cores from idling (SCHED_IDLE busy loops) during the "
                        "half-rate latency run, so that VM wake-up delays stay out of the "
                        "percentiles (on)")
    p.add_argument("--results", type=Path, default=HERE / "results")
    p.add_argument("--keep-tmp", action="store_true",
                   help="keep the temp dir (logs, dnsperf output)")
    p.add_argument("--imports", type=int)
    p.add_argument("--headless", type=int)
    p.add_argument("--endpoints", type=int)
    p.add_argument("--clusters", type=int, default=2)
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--queries", type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    q = a.quick
    for name, full, quick in (("duration", 15.0, 5.0), ("warmup", 2.0, 1.0),
                              ("wait_quiet", 120.0, 10.0),
                              ("imports", 1000, 100), ("headless", 100, 10),
                              ("endpoints", 10, 10), ("queries", 100_000, 10_000)):
        if getattr(a, name) is None:
            setattr(a, name, quick if q else full)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t_start = time.time()
    missing = [t for t in ("dnsperf", "taskset", "dig") if not shutil.which(t)]
    if missing:
        print(f"missing tools: {missing}: apt-get install -y dnsperf bind9-dnsutils knot "
              f"util-linux", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("needs 2 cores (server on core 0, dnsperf on core 1)", file=sys.stderr)
        return 2
    wanted = [s.strip() for s in a.servers.split(",") if s.strip()]
    per_server = a.warmup + 2 * a.duration + 10
    worst = per_server + 2 * 60 + a.ready_timeout + a.wait_quiet + 60
    log(f"plan: {a.rounds} round(s) x {len(wanted)} servers x ~{per_server:.0f} s "
        f"(+ start/load time); bounded by {a.rounds * len(wanted) * worst:.0f} s at worst")

    s0 = system_cpu()
    time.sleep(1)
    s1 = system_cpu()
    busy = 100 * (s1["busy"] - s0["busy"]) / (s1["t"] - s0["t"])
    if busy > 10:
        log(f"WARNING: the machine is busy before the start ({busy:.0f}% of a core used by "
            f"other processes): results will be disturbed")

    tmp = Path(tempfile.mkdtemp(prefix="clusterset-dns-bench-"))
    try:
        ds = gen.Dataset.build(a.imports, a.headless, a.endpoints, a.clusters, a.namespaces)
        info = gen.write_all(tmp, ds, a.queries, a.seed)
        log(f"generated {info['n_objects']:,} objects, {info['n_queries']:,} queries in {tmp}")
        qs = ds.queries(a.queries, a.seed)
        nx_share = sum(1 for n, _ in qs if n.startswith(gen.NX_PREFIXES)) / len(qs)
        ctx = Context(a, tmp, Path(info["objects"]), Path(info["queries_bin"]),
                      json.loads(Path(info["probes"]).read_text()), shlex.split(a.ours_cmd))
        try:
            d = subprocess.run([*ctx.ours_cmd, "dump", "--manifests", str(ctx.objects)],
                               capture_output=True, text=True, cwd=str(REPO), timeout=600)
            if d.returncode == 0:
                ctx.dump_text = d.stdout
                log(f"dump: {len(d.stdout.splitlines()):,} records")
            else:
                tail = (d.stderr or d.stdout).strip().splitlines()
                ctx.dump_error = tail[-1] if tail else f"exit status {d.returncode}"
                log(f"dump failed: {ctx.dump_error}")
        except (OSError, subprocess.TimeoutExpired) as e:
            ctx.dump_error = str(e)

        starters: dict[str, tuple[str, Callable[[], Server]]] = {
            "ours1": ("clusterset-dns, 1 worker", lambda: start_ours(ctx, 1)),
            "ours2": ("clusterset-dns, 2 workers", lambda: start_ours(ctx, 2)),
            "knot": ("Knot DNS", lambda: start_knot(ctx)),
            "coredns": ("CoreDNS", lambda: start_coredns(ctx)),
        }
        unknown = [k for k in wanted if k not in starters]
        if unknown:
            print(f"unknown server(s) {unknown}; known: {', '.join(starters)}", file=sys.stderr)
            return 2
        per_key: dict[str, list[dict[str, Any]]] = {k: [] for k in wanted}
        for rnd in range(a.rounds):
            if a.rounds > 1:
                log(f"##### round {rnd + 1} of {a.rounds}")
            for key in wanted:
                if per_key[key] and per_key[key][0].get("skipped"):
                    continue  # not available: no point asking again
                label, starter = starters[key]
                per_key[key].append(bench_server(ctx, key, label, starter, nx_share))
        rows = [combine_rounds(per_key[k]) for k in wanted]

        now = dt.datetime.now(dt.UTC)
        meta = machine_meta() | {
            "date": now.strftime("%Y-%m-%d %H:%M UTC"),
            "ours_version": ours_version(ctx),
            "ours_cmd": a.ours_cmd,
            "dataset": {k: info[k] for k in ("imports", "headless", "endpoints", "clusters",
                                             "namespaces", "n_objects", "n_queries", "seed")},
            "duration": a.duration,
            "warmup": a.warmup,
            "dnsperf_args": f"-B -c {a.clients} -T {a.threads} -q {a.outstanding} -t 2",
            "quick": a.quick,
            "spin_idle": a.spin_idle,
            "rounds": a.rounds,
            "total_seconds": time.time() - t_start,
        }
        md = render(rows, meta)
        a.results.mkdir(parents=True, exist_ok=True)
        stem = now.strftime("%Y%m%dT%H%M%SZ") + ("-quick" if a.quick else "")
        (a.results / f"{stem}.md").write_text(md)
        (a.results / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=1, default=str))
        shutil.copyfile(a.results / f"{stem}.md", a.results / "latest.md")
        shutil.copyfile(a.results / f"{stem}.json", a.results / "latest.json")
        print()
        print(md)
        log(f"wrote {a.results / stem}.md and .json; total {time.time() - t_start:.0f} s")
        measured = [r for r in rows if r.get("qps")]
        failed = [r for r in rows if r.get("error")]
        return 1 if failed or not measured else 0
    finally:
        if a.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
