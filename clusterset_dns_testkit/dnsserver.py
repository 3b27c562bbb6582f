"""The clusterset-dns server as a subprocess, and a DNS client to ask it, for
end-to-end tests (kube and CoreDNS suites).

Loopback only. Every wait is a bounded poll, never a fixed sleep.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from clusterset_dns_testkit.bench import procs
from clusterset_dns_testkit.peers import free_port

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Calls ``probe`` until it returns a truthy value; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
        last = probe()
    return last


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` (Prometheus text) whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(3))
    return total


def query(host: str, port: int, name: str, rdtype: str = "A", tcp: bool = False,
          timeout: float = 2.0) -> dns.message.Message:
    message = dns.message.make_query(name, rdtype)
    message.flags &= ~dns.flags.RD
    if tcp:
        return dns.query.tcp(message, host, port=port, timeout=timeout)
    return dns.query.udp(message, host, port=port, timeout=timeout)


def answer_set(response: dns.message.Message) -> set[str]:
    """The answer section as zone-text lines, for set comparisons."""
    return {f"{rrset.name} {rrset.ttl} IN {dns.rdatatype.to_text(rrset.rdtype)} {rdata}"
            for rrset in response.answer for rdata in rrset}


class ServerProcess:
    """``python -m clusterset_dns serve SOURCE_ARGS`` on free 127.0.0.1 ports."""

    def __init__(self, *args: str, host: str = "127.0.0.1", port: int | None = None) -> None:
        """``host``/``port``: where DNS is served (default: a free 127.0.0.1 port)."""
        self.host = host
        self.port = port or free_port()
        self.ready_port = free_port()
        self.metrics_port = free_port()
        self.log_path = Path(tempfile.mkdtemp(prefix="clusterset-dns-e2e-")) / "server.log"
        self.cmd = [sys.executable, "-m", "clusterset_dns", "serve",
                    "--listen", f"{self.host}:{self.port}", "--health-listen", "off",
                    "--ready-listen", f"127.0.0.1:{self.ready_port}",
                    "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                    "--lameduck", "0",  # tests stop servers often; a test may pass its own
                    *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ServerProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def _get(self, port: int, path: str) -> tuple[int | None, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), ""
        except OSError:
            return None, ""

    def ready_status(self) -> int | None:
        self.check_alive()
        return self._get(self.ready_port, "/ready")[0]

    def wait_ready(self, timeout: float = 30.0) -> float:
        start = time.monotonic()
        wait_for(lambda: self.ready_status() == 200, timeout, "/ready to be 200")
        return time.monotonic() - start

    def wait_listening(self, timeout: float = 30.0) -> None:
        def up() -> bool:
            self.check_alive()
            try:
                query(self.host, self.port, "dns-version.clusterset.local", "TXT", timeout=0.5)
                return True
            except (OSError, dns.exception.Timeout):
                return False
        wait_for(up, timeout, "the DNS port to answer")

    def rss_kib(self) -> int:
        """The server process's resident size (VmRSS), in KiB."""
        assert self.proc is not None
        kib = procs.rss_kib(self.proc.pid)
        assert kib, f"no VmRSS for pid {self.proc.pid}"
        return kib

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels`` (0 if none)."""
        status, text = self._get(self.metrics_port, "/metrics")
        assert status == 200, f"/metrics answered {status}"
        return metric_sum(text, name, **labels)

    def ask(self, name: str, rdtype: str = "A", tcp: bool = False) -> dns.message.Message:
        self.check_alive()
        return query(self.host, self.port, name, rdtype, tcp)

    def answers(self, name: str, rdtype: str = "A") -> tuple[str, set[str]]:
        """(rcode text, answer lines); ("TIMEOUT", set()) when nothing came back."""
        try:
            response = self.ask(name, rdtype)
        except dns.exception.Timeout:
            return "TIMEOUT", set()
        return dns.rcode.to_text(response.rcode()), answer_set(response)

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"server exited with {self.proc.returncode}\n"
                                 f"$ {shlex.join(self.cmd)}\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def expect(server: ServerProcess, name: str, rdtype: str, rcode: str, lines: Sequence[str],
           timeout: float = 10.0) -> None:
    """Polls until ``name``/``rdtype`` answers ``rcode`` with exactly ``lines``."""
    want = (rcode, set(lines))
    try:
        wait_for(lambda: server.answers(name, rdtype) == want, timeout,
                 f"{name} {rdtype} -> {rcode} {sorted(lines)}")
    except AssertionError as exc:
        got = server.answers(name, rdtype)
        raise AssertionError(f"{exc}\ngot: {got}\n--- server log ---\n"
                             f"{server.log_text()[-4000:]}") from None
