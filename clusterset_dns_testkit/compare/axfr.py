"""Both servers' zone transfers of the same objects: our AXFR next to the one
CoreDNS's ``kubernetes`` plugin gives with ``transfer { to * }``.

Each side runs on the comparison's API server with transfers on (the main pair
keeps them off, so that its ``AXFR`` row shows the default: REFUSED on both).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import dns.exception
import dns.query
import dns.rdatatype

from clusterset_dns_testkit.compare.answers import normalise_rrset
from clusterset_dns_testkit.compare.common import HOST
from clusterset_dns_testkit.compare.servers import wait_answering
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.peers import CoreDNS, KubeAPI, kubernetes_corefile

ZONE = "clusterset.local"


@dataclass
class Transfer:
    error: str = ""  # why no zone came, or ""
    records: set[str] = field(default_factory=set)  # "owner TYPE rdata", TTL and serial dropped
    messages: int = 0

    def owners(self, rdtype: str) -> set[str]:
        return {line.split()[0] for line in self.records if line.split()[1] == rdtype}


def axfr(port: int) -> Transfer:
    out = Transfer()
    try:
        for message in dns.query.xfr(HOST, ZONE, port=port, relativize=False, timeout=10):
            out.messages += 1
            for rrset in message.answer:
                out.records.update(normalise_rrset(rrset))  # as the answer rows are
    except (dns.exception.DNSException, OSError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def below_svc(owner: str) -> int:
    """How many labels ``owner`` has before ``svc.<zone>.``."""
    return len(owner.removesuffix(f".svc.{ZONE}.").split("."))


@dataclass
class AxfrComparison:
    ours: Transfer
    coredns: Transfer

    @property
    def only_ours(self) -> list[str]:
        return sorted(self.ours.records - self.coredns.records)

    @property
    def only_coredns(self) -> list[str]:
        return sorted(self.coredns.records - self.ours.records)

    def endpoint_names_without_clusterid(self) -> list[tuple[str, str]]:
        """CoreDNS's headless endpoint names (``host.svc.ns.svc.<zone>``: three labels),
        each with our name of the same endpoint (``host.<clusterid>.svc.ns...``)."""
        ours_by_short: dict[str, str] = {}
        for owner in self.ours.owners("A") | self.ours.owners("AAAA"):
            if below_svc(owner) == 4:
                host, _cluster, rest = owner.split(".", 2)
                ours_by_short.setdefault(f"{host}.{rest}", owner)
        return sorted((short, ours_by_short[short])
                      for short in self.coredns.owners("A") | self.coredns.owners("AAAA")
                      if below_svc(short) == 3 and short in ours_by_short)


def compare_axfr(api: KubeAPI) -> AxfrComparison:
    with contextlib.ExitStack() as stack:
        ours = ServerProcess("--kubeconfig", str(api.kubeconfig), "--allow-transfer",
                             "127.0.0.1/32")
        stack.callback(ours.stop)
        ours.start()
        coredns = stack.enter_context(CoreDNS(kubernetes_corefile(
            api.kubeconfig, extra="transfer {\n        to *\n    }")))
        ours.wait_ready(30)
        for port in (ours.port, coredns.port):
            wait_answering(port, 60, "the transfer pair to answer for every object")
        return AxfrComparison(axfr(ours.port), axfr(coredns.port))
