"""The worker pool's supervision at its boundaries, on the injected clock: what is sent
to whom, when a silent or stuck worker is killed (the second after the limit, not the
second of it), the restart's back-off (doubling, capped, reset after a healthy run), how
a worker's end is told, and the worker's side of the socketpair (the Config, updates,
reports). The process is a stand-in at its seam (poll, kill, terminate); the real ones
are tests/unit/test_workers.py's. Written for the survivors of
``scripts/mutate clusterset_dns/process/workers.py``."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import workers
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone.cache import Op, SetSynced

from .fakeclock import FakeClock

PID = 4242


class Proc:
    """A worker process at its seam: ``exits``: how many kills or terminations it takes
    to end it (0: it has ended, with ``code``)."""

    def __init__(self, exits: int = 1, code: int | None = None) -> None:
        self.pid = PID
        self.returncode: int | None = code
        self.exits = exits
        self.signals: list[str] = []

    def poll(self) -> int | None:
        return self.returncode

    def _signal(self, name: str, code: int) -> None:
        self.signals.append(name)
        self.exits -= 1
        if self.exits <= 0 and self.returncode is None:
            self.returncode = code

    def kill(self) -> None:
        self._signal("kill", -9)

    def terminate(self) -> None:
        self._signal("term", -15)


class Writer:
    """The parent's end of a worker's socketpair: what was written, whether closed."""

    def __init__(self, on_close: Callable[[], None] = lambda: None) -> None:
        self.frames: list[object] = []
        self.closed = False
        self.on_close = on_close

    def write(self, data: bytes) -> None:
        size = struct.unpack("!I", data[:4])[0]
        assert size == len(data) - 4
        self.frames.append(pickle.loads(data[4:]))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True
        self.on_close()


def pool(count: int = 1, clock: FakeClock | None = None) -> tuple[workers.WorkerPool,
                                                                  list[str]]:
    restarts: list[str] = []
    made = workers.WorkerPool(Config(), count, "none:none", lambda: [SetSynced(True)],
                              restarts.append, clock or FakeClock())
    return made, restarts


def attach(worker: workers.Worker, proc: Proc | None = None,
           writer: Writer | None = None) -> tuple[Proc, Writer]:
    proc = proc or Proc()
    writer = writer or Writer()
    worker.proc = cast(subprocess.Popen[bytes], proc)
    worker.writer = cast(asyncio.StreamWriter, writer)
    return proc, writer


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


# -- the parent sends ------------------------------------------------------------------------------

def test_a_frame_is_its_length_then_the_pickle() -> None:
    update = workers.Update(3, [SetSynced(True)])
    frame = workers._frame(update)
    assert frame[:4] == struct.pack("!I", len(frame) - 4)
    # pickled with the highest protocol (parent and workers run the same interpreter)
    assert frame[4:6] == pickle.PROTO + bytes([pickle.HIGHEST_PROTOCOL])
    assert pickle.loads(frame[4:]) == update

    async def read() -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(frame + b"rest")
        return await workers._read_frame(reader)

    assert run(read()) == update


def test_a_worker_is_sent_to_only_while_its_socket_is_open() -> None:
    worker = workers.Worker(1)
    worker.send(workers.StartServing())  # no socket yet: nothing, no error
    _, writer = attach(worker)
    worker.send(workers.StartServing())
    writer.closed = True
    worker.send(workers.StartServing())
    assert writer.frames == [workers.StartServing()]


def test_updates_are_numbered_per_worker_and_the_longest_kept() -> None:
    made, _ = pool(2)
    first, second = made.workers
    _, writer = attach(first)
    ops_a: list[Op] = [SetSynced(True)]
    ops_b: list[Op] = [SetSynced(False)]
    made.send(ops_a, 0.5)
    made.send(ops_b, 0.25)
    made.send(ops_a)
    assert writer.frames == [workers.Update(1, ops_a), workers.Update(2, ops_b),
                             workers.Update(3, ops_a)]
    assert (first.sent, second.sent) == (3, 0)  # no socket: nothing counted as sent
    assert made.longest_update == 0.5


def test_missing_lists_the_workers_not_serving_once_the_parent_serves() -> None:
    made, _ = pool(3)
    writers = [attach(w)[1] for w in made.workers]
    assert made.missing() == []  # not serving yet: nobody is missing
    made.workers[1].serving = True
    made.start_serving()
    assert made.serving
    assert [w.frames for w in writers] == [[workers.StartServing()]] * 3
    assert made.missing() == [1, 3]
    assert made.stats() == [made.retired, *(w.stats for w in made.workers)]
    assert all(a is b for a, b in zip(made.stats(),
                                      [made.retired, *(w.stats for w in made.workers)],
                                      strict=True))


def test_a_worker_slot_starts_empty() -> None:
    worker = workers.Worker(7)
    assert (worker.index, worker.proc, worker.writer, worker.pid) == (7, None, None, None)
    assert (worker.sent, worker.applied, worker.serving) == (0, 0, False)
    assert (worker.last_report, worker.last_progress, worker.started) == (0.0, 0.0, 0.0)
    assert worker.restart_delay == workers.RESTART_FIRST
    attach(worker)
    assert worker.pid == PID
    made, _ = pool(2)
    assert [w.index for w in made.workers] == [1, 2]
    assert (made.serving, made.stopping, made.longest_update) == (False, False, 0.0)


# -- the watchdog ----------------------------------------------------------------------------------

async def rounds(clock: FakeClock, count: int, before: Callable[[], None] = lambda: None
                 ) -> None:
    """``count`` rounds of the watchdog (one a REPORT_SECONDS); ``before`` each."""
    for _ in range(count):
        before()
        clock.advance(workers.REPORT_SECONDS)
        for _ in range(3):
            await asyncio.sleep(0)


@pytest.mark.parametrize("longest", [0.0, 2.0])
def test_a_silent_worker_is_killed_the_round_after_the_limit(
        longest: float, caplog: pytest.LogCaptureFixture) -> None:
    allowed = workers.STALL_SECONDS + 3 * longest  # 10 s, or 16 s after a 2 s update

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        clock = FakeClock()
        made, restarts = pool(1, clock)
        made.longest_update = longest
        proc, _ = attach(made.workers[0])
        made.workers[0].last_report = made.workers[0].last_progress = clock.monotonic()
        watchdog = asyncio.ensure_future(made._watchdog())
        await asyncio.sleep(0)
        await rounds(clock, int(allowed))  # silent for exactly the limit: kept
        kept = list(proc.signals)
        await rounds(clock, 1)
        watchdog.cancel()
        return kept, proc.signals, restarts

    with caplog.at_level(logging.ERROR):
        kept, signals, restarts = run(scenario())
    assert (kept, signals, restarts) == ([], ["kill"], ["stalled"])
    assert caplog.messages == [f"worker 1 (pid {PID}) stopped reporting for "
                               f"{allowed:.0f}s; killing it"]


@pytest.mark.parametrize(("applied", "sent", "killed"), [(2, 3, True), (3, 3, False)])
def test_a_worker_that_reports_but_applies_nothing_is_killed(
        applied: int, sent: int, killed: bool, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        clock = FakeClock()
        made, restarts = pool(1, clock)
        worker = made.workers[0]
        proc, _ = attach(worker)
        worker.applied, worker.sent = applied, sent
        worker.last_progress = clock.monotonic()

        def report() -> None:
            worker.last_report = clock.monotonic()

        watchdog = asyncio.ensure_future(made._watchdog())
        await asyncio.sleep(0)
        await rounds(clock, int(workers.STALL_SECONDS), report)
        kept = list(proc.signals)
        await rounds(clock, 1, report)
        watchdog.cancel()
        return kept, proc.signals, restarts

    with caplog.at_level(logging.ERROR):
        kept, signals, restarts = run(scenario())
    assert kept == []
    assert (signals, restarts) == ((["kill"], ["stalled"]) if killed else ([], []))
    assert caplog.messages == ([f"worker 1 (pid {PID}) has not applied update 3 of 3 for "
                                "10s; killing it"] if killed else [])


def test_the_watchdog_passes_slots_without_a_running_process() -> None:
    async def scenario() -> list[list[str]]:
        clock = FakeClock()
        made, restarts = pool(4, clock)
        gone, _ = attach(made.workers[0], Proc(code=1))  # exited, not yet reaped
        no_socket, _ = attach(made.workers[1])
        made.workers[1].writer = None  # restarting
        made.workers[2].writer = cast(asyncio.StreamWriter, Writer())  # no process yet
        silent, _ = attach(made.workers[3])  # and after them, one that stopped reporting
        watchdog = asyncio.ensure_future(made._watchdog())
        await asyncio.sleep(0)
        await rounds(clock, 20)
        watchdog.cancel()
        assert restarts == ["stalled"]  # once: a killed process is passed then
        return [gone.signals, no_socket.signals, silent.signals[:1]]

    assert run(scenario()) == [[], [], ["kill"]]


# -- a worker's end, and its restart ---------------------------------------------------------------

def report(applied: int, serving: bool = True, requests: int = 0) -> bytes:
    stats = Stats()
    stats.truncated = requests
    return workers._frame(workers.Report(stats, applied, serving))


def test_reports_move_progress_when_applied_moves_or_has_caught_up() -> None:
    async def scenario() -> list[tuple[int, bool, float, float]]:
        clock = FakeClock()
        made, _ = pool(1, clock)
        worker = made.workers[0]
        attach(worker, Proc(code=0))
        worker.sent = 3
        reader = asyncio.StreamReader()
        follow = asyncio.ensure_future(made._follow(worker, reader))
        seen = []
        for applied in (0, 1, 1, 3, 3):
            clock.advance(1.0)
            reader.feed_data(report(applied, serving=applied == 3))
            for _ in range(3):
                await asyncio.sleep(0)
            seen.append((worker.applied, worker.serving, worker.last_report,
                         worker.last_progress))
        made.stopping = True  # the end is the shutdown's: no restart
        reader.feed_eof()
        await follow
        return seen

    assert run(scenario()) == [(0, False, 1001.0, 0.0), (1, False, 1002.0, 1002.0),
                               (1, False, 1003.0, 1002.0), (3, True, 1004.0, 1004.0),
                               (3, True, 1005.0, 1005.0)]


RESTARTS = [
    # (returncode, how it is told, delay, ran for, the next delay)
    (-9, "was killed by signal 9", workers.RESTART_FIRST, 1.0, 2 * workers.RESTART_FIRST),
    (0, "exited with status 0", 16.0, workers.HEALTHY_SECONDS, workers.RESTART_CAP),
    (1, "exited with status 1", 8.0, workers.HEALTHY_SECONDS + 0.5,
     2 * workers.RESTART_FIRST),
]


@pytest.mark.parametrize(("code", "how", "delay", "ran", "following"), RESTARTS)
def test_a_worker_that_ends_is_restarted_after_its_back_off(
        code: int, how: str, delay: float, ran: float, following: float,
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[workers.WorkerPool, list[str], list[float], float]:
        clock = FakeClock()
        made, restarts = pool(1, clock)
        worker = made.workers[0]
        _, writer = attach(worker, Proc(code=code))
        worker.restart_delay = delay if code != 1 else 4.0  # a healthy run resets it
        worker.started = clock.now
        spawned: list[float] = []

        async def spawn(slot: workers.Worker) -> None:
            assert slot is worker
            spawned.append(clock.now)

        made._spawn = spawn  # type: ignore[method-assign,assignment]
        reader = asyncio.StreamReader()
        reader.feed_data(report(1, requests=5))
        reader.feed_eof()
        clock.advance(ran)
        started = clock.now
        follow = asyncio.ensure_future(made._follow(worker, reader))
        while not follow.done():
            await asyncio.sleep(0)
            clock.jump()
        assert writer.closed and worker.writer is None
        return made, restarts, [t - started for t in spawned], worker.restart_delay

    with caplog.at_level(logging.ERROR):
        made, restarts, spawned, next_delay = run(scenario())
    worker = made.workers[0]
    expected = delay if code != 1 else workers.RESTART_FIRST
    assert restarts == ["exited"]
    assert spawned == [pytest.approx(expected, abs=0.2)]  # plus the reaping's polls
    assert next_delay == following
    assert (worker.serving, worker.stats.truncated, made.retired.truncated) == (False, 0, 5)
    assert caplog.messages == [f"worker 1 (pid {PID}) {how}; restarting it in "
                               f"{expected:.1f}s and resyncing it"]


def test_an_unreadable_report_kills_the_worker_and_restarts_it(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        clock = FakeClock()
        made, restarts = pool(1, clock)
        worker = made.workers[0]
        proc, _ = attach(worker)

        async def spawn(_: workers.Worker) -> None:
            pass

        made._spawn = spawn  # type: ignore[method-assign,assignment]
        killed_at: list[float] = []
        kill = proc.kill

        def timed_kill() -> None:
            killed_at.append(clock.now)
            kill()

        proc.kill = timed_kill  # type: ignore[method-assign]
        start = clock.now
        reader = asyncio.StreamReader()
        reader.feed_data(workers._frame("not a report"))
        follow = asyncio.ensure_future(made._follow(worker, reader))
        while not follow.done():
            await asyncio.sleep(0)
            clock.jump()
        assert killed_at == [start]  # at once, not by the reaping 5 s later
        return proc.signals, restarts

    with caplog.at_level(logging.ERROR):
        signals, restarts = run(scenario())
    assert (signals, restarts) == (["kill"], ["exited"])
    assert caplog.messages[0] == "worker 1: unreadable report; restarting it"
    assert "TypeError: worker sent a str" in caplog.text


def test_a_worker_whose_socket_ended_is_killed_once_5_s_pass_without_its_exit() -> None:
    """The end of a worker's reports while its process runs on (it closed its end, or
    hangs in its exit): it is waited for 5 s, then killed at the first poll past them
    (polled here every 0.25 s), and restarted."""
    async def scenario() -> tuple[list[float], list[str]]:
        clock = FakeClock()
        made, restarts = pool(1, clock)
        worker = made.workers[0]
        proc, _ = attach(worker)  # running: one kill ends it

        async def spawn(_: workers.Worker) -> None:
            pass

        made._spawn = spawn  # type: ignore[method-assign,assignment]
        killed_at: list[float] = []
        kill = proc.kill

        def timed_kill() -> None:
            killed_at.append(clock.now)
            kill()

        proc.kill = timed_kill  # type: ignore[method-assign]
        start = clock.now
        reader = asyncio.StreamReader()
        reader.feed_eof()
        follow = asyncio.ensure_future(made._follow(worker, reader))
        await driven(clock, follow, 0.25)
        return [t - start for t in killed_at], restarts

    assert run(scenario()) == ([5.25], ["exited"])


@pytest.mark.parametrize("why", ["stopping", "replaced"])
def test_an_end_while_stopping_or_after_a_replacement_restarts_nothing(why: str) -> None:
    async def scenario() -> tuple[workers.WorkerPool, list[str], Writer]:
        made, restarts = pool(1)
        worker = made.workers[0]
        _, writer = attach(worker, Proc(code=-15))
        reader = asyncio.StreamReader()
        reader.feed_data(report(1, requests=2))
        follow = asyncio.ensure_future(made._follow(worker, reader))
        await asyncio.sleep(0)  # the report read, the next awaited
        if why == "stopping":
            made.stopping = True
        else:
            worker.proc = cast(subprocess.Popen[bytes], Proc())
        reader.feed_eof()
        await follow
        return made, restarts, writer

    made, restarts, writer = run(scenario())
    assert restarts == []
    assert not writer.closed
    assert (made.workers[0].stats.truncated, made.retired.truncated) == (2, 0)


# -- reaping and stopping --------------------------------------------------------------------------

async def driven(clock: FakeClock, task: asyncio.Future[Any], step: float) -> None:
    """Runs ``task`` to its end, the clock moved ``step`` (a binary fraction: the sums are
    exact) whenever the task waits on it."""
    while not task.done():
        for _ in range(3):
            await asyncio.sleep(0)
        clock.advance(step)


@pytest.mark.parametrize(("exits", "timeout", "kills"), [
    (1, 5.0, [5.25]), (2, 5.0, [5.25, 10.5]),  # polled every 0.25 s here: past, not at
    (1, 0.0, [0.25]),  # a deadline of now: not yet at the first poll
])
def test_reap_kills_after_the_timeout_and_again_after_each(exits: int, timeout: float,
                                                           kills: list[float]) -> None:
    async def scenario() -> tuple[int, list[str], list[float]]:
        clock = FakeClock()
        made, _ = pool(1, clock)
        proc = Proc(exits)
        killed_at: list[float] = []
        kill = proc.kill

        def timed_kill() -> None:
            killed_at.append(clock.now)
            kill()

        proc.kill = timed_kill  # type: ignore[method-assign]
        start = clock.now
        reaping = asyncio.ensure_future(made._reap(cast(subprocess.Popen[bytes], proc),
                                                   timeout))
        await driven(clock, reaping, 0.25)
        return reaping.result(), proc.signals, [t - start for t in killed_at]

    code, signals, killed_at = run(scenario())
    assert (code, signals, killed_at) == (-9, ["kill"] * exits, kills)


def test_stop_waits_stop_seconds_then_terminates_the_rest() -> None:
    async def scenario() -> tuple[list[str], list[str], list[float], list[bool]]:
        clock = FakeClock()
        made, _ = pool(2, clock)
        polite = Proc()
        attach(made.workers[0], polite, Writer(on_close=lambda: setattr(polite, "returncode",
                                                                          0)))
        stubborn, stubborn_writer = attach(made.workers[1])
        terminated_at: list[float] = []
        terminate = stubborn.terminate

        def timed_terminate() -> None:
            terminated_at.append(clock.now)
            terminate()

        stubborn.terminate = timed_terminate  # type: ignore[method-assign]
        start = clock.now
        stopping = asyncio.ensure_future(made.stop())
        await driven(clock, stopping, 0.5)
        return polite.signals, stubborn.signals, [t - start for t in terminated_at], [
            made.stopping, stubborn_writer.closed]

    polite, stubborn, terminated, flags = run(scenario())
    assert (polite, stubborn, flags) == ([], ["term"], [True, True])
    assert terminated == [workers.STOP_SECONDS]  # at the deadline, not a poll later


def test_stop_kills_a_worker_still_there_10_s_after_its_termination() -> None:
    async def scenario() -> list[tuple[str, float]]:
        clock = FakeClock()
        made, _ = pool(1, clock)
        deaf = Proc(exits=2)
        attach(made.workers[0], deaf)
        signalled: list[tuple[str, float]] = []
        start = clock.now
        kill, terminate = deaf.kill, deaf.terminate

        def timed_kill() -> None:
            signalled.append(("kill", clock.now - start))
            kill()

        def timed_terminate() -> None:
            signalled.append(("terminate", clock.now - start))
            terminate()

        deaf.kill = timed_kill  # type: ignore[method-assign]
        deaf.terminate = timed_terminate  # type: ignore[method-assign]
        stopping = asyncio.ensure_future(made.stop())
        await driven(clock, stopping, 0.5)
        return signalled

    # terminated at STOP_SECONDS; killed at the first poll past 10 s later
    assert run(scenario()) == [("terminate", workers.STOP_SECONDS),
                               ("kill", workers.STOP_SECONDS + 10.5)]


def test_stop_is_quick_when_every_worker_exits() -> None:
    async def scenario() -> float:
        clock = FakeClock()
        made, _ = pool(1, clock)
        proc = Proc()
        attach(made.workers[0], proc, Writer(on_close=lambda: setattr(proc, "returncode", 0)))
        start = clock.now
        stopping = asyncio.ensure_future(made.stop())
        while not stopping.done():
            await asyncio.sleep(0)
            clock.jump()
        assert proc.signals == []
        return clock.now - start

    assert run(scenario()) == 0.0


# -- the worker's side -----------------------------------------------------------------------------

def test_the_config_is_read_in_pieces() -> None:
    config = Config(zone="example.test", ttl=9)
    frame = workers._frame(config)
    parent, child = socket.socketpair()
    with parent, child:
        parent.sendall(frame[:2])
        parent.sendall(frame[2:7])
        parent.sendall(frame[7:])
        assert workers.read_config(child) == config


class Arrivals:
    """A socket's receiving end at its seam: the bytes arrive in these pieces, and one
    recv() gets at most what has arrived of the current piece."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)

    def recv(self, size: int) -> bytes:
        if not self.pieces:
            return b""
        data, self.pieces[0] = self.pieces[0][:size], self.pieces[0][size:]
        if not self.pieces[0]:
            self.pieces.pop(0)
        return data


def test_the_config_is_read_to_its_last_byte_and_no_further() -> None:
    frame = workers._frame(Config(ttl=11))
    sock = Arrivals(frame[:2], frame[2:10], frame[10:20], frame[20:] + b"NEXT")
    assert workers.read_config(cast(socket.socket, sock)) == Config(ttl=11)
    assert sock.pieces == [b"NEXT"]  # the first update's bytes, left for the reader


@pytest.mark.parametrize(("sent", "error"), [
    (b"", "the parent went away before sending the config"),
    (workers._frame(Config())[:9], "the parent went away before sending the config"),
    (workers._frame("a config"), "expected the Config, got a str"),
])
def test_no_config_is_an_error_that_says_so(sent: bytes, error: str) -> None:
    parent, child = socket.socketpair()
    with parent, child:
        parent.sendall(sent)
        parent.shutdown(socket.SHUT_WR)
        with pytest.raises((ConnectionError, TypeError)) as caught:
            workers.read_config(child)
    assert str(caught.value) == error


def test_the_worker_applies_serves_and_reports_until_the_parent_goes() -> None:
    async def scenario() -> tuple[list[list[Op]], int, list[object]]:
        clock = FakeClock()
        parent, child = socket.socketpair()
        reader, writer = await asyncio.open_unix_connection(sock=parent)
        applied: list[list[Op]] = []
        started: list[int] = []
        stats = Stats()
        stats.truncated = 3

        async def start_serving() -> None:
            started.append(len(applied))

        following = asyncio.ensure_future(workers.follow_parent(
            child, applied.append, start_serving, stats, lambda: bool(started), clock))
        reports = [await workers._read_frame(reader)]  # at once, before any update
        for message in (workers.Update(1, [SetSynced(True)]), workers.StartServing(),
                        workers.Update(2, [SetSynced(False)])):
            writer.write(workers._frame(message))
        await writer.drain()
        for _ in range(200):  # turns of the loop, no time: the backlog is read at once
            if len(applied) == 2:
                break
            await asyncio.sleep(0)
        assert len(applied) == 2
        assert clock.pending() == [1000.0 + workers.REPORT_SECONDS]
        clock.advance(workers.REPORT_SECONDS)
        reports.append(await workers._read_frame(reader))
        writer.close()
        await following
        return applied, started[0], reports

    applied, started_after, reports = run(scenario())
    assert applied == [[SetSynced(True)], [SetSynced(False)]]
    assert started_after == 1
    assert [(cast(workers.Report, r).applied, cast(workers.Report, r).serving,
             cast(workers.Report, r).stats.truncated) for r in reports] == [
        (0, False, 3), (2, True, 3)]


def test_an_unexpected_message_ends_the_worker_with_the_error() -> None:
    async def scenario() -> None:
        parent, child = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=parent)
        writer.write(workers._frame("hello"))

        async def start_serving() -> None:
            pass

        try:
            await workers.follow_parent(child, lambda ops: None, start_serving, Stats(),
                                        lambda: False, FakeClock())
        finally:
            writer.close()

    with pytest.raises(TypeError, match=r"^unexpected message from the parent: str$"):
        run(scenario())


# -- a worker started: a real process, this module's child() -------------------------------------

def child(fd: int) -> int:
    """A worker that says what it was sent: the frames before update 2 (counted in
    ``truncated``), applied 2 when the first of them was the resync of the parent's
    snapshot, serving when StartServing was among them; it exits with the Config's TTL
    once the parent closes its end."""
    sock = socket.socket(fileno=fd)
    config = workers.read_config(sock)
    stream = sock.makefile("rb")
    frames: list[object] = []
    while True:
        size = struct.unpack("!I", stream.read(4))[0]
        frame = pickle.loads(stream.read(size))
        if frame == workers.Update(2, [SetSynced(False)]):
            break
        frames.append(frame)
    stats = Stats()
    stats.truncated = len(frames)
    resynced = frames[:1] == [workers.Update(1, [SetSynced(True)])]
    sock.sendall(workers._frame(workers.Report(stats, 2 if resynced else -1,
                                               workers.StartServing() in frames)))
    while sock.recv(1):
        pass
    # The package's root first, then what the parent had (INHERITED: the test's copy).
    expected = os.pathsep.join(p for p in (str(workers.PACKAGE_ROOT),
                                           os.environ.get("INHERITED", "")) if p)
    if not os.path.samestat(os.fstat(0), os.stat(os.devnull)):
        return 2  # a worker reads nothing of the terminal: its stdin is /dev/null
    return config.ttl if os.environ.get("PYTHONPATH") == expected else 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("serving", [False, True])
def test_a_started_worker_gets_the_config_then_the_snapshot(
        serving: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With or without a PYTHONPATH of its own: the child is given the package's root,
    then the parent's PYTHONPATH (it checks; no chdir here: under mutmut the child must
    find the mutated tree from the parent's directory)."""
    # This process's stdin a pipe for the test: the child's must not be it.
    saved, (readable, writable) = os.dup(0), os.pipe()
    os.dup2(readable, 0)
    os.close(readable)
    inherited = str(tmp_path / "elsewhere") if serving else ""
    monkeypatch.setenv("INHERITED", inherited)
    if inherited:
        monkeypatch.setenv("PYTHONPATH", inherited)
    else:
        monkeypatch.delenv("PYTHONPATH", raising=False)

    async def scenario() -> tuple[workers.Worker, float, int | None]:
        clock = FakeClock()
        made = workers.WorkerPool(Config(ttl=7), 1, "tests.unit.test_workers_pool:child",
                                  lambda: [SetSynced(True)], clock=clock)
        made.serving = serving
        worker = made.workers[0]
        worker.stats.truncated = 99  # a new process starts from zero
        worker.applied, worker.serving = 5, True
        clock.advance(3.0)
        async def waits() -> None:
            await asyncio.Event().wait()

        running = asyncio.ensure_future(waits())
        finished = asyncio.ensure_future(asyncio.sleep(0))
        await finished
        made._tasks = [running, finished]
        await made._spawn(worker)
        # The tasks stop() cancels: those still running, and this worker's follower.
        assert made._tasks[0] is running and len(made._tasks) == 2
        running.cancel()
        assert (worker.sent, worker.applied, worker.serving, worker.stats.truncated) == (
            1, 0, False, 0)
        assert worker.started == worker.last_report == worker.last_progress == clock.now
        made.send([SetSynced(False)])
        for _ in range(600):  # the child's start and its report, in real time
            if worker.applied:
                break
            await asyncio.sleep(0.05)
        spawned_at = clock.now
        stopping = asyncio.ensure_future(made.stop())
        while not stopping.done():
            await asyncio.sleep(0.01)
            clock.jump()
        assert worker.proc is not None
        return worker, spawned_at, worker.proc.returncode

    try:
        worker, _, code = run(scenario())
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(writable)
    assert (worker.applied, worker.serving) == (2, serving)
    assert worker.stats.truncated == (2 if serving else 1)
    assert code == 7


def test_start_spawns_each_worker_and_watches_only_when_there_are_some() -> None:
    async def scenario() -> tuple[list[int], list[str], list[str]]:
        spawned: list[int] = []

        async def spawn(slot: workers.Worker) -> None:
            spawned.append(slot.index)

        made, _ = pool(2)
        made._spawn = spawn  # type: ignore[method-assign,assignment]
        await made.start()
        names = [t.get_name() for t in made._tasks]
        for task in made._tasks:
            task.cancel()
        none, _ = pool(0)
        await none.start()
        return spawned, names, [t.get_name() for t in none._tasks]

    assert run(scenario()) == ([1, 2], ["worker-watchdog"], [])


def test_a_worker_leaves_ctrl_c_to_its_parent() -> None:
    """Ctrl-C (SIGINT) is ignored; SIGTERM, the parent's stop, is left as it was."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        workers.ignore_interrupts()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, before[0])
        if before[1] is not None:
            signal.signal(signal.SIGTERM, before[1])
