"""``/explain`` on the health port, which every pod can reach (issue 30, docs/explain.md):
a burst gets 429 beyond explain's own limits while /ready, /health and DNS keep
answering; the records listed are capped; and the account shows nothing that no DNS
question reveals, each leak checked against the real server's DNS answers too."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import pytest

from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import
from clusterset_dns_testkit.peers import free_port

from .csdns_testlib import REPO_ROOT, ServerProcess, http_status
from .test_ede import write_objects

pytestmark = [pytest.mark.own_server]

NS = "burst"
BIG = 20_000  # endpoints of the Headless import `big`: its A answer is cut to 4,092 records
CONNECTIONS = 62  # with /ready and /health: the HTTP cap (64), so none is evicted


def name(*labels: str) -> str:
    return ".".join((*labels, NS, "svc", "clusterset.local")) + "."


def big_objects() -> list[dict[str, Any]]:
    eps = [endpoint(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}", hostname=f"h{i}")
           for i in range(BIG)]
    return [service_import("big", NS, "Headless", ports=[HTTP]),
            service_import("quiet", NS, "ClusterSetIP", ips=["10.99.0.1"], ports=[HTTP]),
            *(endpoint_slice(f"big-{j}", "big", NS, "east", endpoints=eps[j:j + 1000],
                             ports=[HTTP]) for j in range(0, BIG, 1000))]


def send(port: int, target: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def receive(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    with sock:
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def dns_answer(port: int, qname: str, qtype: str = "A") -> dns.message.Message:
    return dns.query.tcp(dns.message.make_query(qname, qtype), "127.0.0.1", port=port,
                         timeout=10)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_burst_gets_429_while_probes_and_dns_answer(
        start_server: Callable[..., ServerProcess], tmp_path: Path, workers: str) -> None:
    objects = write_objects(tmp_path / "objects", big_objects())
    health = free_port()
    srv = start_server(objects, "--health-listen", f"127.0.0.1:{health}", "--workers", workers)
    burst = [send(health, f"/explain?name={name('big')}&type=A") for _ in range(CONNECTIONS)]
    # While the burst is being answered:
    ready = http_status(srv.ready_url, timeout=10)
    alive = http_status(f"http://127.0.0.1:{health}/health", timeout=10)
    quiet = dns_answer(srv.port, name("quiet"))
    replies = [receive(sock) for sock in burst]
    assert (ready, alive) == (200, 200)
    assert [str(rd) for rrset in quiet.answer for rd in rrset] == ["10.99.0.1"]
    statuses = Counter(status for status, _, _ in replies)
    assert set(statuses) == {200, 429} and sum(statuses.values()) == CONNECTIONS, statuses
    assert statuses[429] >= CONNECTIONS - 10  # the burst allowance: 10 at once
    assert all(headers.get("Retry-After", "").isdigit() for status, headers, _ in replies
               if status == 429)
    assert srv.metric("clusterset_dns_explain_refused_total") == statuses[429]
    # The records listed are capped like the endpoints; the rest are counted.
    account = json.loads(next(body for status, _, body in replies if status == 200))
    assert len(account["answer"]["answer"]) == 500
    assert account["answer"]["recordsNotListed"] == 4092 - 500
    assert sum(len(s["endpoints"]) for s in account["service"]["slices"]) == 500
    assert account["service"]["endpointsNotListed"] == BIG - 500
    assert srv.ready_status() == 200 and srv.alive()


# -- what the account reveals -------------------------------------------------------------

SECRET = "controller says: token=hunter2"


def prying_objects() -> list[dict[str, Any]]:
    vip = service_import("vip", NS, "ClusterSetIP", ips=["10.80.9.9"], ports=[HTTP])
    vip["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Synced",
                                     "message": SECRET}]}
    return [
        vip, service_import("mixed", NS, "Headless", ports=[HTTP]),
        endpoint_slice("orphan-1", "orphan", NS, "east", endpoints=[
            endpoint("10.80.0.1", hostname="orphan-host", zone="zone-orphan")], ports=[HTTP]),
        endpoint_slice("vip-1", "vip", NS, "east", endpoints=[
            endpoint("10.80.1.1", hostname="vip-pod", zone="zone-vip")], ports=[HTTP]),
        endpoint_slice("mixed-1", "mixed", NS, "east", endpoints=[
            endpoint("10.80.2.1", hostname="up"),
            endpoint("10.80.2.2", hostname="down-host", ready=False)], ports=[HTTP]),
    ]


# issue 30: the slices of a service with no ServiceImport, the pods behind a VIP, a
# not-ready endpoint's address, a controller's condition message
LEAKS = {"no import": ["10.80.0.1", "orphan-host", "zone-orphan"],
         "pods behind a VIP": ["10.80.1.1", "vip-pod", "zone-vip"],
         "not ready": ["10.80.2.2", "down-host"],
         "condition message": ["hunter2"]}
QUESTIONS = [(name("orphan"), "A"), (name("vip"), "A"), (name("vip"), "SRV"),
             (name("mixed"), "A"), (name("mixed"), "SRV"), (name("mixed"), "ANY")]


def test_the_health_port_shows_only_what_dns_reveals(
        start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    objects = write_objects(tmp_path / "objects", prying_objects())
    health = free_port()
    srv = start_server(objects, "--health-listen", f"127.0.0.1:{health}")
    full, shown, by_dns = "", "", ""
    for qname, qtype in QUESTIONS:
        status, _, body = receive(send(health, f"/explain?name={qname}&type={qtype}"))
        assert status == 200
        shown += body.decode()
        there = subprocess.run([sys.executable, "-m", "clusterset_dns", "explain", "--server",
                                f"127.0.0.1:{health}", qname, qtype], capture_output=True,
                               text=True, cwd=REPO_ROOT, timeout=60, check=True)
        shown += there.stdout
        here = subprocess.run([sys.executable, "-m", "clusterset_dns", "explain", "--manifests",
                               str(objects), "--json", qname, qtype], capture_output=True,
                              text=True, cwd=REPO_ROOT, timeout=60, check=True)
        full += here.stdout
        by_dns += dns_answer(srv.port, qname, qtype).to_text()
    every = [(leak, text) for leak, texts in LEAKS.items() for text in texts]
    assert [pair for pair in every if pair[1] in by_dns] == []  # no DNS question reveals it,
    assert [pair for pair in every if pair[1] not in full] == []  # the full account does,
    assert [pair for pair in every if pair[1] in shown] == []  # the health port does not
