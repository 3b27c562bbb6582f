"""--dnstap against collectors that misbehave (raw loopback sockets: no collector
program does this on purpose): garbage in the handshake, a connection closed after the
handshake and in the middle of a frame, and one that takes the handshake and then reads
nothing and never answers STOP, with --workers 2. Every answer is sent whatever the
collector does, and SIGTERM ends the server while the collector is stalled (it hangs
with the STOP and flush waits unbounded). Nothing is timed: the only waits are hang
guards; the exact flush bound is tested on the injected clock (tests/unit/test_dnstap)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import threading
from collections.abc import Callable

import pytest

from clusterset_dns.process import dnstapwire as wire
from clusterset_dns_testkit.dnsserver import REPO, ServerProcess

NAME = b"\x02db\x04demo\x03svc\x0aclusterset\x05local\x00"


def accept_frame() -> bytes:
    body = struct.pack("!III", wire.ACCEPT, 1, len(wire.CONTENT_TYPE)) + wire.CONTENT_TYPE
    return b"\0\0\0\0" + struct.pack("!I", len(body)) + body


def garbage(conn: socket.socket) -> None:
    conn.recv(64)
    conn.sendall(b"\0\0\0\0\0\0\x02\x00" + os.urandom(512))  # a control frame of noise


def closes_mid_frame(conn: socket.socket) -> None:
    conn.recv(64)
    conn.sendall(accept_frame())
    conn.recv(100)  # START and the start of a data frame
    conn.close()


def stalls(conn: socket.socket) -> None:
    conn.recv(64)
    conn.sendall(accept_frame())  # then reads nothing, ever


class Collector:
    """A TCP listener on 127.0.0.1 doing ``behave`` with every connection."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.behave = behave
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)
            with contextlib.suppress(OSError):
                self.behave(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.mark.parametrize("behave", [garbage, closes_mid_frame, stalls],
                         ids=["garbage", "closes-mid-frame", "stalls"])
def test_answers_go_on_and_sigterm_ends_the_server(
        behave: Callable[[socket.socket], None]) -> None:
    collector = Collector(behave)
    server = ServerProcess("--manifests", str(REPO / "examples"), "--workers", "2",
                           "--dnstap", f"tcp:127.0.0.1:{collector.port}",
                           "--dnstap-queue", "100")
    try:
        server.start()
        server.wait_ready()
        answered = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            for n in range(3000):  # 60-byte labels: answers large enough to fill buffers
                query = (n.to_bytes(2, "big") + b"\x01\x00\x00\x01" + bytes(6)
                         + b"\x3c" + b"x" * 60 + NAME + b"\x00\x01\x00\x01")
                sock.sendto(query, (server.host, server.port))
                if sock.recv(4096)[:2] == query[:2]:
                    answered += 1
        assert answered == 3000
        assert collector.accepted  # the server did reach it
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        # A hang guard, not a measure: the server gives a stalled collector 2 s.
        assert server.proc.wait(timeout=60) == 0, server.log_text()[-3000:]
        assert "Traceback" not in server.log_text(), server.log_text()[-3000:]
    finally:
        server.stop()
        collector.close()
