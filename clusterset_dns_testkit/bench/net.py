"""A small DNS client for readiness checks."""

from __future__ import annotations

import os
import socket
import time

import dns.exception
import dns.message
import dns.query

from clusterset_dns_testkit.bench import dataset
from clusterset_dns_testkit.bench.common import LOOPBACK, ZONE


def dns_rcode(port: int, qname: str = ZONE, qtype: str = "SOA", timeout: float = 0.5) -> int | None:
    msg = bytearray(dataset.wire_query(qname, qtype, edns=False))
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


def wait_answer(port: int, name: str, timeout: float, pause: float = 0.2) -> None:
    """Asks ``name`` A over UDP until a reply holds an answer, for ``timeout`` seconds
    at most (the server is up and has loaded its objects); ends the benchmark if not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if dns.query.udp(dns.message.make_query(name, "A"), LOOPBACK, port=port,
                             timeout=0.5).answer:
                return
        except (OSError, dns.exception.Timeout):
            pass
        time.sleep(pause)
    raise SystemExit(f"the server on port {port} never answered {name}")
