"""The dig-based conformance suite, run as a subprocess against either server."""

from __future__ import annotations

import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from clusterset_dns_testkit.compare.common import REPO


@dataclass
class SuiteRun:
    """Outcome per test id (``tests/conformance/test_x.py::test_y[param]``)."""

    outcomes: dict[str, str]  # passed | failed | error | skipped
    messages: dict[str, str]  # failure/error text
    returncode: int
    output: str
    seconds: float

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def summary(self) -> str:
        parts = [f"{self.count(o)} {o}" for o in ("passed", "failed", "error", "skipped")
                 if self.count(o) or o in ("passed", "failed")]
        return ", ".join(parts)


def suite_command(dns_server: str, objects: str, junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "tests/conformance", "-q", "-p", "no:cacheprovider",
            "--dns-server", dns_server, "--objects", objects, "-m", "not own_server", "-rA",
            f"--junitxml={junit}"]


def parse_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        module = tc.get("classname", "").split(".")[-1]
        test_id = f"tests/conformance/{module}.py::{tc.get('name')}"
        outcome = "passed"
        for child, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(child)
            if el is not None:
                outcome = name
                messages[test_id] = (el.get("message") or "") + "\n" + (el.text or "")
                break
        if outcomes.get(test_id) in ("failed", "error"):  # a teardown error after a failure
            continue
        outcomes[test_id] = outcome
    return outcomes, messages


def start_suite(dns_server: str, objects: str, workdir: Path) -> tuple[subprocess.Popen[bytes],
                                                                      Path, Path, float]:
    tag = dns_server.replace(":", "_").replace(".", "_")
    junit, out = workdir / f"suite-{tag}.xml", workdir / f"suite-{tag}.txt"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(suite_command(dns_server, objects, junit), cwd=REPO,
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, junit, out, time.monotonic()


def finish_suite(proc: subprocess.Popen[bytes], junit: Path, out: Path, started: float,
                 timeout: float = 240.0) -> SuiteRun:
    try:
        proc.wait(timeout=max(1.0, started + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"conformance suite did not finish in {timeout:.0f}s; output "
                           f"{out}") from None
    text = out.read_text(errors="replace")
    if not junit.exists():
        raise RuntimeError(f"conformance suite wrote no junit XML (rc {proc.returncode}):\n"
                           f"{text[-4000:]}")
    outcomes, messages = parse_junit(junit)
    return SuiteRun(outcomes, messages, int(proc.returncode or 0), text,
                    time.monotonic() - started)


def run_suites(servers: dict[str, str], objects: str, workdir: Path,
               timeout: float = 240.0) -> dict[str, SuiteRun]:
    """The conformance suite against each ``{label: "127.0.0.1:PORT"}``, in parallel."""
    started = {label: start_suite(addr, objects, workdir) for label, addr in servers.items()}
    return {label: finish_suite(*s, timeout=timeout) for label, s in started.items()}


