"""The remembered-response memory of the real server process is bounded in bytes.

Clients choose how many distinct queries there are (0x20: every letter of the name in
either case) and how large each response is (an EDNS size up to --edns-udp-size). The
code before counted entries (32,768 of them): 4 KB responses grew the server by
about 130 MiB. Measured here: the resident size grown by 40,000 distinct queries for
a 4 KB answer, bounded by the byte budget plus allocator slack (a memory bound, not a
timed assertion)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import dns.message
import dns.rcode

from clusterset_dns.responses import BUDGET
from clusterset_dns_testkit.dnsserver import ServerProcess

NAME = "abcdefghijklmnopqrst.bulk.svc.clusterset.local."  # 2^28 case variants
ENDPOINTS = 240  # an A answer of about 4 KB: fits --edns-udp-size 4096

OBJECTS = f"""apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {{name: abcdefghijklmnopqrst, namespace: bulk}}
spec: {{type: Headless}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: wide
  namespace: bulk
  labels:
    multicluster.kubernetes.io/service-name: abcdefghijklmnopqrst
    multicluster.kubernetes.io/source-cluster: east
addressType: IPv4
endpoints: [{", ".join(f'{{addresses: ["10.7.{i // 250}.{i % 250 + 1}"]}}'
                       for i in range(ENDPOINTS))}]
"""


def case_variant(rng: random.Random) -> str:
    return "".join(c.upper() if c.isalpha() and rng.random() < 0.5 else c for c in NAME)


def test_distinct_0x20_queries_grow_the_server_by_the_byte_budget_at_most(
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
        names = {case_variant(rng) for _ in range(40_000)}
        lost = 0
        for name in names:
            try:
                sock.send(dns.message.make_query(name, "A", use_edns=0,
                                                 payload=4096).to_wire())
                sock.recv(65535)
            except TimeoutError:
                lost += 1
        grown_mib = (server.rss_kib() - before) / 1024
        print(f"{len(names)} distinct queries ({lost} unanswered): RSS grew {grown_mib:.1f} MiB")
        assert lost < len(names) // 100
        budget_mib = BUDGET / (1 << 20)
        assert grown_mib < budget_mib * 1.5 + 4, f"grew {grown_mib:.0f} MiB"
        assert sum(len(rrset) for rrset in ask(NAME.upper()).answer) == ENDPOINTS
