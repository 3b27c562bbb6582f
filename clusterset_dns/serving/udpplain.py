"""The portable UDP path (recvfrom/sendto, one system call per datagram), and the
choice between it and the batched one (udpbatch)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.observe import Observer, failed
from clusterset_dns.serving.stats import Sampler

log = logging.getLogger("clusterset_dns.serving.server")  # moved out of server: same name

Handle = udpbatch.Handle


class UDPReader:
    """The portable path: answers a UDP socket from the loop's reader callback,
    draining up to ``BATCH`` datagrams per wake-up with ``recvfrom``/``sendto``.

    This skips the transport layer's per-datagram work (buffer management, protocol
    dispatch), which costs more than answering a query from the ready-made cache.
    Still on the loop thread, so updates and queries never interleave."""

    kind = "recvfrom/sendto"
    BATCH = udpbatch.BATCH  # then yield to the loop, so a flood cannot starve the watch
    MAX_QUERY = udpbatch.MAX_QUERY

    def __init__(self, sock: socket.socket, handle: Handle, observe: Observer | None = None,
                 sampler: Sampler | None = None, clock: Clock = SYSTEM) -> None:
        self.sock = sock
        self.clock = clock
        self.handle = handle
        self.sampler = sampler
        self.observe = observe
        self.addr: Any = None  # the sender of the datagram being answered
        self.sender: udpbatch.Peer = lambda: str(self.addr[0])  # asked for by an IXFR

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self.sock.fileno(), self._readable)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self.sock.fileno())
        self.sock.close()

    def _readable(self) -> None:
        recvfrom, sendto, handle = self.sock.recvfrom, self.sock.sendto, self.handle
        sender, observe, sampler = self.sender, self.observe, self.sampler
        perf, perf_ns = self.clock.perf_counter, self.clock.perf_counter_ns
        size = self.MAX_QUERY
        started = 0
        timed = 0.0
        for _ in range(self.BATCH):
            try:
                data, addr = recvfrom(size)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. an ICMP error queued on the socket
                log.debug("UDP receive: %s", exc)
                continue
            if observe is not None:
                started = perf_ns()
            if sampler is not None:
                sampler.left -= 1
                if sampler.left <= 0:
                    timed = perf()
            self.addr = addr
            response = handle(data, False, sender)
            if response is not None:
                try:
                    sendto(response, addr)
                except OSError as exc:  # send buffer full: UDP may drop, the client retries
                    log.debug("UDP send to %s: %s", addr, exc)
            if timed:
                assert sampler is not None
                sampler.timed(perf() - timed)
                timed = 0.0
            if observe is not None:
                try:
                    observe(data, response, False, addr, started)
                except Exception:
                    failed()


def udp_reader(sock: socket.socket, handle: Handle, mode: str,
               remembering: udpbatch.Remembering | None = None,
               observe: Observer | None = None, sampler: Sampler | None = None,
               clock: Clock = SYSTEM) -> UDPReader | udpbatch.BatchReader:
    """``batched`` (recvmmsg/sendmmsg; an error where unavailable), ``plain``, or ``auto``:
    batched where the system has it, else plain. ``observe``: see observe.Observer;
    ``sampler``: times 1 in so many answers (stats.Sampler)."""
    if mode != "plain":
        reason = udpbatch.load()
        if reason is None:
            return udpbatch.BatchReader(sock, handle, remembering, observe, sampler, clock)
        if mode == "batched":
            raise OSError(f"--udp-io batched: {reason}")
        log.info("batched UDP I/O unavailable (%s): one system call per datagram", reason)
    return UDPReader(sock, handle, observe, sampler, clock)


