"""The remembered-response memory of the real server process is bounded in bytes.

Clients choose how many distinct queries there are (any EDNS size and flag bits; a
name in mixed case, DNS 0x20, is never stored) and how large each response is (an
EDNS size up to --edns-udp-size). The code before counted entries (32,768 of them):
4 KB responses grew the server by about 130 MiB. Measured here: the resident size
grown by 40,000 distinct queries for a 4 KB answer, bounded by the byte budget plus
allocator slack (a memory bound, not a timed assertion)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import dns.message
import dns.rcode

from clusterset_dns.zone.responses import BUDGET
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.manifests import headless

NAME = "abcdefghijklmnopqrst.bulk.svc.clusterset.local."
ENDPOINTS = 240  # an A answer of about 4 KB: fits --edns-udp-size 4096

OBJECTS = headless("abcdefghijklmnopqrst",
                   [f"10.7.{i // 250}.{i % 250 + 1}" for i in range(ENDPOINTS)], namespace="bulk")


def test_distinct_queries_grow_the_server_by_the_byte_budget_at_most(
        tmp_path: Path) -> None:
    (tmp_path / "wide.yaml").write_text(OBJECTS)
    server = ServerProcess("--manifests", str(tmp_path), "--edns-udp-size", "4096")
    with server:
        server.wait_ready()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(2)
        sock.connect((server.host, server.port))

        def ask(name: str) -> dns.message.Message:
            sock.send(dns.message.make_query(name, "A", use_edns=0, payload=4096).to_wire())
            return dns.message.from_wire(sock.recv(65535))

        first = ask(NAME)
        assert first.rcode() == dns.rcode.NOERROR and not first.flags & dns.flags.TC
        assert sum(len(rrset) for rrset in first.answer) == ENDPOINTS
        before = server.rss_kib()
        rng = random.Random(20)
        # The answer fits every payload size from 4000; the OPT's flag bits other than
        # DO are ignored. Each pair is another query, answered by the fast path.
        variants = set()
        while len(variants) < 40_000:
            variants.add((rng.randrange(4000, 4097), rng.randrange(0x8000)))
        lost = 0
        for payload, flags in variants:
            try:
                sock.send(dns.message.make_query(NAME, "A", use_edns=0, payload=payload,
                                                 ednsflags=flags).to_wire())
                assert len(sock.recv(65535)) > 16 * ENDPOINTS  # every record: no TC
            except TimeoutError:
                lost += 1
        grown_mib = (server.rss_kib() - before) / 1024
        print(f"{len(variants)} distinct queries ({lost} unanswered): RSS grew "
              f"{grown_mib:.1f} MiB")
        assert lost < len(variants) // 100
        budget_mib = BUDGET / (1 << 20)
        assert grown_mib < budget_mib * 1.5 + 4, f"grew {grown_mib:.0f} MiB"
        assert sum(len(rrset) for rrset in ask(NAME.upper()).answer) == ENDPOINTS
