#!/usr/bin/env python3
"""clusterset-dns next to CoreDNS's own multicluster answers, on the same API server.

    python bench/compare_coredns.py            # ~1-2 minutes, writes docs/coredns-comparison.md
    python bench/compare_coredns.py --no-write # print only

One command:

1. starts etcd + kube-apiserver (``tests/support/peers.py``) with the mcs-api
   v0.5.0 CRDs (v1alpha1 and v1beta1 served, v1beta1 stored) and applies the
   conformance objects an API server accepts (``00-namespaces.yaml``, ``core/``,
   ``extended/``; the v1alpha2 ServiceImports of ``extended/layouts.yaml`` are
   skipped: no v0.5.0 CRD version can store them, only our file source reads them);
2. starts CoreDNS v1.14.7 (``kubernetes cluster.local clusterset.local {
   multicluster clusterset.local }``) and clusterset-dns (``--kubeconfig``) on it,
   and waits until both answer for the objects;
3. asks both servers every name/type the objects define plus the special names
   (apex, dns-version, empty non-terminals, dotted cluster ids, NXDOMAIN, NODATA,
   ANY, class CH, outside the zone, AXFR) and compares rcode + answer set
   (TTLs dropped, SOA serial normalised);
4. asks a second pair of servers that can never sync (a token without RBAC
   rights) what they answer before the first sync;
5. runs the dig-based conformance suite (``--objects api -m "not own_server"``)
   against both servers;
6. writes a Markdown report (``docs/coredns-comparison.md``) and prints it.

The known differences and their one-line reasons are :data:`KNOWN_DIFFERENCES`
(conformance suite: :data:`KNOWN_SUITE_DIFFERENCES`); ``tests/coredns/test_compare.py``
runs the same comparison and fails on any difference not listed there.

Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SUPPORT = REPO / "tests" / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

from dnsserver import ServerProcess  # noqa: E402
from peers import CoreDNS, KubeAPI, PeerError, kubernetes_corefile  # noqa: E402

ZONE = "clusterset.local"
HOST = "127.0.0.1"
OBJECTS = REPO / "tests" / "conformance" / "objects"
API_OBJECT_PATHS = (OBJECTS / "00-namespaces.yaml", OBJECTS / "core", OBJECTS / "extended")
REPORT = REPO / "docs" / "coredns-comparison.md"
MCS_CRDS = "mcs-api-v0.5.0"
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
EDNS_PAYLOAD = 1232

JSONObj = dict[str, Any]


def log(msg: str) -> None:
    print(f"compare_coredns: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# the objects
# ----------------------------------------------------------------------------


def manifest_files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml", ".json"))
        else:
            out.append(p)
    return out


def load_objects(paths: Iterable[Path] = API_OBJECT_PATHS) -> list[JSONObj]:
    """Every object of the given files/directories (YAML or JSON, multi-document,
    ``kind: List`` expanded), namespaces first."""
    objs: list[JSONObj] = []
    for f in manifest_files(paths):
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc:
                continue
            objs += doc.get("items") or [] if doc.get("kind") == "List" else [doc]
    return sorted(objs, key=lambda o: o.get("kind") != "Namespace")


@dataclass
class Loaded:
    applied: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (object, reason)


def describe(obj: JSONObj) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{obj.get('apiVersion')} {obj.get('kind')} {where}{meta.get('name')}"


def apply_objects(api: KubeAPI, objs: Iterable[JSONObj]) -> Loaded:
    """Apply what the API server accepts; an object whose apiVersion it does not
    serve (the v1alpha2 layouts under the v0.5.0 CRD) is skipped with the reason."""
    loaded = Loaded()
    for obj in objs:
        try:
            api.resource_for(obj["apiVersion"], obj["kind"])
        except PeerError:
            loaded.skipped.append((describe(obj), f"{obj['apiVersion']} is not served "
                                   f"by the {MCS_CRDS} CRD"))
            continue
        api.apply(obj)
        loaded.applied.append(describe(obj))
    return loaded


def _served(api: KubeAPI, obj: JSONObj) -> bool:
    try:
        api.resource_for(obj["apiVersion"], obj["kind"])
    except PeerError:
        return False
    return True


# ----------------------------------------------------------------------------
# the questions
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One question. ``id`` is what the report and the allow-list use."""

    qname: str
    rdtype: str = "A"
    rdclass: str = "IN"
    tcp: bool = False
    group: str = "objects"

    @property
    def id(self) -> str:
        cls = "" if self.rdclass == "IN" else f" {self.rdclass}"
        return f"{self.qname} {self.rdtype}{cls}"


def fqdn(*labels: str) -> str:
    return ".".join([*labels, ZONE]) + "."


def endpoint_hostname(ep: JSONObj, address: str) -> str:
    """docs/dns-behaviour.md §2.4: ``hostname``, else the address with ``.``/``:`` as ``-`` (``0``
    appended when that ends in ``-``)."""
    if ep.get("hostname"):
        return str(ep["hostname"])
    host = address.replace(".", "-").replace(":", "-")
    return host + "0" if host.endswith("-") else host


def object_cases(objs: Sequence[JSONObj]) -> list[Case]:
    """Every name/type the objects define, written from docs/dns-behaviour.md (not from the
    server's code): per import A/AAAA/SRV and ``_<port>._<proto>`` SRV of named
    ports; per MCS slice with a cluster id every endpoint name (ready or not) and
    its ``<clusterid>.<svc>`` level; per namespace ``<ns>.svc``."""
    cases: list[Case] = []
    namespaces = [o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace"]
    for imp in objs:
        if imp.get("kind") != "ServiceImport":
            continue
        meta = imp["metadata"]
        name, ns = meta["name"], meta["namespace"]
        if ns not in namespaces:
            namespaces.append(ns)
        svc = fqdn(name, ns, "svc")
        cases += [Case(svc, t) for t in ("A", "AAAA", "SRV")]
        spec = imp.get("spec") or {}
        for port in spec.get("ports") or []:
            if port.get("name"):
                proto = (port.get("protocol") or "TCP").lower()
                cases.append(Case(f"_{port['name']}._{proto}.{svc}", "SRV"))
    for sl in objs:
        if sl.get("kind") != "EndpointSlice":
            continue
        labels = sl["metadata"].get("labels") or {}
        service, cluster = labels.get(SERVICE_NAME_LABEL), labels.get(SOURCE_CLUSTER_LABEL)
        if not service or not cluster or sl.get("addressType") not in ("IPv4", "IPv6"):
            continue
        ns = sl["metadata"]["namespace"]
        rdtype = "A" if sl["addressType"] == "IPv4" else "AAAA"
        cases.append(Case(fqdn(cluster, service, ns, "svc"), rdtype))
        for ep in sl.get("endpoints") or []:
            for address in ep.get("addresses") or []:
                host = endpoint_hostname(ep, address)
                cases.append(Case(fqdn(host, cluster, service, ns, "svc"), rdtype))
    cases += [Case(fqdn(ns, "svc"), "A") for ns in namespaces]
    return sorted(cases, key=dns_order)


def dns_order(case: Case) -> tuple[list[str], str]:
    """Zone order: parents before children, siblings by name (groups per service)."""
    return list(reversed(case.qname.lower().rstrip(".").split("."))), case.rdtype


APEX = f"{ZONE}."


def special_cases() -> list[Case]:
    hello, named, db = fqdn("hello", "conf", "svc"), fqdn("named", "conf", "svc"), fqdn(
        "db", "conf", "svc")
    dotted = fqdn("dotted", "ext", "svc")
    s = "special"
    return [
        Case(APEX, "SOA", group=s), Case(APEX, "NS", group=s), Case(APEX, "A", group=s),
        Case(APEX, "TXT", group=s),
        Case(fqdn("dns-version"), "TXT", group=s), Case(fqdn("dns-version"), "A", group=s),
        Case(fqdn("ns", "dns"), "A", group=s),
        Case(fqdn("svc"), "A", group=s),
        Case(fqdn("nosuchns", "svc"), "A", group=s),
        Case(f"east.{db}", "SRV", group=s),
        Case(f"nosuch.{db}", "A", group=s),
        Case(f"x.db-0.east.{db}", "A", group=s),
        Case(f"db-2.east.{db}", "A", group=s),  # not ready
        Case(f"east.example.com.{dotted}", "A", group=s),
        Case(f"example.com.{dotted}", "A", group=s),
        Case(f"com.{dotted}", "A", group=s),
        Case(f"WEB-0.East.Example.COM.{dotted}", "A", group=s),
        Case(fqdn("nosuch", "conf", "svc"), "A", group=s),
        Case(fqdn("nosuch", "conf", "svc"), "TXT", group=s),
        Case(fqdn("foo"), "A", group=s),
        Case(fqdn("hello", "conf"), "A", group=s),
        Case(fqdn("db", "orphan", "svc"), "A", group=s),
        Case(hello, "MX", group=s), Case(hello, "TXT", group=s), Case(hello, "PTR", group=s),
        Case(f"_http._udp.{named}", "SRV", group=s),
        Case(f"_8443._tcp.{named}", "SRV", group=s),
        Case(f"_pg._udp.{db}", "SRV", group=s),
        Case("HeLLo.CoNf.SvC.ClusterSet.LOCAL.", "A", group=s),
        Case(hello, "ANY", group=s), Case(db, "ANY", group=s),
        Case(fqdn("nosuch", "conf", "svc"), "ANY", group=s),
        Case(hello, "A", "CH", group=s), Case(APEX, "SOA", "CH", group=s),
        Case("version.bind.", "TXT", "CH", group=s),
        Case("example.com.", "A", group=s), Case(".", "NS", group=s),
        Case(APEX, "AXFR", tcp=True, group=s),
    ]


def all_cases(objs: Sequence[JSONObj]) -> list[Case]:
    seen: set[str] = set()
    out = []
    for c in [*object_cases(objs), *special_cases()]:
        if c.id.lower() not in seen:
            seen.add(c.id.lower())
            out.append(c)
    return out


# the pair of servers that never sync: a few questions
UNSYNCED_CASES = [
    Case(fqdn("hello", "conf", "svc"), "A", group="unsynced"),
    Case(fqdn("nosuch", "conf", "svc"), "A", group="unsynced"),
    Case(APEX, "SOA", group="unsynced"),
    Case(fqdn("dns-version"), "TXT", group="unsynced"),
]


# ----------------------------------------------------------------------------
# asking
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    rcode: str
    records: tuple[str, ...]  # "owner TYPE rdata", sorted; TTL dropped, SOA serial normalised
    qname: str = ""

    def brief(self, limit: int = 6) -> str:
        """The rcode and records, owners shown only where they differ from the question."""
        recs = [r[len(self.qname) + 1:] if r.startswith(self.qname + " ") else r
                for r in self.records]
        if not recs:
            return self.rcode
        if len(recs) > limit:
            recs = [*recs[:3], f"... ({len(self.records)} records)"]
        return self.rcode + ": " + "; ".join(recs)


def normalise_rrset(rrset: Any) -> list[str]:
    out = []
    rdtype = dns.rdatatype.to_text(rrset.rdtype)
    for rd in rrset:
        text = rd.to_text()
        if rdtype == "SOA":
            f = text.split()
            f[2] = "SERIAL"
            text = " ".join(f)
        out.append(f"{rrset.name.to_text()} {rdtype} {text}")
    return out


def ask(port: int, case: Case, timeout: float = 2.0) -> Answer:
    """One question, without RD, with EDNS (1232); a TC answer is asked again over TCP."""
    q = dns.message.make_query(case.qname, case.rdtype, case.rdclass, use_edns=0,
                               payload=EDNS_PAYLOAD)
    q.flags &= ~dns.flags.RD
    try:
        if case.tcp:
            r = dns.query.tcp(q, HOST, port=port, timeout=timeout)
        else:
            r, _ = dns.query.udp_with_fallback(q, HOST, port=port, timeout=timeout)
    except dns.exception.Timeout:
        return Answer("TIMEOUT", (), case.qname)
    except (OSError, EOFError, dns.exception.DNSException) as exc:
        return Answer(f"ERROR {type(exc).__name__}", (), case.qname)
    records = sorted(line for rrset in r.answer for line in normalise_rrset(rrset))
    return Answer(dns.rcode.to_text(r.rcode()), tuple(records), case.qname)


@dataclass
class Row:
    case: Case
    ours: Answer
    coredns: Answer

    @property
    def same(self) -> bool:
        return self.ours.rcode == self.coredns.rcode and self.ours.records == self.coredns.records


def compare_cases(cases: Sequence[Case], ours_port: int, coredns_port: int) -> list[Row]:
    return [Row(c, ask(ours_port, c), ask(coredns_port, c)) for c in cases]


# ----------------------------------------------------------------------------
# the conformance suite as a subprocess
# ----------------------------------------------------------------------------


@dataclass
class SuiteRun:
    """Outcome per test id (``tests/conformance/test_x.py::test_y[param]``)."""

    outcomes: dict[str, str]  # passed | failed | error | skipped
    messages: dict[str, str]  # failure/error text
    returncode: int
    output: str
    seconds: float

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def summary(self) -> str:
        parts = [f"{self.count(o)} {o}" for o in ("passed", "failed", "error", "skipped")
                 if self.count(o) or o in ("passed", "failed")]
        return ", ".join(parts)


def suite_command(dns_server: str, objects: str, junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "tests/conformance", "-q", "-p", "no:cacheprovider",
            "--dns-server", dns_server, "--objects", objects, "-m", "not own_server", "-rA",
            f"--junitxml={junit}"]


def parse_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        module = tc.get("classname", "").split(".")[-1]
        test_id = f"tests/conformance/{module}.py::{tc.get('name')}"
        outcome = "passed"
        for child, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(child)
            if el is not None:
                outcome = name
                messages[test_id] = (el.get("message") or "") + "\n" + (el.text or "")
                break
        if outcomes.get(test_id) in ("failed", "error"):  # a teardown error after a failure
            continue
        outcomes[test_id] = outcome
    return outcomes, messages


def start_suite(dns_server: str, objects: str, workdir: Path) -> tuple[subprocess.Popen[bytes],
                                                                      Path, Path, float]:
    tag = dns_server.replace(":", "_").replace(".", "_")
    junit, out = workdir / f"suite-{tag}.xml", workdir / f"suite-{tag}.txt"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(suite_command(dns_server, objects, junit), cwd=REPO,
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, junit, out, time.monotonic()


def finish_suite(proc: subprocess.Popen[bytes], junit: Path, out: Path, started: float,
                 timeout: float = 240.0) -> SuiteRun:
    try:
        proc.wait(timeout=max(1.0, started + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"conformance suite did not finish in {timeout:.0f}s; output "
                           f"{out}") from None
    text = out.read_text(errors="replace")
    if not junit.exists():
        raise RuntimeError(f"conformance suite wrote no junit XML (rc {proc.returncode}):\n"
                           f"{text[-4000:]}")
    outcomes, messages = parse_junit(junit)
    return SuiteRun(outcomes, messages, int(proc.returncode or 0), text,
                    time.monotonic() - started)


def run_suites(servers: dict[str, str], objects: str, workdir: Path,
               timeout: float = 240.0) -> dict[str, SuiteRun]:
    """The conformance suite against each ``{label: "127.0.0.1:PORT"}``, in parallel."""
    started = {label: start_suite(addr, objects, workdir) for label, addr in servers.items()}
    return {label: finish_suite(*s, timeout=timeout) for label, s in started.items()}


# ----------------------------------------------------------------------------
# the peers
# ----------------------------------------------------------------------------


def wait_answering(port: int, timeout: float, what: str) -> None:
    """Poll until every sentinel is answered; fail with what is still missing."""
    deadline = time.monotonic() + timeout
    while True:
        missing = missing_sentinels(port)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}; still "
                               "missing:\n  " + "\n  ".join(missing))
        time.sleep(0.2)


#: questions both servers must answer before the comparison starts (the last objects
#: of each kind in apply order, and the big answers)
SENTINELS = [
    (Case(fqdn("hello", "conf", "svc"), "A"), 1),
    (Case(fqdn("db", "conf", "svc"), "A"), 5),
    (Case(fqdn("big", "bulk", "svc"), "AAAA"), 60),
    (Case(fqdn("v6only", "conf", "svc"), "AAAA"), 3),
    (Case(fqdn("dotted", "ext", "svc"), "A"), 3),
    (Case(fqdn("beta-hl", "ext", "svc"), "A"), 1),
]


def missing_sentinels(port: int) -> list[str]:
    """The sentinel questions not (yet) answered with the expected record count."""
    out = []
    for case, n in SENTINELS:
        a = ask(port, case, timeout=1.0)
        if a.rcode != "NOERROR" or len(a.records) < n:
            out.append(f"{case.id} -> {a.brief()} (want {n} records)")
    return out


class Peers(contextlib.ExitStack):
    """kube-apiserver (given, or started here) with the objects, CoreDNS and our
    server on it, both answering; plus an unsynced pair (reader token, no rights)."""

    def __init__(self, api: KubeAPI | None = None, unsynced: bool = True) -> None:
        super().__init__()
        self._given_api = api
        self.want_unsynced = unsynced
        self.api: KubeAPI
        self.ours: ServerProcess
        self.coredns: CoreDNS
        self.ours_unsynced: ServerProcess | None = None
        self.coredns_unsynced: CoreDNS | None = None
        self.loaded = Loaded()
        self.objects: list[JSONObj] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="clusterset-dns-compare-"))
        if os.environ.get("CLUSTERSET_DNS_KEEP_TMP", "") in ("", "0"):
            self.callback(shutil.rmtree, self.workdir, True)
        else:
            self.callback(log, f"kept {self.workdir}")

    def __enter__(self) -> Peers:
        super().__enter__()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        t0 = time.monotonic()
        if self._given_api is None:
            self.api = self.enter_context(KubeAPI())
            log(f"kube-apiserver ready in {time.monotonic() - t0:.1f}s")
        else:
            self.api = self._given_api
        self.api.install_crds([MCS_CRDS])
        all_objects = load_objects()
        self.loaded = apply_objects(self.api, all_objects)
        self.objects = [o for o in all_objects if _served(self.api, o)]
        log(f"applied {len(self.loaded.applied)} objects, skipped {len(self.loaded.skipped)}")
        self.ours = ServerProcess("--kubeconfig", str(self.api.kubeconfig))
        self.callback(self.ours.stop)
        self.ours.start()
        if self.want_unsynced:
            self.ours_unsynced = ServerProcess(
                "--kubeconfig", str(self.api.reader_kubeconfig), "--startup-timeout", "1")
            self.callback(self.ours_unsynced.stop)
            self.ours_unsynced.start()
        self.coredns = self.enter_context(CoreDNS(kubernetes_corefile(self.api.kubeconfig)))
        if self.want_unsynced:
            self.coredns_unsynced = self.enter_context(
                CoreDNS(kubernetes_corefile(self.api.reader_kubeconfig)))
            assert self.ours_unsynced is not None
            self.ours_unsynced.wait_listening(30)
        self.ours.wait_ready(30)
        for label, port in (("clusterset-dns", self.ours.port), ("CoreDNS", self.coredns.port)):
            wait_answering(port, 60, f"{label} to answer for every object")
        log(f"both servers answer ({time.monotonic() - t0:.1f}s since start)")


# ----------------------------------------------------------------------------
# known differences
# ----------------------------------------------------------------------------


def glob_match(key: str, pattern: str) -> bool:
    """``*`` matches anything (brackets and ``?`` are literal); case-sensitive."""
    rx = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(rx, key, re.S) is not None


def _drop_cname(a: Answer) -> Answer:
    return Answer(a.rcode, tuple(r for r in a.records if " CNAME " not in r), a.qname)


def _zero_srv_weight(a: Answer) -> Answer:
    def fix(r: str) -> str:
        owner, rdtype, *rdata = r.split()
        if rdtype == "SRV":
            rdata[1] = "W"
        return " ".join([owner, rdtype, *rdata])
    return Answer(a.rcode, tuple(sorted(fix(r) for r in a.records)), a.qname)


@dataclass(frozen=True)
class Known:
    """A documented difference: the case ids it covers (``*`` patterns, case
    sensitive), the rcodes each server gives, and optionally a normalisation after
    which both answers must be equal (so that nothing else differs)."""

    reason: str
    patterns: tuple[str, ...]
    ours: str | None = None  # our rcode
    coredns: str | None = None  # CoreDNS's rcode
    ours_empty: bool | None = None  # our answer section is empty
    coredns_empty: bool | None = None
    equal_after: Any = None  # Callable[[Answer], Answer]

    def matches(self, row: Row) -> bool:
        if not any(glob_match(row.case.id, p) for p in self.patterns):
            return False
        checks = [
            self.ours is None or row.ours.rcode == self.ours,
            self.coredns is None or row.coredns.rcode == self.coredns,
            self.ours_empty is None or (not row.ours.records) == self.ours_empty,
            self.coredns_empty is None or (not row.coredns.records) == self.coredns_empty,
            self.equal_after is None
            or self.equal_after(row.ours) == self.equal_after(row.coredns),
        ]
        return all(checks)


Z = ZONE
#: every row where the two servers differ must match one of these (one-line reason
#: each); every entry must match at least one row
KNOWN_DIFFERENCES: list[Known] = [
    # -- deliberate deviations (README "Where it differs from CoreDNS")
    Known('deviation: MCS DNS schema "1.0.0" (§3.3); CoreDNS answers the cluster '
          'DNS schema "1.1.0"', (f"dns-version.{Z}. TXT",), "NOERROR", "NOERROR"),
    Known("deviation: `<clusterid>.<svc>` is an empty non-terminal, NODATA (§2.5, "
          "RFC 8020); CoreDNS answers NXDOMAIN, hiding the endpoint names below",
          tuple(f"{c}.{s}.svc.{Z}. *" for c, s in (
              ("east", "db.conf"), ("west", "db.conf"), ("east", "twohost.conf"),
              ("east", "v6only.conf"), ("east", "nolabel.conf"), ("east", "ignored.conf"),
              ("east", "big.bulk"), ("east", "dotted.ext"), ("east", "beta-hl.ext"))),
          "NOERROR", "NXDOMAIN", ours_empty=True),
    Known("deviation: dotted cluster ids (KEP-2149) resolve, and each of their levels is "
          "an empty non-terminal; CoreDNS cannot parse them (NXDOMAIN)",
          (f"*east.example.com.dotted.ext.svc.{Z}. A", f"example.com.dotted.ext.svc.{Z}. A",
           f"com.dotted.ext.svc.{Z}. A", f"*.East.Example.COM.dotted.ext.svc.{Z}. A"),
          "NOERROR", "NXDOMAIN"),
    Known("deviation: ANY gets one RFC 8482 `HINFO \"RFC8482\" \"\"`; CoreDNS answers "
          "NOERROR with an empty answer", (f"*.svc.{Z}. ANY",), "NOERROR", "NOERROR",
          ours_empty=False, coredns_empty=True),
    Known("deviation: SRV weight is `max(1, 100 // n)` over the n records returned; CoreDNS "
          "divides 100 by its (address, port) entries before de-duplication (e.g. 25 on "
          "hello's single record)", ("* SRV",), "NOERROR", "NOERROR",
          equal_after=_zero_srv_weight),
    # -- CoreDNS reads fields differently from docs/dns-behaviour.md
    Known("§1.1: an empty port protocol means TCP; CoreDNS finds no `_http._tcp` for a "
          "port without `protocol` (NXDOMAIN)", (f"_http._tcp.named.conf.svc.{Z}. SRV",),
          "NOERROR", "NXDOMAIN"),
    Known("§1.2: FQDN EndpointSlices are ignored; CoreDNS adds a CNAME to the FQDN "
          "endpoint (beside the A records: CNAME and other data)",
          (f"ignored.conf.svc.{Z}. A", f"ignored.conf.svc.{Z}. AAAA"), "NOERROR", "NOERROR",
          equal_after=_drop_cname),
    Known("§1.3: an IP entry that does not parse is dropped; CoreDNS answers a CNAME "
          "to the invalid string", (f"badip.ext.svc.{Z}. A*", f"allbad.ext.svc.{Z}. A*"),
          "NOERROR", "NOERROR", equal_after=_drop_cname),
    Known("§1.2, §5.4: a slice without source-cluster counts for the service only; CoreDNS "
          "sends no answer at all to the SRV query of such a service (timeout)",
          (f"nolabel.conf.svc.{Z}. SRV", f"_http._tcp.nolabel.conf.svc.{Z}. SRV"),
          "NOERROR", "TIMEOUT"),
    Known("§3.2, §5.6: endpoint names exist for Headless imports only; CoreDNS also answers "
          "them for ClusterSetIP imports from their slices",
          (f"*.east.hello.conf.svc.{Z}. A", f"*.west.hello.conf.svc.{Z}. A"),
          "NXDOMAIN", "NOERROR"),
    Known("§3.4: an existing name asked for another type is NODATA; CoreDNS answers "
          "NXDOMAIN for non-TXT types at dns-version and for TXT at the apex",
          (f"dns-version.{Z}. A", f"{Z}. TXT"), "NOERROR", "NXDOMAIN", ours_empty=True),
    Known("§3.4: `<ns>.svc` exists only while an import exists in the namespace; "
          "CoreDNS answers NODATA for any namespace object", (f"orphan.svc.{Z}. A",),
          "NXDOMAIN", "NOERROR", coredns_empty=True),
    # -- environment
    Known("apex NS: ours is always `ns.dns.<zone>`; CoreDNS builds NS from its own "
          "kube-dns Service, which this test API server does not have (NODATA)",
          (f"{Z}. NS",), "NOERROR", "NOERROR", ours_empty=False, coredns_empty=True),
    Known("`ns.dns.<zone>` has addresses only with --ns-address (NXDOMAIN without); "
          "CoreDNS answers NODATA (no kube-dns Service here)", (f"ns.dns.{Z}. A",),
          "NXDOMAIN", "NOERROR", coredns_empty=True),
]


def known_for(row: Row) -> Known | None:
    return next((k for k in KNOWN_DIFFERENCES if k.matches(row)), None)


_EDNS = ("deviation: our UDP answers are capped at --edns-udp-size 1232; CoreDNS (no "
         "`bufsize` plugin) advertises and fills the client's 4096")
_MALFORMED = ("CoreDNS answers SERVFAIL (not FORMERR) to a header announcing a question "
              "it does not carry, and NOERROR (not NOTIMP) to NOTIFY")

#: conformance test-id pattern -> reason, for tests whose outcome differs between
#: the two servers (``--objects api``)
KNOWN_SUITE_DIFFERENCES: dict[str, str] = {
    "*::test_dns_version_txt_is_mcs_schema_1_0_0": "dns-version 1.0.0 vs 1.1.0 (deviation)",
    "*::test_cluster_level_name_is_empty_non_terminal_nodata[*]":
        "`<clusterid>.<svc>` NODATA vs NXDOMAIN (deviation)",
    "*::test_dotted_cluster_id_*": "dotted cluster ids (deviation)",
    "*::test_any_on_existing_name_is_minimal_hinfo[*]": "ANY: RFC 8482 HINFO vs empty "
                                                        "NOERROR (deviation)",
    "*::test_clusterset_ip_bare_name_srv_one_record_per_distinct_port[*]": "SRV weights",
    "*::test_clusterset_ip_named_port_srv[*]": "SRV weights; `_http._tcp.named` also: "
                                               "empty protocol = TCP",
    "*::test_headless_srv_targets_and_additional[*]": "SRV weights",
    "*::test_two_endpoints_sharing_hostname_srv_dedup": "SRV weights",
    "*::test_case_insensitive_srv_owner_keeps_question_case": "SRV weights",
    "*::test_layout_clusterset_ip_named_port_srv[v1beta1-spec]": "SRV weights",
    "*::test_clusterset_ip_srv_additional_carries_target_addresses[_http._tcp.named.conf]":
        "empty protocol = TCP: CoreDNS has no `_http._tcp.named`",
    "*::test_existing_name_other_type_is_nodata[srvname-A]":
        "empty protocol = TCP: CoreDNS has no `_http._tcp.named` (NXDOMAIN)",
    "*::test_non_mcs_and_fqdn_slices_ignored": "CoreDNS answers a CNAME for an FQDN slice",
    "*::test_nonexistent_endpoint_name_nxdomain[i-2.east.ignored.conf]":
        "CoreDNS answers a name for the FQDN slice's endpoint",
    "*::test_import_with_only_invalid_ips_exists_without_addresses[*]":
        "CoreDNS answers a CNAME to the invalid IP string",
    "*::test_invalid_import_ip_dropped_valid_one_served": "CoreDNS answers a CNAME to the "
                                                          "invalid IP string",
    "*::test_apex_soa": "CoreDNS's clusterset.local SOA serial is 0: only updates of imports "
                        "and slices bump it (adds and deletes bump the cluster.local one)",
    "*::test_apex_ns": "CoreDNS has no NS without its own kube-dns Service",
    "*::test_nonexistent_name_nxdomain[ns.dns]": "CoreDNS: NODATA for ns.dns.<zone>",
    "*::test_apex_other_types_nodata[TXT]": "CoreDNS: NXDOMAIN for TXT at the apex",
    "*::test_dns_version_other_type_nodata": "CoreDNS: NXDOMAIN for dns-version A",
    "*::test_slices_without_import_create_no_names[orphan-ns]":
        "CoreDNS: NODATA for a namespace without imports",
    "*::test_nonexistent_name_nxdomain[orphan.svc]": "CoreDNS: NODATA for a namespace "
                                                     "without imports",
    "*::test_outside_zone_refused[*-cluster.local.-SOA]":
        "the CoreDNS server block also serves cluster.local (configuration)",
    "*::test_outside_zone_refused[*-hello.conf.svc.cluster.local.-A]":
        "the CoreDNS server block also serves cluster.local (configuration)",
    "*::test_edns_opt_echoed_with_capped_udp_size": _EDNS,
    "*::test_udp_edns_4096_a_fits_under_1232_cap": _EDNS,
    "*::test_udp_edns_4096_capped_at_1232": _EDNS,
    "*::test_size_limits_do_not_leak_between_queries": _EDNS,
    "*::test_large_aaaa_full_over_tcp[udp-then-tcp-retry]": _EDNS + " (no TC, no TCP retry)",
    "*::test_malformed_query_formerr_over_tcp": _MALFORMED,
    "*::test_malformed_query_formerr_over_udp[header-only-qdcount-1]": _MALFORMED,
    "*::test_random_queries_always_get_a_reply": _MALFORMED,
    "*::test_opcode_other_than_query_notimp[NOTIFY]": _MALFORMED,
}

#: conformance tests that fail on BOTH servers with ``--objects api``, and why
KNOWN_SUITE_FAILURES_BOTH: dict[str, str] = {
    "*::test_layout_*[v1alpha2-*]": "the v1alpha2 ServiceImports cannot be stored by the "
                                    "v0.5.0 CRD (only our file source reads them)",
}


def reason_for(key: str, known: dict[str, str]) -> str | None:
    for pattern, reason in known.items():
        if glob_match(key, pattern):
            return reason
    return None


def unexplained_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if not r.same and known_for(r) is None]


def unused_known(rows: Sequence[Row]) -> list[Known]:
    """Entries of :data:`KNOWN_DIFFERENCES` no differing row matches (stale)."""
    diff = [r for r in rows if not r.same]
    return [k for k in KNOWN_DIFFERENCES if not any(k.matches(r) for r in diff)]


def stale_patterns(keys: Iterable[str], known: dict[str, str]) -> list[str]:
    keys = list(keys)
    return [p for p in known if not any(glob_match(k, p) for k in keys)]


def unexplained_suite_differences(ours: SuiteRun, coredns: SuiteRun) -> dict[str, str]:
    """Test id -> what is wrong: tests whose outcomes differ without a known reason
    (or where ours fails and CoreDNS passes), and tests failing on both servers
    without a known reason."""
    out = {}
    for t, (o, c) in suite_differences(ours, coredns).items():
        if o != "passed" or c not in ("failed", "error"):
            out[t] = f"clusterset-dns {o}, CoreDNS {c}"
        elif reason_for(t, KNOWN_SUITE_DIFFERENCES) is None:
            out[t] = f"clusterset-dns {o}, CoreDNS {c}: not in KNOWN_SUITE_DIFFERENCES"
    for t in failing_on_both(ours, coredns):
        if reason_for(t, KNOWN_SUITE_FAILURES_BOTH) is None:
            out[t] = "fails on both servers: not in KNOWN_SUITE_FAILURES_BOTH"
    return out


def failing_on_both(ours: SuiteRun, coredns: SuiteRun) -> list[str]:
    bad = ("failed", "error")
    return sorted(t for t, o in ours.outcomes.items()
                  if o in bad and coredns.outcomes.get(t) in bad)


def suite_differences(ours: SuiteRun, coredns: SuiteRun) -> dict[str, tuple[str, str]]:
    """Test id -> (our outcome, CoreDNS's) where they differ."""
    ids = sorted(set(ours.outcomes) | set(coredns.outcomes))
    return {t: (ours.outcomes.get(t, "missing"), coredns.outcomes.get(t, "missing"))
            for t in ids if ours.outcomes.get(t) != coredns.outcomes.get(t)}


# ----------------------------------------------------------------------------
# the whole comparison and the report
# ----------------------------------------------------------------------------


@dataclass
class Comparison:
    rows: list[Row]
    unsynced_rows: list[Row]
    suites: dict[str, SuiteRun]
    loaded: Loaded
    seconds: float

    @property
    def all_rows(self) -> list[Row]:
        return [*self.rows, *self.unsynced_rows]


def run_comparison(api: KubeAPI | None = None, suites: bool = True,
                   unsynced: bool = True) -> Comparison:
    t0 = time.monotonic()
    with Peers(api, unsynced=unsynced) as peers:
        runs: dict[str, SuiteRun] = {}
        started = {}
        if suites:
            started = {label: start_suite(f"{HOST}:{port}", "api", peers.workdir)
                       for label, port in (("ours", peers.ours.port),
                                           ("coredns", peers.coredns.port))}
        cases = all_cases(peers.objects)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            rows_f = pool.submit(compare_cases, cases, peers.ours.port, peers.coredns.port)
            unsynced_rows: list[Row] = []
            if peers.ours_unsynced is not None and peers.coredns_unsynced is not None:
                unsynced_rows = compare_cases(UNSYNCED_CASES, peers.ours_unsynced.port,
                                              peers.coredns_unsynced.port)
            rows = rows_f.result()
        log(f"{len(rows) + len(unsynced_rows)} questions asked")
        for label, s in started.items():
            runs[label] = finish_suite(*s)
            log(f"conformance suite against {label}: {runs[label].summary()} "
                f"in {runs[label].seconds:.0f}s")
        return Comparison(rows, unsynced_rows, runs, peers.loaded, time.monotonic() - t0)


def md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(cmp: Comparison) -> str:
    rows = cmp.all_rows
    same = sum(r.same for r in rows)
    lines = [
        "# clusterset-dns and CoreDNS's `multicluster` answers, side by side",
        "",
        "Generated by `python bench/compare_coredns.py` (do not edit by hand): one",
        "kube-apiserver v1.33 with the mcs-api v0.5.0 CRDs and the conformance objects",
        "(`tests/conformance/objects`), served at once by clusterset-dns (`--kubeconfig`)",
        "and by CoreDNS v1.14.7 (`kubernetes cluster.local clusterset.local { multicluster",
        "clusterset.local }`). Each question is asked without RD, with EDNS (1232), TCP",
        "after a TC answer; compared: rcode and the answer section (TTLs dropped, SOA",
        "serial normalised). Owners equal to the question are left out of the cells.",
        "",
    ]
    summary = f"**Summary: {same} same, {len(rows) - same} different**"
    if cmp.suites:
        ours, core = cmp.suites.get("ours"), cmp.suites.get("coredns")
        if ours and core:
            summary += (f"; conformance suite (`--objects api -m \"not own_server\"`): "
                        f"clusterset-dns {ours.summary()}; CoreDNS {core.summary()}")
    lines += [summary + ".", ""]
    if cmp.loaded.skipped:
        lines += ["Objects not loaded (only clusterset-dns's file source reads them):", ""]
        lines += [f"- `{o}`: {why}" for o, why in cmp.loaded.skipped]
        lines.append("")
    for title, group_rows in (
            ("Names and types the objects define", [r for r in cmp.rows
                                                    if r.case.group == "objects"]),
            ("Special names", [r for r in cmp.rows if r.case.group == "special"]),
            ("Before the first sync (a token without RBAC rights: neither server can list)",
             cmp.unsynced_rows)):
        if not group_rows:
            continue
        lines += [f"## {title}", "", "| case | clusterset-dns | CoreDNS | same? |",
                  "| --- | --- | --- | --- |"]
        for r in group_rows:
            if r.same:
                verdict = "same"
            else:
                known = known_for(r)
                verdict = (f"different: {known.reason}" if known
                           else "**different (unexplained)**")
            lines.append(f"| `{md(r.case.id)}` | {md(r.ours.brief())} | {md(r.coredns.brief())} "
                         f"| {md(verdict)} |")
        lines.append("")
    if "ours" in cmp.suites and "coredns" in cmp.suites:
        ours, core = cmp.suites["ours"], cmp.suites["coredns"]
        diffs = suite_differences(ours, core)
        both = failing_on_both(ours, core)
        lines += ["## Conformance suite", "",
                  f"`python -m pytest tests/conformance --dns-server ... --objects api "
                  f"-m \"not own_server\"`: clusterset-dns {ours.summary()}; CoreDNS "
                  f"{core.summary()}.", ""]
        if diffs:
            lines += ["Tests with different outcomes:", "",
                      "| test | clusterset-dns | CoreDNS | why |", "| --- | --- | --- | --- |"]
            for t, (o, c) in diffs.items():
                why = reason_for(t, KNOWN_SUITE_DIFFERENCES) or "**unexplained**"
                lines.append(f"| `{md(t.removeprefix('tests/conformance/'))}` | {o} | {c} "
                             f"| {md(why)} |")
            lines.append("")
        if both:
            lines += ["Tests failing on both servers:", ""]
            for t in both:
                why = reason_for(t, KNOWN_SUITE_FAILURES_BOTH) or "**unexplained**"
                lines.append(f"- `{t.removeprefix('tests/conformance/')}`: {why}")
            lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-write", action="store_true", help=f"do not write {REPORT}")
    ap.add_argument("--no-suite", action="store_true", help="skip the conformance suite runs")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = ap.parse_args(argv)
    cmp = run_comparison(suites=not args.no_suite)
    text = render(cmp)
    print(text)
    if not args.no_write:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text + "\n")
        log(f"wrote {REPORT.relative_to(REPO)} ({cmp.seconds:.0f}s)")
    if args.json:
        args.json.write_text(json.dumps(
            [{"case": r.case.id, "ours": [r.ours.rcode, *r.ours.records],
              "coredns": [r.coredns.rcode, *r.coredns.records], "same": r.same}
             for r in cmp.all_rows], indent=1))
    bad = unexplained_rows(cmp.all_rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
