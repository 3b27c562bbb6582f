"""One frozen configuration object, built by the CLI, read by everything else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clusterset_dns.model import IP

HostPort = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Config:
    zone: str = "clusterset.local"
    ttl: int = 5
    listen: tuple[HostPort, ...] = (("::", 53),)
    health_listen: HostPort | None = ("::", 8080)
    ready_listen: HostPort | None = ("::", 8181)
    metrics_listen: HostPort | None = ("::", 9153)
    log_level: str = "info"
    log_format: str = "text"
    # Sources: manifest files when set, else the Kubernetes API.
    manifests: Path | None = None
    poll_interval: float = 0.5
    kubeconfig: Path | None = None
    context: str | None = None
    serviceimport_apis: tuple[str, ...] = ()  # "group/version"; empty = discover
    namespaces: tuple[str, ...] = ()  # empty = all
    watch_timeout: float = 300.0  # server-side timeout of one watch request
    inactivity_timeout: float = 600.0  # reconnect a stream silent for this long
    startup_timeout: float = 5.0
    # Serving.
    workers: int = 1
    tcp_idle_timeout: float = 10.0
    max_tcp_connections: int = 0  # 0 = half the descriptor limit, at most 1,024
    edns_udp_size: int = 1232
    ns_addresses: tuple[IP, ...] = ()
