"""Answer checks with dig before a server is measured."""

from __future__ import annotations

import ipaddress
import re
import subprocess
from typing import Any

from clusterset_dns_testkit.bench.common import LOOPBACK
from clusterset_dns_testkit.bench.servers import Server


def dig(port: int, name: str, qtype: str, mode: str) -> tuple[str, list[str], list[str], str]:
    """(status, answer rdata of qtype, header flags, raw) with mode edns|noedns|tcp."""
    cmd = ["dig", f"@{LOOPBACK}", "-p", str(port), name, qtype, "+norecurse",
           "+noall", "+comments", "+answer", "+time=2", "+tries=1"]
    cmd += {"edns": ["+bufsize=1232"], "noedns": ["+noedns"], "tcp": ["+tcp"]}[mode]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=15).stdout
    m = re.search(r"status: (\w+)", out)
    status = m.group(1) if m else "NO-ANSWER"
    fm = re.search(r";; flags: ([a-z ]*);", out)
    flags = fm.group(1).split() if fm else []
    rdatas = []
    for line in out.splitlines():
        if not line or line.startswith(";"):
            continue
        f = line.split(None, 4)
        if len(f) == 5 and f[3].upper() == qtype and f[0].lower() == name.lower():
            rdatas.append(f[4])
    return status, rdatas, flags, out


def _norm(qtype: str, rdata: str) -> str:
    if qtype in ("A", "AAAA"):
        return str(ipaddress.ip_address(rdata.strip()))
    if qtype == "SRV":
        f = rdata.split()
        return f"{f[2]} {f[3].lower()}"
    return rdata


def verify(srv: Server, probes: list[dict[str, Any]]) -> list[str]:
    """Problems found (empty: all probes answered as expected)."""
    problems = []
    for p in probes:
        for mode in ("edns", "noedns", "tcp"):
            status, rd, flags, _raw = dig(srv.port, p["name"], p["type"], mode)
            what = f"{p['name']} {p['type']} ({mode})"
            if status != p["rcode"]:
                problems.append(f"{what}: status {status}, expected {p['rcode']}")
                continue
            if "aa" not in flags:
                problems.append(f"{what}: AA flag not set")
            if p["answer"] is None:
                if not rd:
                    problems.append(f"{what}: no {p['type']} record")
                continue
            got = sorted(_norm(p["type"], r) for r in rd)
            want = sorted(p["answer"])
            if got != want:
                problems.append(f"{what}: answer {got[:4]}{'...' if len(got) > 4 else ''} "
                                f"({len(got)}), expected {want[:4]}"
                                f"{'...' if len(want) > 4 else ''} ({len(want)})")
    return problems


