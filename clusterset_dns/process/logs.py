"""Logging set-up: plain text or one JSON object a line, written to standard error by a
thread of its own (:class:`StderrHandler`)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import deque

MAX_PENDING = 1 << 20  # bytes of lines held while standard error is not being read
FLUSH_TIMEOUT = 1.0  # seconds the exit waits for held lines to be written


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "query", None)  # a query log line (querylog): its fields too
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class StderrHandler(logging.Handler):
    """Hands each formatted line to a thread that writes it to ``fd``.

    A reader that stops reading (a pipe nobody drains, a stalled log collector) blocks
    that thread, never the event loop: a StreamHandler's write blocked it, so once the
    pipe held 64 KiB the server answered nothing and ignored SIGTERM. Lines past
    ``limit`` bytes held are dropped and counted; the count is written once the reader
    reads again."""

    def __init__(self, fd: int, limit: int = MAX_PENDING) -> None:
        super().__init__()
        self.fd = fd
        self.limit = limit
        self.pending: deque[bytes] = deque()
        self.held = 0  # bytes queued or being written
        self.dropped = 0
        self.changed = threading.Condition()  # reentrant: a signal handler may log
        self.thread: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:  # logging's contract: report, never raise
            self.handleError(record)
            return
        with self.changed:
            if self.held + len(data) > self.limit:
                self.dropped += 1
                return
            self.pending.append(data)
            self.held += len(data)
            if self.thread is None:
                # Daemon: a writer blocked for good must not keep the process alive.
                self.thread = threading.Thread(target=self._write_forever,
                                               name="log-writer", daemon=True)
                self.thread.start()
            self.changed.notify_all()

    def flush(self) -> None:
        """Waits, at most FLUSH_TIMEOUT, for the held lines to be written (the exit's
        logging.shutdown calls it: a reader that never reads cannot hold the exit)."""
        with self.changed:
            self.changed.wait_for(lambda: not self.held, FLUSH_TIMEOUT)

    def _write_forever(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(lambda: bool(self.pending or self.dropped))
                lines = b"".join(self.pending)
                self.pending.clear()
                dropped, self.dropped = self.dropped, 0
            if dropped:  # dropped after these lines were queued: said after them
                lines += (f"{dropped} log lines dropped: standard error was not being "
                          f"read\n").encode()
            self._write(lines)
            with self.changed:
                self.held = sum(map(len, self.pending))
                self.changed.notify_all()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except InterruptedError:
                continue
            except OSError:
                return  # closed or gone: nobody can read these lines


def setup(level: str, fmt: str) -> None:
    handler: logging.Handler
    try:
        handler = StderrHandler(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor: a replaced stream
        handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The API client logs every request at debug; keep it quiet unless asked for.
    logging.getLogger("aiohttp").setLevel(max(logging.INFO, root.level))
