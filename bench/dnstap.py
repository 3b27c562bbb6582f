#!/usr/bin/env python3
"""What dnstap costs: CPU per answer with --dnstap on and off, against Knot with and
without its dnstap module, in the same run (bench/run.py's measurement, its servers
ours1, ours1-dnstap, knot, knot-dnstap).

    python bench/dnstap.py --rounds 3 --duration 10
    python bench/dnstap.py --quick

Each server with dnstap sends every query and response over a Unix socket to
golang-dnstap's reader (``scripts/build-peers dnstap``; Debian's knot-module-dnstap for
Knot's), pinned to dnsperf's core and writing to /dev/null. Writes
bench/results/dnstap/<UTC time>.json; ``python bench/report.py`` puts it on
docs/benchmark.md. Every other option is run.py's (``--mix``, ``--rounds``, ...).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SERVERS = "ours1,ours1-dnstap,knot,knot-dnstap"

if __name__ == "__main__":
    # run.py's measurement, run as its own program (bench scripts share code only
    # through the testkit, never by importing each other).
    argv = sys.argv[1:]
    if not any(a == "--servers" or a.startswith("--servers=") for a in argv):
        argv = ["--servers", SERVERS, *argv]
    run = str(Path(__file__).resolve().with_name("run.py"))
    os.execv(sys.executable, [sys.executable, run, "--benchmark", "dnstap", *argv])
