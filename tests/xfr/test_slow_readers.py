"""Slow readers against a real server process: AXFRs from allowed addresses that stop
reading after their first message hold transfer slots, yet a real secondary's AXFR
(dnspython) from another address is served whole, and --xfr-timeout ends them all."""

from __future__ import annotations

import socket
from pathlib import Path

import dns.message
import dns.query
import dns.rcode

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for

from .test_transfer_floods import big_zone
from .xfrlib import ZONE, answer_lines


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data


def slow_reader(host: str, port: int, source: str) -> tuple[socket.socket, bool]:
    """An AXFR from ``source`` whose reader takes the first message and stops; (the
    socket, whether it holds a slot: its first message is not SERVFAIL)."""
    sock = socket.socket(socket.AF_INET6 if ":" in source else socket.AF_INET)
    sock.settimeout(30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((source, 0))
    sock.connect((host, port))
    query = dns.message.make_query(ZONE, "AXFR").to_wire()
    sock.sendall(len(query).to_bytes(2, "big") + query)
    length = int.from_bytes(_read_exactly(sock, 2), "big")
    first = dns.message.from_wire(_read_exactly(sock, length), one_rr_per_rrset=True)
    return sock, first.rcode() != dns.rcode.SERVFAIL


def test_a_secondary_gets_its_axfr_while_slow_readers_hold_the_other_slots(
        tmp_path: Path) -> None:
    """16 slow readers from four addresses: 15 hold a slot (at most 4 an address; the
    last slot only for an address running none), and a secondary at 127.0.0.1 gets
    the 16th: its AXFR is whole. Before: the readers took all 16 slots and the
    secondary got SERVFAIL for as long as they read."""
    manifests = tmp_path / "objects"
    big_zone(manifests)  # about 1.4 MB: far more than the socket buffers hold
    # Long timeouts: the readers hold their slots for the whole test, however slowly
    # dnspython parses the secondary's 1.4 MB on a loaded machine.
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8",
                       "--tcp-idle-timeout", "600", "--xfr-timeout", "600") as srv:
        srv.wait_ready(60)
        readers: list[socket.socket] = []
        try:
            holding = []
            for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
                for _ in range(4):
                    sock, holds = slow_reader(srv.host, srv.port, source)
                    readers.append(sock)
                    holding.append(holds)
            assert holding == [True] * 15 + [False], holding
            messages = list(dns.query.xfr(srv.host, ZONE, port=srv.port, source="127.0.0.1",
                                          relativize=False, timeout=60))
            lines = answer_lines(messages)
            assert len(messages) > 3 and lines[0].split()[3] == lines[-1].split()[3] == "SOA"
            assert srv.metric("clusterset_dns_transfers_total", type="axfr",
                              result="busy") == 1
        finally:
            for sock in readers:
                sock.close()
        srv.check_alive()


def test_xfr_timeout_cuts_a_slow_reader_and_frees_its_slot(tmp_path: Path) -> None:
    """--xfr-timeout 2: a reader that stops after the first message is cut (counted as
    timeout, its connection closed) though --tcp-idle-timeout would let it stay. The
    exact second is tested with the injected clock (tests/unit/test_xfr_slots.py)."""
    manifests = tmp_path / "objects"
    big_zone(manifests)
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8",
                       "--tcp-idle-timeout", "600", "--xfr-timeout", "2") as srv:
        srv.wait_ready(60)
        sock, holds = slow_reader(srv.host, srv.port, "127.0.0.2")
        try:
            assert holds
            wait_for(lambda: srv.metric("clusterset_dns_transfers_total", type="axfr",
                                        result="timeout") == 1, 60,
                     "the transfer to reach --xfr-timeout")
            closed = False
            for _ in range(10_000):  # what was sent before the cut, then the end
                try:
                    if not sock.recv(65536):
                        closed = True
                        break
                except ConnectionResetError:
                    closed = True
                    break
            assert closed
        finally:
            sock.close()
        srv.check_alive()


def test_with_two_workers_one_address_still_runs_at_most_four(tmp_path: Path) -> None:
    """--workers 2, DNS on 127.0.0.1 and ::1: 16 slow readers from 127.0.0.2 (the
    kernel spreads their connections over both processes) hold 4 slots in all, 2 in
    each process; ::1 is another address and gets its transfer. Before: the slots were
    a process's, and the one address held 8 (4 in each)."""
    manifests = tmp_path / "objects"
    big_zone(manifests)
    srv = ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8",
                        "--allow-transfer", "::1/128", "--workers", "2",
                        "--tcp-idle-timeout", "600", "--xfr-timeout", "600")
    srv.cmd += ["--listen", f"[::1]:{srv.port}"]
    with srv:
        srv.wait_ready(60)
        readers: list[socket.socket] = []
        try:
            holding = []
            for _ in range(16):
                sock, holds = slow_reader(srv.host, srv.port, "127.0.0.2")
                readers.append(sock)
                holding.append(holds)
            # Each process gets at least 2 of the 16 connections but for a 17-in-65,536
            # chance a side of the kernel's hash.
            assert sum(holding) == 4, holding
            sock, holds = slow_reader("::1", srv.port, "::1")
            readers.append(sock)
            assert holds
            # A worker's counts reach the metrics a moment later.
            wait_for(lambda: srv.metric("clusterset_dns_transfers_total", type="axfr",
                                        result="busy") == 12, 30, "12 refused as busy")
        finally:
            for sock in readers:
                sock.close()
        srv.check_alive()


def test_idle_connections_of_one_address_leave_room_for_a_secondary(tmp_path: Path) -> None:
    """--max-tcp-connections 64: 64 connections from 127.0.0.2 that send nothing; 16 are
    kept (a quarter), the rest closed at once; a secondary's AXFR from 127.0.0.1 is
    whole and a TCP query answered. Before, the idle ones held all 64 and both were
    reset (for as long as the client opened them again at each idle timeout)."""
    manifests = tmp_path / "objects"
    big_zone(manifests)
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8",
                       "--tcp-idle-timeout", "600", "--max-tcp-connections", "64") as srv:
        srv.wait_ready(60)
        idle: list[socket.socket] = []
        try:
            for _ in range(64):
                sock = socket.socket()
                sock.bind(("127.0.0.2", 0))
                sock.connect((srv.host, srv.port))
                idle.append(sock)
            wait_for(lambda: srv.metric("clusterset_dns_tcp_refused_total") == 48, 30,
                     "48 connections refused")
            messages = list(dns.query.xfr(srv.host, ZONE, port=srv.port, source="127.0.0.1",
                                          relativize=False, timeout=60))
            lines = answer_lines(messages)
            assert len(messages) > 3 and lines[0].split()[3] == lines[-1].split()[3] == "SOA"
            assert srv.ask(ZONE, "SOA", tcp=True).answer
        finally:
            for sock in idle:
                sock.close()
        srv.check_alive()
