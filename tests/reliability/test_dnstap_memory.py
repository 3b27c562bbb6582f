"""The dnstap queue of the real server process is bounded in bytes, not only in
answers: with --dnstap set and no collector (absent, or stalled), every answer waits
in the queue until it is full. A TCP answer may be 64 KiB; the default queue of
10,000 answers held by count alone grows the server by up to 655 MiB (past the
chart's memory limit). Measured here: the resident size grown by 3,000 TCP answers of
about 56 KB each with the collector absent (a memory bound, not a timed assertion)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import dns.message

from clusterset_dns.process.dnstap import QUEUE_BYTES
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.manifests import headless

NAME = "wide.bulk.svc.clusterset.local."
ENDPOINTS = 3500  # an A answer of about 56 KB: TCP only
ANSWERS = 3000  # 168 MB of answers: five times QUEUE_BYTES

OBJECTS = headless("wide", [f"10.7.{i // 250}.{i % 250 + 1}" for i in range(ENDPOINTS)],
                   namespace="bulk")


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def test_an_absent_collector_holds_at_most_the_queues_bytes(tmp_path: Path) -> None:
    (tmp_path / "objects").mkdir()
    (tmp_path / "objects" / "wide.yaml").write_text(OBJECTS)
    absent = tmp_path / "no-collector.sock"  # nobody listens: every answer is queued
    server = ServerProcess("--manifests", str(tmp_path / "objects"),
                           "--dnstap", f"unix:{absent}")
    with server:
        server.wait_ready()
        query = dns.message.make_query(NAME, "A", use_edns=0).to_wire()
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            def ask(ident: int) -> int:
                sock.sendall(struct.pack("!HH", len(query), ident) + query[2:])
                size = struct.unpack("!H", read_exactly(sock, 2))[0]
                response = read_exactly(sock, size)
                assert struct.unpack_from("!H", response)[0] == ident
                return size

            assert ask(0) > 16 * ENDPOINTS  # every record
            before = server.rss_kib()
            for ident in range(1, ANSWERS + 1):
                ask(ident)
            grown_mib = (server.rss_kib() - before) / 1024
        dropped = server.metric("clusterset_dns_dnstap_dropped_total")
        print(f"{ANSWERS} answers of ~{16 * ENDPOINTS // 1000} KB: RSS grew {grown_mib:.1f} "
              f"MiB, {dropped:.0f} messages dropped")
        assert dropped > 0
        assert grown_mib < QUEUE_BYTES / (1 << 20) + 24  # allocator slack
