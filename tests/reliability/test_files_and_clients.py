"""Process-level reliability of the file source and the TCP server: the real
server process, real sockets on loopback, a real descriptor limit (prlimit).

- ~1,100 idle TCP clients against a server whose hard descriptor limit is 1024:
  the connection cap refuses the excess and the zone stays whole; with the cap
  lifted above the limit, descriptors really run out, the directory walk fails,
  and the zone still stays whole (the walk error is counted, not read as "every
  file was removed").
- TCP clients that send queries and never read: the server's RSS stays bounded
  and the connections are aborted after the idle timeout.
- A hostile file dropped into the served directory; a served FILE deleted.
- ~1,100 idle clients of the /ready port under the same descriptor limit: /ready,
  /metrics, DNS over TCP and the file source keep working; the idle ones are cut.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import dns.message
import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CORE = REPO / "tests" / "conformance" / "objects" / "core"
Z = "svc.clusterset.local."
WEB = f"web.demo.{Z}"

NEW_IMPORT = """\
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: later, namespace: demo}
spec: {type: ClusterSetIP, ips: [10.99.0.1]}
"""

ALIAS_BOMB = "\n".join([
    "apiVersion: multicluster.x-k8s.io/v1beta1", "kind: ServiceImport",
    "metadata: {name: web, namespace: demo}",
    'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    *(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)),
    "spec: {type: ClusterSetIP, ips: *l8}", ""])


def examples_dir(tmp_path: Path) -> Path:
    target = tmp_path / "objects"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("*.md"))
    return target


def web_answers(server: ServerProcess) -> tuple[str, set[str]]:
    return server.answers(WEB, "A")


def limited(server: ServerProcess, soft: int, hard: int) -> ServerProcess:
    """Runs the server under descriptor limits (the server raises its soft limit to
    the hard one at start, so the hard one is what counts)."""
    server.cmd = ["prlimit", f"--nofile={soft}:{hard}", "--", *server.cmd]
    return server


def open_clients(server: ServerProcess, count: int) -> list[socket.socket]:
    """From eight source addresses: one address alone holds at most a quarter of the
    connection cap."""
    clients = []
    for n in range(count):
        s = socket.create_connection((server.host, server.port), timeout=10,
                                     source_address=(f"127.0.0.{2 + n % 8}", 0))
        clients.append(s)
    return clients


def close_all(clients: list[socket.socket]) -> None:
    for s in clients:
        s.close()


def server_fds(server: ServerProcess) -> int:
    assert server.proc is not None
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))



@pytest.fixture
def prlimit() -> None:
    if shutil.which("prlimit") is None:
        pytest.fail("prlimit (util-linux) is needed: apt-get install util-linux")


@pytest.fixture
def many_fds() -> Iterator[None]:
    """This test process needs more than 1,100 descriptors itself."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4096, "need 4096 descriptors"
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


WEB_A = ("NOERROR", {f"{WEB} 5 IN A 10.96.10.1"})
LATER_A = ("NOERROR", {f"later.demo.{Z} 5 IN A 10.99.0.1"})


@pytest.mark.usefixtures("prlimit", "many_fds")
def test_connection_cap_under_a_low_descriptor_limit(tmp_path: Path) -> None:
    objects = examples_dir(tmp_path)
    server = limited(ServerProcess("--manifests", str(objects), "--poll-interval", "0.2",
                                   "--tcp-idle-timeout", "120"), 256, 1024)
    with server:
        server.wait_ready()
        assert web_answers(server) == WEB_A
        # soft 256 raised to the hard 1024; the cap is half of that
        assert "at most 512 TCP connections (descriptor limit 1024)" in server.log_text()
        clients = open_clients(server, 1100)
        try:
            wait_for(lambda: server.metric("clusterset_dns_tcp_refused_total") >= 1100 - 512,
                     30, "the connections over the cap to be refused")
            assert server.metric("clusterset_dns_tcp_connections") == 512
            # the zone is whole, and the source still reads new files
            assert web_answers(server) == WEB_A
            (objects / "later.yaml").write_text(NEW_IMPORT)
            expect(server, f"later.demo.{Z}", "A", *LATER_A)
            assert server.metric("clusterset_dns_manifest_errors_total") == 0
        finally:
            close_all(clients)
        # and once they leave, TCP answers again
        wait_for(lambda: server.metric("clusterset_dns_tcp_connections") == 0, 30,
                 "the connections to be gone")
        assert server.ask(WEB, "A", tcp=True).answer


@pytest.mark.usefixtures("prlimit", "many_fds")
def test_descriptors_exhausted_keeps_the_zone(tmp_path: Path) -> None:
    """The issue's repro: the cap lifted above the limit, so ~1,100 idle clients take
    every descriptor. The walk fails (EMFILE); the zone must not empty itself."""
    objects = examples_dir(tmp_path)
    server = limited(ServerProcess("--manifests", str(objects), "--poll-interval", "0.2",
                                   "--tcp-idle-timeout", "120", "--max-tcp-connections",
                                   "5000"), 1024, 1024)
    with server:
        server.wait_ready()
        assert web_answers(server) == WEB_A
        assert "--max-tcp-connections 5000 leaves less than half" in server.log_text()
        clients: list[socket.socket] = []
        try:
            # Fill the descriptor table: connect until the server cannot accept.
            for _ in range(1100):
                clients.append(socket.create_connection((server.host, server.port),
                                                        timeout=10))
            wait_for(lambda: server_fds(server) >= 1020, 30, "the server to run out of fds")
            (objects / "later.yaml").write_text(NEW_IMPORT)  # cannot be listed now
            log_mark = "cannot list"
            wait_for(lambda: log_mark in server.log_text(), 30, "the walk error to be logged")
            for _ in range(5):  # several polls: still every answer (UDP needs no fd)
                assert web_answers(server) == WEB_A
                assert server.answers(f"nosuch.demo.{Z}", "A")[0] == "NXDOMAIN"
                time.sleep(0.2)
        finally:
            close_all(clients)
        # descriptors back: the walk succeeds, the new file is read, errors were counted
        expect(server, f"later.demo.{Z}", "A", *LATER_A, timeout=30)
        assert web_answers(server) == WEB_A
        assert server.metric("clusterset_dns_manifest_errors_total", reason="walk") >= 1


def connect_many(port: int, count: int, batch: int = 50) -> list[socket.socket]:
    """``count`` connections to 127.0.0.1:``port``, ``batch`` at a time, so that the
    server's accept queue (backlog 100) does not overflow: over it the kernel drops
    the handshake's last ACK while the client believes it is connected."""
    clients: list[socket.socket] = []
    while len(clients) < count:
        for _ in range(min(batch, count - len(clients))):
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.02)  # pacing, not a wait for a result: the server accepts meanwhile
    return clients


def closed_by_server(s: socket.socket) -> bool:
    s.setblocking(True)
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@pytest.mark.usefixtures("prlimit", "many_fds")
def test_idle_http_clients_keep_out_neither_probes_nor_dns(tmp_path: Path) -> None:
    """The issue's repro: 1,100 idle connections to the /ready port under a 1024
    descriptor limit made /ready fail and stopped DNS over TCP and the file source.
    The HTTP endpoints are capped: each new connection takes the place of the oldest
    idle one, so a probe gets in; the idle ones are cut after the request timeout."""
    objects = examples_dir(tmp_path)
    server = limited(ServerProcess("--manifests", str(objects), "--poll-interval", "0.2",
                                   "--tcp-idle-timeout", "120"), 1024, 1024)
    with server:
        server.wait_ready()
        clients = connect_many(server.ready_port, 1100)
        try:
            assert len(clients) >= 1000, f"only {len(clients)} connections got through"
            # one probe, while every idle client still holds on
            assert server.ready_status() == 200
            wait_for(lambda: server.metric("clusterset_dns_http_connections_closed_total")
                     >= len(clients) - 64, 10, "the idle connections over the cap to be closed")
            assert server.ask(WEB, "A", tcp=True).answer
            (objects / "later.yaml").write_text(NEW_IMPORT)
            expect(server, f"later.demo.{Z}", "A", *LATER_A)
            assert server.metric("clusterset_dns_manifest_errors_total") == 0
            # the idle connections that were let in are cut (5 s to send a request)
            wait_for(lambda: all(closed_by_server(s) for s in clients), 30,
                     "the idle HTTP connections to be closed")
        finally:
            close_all(clients)
        assert server.ready_status() == 200


def tcp_query(name: str, rdtype: str, ident: int) -> bytes:
    message = dns.message.make_query(name, rdtype, use_edns=False)
    message.id = ident
    wire = message.to_wire()
    return struct.pack("!H", len(wire)) + wire


def test_non_reading_clients_are_bounded_and_aborted(tmp_path: Path) -> None:
    """Clients pipeline queries for a ~1 KB answer and never read. Answers must not
    pile up in the server (RSS bound) and the connections must be aborted after the
    idle timeout even though their answers can never be delivered."""
    clients_count, seconds, timeout = 24, 3.0, 3
    server = ServerProcess("--manifests", str(CORE), "--tcp-idle-timeout", str(timeout))
    with server:
        server.wait_ready()
        big = server.ask("big.bulk.svc.clusterset.local.", "A", tcp=True)
        assert len(big.answer[0]) == 60  # a large answer: the amplification is real
        base_rss, base_fds = server.rss_kib(), server_fds(server)
        chunk = b"".join(tcp_query("big.bulk.svc.clusterset.local.", "A", i)
                         for i in range(2000))
        clients = [socket.create_connection((server.host, server.port), timeout=5)
                   for _ in range(clients_count)]
        for s in clients:
            s.setblocking(False)
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # push until the kernel buffers are full
            progress = False
            for s in clients:
                try:
                    sent += s.send(chunk)
                    progress = True
                except BlockingIOError:
                    pass
                except OSError:
                    break
            if not progress:
                time.sleep(0.05)
        grown_mib = (server.rss_kib() - base_rss) / 1024
        try:
            print(f"{sent >> 20} MiB of queries sent; RSS grew {grown_mib:.1f} MiB")
            assert sent > 8 << 20  # enough to ask for hundreds of MiB of answers
            assert grown_mib < 64, f"RSS grew {grown_mib:.0f} MiB ({sent >> 20} MiB of queries)"
            # the server still answers everybody else meanwhile
            assert server.answers("hello.conf.svc.clusterset.local.", "A")[0] == "NOERROR"
            wait_for(lambda: server.metric("clusterset_dns_tcp_aborted_total") >= clients_count,
                     timeout * 4 + 20, "the non-reading connections to be aborted")
            wait_for(lambda: server_fds(server) <= base_fds, 20, "their descriptors to be freed")
            assert server.metric("clusterset_dns_tcp_connections") == 0
        finally:
            close_all(clients)


def test_hostile_file_while_serving(tmp_path: Path) -> None:
    objects = examples_dir(tmp_path)
    with ServerProcess("--manifests", str(objects), "--poll-interval", "0.2") as server:
        server.wait_ready()
        assert web_answers(server) == WEB_A
        (objects / "bomb.yaml").write_text(ALIAS_BOMB)
        (objects / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        (objects / "junk.yaml").write_bytes(bytes(range(256)) * 16)
        wait_for(lambda: server.metric("clusterset_dns_manifest_errors_total") >= 3, 30,
                 "the three bad files to be counted")
        (objects / "later.yaml").write_text(NEW_IMPORT)
        expect(server, f"later.demo.{Z}", "A", *LATER_A)
        assert web_answers(server) == WEB_A
        assert server.metric("clusterset_dns_manifest_errors_total", reason="limits") == 2
        assert server.metric("clusterset_dns_manifest_errors_total", reason="parse") == 1
        log = server.log_text()
        assert str(objects / "bomb.yaml") in log and "aliases expand" in log


def test_served_file_deleted(tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    shutil.copy(EXAMPLES / "web.yaml", path)
    with ServerProcess("--manifests", str(path), "--poll-interval", "0.2") as server:
        server.wait_ready()
        assert web_answers(server) == WEB_A
        path.unlink()
        expect(server, WEB, "A", "NXDOMAIN", [])
        assert server.ready_status() == 200  # still synced: an empty zone, not an unknown one
        shutil.copy(EXAMPLES / "web.yaml", path)
        expect(server, WEB, "A", *WEB_A)


