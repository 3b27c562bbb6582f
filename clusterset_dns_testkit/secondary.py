"""Knot DNS as a secondary of a clusterset-dns server (zone transfers, NOTIFY).

Knot keeps no zone file and no journal of its own (``zonefile-sync: -1``,
``journal-content: none`` would forbid IXFR on restart, so changes are kept);
it accepts NOTIFY from the primary's address and logs transfers at info level,
so a test reads from its log whether a refresh was incremental.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode

from clusterset_dns_testkit.peers import Proc, _wait, free_port

ZONE = "clusterset.local"
HOST = "127.0.0.1"
# Knot 3.2 logs an incremental refresh as "IXFR, incoming, remote R, started", "...,
# finished, ..." then "refresh, remote R, zone updated, ..., serial X -> Y"; an IXFR
# answered with the whole zone adds "receiving AXFR-style IXFR" in between.
REFRESH_LINE = re.compile(r"refresh, remote [^,]+, zone updated, .*serial (\d+) -> (\d+)")


def serial_at(host: str, port: int, zone: str = ZONE) -> int | None:
    """The SOA serial ``host:port`` answers for ``zone``, or None (no answer, no zone)."""
    try:
        reply = dns.query.udp(dns.message.make_query(zone, "SOA"), host, port=port, timeout=1)
    except (dns.exception.Timeout, OSError):
        return None
    if reply.rcode() != dns.rcode.NOERROR or not reply.answer:
        return None
    return int(reply.answer[0][0].serial)


class KnotSecondary:
    """``knotd`` on a free loopback port, secondary for ``clusterset.local`` of
    ``primary_port``; ``key``: (name, base64 secret) of an HMAC-SHA256 TSIG key."""

    def __init__(self, primary_port: int, key: tuple[str, str] | None = None,
                 port: int | None = None, tmp: Path | None = None) -> None:
        knotd = shutil.which("knotd")
        if knotd is None:
            raise RuntimeError("knotd not installed (apt-get install -y knot)")
        self.dir = Path(tempfile.mkdtemp(prefix="knot-secondary-", dir=tmp))
        (self.dir / "db").mkdir()
        self.port = port if port is not None else free_port()
        self.log_path = self.dir / "knot.log"
        keys = remote_key = acl_key = ""
        if key is not None:
            keys = (f"key:\n  - id: {key[0]}\n    algorithm: hmac-sha256\n"
                    f"    secret: {key[1]}\n")
            remote_key = f"\n    key: {key[0]}"
            acl_key = f"\n    key: {key[0]}"
        conf = f"""\
server:
    listen: {HOST}@{self.port}
    rundir: {self.dir}
    udp-workers: 1
    tcp-workers: 1
    # Knot's 500 ms default cuts a query sent in timed pieces (the conformance
    # suite's slow-TCP case) when a loaded machine stretches the pauses.
    tcp-io-timeout: 5000
    background-workers: 1
control:
    listen: {self.dir}/knot.sock
database:
    storage: {self.dir}/db
log:
  - target: stderr
    any: info
{keys}remote:
  - id: primary
    address: {HOST}@{primary_port}{remote_key}
acl:
  - id: notify-from-primary
    address: {HOST}
    action: notify{acl_key}
  - id: transfer-to-loopback
    address: {HOST}
    action: transfer
zone:
  - domain: {ZONE}
    storage: {self.dir}
    master: primary
    acl: [notify-from-primary, transfer-to-loopback]
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
"""
        (self.dir / "knot.conf").write_text(conf)
        self.proc = Proc("knotd", [knotd, "-c", self.dir / "knot.conf"], self.log_path)

    def serial(self) -> int | None:
        return serial_at(HOST, self.port)

    def answers(self, name: str, rdtype: str) -> set[str]:
        """The rdata Knot answers for ``name``/``rdtype``, as text."""
        reply = dns.query.udp(dns.message.make_query(name, rdtype), HOST, port=self.port,
                              timeout=2)
        return {rdata.to_text() for rrset in reply.answer for rdata in rrset}

    def wait_serial(self, serial: int, timeout: float = 30.0) -> None:
        _wait(lambda: self.serial() == serial, timeout, f"Knot at serial {serial}", self.proc)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ixfr_refreshes(self) -> list[tuple[int, int]]:
        """(old, new) serial of every incremental refresh Knot logged."""
        found: list[tuple[int, int]] = []
        ixfr = False
        for line in self.log_text().splitlines():
            if "IXFR, incoming" in line and line.endswith("started"):
                ixfr = True
            elif "AXFR-style IXFR" in line or "AXFR, incoming" in line:
                ixfr = False
            elif (match := REFRESH_LINE.search(line)) is not None:
                if ixfr:
                    found.append((int(match.group(1)), int(match.group(2))))
                ixfr = False
        return found

    def refresh(self) -> None:
        """Forces a refresh now (``knotc zone-refresh``): the SOA query Knot's refresh
        timer sends, then a transfer if the primary's serial is newer."""
        knotc = shutil.which("knotc")
        if knotc is None:
            raise RuntimeError("knotc not installed (apt-get install -y knot)")
        subprocess.run([knotc, "-s", str(self.dir / "knot.sock"), "zone-refresh", ZONE],
                       check=True, capture_output=True, timeout=30)

    def stop(self) -> None:
        self.proc.stop()

    def __enter__(self) -> KnotSecondary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
