"""logs.setup and logs.JSONFormatter: the handler set on the root logger (the writer
thread on standard error's descriptor, or a plain stream handler when standard error has
none), its format in each --log-format, the level, the API client's level; a JSON line's
fields exactly. Written for the survivors of scripts/mutate on process/logs.py."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from clusterset_dns.process import logs


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger, its handlers and the levels setup changes put back after."""
    logger = logging.getLogger()
    handlers, level = logger.handlers[:], logger.level
    client = logging.getLogger("aiohttp")
    client_level = client.level
    yield logger
    for handler in logger.handlers:
        handler.flush()  # its writer thread done with the test's descriptor before it closes
    logger.handlers[:] = handlers
    logger.setLevel(level)
    client.setLevel(client_level)


def record(message: str = "hello %s", args: tuple[Any, ...] = ("you",),
           level: int = logging.WARNING, exc_info: Any = None) -> logging.LogRecord:
    entry = logging.LogRecord("clusterset_dns.t", level, __file__, 1, message, args, exc_info)
    entry.created, entry.msecs = 1_700_000_000.0, 5.9  # 2023-11-14T22:13:20
    return entry


class NoDescriptor:
    def __init__(self, error: type[Exception] | None) -> None:
        self.error = error
        self.text = io.StringIO()

    def write(self, text: str) -> int:
        return self.text.write(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        if self.error is None:
            raise AttributeError("fileno")
        raise self.error("no descriptor")


@pytest.mark.parametrize("error", [None, OSError, ValueError],
                         ids=["no fileno", "OSError", "ValueError"])
def test_standard_error_without_a_descriptor_gets_a_stream_handler(
        root: logging.Logger, monkeypatch: pytest.MonkeyPatch,
        error: type[Exception] | None) -> None:
    stream = NoDescriptor(error)
    monkeypatch.setattr(sys, "stderr", stream)
    logs.setup("info", "json")
    [handler] = root.handlers
    assert type(handler) is logging.StreamHandler
    logging.getLogger("clusterset_dns.t").info("said")
    assert json.loads(stream.text.getvalue())["message"] == "said"


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    reader, writer = os.pipe()
    yield reader, writer
    os.close(reader)
    os.close(writer)


class Descriptor:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


@pytest.mark.parametrize(("level", "fmt", "client"), [
    ("debug", "json", logging.INFO), ("INFO", "text", logging.INFO),
    ("warning", "text", logging.WARNING), ("error", "json", logging.ERROR)])
def test_the_handler_its_format_and_the_levels(
        root: logging.Logger, monkeypatch: pytest.MonkeyPatch, pipe: tuple[int, int],
        level: str, fmt: str, client: int) -> None:
    monkeypatch.setattr(sys, "stderr", Descriptor(pipe[1]))
    root.handlers[:] = [logging.NullHandler(), logging.NullHandler()]
    logs.setup(level, fmt)
    [handler] = root.handlers
    assert isinstance(handler, logs.StderrHandler) and handler.fd == pipe[1]
    assert handler.limit == logs.MAX_PENDING
    assert root.level == logging.getLevelName(level.upper())
    assert logging.getLogger("aiohttp").level == client
    line = handler.format(record())
    if fmt == "json":
        assert json.loads(line)["message"] == "hello you"
    else:
        when = logging.Formatter().formatTime(record())
        assert line == f"{when} WARNING clusterset_dns.t: hello you"


def test_a_json_line() -> None:
    assert json.loads(logs.JSONFormatter().format(record())) == {
        "time": "2023-11-14T22:13:20.005Z", "level": "warning", "logger": "clusterset_dns.t",
        "message": "hello you"}


def test_a_json_line_of_a_query_has_its_fields() -> None:
    entry = record("answered", ())
    entry.query = {"client": "127.0.0.1", "rcode": "NOERROR", "message": "kept"}
    assert json.loads(logs.JSONFormatter().format(entry)) == {
        "time": "2023-11-14T22:13:20.005Z", "level": "warning", "logger": "clusterset_dns.t",
        "message": "kept", "client": "127.0.0.1", "rcode": "NOERROR"}
    entry.query = "not a dict"
    assert "client" not in json.loads(logs.JSONFormatter().format(entry))


def test_a_json_line_with_an_exception() -> None:
    try:
        raise KeyError("lost")
    except KeyError:
        entry = record("failed", (), logging.ERROR, sys.exc_info())
    fields = json.loads(logs.JSONFormatter().format(entry))
    assert fields["level"] == "error"
    assert fields["exception"].startswith("Traceback (most recent call last):\n")
    assert fields["exception"].endswith("KeyError: 'lost'")


@pytest.mark.parametrize(("msecs", "shown"), [(0.0, ".000Z"), (999.99, ".999Z"), (42.5, ".042Z")])
def test_the_milliseconds(msecs: float, shown: str) -> None:
    entry = record()
    entry.msecs = msecs
    assert json.loads(logs.JSONFormatter().format(entry))["time"] == f"2023-11-14T22:13:20{shown}"


# -- StderrHandler's edges -------------------------------------------------------------------

def written(reader: int) -> bytes:
    """What the pipe holds now (the handler flushed first)."""
    os.set_blocking(reader, False)
    try:
        return os.read(reader, 65536)
    except BlockingIOError:
        return b""


def test_a_line_that_is_not_utf8_is_written_escaped(
        pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "FLUSH_TIMEOUT", 10.0)  # returns once written, far sooner
    handler = logs.StderrHandler(pipe[1])
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.emit(record("a name: %s", ("b\udcffc",)))  # a lone surrogate: os.fsdecode's
    handler.flush()
    assert written(pipe[0]) == b"a name: b\\udcffc\n"


def test_a_line_that_cannot_be_formatted_is_reported_not_raised(
        pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", True)  # logging's default: reported
    handler = logs.StderrHandler(pipe[1])
    handler.emit(record("count %d", ("many",)))
    assert (handler.held, handler.thread) == (0, None)
    assert "Message: 'count %d'\nArguments: ('many',)\n" in capsys.readouterr().err


def test_the_writer_is_a_daemon_thread_named_for_its_job(pipe: tuple[int, int]) -> None:
    """A writer blocked for good on a reader that never reads must not keep the process
    from exiting."""
    handler = logs.StderrHandler(pipe[1])
    handler.emit(record())
    handler.flush()  # written before the pipe closes (its descriptor's number is reused)
    assert handler.thread is not None
    assert (handler.thread.name, handler.thread.daemon) == ("log-writer", True)


class Waits(threading.Condition):
    """A Condition whose wait_for returns at once, keeping the predicate it was given."""

    predicate: Any = None

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        self.predicate = predicate
        return predicate()


def test_flush_waits_until_nothing_is_held(pipe: tuple[int, int]) -> None:
    handler = logs.StderrHandler(pipe[1])
    handler.changed = waits = Waits()
    handler.flush()
    handler.held = 5
    assert waits.predicate() is False
    handler.held = 0
    assert waits.predicate() is True


def test_lines_held_together_are_written_together_in_order(pipe: tuple[int, int]) -> None:
    """While the test holds the handler's lock the writer thread cannot take a line: it
    takes the three at once."""
    handler = logs.StderrHandler(pipe[1])
    handler.setFormatter(logging.Formatter("%(message)s"))
    with handler.changed:
        for i in range(3):
            handler.emit(record(f"line {i}", ()))
        assert handler.held == 3 * len(b"line 0\n")
    handler.flush()
    assert written(pipe[0]) == b"line 0\nline 1\nline 2\n"
