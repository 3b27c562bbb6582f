"""server.TCPProtocol and zone transfers, driven call by call: the transfer holds the
queries behind it and answers them after, the send buffer it asks for, when reading
resumes, what a failed or lost transfer costs, and how a transfer waits for a client
that does not read. Stand-ins in tcpfakes.py; test_tcpprotocol.py has the rest."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from clusterset_dns.serving import server
from clusterset_dns.serving.server import TCPProtocol

from .tcpfakes import Loop, Transport, connect, frame, frames, make, run


class Transfers:
    """A transfer for a query starting b"axfr": it sends two messages through the
    connection once ``go`` is set, then ends as ``ending`` says."""

    def __init__(self, ending: BaseException | None = None) -> None:
        self.go = asyncio.Event()
        self.ending = ending
        self.messages = [b"soa", b"end"]
        self.asked: list[tuple[bytes, str]] = []

    def __call__(self, message: bytes, peer: str,
                 proto: TCPProtocol) -> Coroutine[Any, Any, None] | None:
        if not message.startswith(b"axfr"):
            return None
        self.asked.append((message, peer))
        return self.send(proto)

    async def send(self, proto: TCPProtocol) -> None:
        await self.go.wait()
        for message in self.messages:
            await proto.send(message)
        if self.ending is not None:
            raise self.ending


def test_a_transfer_holds_the_queries_behind_it_and_answers_them_after() -> None:
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        transport = Transport(("127.0.0.2", 40000), sock)
        proto = connect(dns, transport)
        proto.data_received(frame(b"q1") + frame(b"axfr") + frame(b"q2"))
        assert transfers.asked == [(b"axfr", "127.0.0.2")]
        assert [frames(w) for w in transport.written] == [[b"re:q1"]]  # before it: sent
        assert not transport.reading and proto.transferring is not None
        # the kernel doubles what it is given (up to net.core.wmem_max)
        wmem_max = int(Path("/proc/sys/net/core/wmem_max").read_text())
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
            2 * min(server.TRANSFER_SNDBUF, wmem_max)
        proto.data_received(frame(b"q3"))  # arrives during the transfer: waits
        proto.resume_writing()  # a drained write buffer does not end the wait either
        assert len(transport.written) == 1
        transfers.go.set()
        task = proto.transferring
        await task
        assert [frames(w) for w in transport.written[1:]] == [[b"soa"], [b"end"],
                                                              [b"re:q2", b"re:q3"]]
        assert proto.transferring is None and transport.reading
        assert not transport.aborted and not transport.closed
        proto.connection_lost(None)
        sock.close()
    run(main)


class NoBuffer:
    """A socket whose send buffer cannot be set."""

    def setsockopt(self, level: int, option: int, value: int) -> None:
        raise OSError(22, "Invalid argument")


def test_a_transfer_starts_where_the_send_buffer_cannot_be_set() -> None:
    async def main() -> None:
        transfers = Transfers()
        transfers.go.set()
        dns = make(transfer=transfers)
        transport = Transport(sock=NoBuffer())
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr"))
        task = proto.transferring
        assert task is not None
        await task
        assert [a for w in transport.written for a in frames(w)] == [b"soa", b"end"]
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize("after", ["paused", "eof", "another transfer"])
def test_after_a_transfer_reading_resumes_only_for_a_client_still_owed_nothing(
        after: str) -> None:
    """Not while the client does not read, not after it half-closed, not while a
    transfer asked for behind the first runs."""
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr") + (frame(b"axfr2") if after == "another transfer"
                                              else b""))
        first = proto.transferring
        assert first is not None
        if after == "paused":
            proto.pause_writing()
            transfers.messages = []  # it ends while the client still does not read
        if after == "eof":
            assert proto.eof_received() is True
        transfers.go.set()
        await asyncio.wait([first])
        assert not transport.reading
        if after == "another transfer":
            assert proto.transferring is not None and proto.transferring is not first
            await proto.transferring
            assert transport.reading  # after the last one
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize(("ending", "aborted"), [
    (ConnectionResetError("peer gone"), False),
    (TimeoutError(), True),  # over --xfr-timeout: cut mid-stream, so not a clean close
    (RuntimeError("a bug"), True),
])
def test_a_transfer_that_fails_costs_only_itself(ending: BaseException, aborted: bool,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        transfers = Transfers(ending)
        transfers.go.set()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr") + frame(b"q2"))
        task = proto.transferring
        assert task is not None
        await task
        assert proto.transferring is None
        assert transport.aborted is aborted
        answers = [a for w in transport.written for a in frames(w)]
        # after a failure the connection is not answered any more (it is being closed)
        assert answers == [b"soa", b"end"]
        proto.connection_lost(None)
    with caplog.at_level(logging.ERROR, "clusterset_dns.serving.server"):
        run(main)
    assert [r.getMessage() for r in caplog.records] == (
        ["zone transfer failed"] if isinstance(ending, RuntimeError) else [])


def test_a_transfer_waits_while_the_client_does_not_read() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        loop = asyncio.get_running_loop()
        proto.pause_writing()
        sending = loop.create_task(proto.send(b"m1"))
        await asyncio.sleep(0)
        assert frames(transport.written[0]) == [b"m1"] and not sending.done()
        proto.resume_writing()
        await sending
        assert proto.drained is None
        before = proto.last_activity
        await proto.send(b"m2")  # not paused: progress, no wait
        assert proto.last_activity >= before and frames(transport.written[1]) == [b"m2"]
        proto.pause_writing()
        sending = loop.create_task(proto.send(b"m3"))
        await asyncio.sleep(0)
        proto.connection_lost(None)
        with pytest.raises(ConnectionResetError, match=r"^connection lost$"):
            await sending
        proto.connection_lost(None)  # twice: nothing waits any more
        with pytest.raises(ConnectionResetError, match=r"^connection closed$"):
            await proto.send(b"m4")
    run(main)


def test_a_transfer_message_gives_other_connections_one_turn() -> None:
    async def main() -> None:
        dns = make()
        proto = connect(dns, Transport())
        sending = asyncio.get_running_loop().create_task(proto.send(b"m1"))
        for _ in range(3):  # the task's start, its turn given away, its end
            await asyncio.sleep(0)
        assert sending.done()
        proto.connection_lost(None)
    run(main)


def test_a_lost_connection_cancels_its_transfer() -> None:
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr"))
        task = proto.transferring
        assert task is not None
        await asyncio.sleep(0)
        proto.connection_lost(None)
        await task  # the cancellation ends the transfer quietly
        assert proto.transferring is None and not transport.aborted and not transport.written
    run(main)


@pytest.mark.parametrize("taken", [0, 1])
def test_a_transfer_message_left_in_the_buffer_is_what_the_client_must_drain(
        taken: int) -> None:
    """The last messages of a transfer may stay in the write buffer below the pause,
    where asyncio calls nothing as the client reads them: the idle check counts
    their draining, and a client reading none of them is cut at the instant."""
    async def main() -> None:
        dns = make(idle=5.0)
        transport = Transport()
        transport.holding = True
        proto = connect(dns, transport)
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        loop.now = 102.0
        await proto.send(bytes(1000))  # not paused: progress
        assert proto.last_activity == 102.0 and transport.buffered == 1002
        transport.buffered -= taken
        loop.now = 107.0
        proto._check_idle()
        assert (transport.aborted, dns.stats.tcp_aborted) == (not taken, int(not taken))
        assert [t.delay for t in loop.timers] == ([5.0] if taken else [])
        proto.connection_lost(None)
    run(main)
