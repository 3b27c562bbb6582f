"""CoreDNS's ``secondary`` plugin pulling the zone from us: AXFR at start, again on
NOTIFY; its answers equal ours for every name and type of the zone."""

from __future__ import annotations

import shutil
from pathlib import Path

import dns.rcode
import dns.rdatatype

from clusterset_dns_testkit.dnsserver import ServerProcess, answer_set, wait_for
from clusterset_dns_testkit.manifests import write_atomically
from clusterset_dns_testkit.peers import CoreDNS, free_port
from clusterset_dns_testkit.secondary import serial_at

from .xfrlib import ZONE, headless

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "tests" / "conformance" / "objects"


def zone_questions(srv: ServerProcess) -> set[tuple[str, str]]:
    """(owner, type) of every RRset our AXFR holds."""
    import dns.query

    return {(rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype))
            for message in dns.query.xfr(srv.host, ZONE, port=srv.port, relativize=False)
            for rrset in message.answer}


def same_answers(srv: ServerProcess, coredns: CoreDNS, questions: set[tuple[str, str]]
                 ) -> list[str]:
    differences = []
    for name, rdtype in sorted(questions):
        ours = srv.ask(name, rdtype, tcp=True)
        theirs = coredns.query(name, rdtype, tcp=True)
        if (ours.rcode(), answer_set(ours)) != (theirs.rcode(), answer_set(theirs)):
            differences.append(f"{name} {rdtype}: ours {dns.rcode.to_text(ours.rcode())} "
                               f"{sorted(answer_set(ours))}, CoreDNS "
                               f"{dns.rcode.to_text(theirs.rcode())} "
                               f"{sorted(answer_set(theirs))}")
    return differences


def test_coredns_secondary_answers_equal_ours_and_follows_notify(tmp_path: Path) -> None:
    manifests = tmp_path / "objects"
    shutil.copytree(OBJECTS, manifests)
    extra = manifests / "xfr-extra.yaml"
    write_atomically(extra, headless("xfr", "web", "east", ["10.77.0.1"]))
    coredns_port = free_port()
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.1/32",
                       "--notify", f"127.0.0.1:{coredns_port}", "--poll-interval", "0.1") as srv:
        srv.wait_ready()
        corefile = f"{ZONE} {{\n    secondary {{\n        transfer from 127.0.0.1:{srv.port}\n"\
                   "    }\n}\n"
        with CoreDNS(corefile, port=coredns_port) as coredns:
            serial = serial_at(srv.host, srv.port)
            wait_for(lambda: serial_at("127.0.0.1", coredns.port) == serial, 30,
                     "CoreDNS to load the zone")
            questions = zone_questions(srv)
            assert len(questions) > 100
            assert same_answers(srv, coredns, questions) == []
            # A change reaches CoreDNS by NOTIFY (its refresh timer is the SOA's 7200 s).
            write_atomically(extra, headless("xfr", "web", "east", ["10.77.0.2"]))
            new = wait_for(lambda: (s := serial_at(srv.host, srv.port)) != serial and s, 10,
                           "the primary's new serial")
            wait_for(lambda: serial_at("127.0.0.1", coredns.port) == new, 30,
                     "CoreDNS to follow the NOTIFY")
            name = "web.xfr.svc." + ZONE
            assert answer_set(coredns.query(name, "A")) == {f"{name}. 5 IN A 10.77.0.2"}
            assert same_answers(srv, coredns, zone_questions(srv)) == []
