"""Standard error that nobody reads: the real server process with --query-log all
writing to a pipe whose reader never reads (a stalled log collector, `serve | less`
left paused). The pipe fills at 64 KiB; answers must keep coming, and SIGTERM must
still stop the server (before: the log's write blocked the event loop, so the server
answered nothing more and ignored SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess

REPO = Path(__file__).resolve().parents[2]
QUERIES = 4000  # lines of about 270 bytes: 1.1 MB, 16 times what the pipe holds
LONG = ".".join(["x" * 60] * 3)  # 182 characters before the zone


@pytest.mark.parametrize("workers", ["1", "2"])
def test_answers_and_stop_while_stderr_is_not_read(workers: str) -> None:
    server = ServerProcess("--manifests", str(REPO / "examples"), "--query-log", "all",
                           "--query-log-rate", "1000000", "--workers", workers)
    reader, writer = os.pipe()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        server.proc = subprocess.Popen(server.cmd, cwd=REPO, env=env, stdout=writer,
                                       stderr=writer, start_new_session=True)
        os.close(writer)
        writer = -1
        server.wait_ready()
        answered = 0
        for i in range(QUERIES):
            response = server.ask(f"q{i}.{LONG}.clusterset.local.", "A")
            answered += response.id is not None
        assert answered == QUERIES
        server.proc.send_signal(signal.SIGTERM)
        try:
            code = server.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM did not stop a server whose stderr is full") from None
        assert code == 0
        os.set_blocking(reader, False)
        written = os.read(reader, 1 << 20)
        assert b"q0." in written  # the first lines went into the pipe, as asked
    finally:
        if writer >= 0:
            os.close(writer)
        os.close(reader)
        server.stop()
