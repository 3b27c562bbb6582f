"""The first-use memory of the real server process with --workers 2 (each worker keeps
its own, zone/firstuse.py): once an update moves one endpoint name's address, every
worker answers the new address for it, over UDP in mixed case (DNS 0x20: never in the
remembered responses) and over TCP, while the names the update left alone, of the
same service and of another, keep their answers throughout."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import yaml

from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.manifests import write_atomically
from clusterset_dns_testkit.objects import HTTP, endpoint_slice, ready_endpoints, service_import

ZONE = "clusterset.local"
ASKS = 40  # queries a name, each from a new source port: both workers answer some
BOUND = 10.0  # seconds for an update to reach both workers (polled, never asserted as time)


def _service(name: str, hosts: dict[str, str]) -> str:
    return yaml.safe_dump_all([
        service_import(name, "demo", "Headless", ports=[HTTP]),
        endpoint_slice(f"{name}-east", name, "demo", "east", ports=[HTTP],
                       endpoints=ready_endpoints(list(hosts.values()), list(hosts)))])


def _name(host: str, service: str) -> str:
    return f"{host}.east.{service}.demo.svc.{ZONE}."


def _mixed(name: str, seed: int) -> str:
    return "".join(c.upper() if (seed >> (i % 16)) & 1 else c for i, c in enumerate(name))


def _addresses(server: ServerProcess, name: str) -> set[str]:
    """Every address answered for ``name`` by ASKS queries over UDP (mixed case, each
    from a new socket) and ASKS over TCP."""
    seen: set[str] = set()
    for i in range(ASKS):
        query = dns.message.make_query(_mixed(name, i + 1), "A")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            reply = dns.query.udp(query, server.host, port=server.port, timeout=2, sock=sock)
        tcp = dns.query.tcp(dns.message.make_query(name, "A"), server.host, port=server.port,
                            timeout=2)
        for message in (reply, tcp):
            assert message.rcode() == dns.rcode.NOERROR, (name, message)
            seen.update(rr.address for rrset in message.answer for rr in rrset)
    return seen


def test_an_update_reaches_every_workers_remembered_answers(tmp_path: Path) -> None:
    write_atomically(tmp_path / "web.yaml", _service("web", {"h0": "10.0.0.1",
                                                             "h1": "10.0.0.2"}))
    write_atomically(tmp_path / "db.yaml", _service("db", {"h0": "10.0.1.1"}))
    kept = {_name("h1", "web"): {"10.0.0.2"}, _name("h0", "db"): {"10.0.1.1"}}
    with ServerProcess("--manifests", str(tmp_path), "--workers", "2",
                       "--poll-interval", "0.05") as server:
        server.wait_ready()
        assert _addresses(server, _name("h0", "web")) == {"10.0.0.1"}
        for name, addresses in kept.items():
            assert _addresses(server, name) == addresses  # remembered in both workers
        write_atomically(tmp_path / "web.yaml", _service("web", {"h0": "10.0.0.9",
                                                                 "h1": "10.0.0.2"}))
        deadline = time.monotonic() + BOUND
        while (now := _addresses(server, _name("h0", "web"))) != {"10.0.0.9"}:
            assert now <= {"10.0.0.1", "10.0.0.9"}
            assert time.monotonic() < deadline, f"still {now}:\n{server.log_text()[-3000:]}"
            for name, addresses in kept.items():
                assert _addresses(server, name) == addresses
        for _ in range(3):  # and it stays so: no worker serves the old address again
            assert _addresses(server, _name("h0", "web")) == {"10.0.0.9"}
        for name, addresses in kept.items():
            assert _addresses(server, name) == addresses
