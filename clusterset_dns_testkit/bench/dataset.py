"""The benchmark's data set and query files, generated deterministically.

Writes, into an output directory:

* ``objects.json``  - ONE ``kind: List`` JSON document holding every
  ServiceImport (``multicluster.x-k8s.io/v1beta1``) and EndpointSlice
  (``discovery.k8s.io/v1``) of the data set;
* ``queries.bin``   - the dnsperf query file in dnsperf's ``-B`` format
  (RFC 1035 4.2.2 TCP framing: 2-byte length + raw DNS message).  Exactly half
  of the messages carry an EDNS0 OPT record (UDP size 1232), chosen by a seeded
  shuffle, so ONE dnsperf process sends a 50/50 EDNS mix;
* ``queries.txt``   - the same questions as plain ``name TYPE`` lines (for
  reading, and for runs with dnsperf's ``-e`` on or off for every query);
* ``probes.json``   - a few questions with their expected answers, derived from
  the data set itself, used to check that a server answers correctly before it
  is measured.

Everything is deterministic for a given set of options and ``--seed``.

Query mix (of ``--queries`` questions, default 100,000):

=====  ==========================================================
 80%   A:    70% ClusterSetIP service, 5% headless service,
             5% one headless endpoint (<host>.<cluster>.<svc>...)
  5%   AAAA: ClusterSetIP service
 10%   SRV:  4% _http._tcp.<ClusterSetIP svc>, 2% bare ClusterSetIP svc,
             2% _http._tcp.<headless svc>, 2% bare headless svc
  5%   A for names that do not exist (NXDOMAIN): an unknown service in
             a namespace that exists, or a namespace that does not
=====  ==========================================================

The ``negative`` mix (``queries-negative.bin``/``.txt``) moves 5% of the
ClusterSetIP A questions to NODATA questions: AAAA for a headless service or
one of its endpoints (their endpoints are IPv4 only), so that with the 5%
NXDOMAIN about 10% of the answers are negative.

The ``0x20`` mix (``queries-0x20.bin``/``.txt``) asks the standard mix's questions,
in the same order, each name in a random case (as resolvers using DNS 0x20 send
them, Unbound among them): no question repeats within the file, so a server cannot
answer a repeat from a memory of whole responses.

``python bench/gen.py OUTDIR`` writes the files (see there for the options).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

QTYPES = {"A": 1, "AAAA": 28, "SRV": 33, "TXT": 16, "SOA": 6, "NS": 2}
EDNS_UDP_SIZE = 1232
MAX_ENDPOINTS_PER_SLICE = 100  # the EndpointSlice controller's default
NX_PREFIXES = ("missing-", "svc-00001.nons-")  # the names of the NXDOMAIN questions
MIXES = {  # name -> what the report says of it
    "standard": "80% A, 5% AAAA, 10% SRV, 5% NXDOMAIN",
    "negative": "75% A, 5% AAAA, 10% SRV, 5% NODATA (AAAA of IPv4-only names), 5% NXDOMAIN",
    "0x20": "the standard mix, every name in random case (DNS 0x20): no query repeats",
}
CASE_SEED = 0x20  # mixed into --seed for the 0x20 mix's letter cases
CASE_TRIES = 1000  # random cases tried for a question before giving up on a distinct one

SVC_PORTS = [
    {"name": "http", "protocol": "TCP", "port": 80},
    {"name": "metrics", "protocol": "TCP", "port": 9090},
]
HEADLESS_PORTS = [{"name": "http", "protocol": "TCP", "port": 8080}]

V4_SVC_BASE = int(ipaddress.IPv4Address("10.96.0.0"))
V6_SVC_BASE = int(ipaddress.IPv6Address("fd00:10:96::"))
V4_POD_BASE = int(ipaddress.IPv4Address("10.128.0.0"))


@dataclass
class Endpoint:
    hostname: str
    address: str


@dataclass
class Headless:
    name: str
    namespace: str
    # cluster id -> endpoints
    clusters: dict[str, list[Endpoint]] = field(default_factory=dict)


@dataclass
class ClusterSetIP:
    name: str
    namespace: str
    ipv4: str
    ipv6: str


@dataclass
class Dataset:
    zone: str = "clusterset.local"
    imports: int = 1000
    headless: int = 100
    endpoints: int = 10
    clusters: int = 2
    namespaces: int = 10
    services: list[ClusterSetIP] = field(default_factory=list)
    headless_services: list[Headless] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        imports: int = 1000,
        headless: int = 100,
        endpoints: int = 10,
        clusters: int = 2,
        namespaces: int = 10,
        zone: str = "clusterset.local",
    ) -> Dataset:
        if imports < 1 or namespaces < 1 or clusters < 1:
            raise ValueError("need at least one import, namespace and cluster")
        if headless and endpoints < 1:
            raise ValueError("headless imports need at least one endpoint")
        ds = cls(zone, imports, headless, endpoints, clusters, namespaces)
        for j in range(imports):
            ds.services.append(
                ClusterSetIP(
                    name=f"svc-{j:05d}",
                    namespace=ns_name(j % namespaces),
                    ipv4=str(ipaddress.IPv4Address(V4_SVC_BASE + j + 1)),
                    ipv6=str(ipaddress.IPv6Address(V6_SVC_BASE + j + 1)),
                )
            )
        pod = 0
        for k in range(headless):
            h = Headless(name=f"hl-{k:04d}", namespace=ns_name(k % namespaces))
            for e in range(endpoints):
                cluster = cluster_name(e % clusters)
                pod += 1
                h.clusters.setdefault(cluster, []).append(
                    Endpoint(f"pod-{e}", str(ipaddress.IPv4Address(V4_POD_BASE + pod)))
                )
            ds.headless_services.append(h)
        return ds

    # ---- names -----------------------------------------------------------
    def svc_fqdn(self, name: str, namespace: str) -> str:
        return f"{name}.{namespace}.svc.{self.zone}."

    # ---- Kubernetes objects ---------------------------------------------
    def objects(self) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for s in self.services:
            imp = service_import(s.name, s.namespace, ips=[s.ipv4, s.ipv6], ports=SVC_PORTS)
            imp["spec"]["ipFamilies"] = ["IPv4", "IPv6"]
            items.append(imp)
        for h in self.headless_services:
            items.append(service_import(h.name, h.namespace, "Headless", ports=HEADLESS_PORTS))
            for cluster, eps in h.clusters.items():
                for n in range(0, len(eps), MAX_ENDPOINTS_PER_SLICE):
                    chunk = eps[n : n + MAX_ENDPOINTS_PER_SLICE]
                    items.append(endpoint_slice(
                        f"{h.name}-{cluster}-{n // MAX_ENDPOINTS_PER_SLICE}", h.name,
                        h.namespace, cluster, ports=HEADLESS_PORTS,
                        endpoints=[endpoint(ep.address, hostname=ep.hostname, ready=True)
                                   for ep in chunk],
                        labels={"endpointslice.kubernetes.io/managed-by": "bench-gen"}))
        return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}

    # ---- queries ----------------------------------------------------------
    def queries(self, total: int, seed: int, mix_name: str = "standard"
                ) -> list[tuple[str, str]]:
        """The shuffled (qname, qtype) list with the documented mix (see MIXES)."""
        if mix_name not in MIXES:
            raise ValueError(f"unknown query mix {mix_name!r}; known: {', '.join(MIXES)}")
        if mix_name == "0x20":
            return mixed_case(self.queries(total, seed), seed)
        rng = random.Random(seed)
        have_hl = bool(self.headless_services)
        if mix_name == "negative" and not have_hl:
            raise ValueError("the negative mix needs headless imports (IPv4-only names)")
        nodata = 5.0 if mix_name == "negative" else 0.0
        # (weight, generator) - weights in percent of all queries
        mix: list[tuple[float, str]] = [
            (70.0 - nodata if have_hl else 80.0, "svc_a"),
            (5.0, "svc_aaaa"),
            (4.0 if have_hl else 6.0, "svc_srv_named"),
            (2.0 if have_hl else 4.0, "svc_srv_bare"),
            (5.0, "nx"),
        ]
        if have_hl:
            mix += [(5.0, "hl_a"), (5.0, "ep_a"), (2.0, "hl_srv_named"), (2.0, "hl_srv_bare")]
        if nodata:
            mix.append((nodata, "nodata"))
        counts = [int(total * w / 100.0) for w, _ in mix]
        counts[0] += total - sum(counts)
        out: list[tuple[str, str]] = []
        for (_, kind), n in zip(mix, counts, strict=True):
            for _ in range(n):
                out.append(self._one(kind, rng))
        rng.shuffle(out)
        return out

    def _one(self, kind: str, rng: random.Random) -> tuple[str, str]:
        if kind.startswith("svc"):
            s = rng.choice(self.services)
            fq = self.svc_fqdn(s.name, s.namespace)
            return {
                "svc_a": (fq, "A"),
                "svc_aaaa": (fq, "AAAA"),
                "svc_srv_named": ("_http._tcp." + fq, "SRV"),
                "svc_srv_bare": (fq, "SRV"),
            }[kind]
        if kind in ("hl_a", "hl_srv_named", "hl_srv_bare", "ep_a", "nodata"):
            h = rng.choice(self.headless_services)
            fq = self.svc_fqdn(h.name, h.namespace)
            if kind == "nodata":  # half the service, half an endpoint: IPv4 only
                if rng.randrange(2):
                    return (fq, "AAAA")
                kind = "ep_aaaa"
            if kind in ("ep_a", "ep_aaaa"):
                cluster = rng.choice(sorted(h.clusters))
                ep = rng.choice(h.clusters[cluster])
                return (f"{ep.hostname}.{cluster}.{fq}", "A" if kind == "ep_a" else "AAAA")
            return {
                "hl_a": (fq, "A"),
                "hl_srv_named": ("_http._tcp." + fq, "SRV"),
                "hl_srv_bare": (fq, "SRV"),
            }[kind]
        if kind == "nx":
            r = rng.randrange(1 << 30)
            if r % 4:
                ns = ns_name(r % self.namespaces)
                return (f"missing-{r:09d}.{ns}.svc.{self.zone}.", "A")
            return (f"svc-00001.nons-{r:09d}.svc.{self.zone}.", "A")
        raise ValueError(kind)

    # ---- expected answers for correctness probes -------------------------
    def probes(self) -> list[dict[str, object]]:
        """A handful of questions with the answer every correct server gives.

        ``answer`` lists rdata strings in dig's presentation format; for SRV
        only ``port target`` is compared (priority/weight are the server's
        choice).
        """
        s = self.services[len(self.services) // 2]
        fq = self.svc_fqdn(s.name, s.namespace)
        p: list[dict[str, object]] = [
            {"name": fq, "type": "A", "rcode": "NOERROR", "answer": [s.ipv4]},
            {"name": fq, "type": "AAAA", "rcode": "NOERROR", "answer": [s.ipv6]},
            {"name": "_http._tcp." + fq, "type": "SRV", "rcode": "NOERROR",
             "answer": [f"80 {fq}"]},
            {"name": fq, "type": "SRV", "rcode": "NOERROR",
             "answer": sorted(f"{pt['port']} {fq}" for pt in SVC_PORTS)},
            {"name": f"missing-probe.{s.namespace}.svc.{self.zone}.", "type": "A",
             "rcode": "NXDOMAIN", "answer": []},
            {"name": f"dns-version.{self.zone}.", "type": "TXT", "rcode": "NOERROR",
             "answer": None},  # value differs by implementation: only NOERROR + 1 record
        ]
        if self.headless_services:
            h = self.headless_services[len(self.headless_services) // 2]
            hfq = self.svc_fqdn(h.name, h.namespace)
            cluster = sorted(h.clusters)[0]
            ep = h.clusters[cluster][0]
            all_addr = sorted({e.address for eps in h.clusters.values() for e in eps})
            p += [
                # more than ~60 addresses do not fit a 1232-byte UDP answer:
                # probes go over TCP (dig +tcp) so the full set is compared
                {"name": hfq, "type": "A", "rcode": "NOERROR", "answer": all_addr},
                {"name": f"{ep.hostname}.{cluster}.{hfq}", "type": "A",
                 "rcode": "NOERROR", "answer": [ep.address]},
                {"name": "_http._tcp." + hfq, "type": "SRV", "rcode": "NOERROR",
                 "answer": sorted(
                     f"8080 {e.hostname}.{c}.{hfq}"
                     for c, eps in h.clusters.items() for e in eps)},
            ]
        return p


def mixed_case(questions: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    """``questions`` with every name's letters in a random case, each (name, type)
    distinct from every other (a question drawn again gets another case)."""
    rng = random.Random(seed ^ CASE_SEED)
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for name, qtype in questions:
        for _ in range(CASE_TRIES):
            bits = rng.getrandbits(len(name))
            spelled = "".join(c.upper() if bits >> i & 1 else c.lower()
                              for i, c in enumerate(name))
            if (spelled, qtype) not in seen:
                break
        else:
            raise ValueError(f"no distinct case left for {name} {qtype}")
        seen.add((spelled, qtype))
        out.append((spelled, qtype))
    return out


def ns_name(i: int) -> str:
    return f"ns-{i:02d}"


def cluster_name(i: int) -> str:
    return f"cluster-{chr(ord('a') + i)}" if i < 26 else f"cluster-{i}"


# ---- wire format -----------------------------------------------------------
def wire_query(qname: str, qtype: str, edns: bool) -> bytes:
    """A DNS query message with ID 0 (dnsperf rewrites it), RD set like dnsperf's own."""
    header = struct.pack("!HHHHHH", 0, 0x0100, 1, 0, 0, 1 if edns else 0)
    labels = [lab for lab in qname.rstrip(".").split(".") if lab]
    qn = b"".join(bytes([len(lab)]) + lab.encode("ascii") for lab in labels) + b"\0"
    msg = header + qn + struct.pack("!HH", QTYPES[qtype], 1)
    if edns:
        # root owner, TYPE OPT, CLASS = UDP payload size, TTL = ext-rcode/version/flags, RDLEN 0
        msg += b"\0" + struct.pack("!HHIH", 41, EDNS_UDP_SIZE, 0, 0)
    return msg


def binary_file(queries: list[tuple[str, str]], seed: int) -> Iterator[bytes]:
    """dnsperf -B records; exactly half (rounded down) with EDNS, seeded shuffle."""
    flags = [i < len(queries) // 2 for i in range(len(queries))]
    random.Random(seed ^ 0xED5).shuffle(flags)
    for (qname, qtype), edns in zip(queries, flags, strict=True):
        m = wire_query(qname, qtype, edns)
        yield struct.pack("!H", len(m)) + m


def write_queries(outdir: Path, ds: Dataset, total_queries: int, seed: int,
                  mix_name: str) -> dict[str, Any]:
    """queries-<mix>.bin/.txt (for the standard mix also queries.bin/.txt, the names
    other tools read): the file names and the mix's NXDOMAIN share."""
    qs = ds.queries(total_queries, seed, mix_name)
    txt, binary = outdir / f"queries-{mix_name}.txt", outdir / f"queries-{mix_name}.bin"
    with open(txt, "w") as f:
        f.writelines(f"{n} {t}\n" for n, t in qs)
    with open(binary, "wb") as f:
        f.writelines(binary_file(qs, seed))
    nx = sum(1 for n, _ in qs if n.lower().startswith(NX_PREFIXES)) / len(qs)
    return {"queries_txt": str(txt), "queries_bin": str(binary), "nx_share": nx,
            "n_queries": len(qs)}


def write_all(
    outdir: Path,
    ds: Dataset,
    total_queries: int = 100_000,
    seed: int = 1,
    mixes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The standard files, and ``info["mixes"][name]`` for each of ``mixes``."""
    outdir.mkdir(parents=True, exist_ok=True)
    objects = ds.objects()
    with open(outdir / "objects.json", "w") as f:
        json.dump(objects, f, separators=(",", ":"))
    qs = ds.queries(total_queries, seed)
    with open(outdir / "queries.txt", "w") as f:
        f.writelines(f"{n} {t}\n" for n, t in qs)
    with open(outdir / "queries.bin", "wb") as f:
        f.writelines(binary_file(qs, seed))
    with open(outdir / "probes.json", "w") as f:
        json.dump(ds.probes(), f, indent=1)
    mixes_info = {m: write_queries(outdir, ds, total_queries, seed, m) for m in mixes}
    n_items = len(objects["items"])
    return {
        "objects": str(outdir / "objects.json"),
        "queries_txt": str(outdir / "queries.txt"),
        "queries_bin": str(outdir / "queries.bin"),
        "probes": str(outdir / "probes.json"),
        "n_objects": n_items,
        "n_queries": len(qs),
        "imports": ds.imports,
        "headless": ds.headless,
        "endpoints": ds.endpoints,
        "clusters": ds.clusters,
        "namespaces": ds.namespaces,
        "seed": seed,
        "mixes": mixes_info,
    }


def add_dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--imports", type=int, default=1000, help="ClusterSetIP imports (1000)")
    p.add_argument("--headless", type=int, default=100, help="headless imports (100)")
    p.add_argument("--endpoints", type=int, default=10,
                   help="endpoints per headless import, spread over the clusters (10)")
    p.add_argument("--clusters", type=int, default=2, help="source clusters (2)")
    p.add_argument("--namespaces", type=int, default=10, help="namespaces (10)")
    p.add_argument("--queries", type=int, default=100_000, help="questions in the file (100000)")
    p.add_argument("--seed", type=int, default=1, help="shuffle seed (1)")


def dataset_from_args(a: argparse.Namespace) -> Dataset:
    return Dataset.build(a.imports, a.headless, a.endpoints, a.clusters, a.namespaces)
