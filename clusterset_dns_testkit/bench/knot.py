"""Knot DNS, the reference, serving the zone that clusterset-dns dumps."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from clusterset_dns_testkit.bench.common import LOOPBACK, SERVER_CORE, ZONE, Skip
from clusterset_dns_testkit.bench.servers import Context, Server, spawn, wait_until
from clusterset_dns_testkit.peers import free_port

_DOMAIN_FIELDS = {"NS": [0], "CNAME": [0], "PTR": [0], "DNAME": [0], "SOA": [0, 1],
                  "MX": [1], "SRV": [3]}


def _abs(name: str, zone: str = ZONE) -> str:
    if name.endswith("."):
        return name
    if name == "@":
        return zone + "."
    if name.lower() == zone or name.lower().endswith("." + zone):
        return name + "."
    return f"{name}.{zone}."


def knot_zone_from_dump(dump: str, zone: str = ZONE) -> tuple[str, list[str]]:
    """Turn ``dump`` output (name ttl IN TYPE rdata) into a zone file for Knot."""
    out = [f"$ORIGIN {zone}.", f"$TTL {5}"]
    notes: list[str] = []
    seen_types: set[str] = set()
    apex_ns: list[str] = []
    owners_with_addr: set[str] = set()
    for raw in dump.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#", "$")):
            continue
        m = re.match(r"(\S+)\s+(?:(\d+)\s+)?(?:IN\s+)?([A-Za-z][A-Za-z0-9]*)\s*(.*)$", line,
                     re.IGNORECASE)
        if not m:
            raise ValueError(f"dump line not understood: {raw!r}")
        name, ttl, rtype, rdata = m.group(1), m.group(2) or "5", m.group(3).upper(), m.group(4)
        owner = _abs(name, zone)
        fields_idx = _DOMAIN_FIELDS.get(rtype)
        if fields_idx:
            f = rdata.split()
            for i in fields_idx:
                if i < len(f):
                    f[i] = _abs(f[i], zone)
            rdata = " ".join(f)
        if rtype == "NS" and owner.lower() == zone + ".":
            apex_ns.append(rdata.split()[0].lower())
        if rtype in ("A", "AAAA"):
            owners_with_addr.add(owner.lower())
        seen_types.add(rtype if owner.lower() != zone + "." else "apex-" + rtype)
        out.append(f"{owner} {ttl} IN {rtype} {rdata}")
    if "apex-SOA" not in seen_types:
        raise ValueError("dump has no apex SOA")
    if "apex-NS" not in seen_types:
        raise ValueError("dump has no apex NS")
    for ns in apex_ns:
        if ns.endswith("." + zone + ".") and ns not in owners_with_addr:
            notes.append(f"in-zone NS {ns} has no address in the dump; Knot logs "
                         f"'missing glue' and serves the zone anyway (no glue added, so both "
                         f"servers hold the same records)")
    return "\n".join(out) + "\n", notes


def start_knot(ctx: Context, dnstap: Path | None = None) -> Server:
    """Knot on the zone ``dump`` prints; ``dnstap``: its dnstap module sends every query
    and response to the collector on that Unix socket (Debian's knot-module-dnstap)."""
    knotd = shutil.which("knotd")
    if not knotd:
        raise Skip("knotd not installed (apt-get install -y knot)")
    if ctx.dump_text is None:
        raise Skip(f"no zone: `dump` failed: {ctx.dump_error}")
    kdir = ctx.tmp / ("knot-dnstap" if dnstap else "knot")
    (kdir / "db").mkdir(parents=True, exist_ok=True)
    zone_text, notes = knot_zone_from_dump(ctx.dump_text)
    (kdir / f"{ZONE}.zone").write_text(zone_text)
    port = free_port()
    conf = f"""\
server:
    listen: {LOOPBACK}@{port}
    rundir: {kdir}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
control:
    listen: {kdir}/knot.sock
database:
    storage: {kdir}/db
log:
  - target: stderr
    any: warning
zone:
  - domain: {ZONE}
    storage: {kdir}
    file: {ZONE}.zone
    journal-content: none
    zonefile-sync: -1
    zonefile-load: whole
"""
    if dnstap is not None:  # the module is declared before the zone that refers to it
        conf = conf.replace("zone:\n", f"""\
mod-dnstap:
  - id: tap
    sink: unix:{dnstap}
    log-queries: on
    log-responses: on
zone:
""") + "    module: mod-dnstap/tap\n"
    (kdir / "knot.conf").write_text(conf)
    version = subprocess.run([knotd, "-V"], capture_output=True, text=True).stdout.strip()
    srv = Server("Knot DNS, dnstap" if dnstap else "Knot DNS",
                 spawn(["taskset", "-c", SERVER_CORE, knotd, "-c", str(kdir / "knot.conf")],
                       kdir / "knot.log"),
                 port, SERVER_CORE, kdir / "knot.log", version=version, notes=notes)
    srv.notes.append("1 UDP worker, 1 TCP worker, 1 background worker; zone file = "
                     "`dump` output" + ("; mod-dnstap: queries and responses to a Unix socket"
                                        if dnstap else ""))
    try:
        t0 = time.time()
        wait_until(srv, ctx.args.ready_timeout)
        srv.notes.append(f"ready in {time.time() - t0:.1f} s")
    except BaseException:
        srv.stop()
        raise
    return srv


