"""serving/outq.py: the kernel's count of bytes a client has not taken, on a real
loopback TCP connection (what the idle check reads beside asyncio's buffer)."""

from __future__ import annotations

import socket
import time
from typing import Any

from clusterset_dns.serving import outq

CHUNK = b"x" * 65_536


def connected() -> tuple[socket.socket, socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname(), timeout=5)
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32_768)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32_768)
    server.setblocking(False)
    return server, client


def fill(sock: socket.socket) -> int:
    """Writes until the kernel takes no more (the client reads nothing); bounded."""
    sent = 0
    for _ in range(10_000):
        try:
            sent += sock.send(CHUNK)
        except BlockingIOError:
            return sent
    raise AssertionError("the kernel never stopped taking bytes")


def test_the_queue_holds_what_the_client_has_not_read_and_drains_as_it_reads() -> None:
    server, client = connected()
    try:
        sent = fill(server)
        held = outq.kernel_unsent(server)
        assert 0 < held <= sent
        assert outq.kernel_unsent(server) == held  # the client reads nothing: no change
        received = 0
        deadline = time.monotonic() + 10
        while received < sent and time.monotonic() < deadline:
            received += len(client.recv(1 << 20))
        assert received == sent
        while outq.kernel_unsent(server) and time.monotonic() < deadline:
            time.sleep(0.01)  # the last acknowledgements
        assert outq.kernel_unsent(server) == 0
    finally:
        server.close()
        client.close()


def test_no_socket_or_a_closed_one_counts_nothing() -> None:
    assert outq.kernel_unsent(None) == 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.close()  # fileno() is -1 now
    assert outq.kernel_unsent(sock) == 0
    assert outq.kernel_unsent(object()) == 0  # no fileno at all


class Transport:
    def __init__(self, buffered: int, sock: Any) -> None:
        self.buffered, self.sock = buffered, sock

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default


def test_unsent_bytes_adds_asyncios_buffer_and_the_kernels() -> None:
    server, client = connected()
    try:
        fill(server)
        held = outq.kernel_unsent(server)
        assert outq.unsent_bytes(Transport(1234, server)) == 1234 + held
        assert outq.unsent_bytes(Transport(1234, None)) == 1234
    finally:
        server.close()
        client.close()
