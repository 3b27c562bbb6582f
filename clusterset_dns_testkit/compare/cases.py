"""The questions both servers are asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusterset_dns_testkit.compare.common import ZONE, JSONObj
from clusterset_dns_testkit.objects import SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL


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




# Local-first answers (opt-in, issue 12): asked of a second clusterset-dns that knows
# its cluster ("east", --cluster-id) and of the same CoreDNS, which ignores
# trafficDistribution. Objects: tests/conformance/objects/extended/near.yaml.
LOCAL_CLUSTER = "east"
LOCAL_CASES = [
    Case(fqdn("near", "ext", "svc"), "A", group="local"),
    Case(fqdn("near", "ext", "svc"), "SRV", group="local"),
    Case(fqdn("_http", "_tcp", "near", "ext", "svc"), "SRV", group="local"),
    Case(fqdn("10-47-1-1", "west", "near", "ext", "svc"), "A", group="local"),
    Case(fqdn("near-down", "ext", "svc"), "A", group="local"),  # nothing ready in east
    Case(fqdn("hello", "conf", "svc"), "A", group="local"),  # no trafficDistribution
]
