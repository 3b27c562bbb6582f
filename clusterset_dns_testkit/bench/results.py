"""Machine-readable benchmark results: one JSON file per run under ``bench/results/``.

Every file is one envelope: which benchmark, the command as typed, when, the versions
of what was measured, the machine, whether it was a ``--quick`` smoke run, and the
benchmark's own figures under ``data``. ``bench/report.py`` turns the newest full run of
each benchmark into docs/benchmark.md (and the README's table), so the page is never
edited by hand.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.bench.common import REPO
from clusterset_dns_testkit.peers import cache_dir

RESULTS = REPO / "bench" / "results"
BENCHMARKS = ("run", "kube_scale", "xfr_scale", "startup", "storm", "locality", "manifest_poll",
              "fat_objects", "xfr_load", "change_cost", "observe_cost", "explain_burst",
              "dnstap", "instructions")


def portable(text: str) -> str:
    """``text`` with this machine's own paths spelt for any machine: the checkout as
    ``.`` and the home directory as ``~``, so a published result names no directory
    that exists only here."""
    for path, name in ((str(REPO), "."), (str(Path.home()), "~")):
        if len(path) > 1:
            text = text.replace(path.rstrip("/") + "/", name + "/")
    return text


def command_line(argv: list[str] | None = None) -> str:
    """The command as a user types it from the repository root: ``python bench/x.py ...``."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    with contextlib.suppress(ValueError):
        script = script.resolve().relative_to(REPO)
    return shlex.join(["python", str(script), *argv[1:]])


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


# The load when the benchmark started (this module is imported as a script begins): the
# envelope is made at the end, when a long run's load says little about its start.
START_LOAD = round(os.getloadavg()[0], 2)


def machine() -> dict[str, Any]:
    return {"cpu_model": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
            "load_average_1m": START_LOAD,
            "load_average_1m_end": round(os.getloadavg()[0], 2)}


def git_version(repo: Path = REPO) -> str:
    try:
        rev = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return f"git {rev}" if rev else "?"


def peer_versions(*names: str) -> dict[str, str]:
    """Versions of built peers, from the stamps scripts/build-peers writes beside them."""
    out = {}
    for name in names:
        with contextlib.suppress(OSError):
            out[name] = (cache_dir() / "bin" / f".{name}.version").read_text().strip()
    return out


def envelope(benchmark: str, data: dict[str, Any], *, quick: bool = False,
             versions: dict[str, str] | None = None, argv: list[str] | None = None,
             when: dt.datetime | None = None) -> dict[str, Any]:
    assert benchmark in BENCHMARKS, benchmark
    when = when or dt.datetime.now(dt.UTC)
    return {
        "benchmark": benchmark,
        "command": command_line(argv),
        "date": when.strftime("%Y-%m-%d %H:%M UTC"),
        "versions": {"clusterset-dns": git_version(), "python": platform.python_version()}
        | (versions or {}),
        "machine": machine(),
        "quick": quick,
        "data": data,
    }


def write(result: dict[str, Any], results: Path = RESULTS) -> Path:
    """``<results>/<benchmark>/<UTC stamp>[-quick].json``; returns the path. Every path
    of this machine in it (a command, an interpreter, a CRD directory) is written
    :func:`portable`, so a published result names no directory that exists only here."""
    when = dt.datetime.strptime(result["date"], "%Y-%m-%d %H:%M UTC")
    stamp = when.strftime("%Y%m%dT%H%MZ") + ("-quick" if result["quick"] else "")
    benchmark: str = result["benchmark"]
    path = results / benchmark / f"{stamp}.json"
    n = 1
    while path.exists():  # two runs in one minute: keep both
        n += 1
        path = path.with_name(f"{stamp}-{n}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(portable(json.dumps(result, indent=1, default=str)) + "\n")
    return path


def load(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text())
    missing = [k for k in ("benchmark", "command", "date", "versions", "machine", "quick",
                           "data") if k not in result]
    if missing:
        raise ValueError(f"{path}: not a benchmark result (no {', '.join(missing)})")
    return result


def latest(benchmark: str, results: Path = RESULTS,
           include_quick: bool = False) -> tuple[Path, dict[str, Any]] | None:
    """The newest result of ``benchmark`` (by its date, then file name); quick smoke runs
    only when asked for."""
    found = []
    for path in sorted((results / benchmark).glob("*.json")):
        result = load(path)
        if result["benchmark"] != benchmark:
            raise ValueError(f"{path}: a {result['benchmark']!r} result in {benchmark}/")
        if result["quick"] and not include_quick:
            continue
        found.append((result["date"], path.name, path, result))
    if not found:
        return None
    _, _, path, result = max(found, key=lambda f: (f[0], f[1]))
    return path, result
