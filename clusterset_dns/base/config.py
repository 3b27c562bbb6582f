"""One frozen configuration object, built by the CLI, read by everything else.

Each field carries its command-line flag in its metadata (help text, parser,
whether it repeats, which commands take it), so defaults live here and only
here; :meth:`Config.__post_init__` is the one place values are validated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from pathlib import Path
from typing import Any

from clusterset_dns.base import names
from clusterset_dns.base.names import IP

HostPort = tuple[str, int]
Network = IPv4Network | IPv6Network

SERVE = ("serve",)
SERVE_AND_DUMP = ("serve", "dump", "explain")  # explain: offline, on --manifests
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")


class ConfigError(ValueError):
    """A setting that cannot work; the message names the flag."""


def parse_listen(value: str) -> HostPort:
    """``127.0.0.1:53``, ``[::1]:53``, ``:53`` (every address) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"listen address {value!r} is not HOST:PORT")
    host = host.strip("[]")
    return host or "::", int(port)


def parse_listen_or_off(value: str) -> HostPort | None:
    return None if value == "off" else parse_listen(value)


def cluster_id_of(value: str) -> str:
    """A cluster id written as slices' source-cluster labels are read (lower case)."""
    try:
        return b".".join(names.subdomain(value.strip())).decode("ascii")
    except names.InvalidName as exc:
        raise ValueError(f"not a cluster id: {exc}") from None


def parse_network(value: str) -> Network:
    """``10.0.0.0/8``, ``127.0.0.1`` (one address), ``::1/128``."""
    return ip_network(value, strict=False)


def parse_target(value: str) -> HostPort:
    """A NOTIFY target: ``HOST:PORT`` with an IP address (no name: no resolver here)."""
    host, port = parse_listen(value)
    ip_address(host)
    return host, port


@dataclass(frozen=True, slots=True)
class DnstapTarget:
    """Where a dnstap collector listens: a Unix socket path, or a TCP address."""

    path: str | None = None
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        return f"unix:{self.path}" if self.path is not None else f"tcp:{self.host}:{self.port}"


def parse_dnstap(value: str) -> DnstapTarget:
    """``unix:/run/dnstap.sock`` or ``tcp:127.0.0.1:6000`` (``tcp:[::1]:6000``)."""
    kind, _, rest = value.partition(":")
    if kind == "unix" and rest:
        return DnstapTarget(path=rest)
    if kind == "tcp":
        host, sep, port = rest.rpartition(":")
        host = host.strip("[]")
        if sep and host and port.isdigit() and 0 < int(port) < 65536:
            ip_address(host)  # no name: there is no resolver here
            return DnstapTarget(host=host, port=int(port))
    raise ValueError(f"{value!r} is not unix:PATH or tcp:IP:PORT")


QUERY_LOG_CLASSES = ("all", "denial", "error")


def parse_query_log(value: str) -> str:
    """``off``, or classes of answers separated by commas (``denial,error``), as CoreDNS's
    ``log`` plugin names them; normalized (sorted, lower case)."""
    text = value.strip().lower()
    if text in ("off", ""):
        return "off"
    found = sorted({part.strip() for part in text.split(",") if part.strip()})
    for part in found:
        if part not in QUERY_LOG_CLASSES:
            raise ValueError(f"unknown class {part!r}: off, or any of "
                             f"{', '.join(QUERY_LOG_CLASSES)} separated by commas")
    return ",".join(found)


def parse_switch(value: str) -> bool:
    """A switch's environment value: true/false, 1/0, yes/no (the flag itself: true)."""
    text = value.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ValueError("not true or false")


def flag(default: Any, help: str, *, parse: Callable[[str], Any] = str, repeat: bool = False,
         choices: tuple[str, ...] | None = None, commands: tuple[str, ...] = SERVE,
         name: str | None = None, switch: bool = False,
         bounds: tuple[float, float] | None = None, metavar: str | None = None,
         help_for: dict[str, str] | None = None) -> Any:
    """A field that is also a command-line flag (``--<field-name>`` unless ``name``);
    ``switch``: a flag without a value (a bool field); ``bounds``: the inclusive range
    of a number (every int and float flag has one: ``float`` reads ``inf`` and ``nan``);
    ``help_for``: another help text for some commands."""
    meta = {"help": help, "parse": parse_switch if switch else parse, "repeat": repeat,
            "choices": choices, "commands": commands, "name": name, "switch": switch,
            "bounds": bounds, "metavar": metavar, "help_for": help_for or {}}
    return field(default=default, metadata=meta)


def flag_of(f: Field[Any]) -> str:
    """The command-line flag of a Config field."""
    return "--" + (f.metadata["name"] or f.name.replace("_", "-"))


def number_text(value: float) -> str:
    """A bound as people write it: 3600, 0.001."""
    return str(int(value)) if float(value).is_integer() else repr(value)


@dataclass(frozen=True, slots=True)
class Config:
    # Zone data.
    manifests: Path | None = flag(
        None, "YAML/JSON file or directory of ServiceImports and EndpointSlices (re-read on "
        "change); without it, the Kubernetes API is watched", parse=Path, commands=SERVE_AND_DUMP,
        metavar="PATH",
        help_for={"dump": "YAML/JSON file or directory of ServiceImports and EndpointSlices "
                          "whose records are printed (required)",
                  "explain": "YAML/JSON file or directory of ServiceImports and EndpointSlices "
                             "the answer is worked out from (required unless --server)"})
    zone: str = flag("clusterset.local", "zone served", commands=SERVE_AND_DUMP)
    ttl: int = flag(5, "TTL of every record and of negative answers", parse=int,
                    commands=SERVE_AND_DUMP, bounds=(0, 3600), metavar="SECONDS")
    ns_addresses: tuple[IP, ...] = flag(
        (), "address of ns.dns.<zone> (A/AAAA), repeatable", parse=ip_address, repeat=True,
        commands=SERVE_AND_DUMP, name="ns-address", metavar="IP")
    # Where this server runs: preferring imports answer local-first (docs/locality.md).
    cluster_id: str | None = flag(
        None, "id of the cluster this server runs in (wins over the ClusterProperty "
        "cluster.clusterset.k8s.io); PreferClose imports answer with its endpoints first",
        parse=cluster_id_of, commands=SERVE_AND_DUMP, metavar="ID")
    topology_zone: str | None = flag(
        None, "topology zone this server runs in; PreferClose imports answer with the local "
        "cluster's endpoints of this zone first", commands=SERVE_AND_DUMP, metavar="ZONE")
    topology_zone_from_node: str | None = flag(
        None, "read --topology-zone from this Node's topology.kubernetes.io/zone label "
        "(Kubernetes source only; e.g. the pod's spec.nodeName)", metavar="NODE")
    node_name: str | None = flag(
        None, "name of the node this server runs on (e.g. the pod's spec.nodeName); "
        "PreferSameNode imports rank the local cluster's endpoints with this nodeName first",
        commands=SERVE_AND_DUMP, metavar="NODE")
    serve_terminating: bool = flag(
        False, "answer with serving (terminating) endpoints when an import has no ready "
        "one in any cluster, instead of NXDOMAIN (a deviation from the MCS specification; "
        "environment: true or false)",
        switch=True, commands=SERVE_AND_DUMP)
    # Listeners.
    listen: tuple[HostPort, ...] = flag(
        (("::", 53),), "DNS address HOST:PORT (UDP and TCP), repeatable; :PORT = every address",
        parse=parse_listen, repeat=True, metavar="HOST:PORT")
    health_listen: HostPort | None = flag(("::", 8080), "HOST:PORT of /health, or off",
                                          parse=parse_listen_or_off, metavar="HOST:PORT")
    ready_listen: HostPort | None = flag(("::", 8181), "HOST:PORT of /ready, or off",
                                         parse=parse_listen_or_off, metavar="HOST:PORT")
    metrics_listen: HostPort | None = flag(("::", 9153), "HOST:PORT of /metrics, or off",
                                           parse=parse_listen_or_off, metavar="HOST:PORT")
    log_level: str = flag("info", "log level", choices=LOG_LEVELS)
    log_format: str = flag("text", "log format (json: one object a line)", choices=LOG_FORMATS)
    query_log: str = flag(
        "off", "a log line per answer of these classes: all, denial (NXDOMAIN, NODATA), error "
        "(SERVFAIL, REFUSED, FORMERR, NOTIMP, ...), comma-separated; off = none",
        parse=parse_query_log, metavar="CLASSES")
    query_log_rate: float = flag(
        1000.0, "query log lines a second at most (burst: one second's worth; shared by the "
        "workers); lines over it are dropped and counted", parse=float,
        bounds=(0.001, 1_000_000), metavar="LINES")
    # Sources: manifest files when set, else the Kubernetes API.
    poll_interval: float = flag(0.5, "seconds between checks of --manifests for changes",
                                parse=float, bounds=(0.001, 3600), metavar="SECONDS")
    kubeconfig: Path | None = flag(
        None, "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
        parse=Path, metavar="FILE")
    context: str | None = flag(None, "kubeconfig context", metavar="NAME")
    serviceimport_apis: tuple[str, ...] = flag(
        (), "GROUP/VERSION of ServiceImports to watch, repeatable (default: discover "
        "multicluster.x-k8s.io)", repeat=True, name="serviceimport-api",
        metavar="GROUP/VERSION")
    namespaces: tuple[str, ...] = flag((), "serve only this namespace, repeatable (default: all)",
                                       parse=str.lower, repeat=True, name="namespace",
                                       metavar="NS")
    watch_timeout: float = flag(300.0, "seconds one watch request lasts before it is renewed",
                                parse=float, bounds=(1, 86400), metavar="SECONDS")
    inactivity_timeout: float = flag(600.0, "reconnect a watch silent for this many seconds",
                                     parse=float, bounds=(1, 86400), metavar="SECONDS")
    events: bool = flag(
        False, "a Warning Event on each rejected object (Kubernetes source), sent by the one "
        "replica holding the Lease --events-lease (RBAC: deploy/overlays/events; environment: "
        "true or false)", switch=True)
    events_namespace: str | None = flag(
        None, "namespace of the --events Lease (default: the pod's, from its service account; "
        "else default)", metavar="NS")
    events_lease: str = flag("clusterset-dns-events", "name of the --events Lease",
                             metavar="NAME")
    relist_interval: float = flag(
        1800.0, "seconds between full relists that repair any drift of the watch "
        "(jittered +-20%%); 0 = never", parse=float, bounds=(0, 604800), metavar="SECONDS")
    startup_timeout: float = flag(5.0, "seconds to wait for the first full sync before serving",
                                  parse=float, bounds=(0, 3600), metavar="SECONDS")
    # Serving.
    workers: int = flag(1, "server processes sharing the port (SO_REUSEPORT)", parse=int,
                        bounds=(1, 1024), metavar="N")
    tcp_idle_timeout: float = flag(
        10.0, "seconds without progress (no complete query received, no answer drained) "
        "before a TCP connection is closed; aborted if answers are still unsent", parse=float,
        bounds=(0.001, 3600), metavar="SECONDS")
    max_tcp_connections: int = flag(
        0, "concurrent TCP connections per process, one client address at most a quarter; "
        "more are closed at once (0 = half the descriptor limit, at most 1024)", parse=int,
        bounds=(0, 1048576), metavar="N")
    lameduck: float = flag(
        5.0, "seconds DNS keeps answering after SIGTERM while /ready says 503 (so the "
        "Service drops this pod before its listeners close)", parse=float, bounds=(0, 3600),
        metavar="SECONDS")
    edns_udp_size: int = flag(1232, "largest UDP answer with EDNS, in bytes", parse=int,
                              bounds=(512, 4096), metavar="BYTES")
    udp_io: str = flag("auto", "UDP system calls: batched (recvmmsg/sendmmsg, Linux), plain "
                       "(recvfrom/sendto), or auto (batched where available)",
                       choices=("auto", "batched", "plain"))
    duration_sample: int = flag(
        64, "time 1 in N answers of each transport (over batched UDP: the batch holding it) "
        "for clusterset_dns_request_duration_seconds; 0 = none", parse=int,
        bounds=(0, 1_000_000), metavar="N")
    # Zone transfers (AXFR/IXFR) and NOTIFY.
    allow_transfer: tuple[Network, ...] = flag(
        (), "network (CIDR) whose clients may transfer the zone: AXFR over TCP, IXFR over "
        "TCP and UDP; repeatable (default: none, every transfer is REFUSED)",
        parse=parse_network, repeat=True, metavar="CIDR")
    notify: tuple[HostPort, ...] = flag(
        (), "secondary IP:PORT sent a NOTIFY on every serial change, repeatable",
        parse=parse_target, repeat=True, metavar="IP:PORT")
    transfer_tsig_key: Path | None = flag(
        None, "file holding one TSIG key, [hmac-sha256:]NAME:BASE64SECRET; transfers must "
        "then be signed with it, and NOTIFYs are", parse=Path, metavar="FILE")
    journal_changes: int = flag(
        100, "zone changes kept for IXFR (older ones: a full transfer)", parse=int,
        bounds=(0, 1000000), metavar="N")
    xfr_timeout: float = flag(
        300.0, "seconds a zone transfer may last in all; then its connection is closed (a "
        "client reading slowly cannot hold a transfer slot for longer)", parse=float,
        bounds=(1, 86400), metavar="SECONDS")
    # dnstap (process/dnstap.py; docs/operations.md).
    dnstap: DnstapTarget | None = flag(
        None, "send every answer as dnstap AUTH_QUERY and AUTH_RESPONSE messages (Frame "
        "Streams) to the collector at unix:PATH or tcp:IP:PORT; dropped and counted while it "
        "cannot keep up", parse=parse_dnstap, metavar="TARGET")
    dnstap_identity: str | None = flag(None, "dnstap identity (default: the host name)",
                                       metavar="TEXT")
    dnstap_version: str | None = flag(None, "dnstap version (default: clusterset-dns VERSION)",
                                      metavar="TEXT")
    dnstap_queue: int = flag(
        10000, "answers queued for the dnstap collector per process; more are dropped and "
        "counted", parse=int, bounds=(1, 10000000), metavar="N")

    def __post_init__(self) -> None:
        def need(ok: bool, flag_name: str, why: str) -> None:
            if not ok:
                raise ConfigError(f"--{flag_name}: {why}")

        try:
            names.ZoneNames(self.zone)
        except (ValueError, UnicodeError) as exc:
            raise ConfigError(f"--zone {self.zone!r} is not a usable domain name: {exc}") from None
        need(bool(names.split(self.zone)), "zone", "the root zone cannot be served")
        need(bool(self.listen), "listen", "at least one address is needed")
        for f in fields(self):
            if f.metadata["bounds"] is not None:
                low, high = f.metadata["bounds"]
                value = getattr(self, f.name)
                # Written so that nan (which compares false to everything) is refused.
                if not low <= value <= high:
                    raise ConfigError(f"{flag_of(f)}: must be within {number_text(low)}.."
                                      f"{number_text(high)}, not {value!r}")
        need(self.topology_zone is None or self.topology_zone_from_node is None,
             "topology-zone-from-node", "give either it or --topology-zone, not both")
        need(self.topology_zone != "", "topology-zone", "must not be empty")
        need(self.node_name != "", "node-name", "must not be empty")
        need(self.topology_zone_from_node is None or self.manifests is None,
             "topology-zone-from-node", "needs the Kubernetes source (not --manifests)")
        for api in self.serviceimport_apis:
            group, _, version = api.partition("/")
            need(bool(group and version and "/" not in version), "serviceimport-api",
                 f"{api!r} is not GROUP/VERSION")
