"""BIND, NSD and PowerDNS as secondaries of a clusterset-dns server: each loads the
zone by AXFR (TSIG-signed when given a key), takes our NOTIFY on its port and follows
a change by IXFR. Knot's launcher is ``secondary.KnotSecondary``.

Each keeps its copy in its own directory (``daemon.Daemon``); none has a refresh timer
that fires during a test (the SOA's refresh is 7200 s), so a new serial reaching one is
the NOTIFY's doing. The configurations are the recipes of docs/operations.md with
loopback addresses and ports.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

from clusterset_dns_testkit.daemon import ZONE, Daemon, Named, give, program, unprivileged
from clusterset_dns_testkit.peers import HOST, PeerError

Key = tuple[str, str]  # (name, base64 secret) of an HMAC-SHA256 TSIG key


def bind_version() -> tuple[int, ...]:
    """The installed BIND's version, e.g. (9, 18, 49)."""
    out = subprocess.run([program("named", "bind9"), "-v"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    found = re.search(r"BIND (\d+)\.(\d+)\.(\d+)", out)
    if found is None:
        raise PeerError(f"named -v: no version in {out!r}")
    return tuple(int(part) for part in found.groups())


def bind_default_max_records() -> int | None:
    """BIND's default ``max-records-per-type``: 100 since 9.18.28 (CVE-2024-1737),
    none before."""
    return 100 if bind_version() >= (9, 18, 28) else None


class BindSecondary(Named):
    """``named`` (BIND 9) as a secondary. ``max_records``, ``max_types``: its
    ``max-records-per-type`` and ``max-types-per-name`` (None: BIND's default; since
    9.18.28 both are 100, and a transfer with a larger RRset fails whole)."""

    def __init__(self, primary_port: int, key: Key | None = None, port: int | None = None,
                 max_records: int | None = None, max_types: int | None = None) -> None:
        super().__init__(port)
        key_clause = key_ref = ""
        if key is not None:
            key_clause = (f'key "{key[0]}" {{\n    algorithm hmac-sha256;\n'
                          f'    secret "{key[1]}";\n}};\n')
            key_ref = f' key "{key[0]}"'
        self.start_named("    recursion no;\n    notify no;\n", f"""\
{key_clause}zone "{ZONE}" {{
    type secondary;
    primaries {{ {HOST} port {primary_port}{key_ref}; }};
    file "{ZONE}.db";
}};
""", max_records, max_types)


class NsdSecondary(Daemon):
    """``nsd`` (NSD 4) as a secondary: IXFR over TCP, falling back to AXFR."""

    program_name = "nsd"
    package = "nsd"

    def __init__(self, primary_port: int, key: Key | None = None,
                 port: int | None = None) -> None:
        super().__init__(port)
        nsd = program("nsd", self.package)
        key_clause = ""
        key_name = "NOKEY"
        if key is not None:
            key_clause = (f"key:\n    name: {key[0]}\n    algorithm: hmac-sha256\n"
                          f'    secret: "{key[1]}"\n')
            key_name = key[0]
        conf = f"""\
server:
    ip-address: {HOST}@{self.port}
    port: {self.port}
    username: ""
    chroot: ""
    zonesdir: "{self.dir}"
    database: ""
    zonelistfile: "{self.dir}/zone.list"
    xfrdfile: "{self.dir}/xfrd.state"
    xfrdir: "{self.dir}"
    pidfile: "{self.dir}/nsd.pid"
    logfile: "{self.log_path}"
    server-count: 1
    verbosity: 2
remote-control:
    control-enable: no
{key_clause}zone:
    name: {ZONE}
    zonefile: "{ZONE}.zone"
    allow-notify: {HOST} {key_name}
    request-xfr: {HOST}@{primary_port} {key_name}
"""
        (self.dir / "nsd.conf").write_text(conf)
        self.run([nsd, "-d", "-c", self.dir / "nsd.conf"])


SCHEMA = Path("/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql")


class PdnsSecondary(Daemon):
    """``pdns_server`` (PowerDNS Authoritative 4) as a secondary on its SQLite backend
    (gsqlite3), the zone, key and IXFR set up with ``pdnsutil`` as the recipe says."""

    program_name = "pdns_server"
    package = "pdns-server pdns-backend-sqlite3"

    def __init__(self, primary_port: int, key: Key | None = None,
                 port: int | None = None) -> None:
        super().__init__(port)
        pdns = program("pdns_server", self.package)
        pdnsutil = program("pdnsutil", self.package)
        if not SCHEMA.is_file():
            raise PeerError(f"{SCHEMA} not found: run scripts/setup-test (Debian package "
                            "pdns-backend-sqlite3)")
        db = self.dir / "pdns.sqlite3"
        with sqlite3.connect(db) as conn:
            conn.executescript(SCHEMA.read_text())
        conn.close()
        give(db)
        conf = f"""\
launch=gsqlite3
gsqlite3-database={db}
local-address={HOST}:{self.port}
secondary=yes
allow-notify-from={HOST}/32
daemon=no
guardian=no
disable-syslog=yes
write-pid=no
socket-dir={self.dir}
loglevel=6
"""
        (self.dir / "pdns.conf").write_text(conf)
        # without the IXFR metadata PowerDNS asks for AXFR at every change
        steps = [["create-secondary-zone", ZONE, f"{HOST}:{primary_port}"],
                 ["set-meta", ZONE, "IXFR", "1"]]
        if key is not None:
            steps += [["import-tsig-key", key[0], "hmac-sha256", key[1]],
                      ["activate-tsig-key", ZONE, key[0], "secondary"]]
        with self.starting():
            for step in steps:
                done = subprocess.run(
                    unprivileged([pdnsutil, f"--config-dir={self.dir}", *step]),
                    capture_output=True, text=True, timeout=60, check=False)
                if done.returncode != 0:
                    raise PeerError(f"pdnsutil {' '.join(step)}: {done.stdout}{done.stderr}")
            self.run([pdns, f"--config-dir={self.dir}"])
