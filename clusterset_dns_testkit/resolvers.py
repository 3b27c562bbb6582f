"""Resolvers outside the cluster that send ``clusterset.local`` to our server: Unbound
(``stub-zone``), dnsmasq (``server=/zone/``) and BIND (a ``forward only`` zone). Each
is its real program (``daemon.Daemon``: unprivileged, loopback, its own directory),
configured as the recipes of docs/clients.md say, with loopback addresses and ports.

DNSSEC validation is off in each: ``clusterset.local`` is not signed and ``local`` has
no delegation a validator could prove insecure, so a validating resolver would answer
SERVFAIL.
"""

from __future__ import annotations

from clusterset_dns_testkit.daemon import ZONE, Daemon, Named, program
from clusterset_dns_testkit.peers import HOST


class UnboundResolver(Daemon):
    """``unbound`` with a ``stub-zone`` for the zone, pointing at ``upstream_port``."""

    program_name = "unbound"
    package = "unbound"

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        super().__init__(port)
        unbound = program("unbound", self.package)
        conf = f"""\
server:
    interface: {HOST}@{self.port}
    port: {self.port}
    access-control: 127.0.0.0/8 allow
    do-ip6: no
    num-threads: 1
    username: ""
    chroot: ""
    directory: "{self.dir}"
    pidfile: "{self.dir}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 1
    # the stub's address is on loopback, which Unbound does not query by default
    do-not-query-localhost: no
    # no validator: the zone is unsigned and has no secure delegation
    module-config: "iterator"
    domain-insecure: "{ZONE}"
remote-control:
    control-enable: no
stub-zone:
    name: "{ZONE}"
    stub-addr: {HOST}@{upstream_port}
"""
        (self.dir / "unbound.conf").write_text(conf)
        with self.starting():
            self.run([unbound, "-d", "-c", self.dir / "unbound.conf"])
            self.wait_answering()


class DnsmasqResolver(Daemon):
    """``dnsmasq`` forwarding the zone to ``upstream_port`` (``server=/zone/addr#port``),
    caching (its default 150 names), nothing else configured."""

    program_name = "dnsmasq"
    package = "dnsmasq-base"

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        super().__init__(port)
        dnsmasq = program("dnsmasq", self.package)
        conf = f"""\
port={self.port}
listen-address={HOST}
bind-interfaces
no-resolv
no-hosts
no-poll
server=/{ZONE}/{HOST}#{upstream_port}
log-queries
log-facility=-
pid-file=
"""
        (self.dir / "dnsmasq.conf").write_text(conf)
        with self.starting():
            self.run([dnsmasq, "--keep-in-foreground", f"--conf-file={self.dir}/dnsmasq.conf"])
            self.wait_answering()


class BindForwarder(Named):
    """``named`` (BIND 9) as a caching resolver with a ``forward only`` zone for the
    zone. ``max_records``: its ``max-records-per-type`` (the limit applies to its cache
    too; None: BIND's default)."""

    def __init__(self, upstream_port: int, port: int | None = None,
                 max_records: int | None = None) -> None:
        super().__init__(port)
        self.start_named("""\
    recursion yes;
    allow-query { 127.0.0.0/8; };
    allow-recursion { 127.0.0.0/8; };
""", f"""\
zone "{ZONE}" {{
    type forward;
    forward only;
    forwarders {{ {HOST} port {upstream_port}; }};
}};
""", max_records)
