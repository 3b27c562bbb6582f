"""The API server through an HTTPS proxy from the environment, and a ~/.netrc.

The proxy variables (HTTPS_PROXY, NO_PROXY) are read once at start and apply to
every request; ~/.netrc is never read (its credentials cannot be combined with
the bearer token: aiohttp refuses the request). A real CONNECT proxy on loopback
sees what the server sends."""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, expect
from clusterset_dns_testkit.objects import HTTP, service_import
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn


class ConnectProxy(socketserver.ThreadingTCPServer):
    """An HTTP CONNECT proxy that records each tunnel's target and Proxy-Authorization."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.tunnels: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Tunnel(socketserver.StreamRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        request = self.rfile.readline(8192).decode("latin-1").split()
        headers: dict[str, str] = {}
        while (line := self.rfile.readline(8192).decode("latin-1").strip()):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(request) < 2 or request[0] != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        self.server.tunnels.append((request[1], headers.get("proxy-authorization")))
        host, _, port = request[1].rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            _pipe(self.connection, upstream)


def _pipe(one: socket.socket, other: socket.socket) -> None:
    """Copies both ways until either side closes (bounded by the test's lifetime)."""
    peers = {one: other, other: one}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 60)
        if not readable:
            return
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    server = ConnectProxy()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _clear_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                 "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _serves(api: KubeAPI, namespace: str, server: ServerProcess) -> None:
    server.wait_ready()
    web = fqdn("web", namespace)
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.40.0.1"]))
    expect(server, web, "A", "NOERROR", a(web, "10.40.0.1"))  # the watch, too


def test_https_proxy_from_the_environment_carries_every_request(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess], proxy: ConnectProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://user:secret@"))
    server = server_for().start()
    _serves(api, namespace, server)
    assert proxy.tunnels, "no request went through the proxy"
    credentials = "Basic " + base64.b64encode(b"user:secret").decode()
    assert set(proxy.tunnels) == {(f"127.0.0.1:{api.port}", credentials)}


def test_no_proxy_bypasses_it(api: KubeAPI, namespace: str,
                              server_for: type[ServerProcess], proxy: ConnectProxy,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = server_for().start()
    _serves(api, namespace, server)
    assert proxy.tunnels == []


def test_a_netrc_entry_for_the_api_server_is_ignored(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp would add the entry as Basic credentials beside the bearer token and
    refuse the request (ValueError) on every list and watch."""
    _clear_proxy_env(monkeypatch)
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password something\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    server = server_for().start()
    _serves(api, namespace, server)
