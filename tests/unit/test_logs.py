"""logs.StderrHandler against a real pipe whose reader stops reading: emit never
blocks, the bytes held are bounded exactly, the dropped lines are said once the reader
reads again, and flush (the exit's) returns though nothing can be written."""

from __future__ import annotations

import fcntl
import logging
import os
import select
from collections.abc import Iterator

import pytest

from clusterset_dns.process import logs

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@pytest.fixture
def full_pipe() -> Iterator[tuple[int, int]]:
    """A pipe already full: the next write to it blocks until the reader reads."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, F_SETPIPE_SZ, 4096)
    os.set_blocking(writer, False)
    while True:
        try:
            os.write(writer, b"f" * 4096)
        except BlockingIOError:
            break
    os.set_blocking(writer, True)
    yield reader, writer
    os.close(reader)
    os.close(writer)


def record(text: str) -> logging.LogRecord:
    return logging.LogRecord("t", logging.INFO, __file__, 0, text, (), None)


def drain_until(reader: int, end: bytes) -> bytes:
    """What the pipe holds after the filler, up to ``end`` (at most 50 polls of 0.2 s)."""
    got = b""
    for _ in range(50):
        if select.select([reader], [], [], 0.2)[0]:
            got += os.read(reader, 65536)
        if got.endswith(end):
            return got.lstrip(b"f")
    raise AssertionError(f"never got {end!r}: {got[-200:]!r}")


@pytest.mark.parametrize(("slack", "kept"), [(0, 2), (-1, 1)])
def test_lines_past_the_limit_are_dropped_then_said(full_pipe: tuple[int, int], slack: int,
                                                    kept: int) -> None:
    reader, writer = full_pipe
    line = len(b"line 1\n")
    handler = logs.StderrHandler(writer, limit=2 * line + slack)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for i in range(1, 4):
        handler.emit(record(f"line {i}"))  # returns though the pipe is full
    dropped = 3 - kept
    assert handler.held == kept * line
    notice = f"{dropped} log lines dropped: standard error was not being read\n".encode()
    expected = b"".join(f"line {i}\n".encode() for i in range(1, kept + 1)) + notice
    assert drain_until(reader, notice) == expected


def test_flush_returns_though_nothing_can_be_written(full_pipe: tuple[int, int],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "FLUSH_TIMEOUT", 0.01)
    handler = logs.StderrHandler(full_pipe[1])
    handler.emit(record("held"))
    handler.flush()
    assert handler.held == len(b"held\n")


def test_a_closed_reader_loses_the_lines_not_the_writer() -> None:
    reader, writer = os.pipe()
    os.close(reader)
    handler = logs.StderrHandler(writer)
    try:
        handler.emit(record("nobody reads this"))
        handler.flush()  # EPIPE: the line is given up, the writer goes on
        assert handler.held == 0
        assert handler.thread is not None and handler.thread.is_alive()
    finally:
        os.close(writer)
