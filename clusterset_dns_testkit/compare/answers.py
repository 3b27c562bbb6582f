"""Asking both servers, and their answers side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype

from clusterset_dns_testkit.compare.cases import Case
from clusterset_dns_testkit.compare.common import EDNS_PAYLOAD, HOST


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


