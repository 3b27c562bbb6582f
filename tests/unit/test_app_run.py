"""The serving process's entry (process/app.py: run) in this process, with a source that
fails at once (no kubeconfig there: exit 2 before anything is served): a key file that
cannot be read stops the start before the source, a weak one is warned about; with
--workers the listen address is tried once before the workers start (on a port shared
with SO_REUSEPORT, as they will); the process's logging and collector thresholds are
set. Written for the survivors of ``scripts/mutate clusterset_dns/process/app.py``."""

from __future__ import annotations

import base64
import errno
import gc
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import app
from clusterset_dns_testkit.peers import free_port

LOCAL = "127.0.0.1"


@pytest.fixture(autouse=True)
def process_setup_undone() -> Iterator[None]:
    """run sets the process's logging, collector thresholds and signal handlers: this
    test process gets its own back."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("aiohttp").level,
             gc.get_threshold(),
             {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)})
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logging.getLogger("aiohttp").setLevel(saved[2])
    gc.set_threshold(*saved[3])
    for signum, handler in saved[4].items():
        signal.signal(signum, handler)


def failing(tmp_path: Path, port: int | None = None, **more: Any) -> Config:
    """A server whose source fails at start: run returns 2 before serving DNS."""
    return Config(kubeconfig=tmp_path / "missing", listen=((LOCAL, port or free_port()),),
                  health_listen=None, ready_listen=None, metrics_listen=None, **more)


def said(capfd: pytest.CaptureFixture[str]) -> str:
    """What the process logged (its handler writes from a thread: flushed first)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    return capfd.readouterr().err


def key_file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "xfr.key"
    path.write_text("hmac-sha256:xfr-key:" + base64.b64encode(b"k" * size).decode() + "\n")
    return path


def test_a_key_file_that_cannot_be_read_stops_the_start(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert app.run(failing(tmp_path, transfer_tsig_key=tmp_path / "none.key")) == 2
    err = said(capfd)
    assert "cannot start:" in err and "none.key" in err
    assert "kubeconfig" not in err  # the source never ran


@pytest.mark.parametrize(("size", "weak"), [(31, True), (32, False)])
def test_a_weak_key_is_warned_about_and_the_start_goes_on(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], size: int, weak: bool) -> None:
    config = failing(tmp_path, transfer_tsig_key=key_file(tmp_path, size), log_level="debug",
                     log_format="json")
    assert app.run(config) == 2
    err = said(capfd)
    assert ("the TSIG key's secret is 31 bytes" in err) is weak
    assert "cannot start: kubeconfig" in err  # the source ran
    # The process's settings, from the flags.
    assert gc.get_threshold() == (100_000, 50, 100)
    assert logging.getLogger().level == logging.DEBUG and err.lstrip().startswith("{")


def holding(port: int, reuse: bool) -> list[socket.socket]:
    """UDP and TCP sockets on ``port`` (bound, not listening: no query reaches them)."""
    held = []
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        sock = socket.socket(socket.AF_INET, kind)
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((LOCAL, port))
        held.append(sock)
    return held


@pytest.mark.parametrize(("workers", "reuse", "outcome"), [
    (2, False, "in use"),  # tried before the workers start: fails here, once
    (1, False, 2),  # one process: bound when the source has synced, never here
    (2, True, 2),  # shared with SO_REUSEPORT, as the workers will
])
def test_with_workers_the_listen_address_is_tried_first(
        tmp_path: Path, workers: int, reuse: bool, outcome: int | str) -> None:
    port = free_port()
    held = holding(port, reuse)
    try:
        config = failing(tmp_path, port, workers=workers)
        if outcome == "in use":
            with pytest.raises(OSError) as raised:
                app.run(config)
            assert raised.value.errno == errno.EADDRINUSE
        else:
            assert app.run(config) == outcome
    finally:
        for sock in held:
            sock.close()


def test_without_uvloop_the_process_runs_on_asyncio_s_loop(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    async def main() -> int:
        return 7

    monkeypatch.setitem(sys.modules, "uvloop", None)  # its import fails
    assert app._loop_run(main()) == 7
