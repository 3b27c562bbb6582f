"""Thin command line: flags (each also from CLUSTERSET_DNS_<FLAG>) -> Config -> app."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from ipaddress import ip_address
from pathlib import Path

from clusterset_dns import __version__
from clusterset_dns.config import Config, HostPort
from clusterset_dns.server import parse_listen

ENV_PREFIX = "CLUSTERSET_DNS_"


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _listen_or_off(value: str) -> HostPort | None:
    return None if value == "off" else parse_listen(value)


def _ttl(value: str) -> int:
    ttl = int(value)
    if not 0 <= ttl <= 3600:
        raise argparse.ArgumentTypeError("TTL must be within 0..3600")
    return ttl


def _positive(value: str) -> float:
    number = float(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return number


def _add(parser: argparse.ArgumentParser, flag: str, help: str, *, repeat: bool = False,
         **kwargs: object) -> None:
    """A flag whose default comes from its environment variable (comma-separated if
    repeatable); the variable's name is shown in --help."""
    env = _env_name(flag)
    raw = os.environ.get(env)
    default = kwargs.pop("default", None)
    convert = kwargs.get("type", str)
    if raw is not None:
        try:
            if repeat:
                default = [convert(v.strip()) for v in raw.split(",") if v.strip()]  # type: ignore[operator]
            else:
                default = convert(raw)  # type: ignore[operator]
        except (ValueError, argparse.ArgumentTypeError) as exc:
            parser.error(f"{env}={raw!r}: {exc}")
    shown = f" [env {env}]" + (f" (default: {default})" if default not in (None, []) else "")
    parser.add_argument(flag, help=help + shown, default=default,
                        action="append" if repeat else "store", **kwargs)  # type: ignore[arg-type]


def _source_flags(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--manifests", "YAML/JSON file or directory of ServiceImports and "
         "EndpointSlices (re-read on change); without it, the Kubernetes API is watched",
         type=Path)
    _add(parser, "--zone", "zone served", default="clusterset.local")
    _add(parser, "--ttl", "TTL of every record and of negative answers, 0..3600",
         type=_ttl, default=5)
    _add(parser, "--ns-address", "address of ns.dns.<zone> (A/AAAA), repeatable",
         repeat=True, type=ip_address)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterset-dns", description=__doc__)
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the DNS server")
    _source_flags(serve)
    _add(serve, "--listen", "DNS address HOST:PORT (UDP and TCP), repeatable; default :53",
         repeat=True, type=parse_listen)
    _add(serve, "--health-listen", "HOST:PORT of /health, or off", type=_listen_or_off,
         default=parse_listen(":8080"))
    _add(serve, "--ready-listen", "HOST:PORT of /ready, or off", type=_listen_or_off,
         default=parse_listen(":8181"))
    _add(serve, "--metrics-listen", "HOST:PORT of /metrics, or off", type=_listen_or_off,
         default=parse_listen(":9153"))
    _add(serve, "--log-level", "debug, info, warning or error", default="info",
         choices=["debug", "info", "warning", "error"])
    _add(serve, "--log-format", "text or json", default="text", choices=["text", "json"])
    _add(serve, "--kubeconfig", "kubeconfig file (default: in-cluster, then $KUBECONFIG, "
         "then ~/.kube/config)", type=Path)
    _add(serve, "--context", "kubeconfig context")
    _add(serve, "--serviceimport-api", "GROUP/VERSION of ServiceImports to watch, repeatable "
         "(default: discover multicluster.x-k8s.io)", repeat=True)
    _add(serve, "--namespace", "serve only this namespace, repeatable", repeat=True)
    _add(serve, "--startup-timeout", "seconds to wait for the first full sync before serving",
         type=_positive, default=5.0)
    _add(serve, "--workers", "server processes sharing the port (SO_REUSEPORT)", type=int,
         default=1)
    _add(serve, "--tcp-idle-timeout", "seconds before an idle TCP connection is closed",
         type=_positive, default=10.0)
    _add(serve, "--max-tcp-connections", "concurrent TCP connections per process; more are "
         "closed at once (0 = half the descriptor limit, at most 1024)", type=int, default=0)
    _add(serve, "--edns-udp-size", "largest UDP answer with EDNS (512..4096)", type=int,
         default=1232)
    _add(serve, "--poll-interval", "seconds between checks of --manifests for changes",
         type=_positive, default=0.5)
    _add(serve, "--watch-timeout", "seconds one watch request lasts before it is renewed",
         type=_positive, default=300.0)
    _add(serve, "--inactivity-timeout", "reconnect a watch silent for this many seconds",
         type=_positive, default=600.0)

    dump = commands.add_parser("dump", help="print the records the manifests give, as zone text")
    _source_flags(dump)
    return parser


def to_config(args: argparse.Namespace) -> Config:
    listen = tuple(getattr(args, "listen", None) or [parse_listen(":53")])
    workers = getattr(args, "workers", 1)
    if workers < 1:
        raise SystemExit("--workers must be at least 1")
    max_tcp = getattr(args, "max_tcp_connections", 0)
    if max_tcp < 0:
        raise SystemExit("--max-tcp-connections must not be negative")
    edns = getattr(args, "edns_udp_size", 1232)
    if not 512 <= edns <= 4096:
        raise SystemExit("--edns-udp-size must be within 512..4096")
    return Config(
        zone=args.zone,
        ttl=args.ttl,
        listen=listen,
        health_listen=getattr(args, "health_listen", None),
        ready_listen=getattr(args, "ready_listen", None),
        metrics_listen=getattr(args, "metrics_listen", None),
        log_level=getattr(args, "log_level", "info"),
        log_format=getattr(args, "log_format", "text"),
        manifests=args.manifests,
        poll_interval=getattr(args, "poll_interval", 0.5),
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        serviceimport_apis=tuple(getattr(args, "serviceimport_api", None) or ()),
        namespaces=tuple(n.lower() for n in getattr(args, "namespace", None) or ()),
        watch_timeout=getattr(args, "watch_timeout", 300.0),
        inactivity_timeout=getattr(args, "inactivity_timeout", 600.0),
        startup_timeout=getattr(args, "startup_timeout", 5.0),
        workers=workers,
        tcp_idle_timeout=getattr(args, "tcp_idle_timeout", 10.0),
        max_tcp_connections=max_tcp,
        edns_udp_size=edns,
        ns_addresses=tuple(args.ns_address or ()),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = to_config(args)
    if args.command == "dump":
        from clusterset_dns.dump import dump

        if config.manifests is None:
            print("dump needs --manifests", file=sys.stderr)
            return 2
        return dump(config, sys.stdout)
    from clusterset_dns.app import run

    return run(config)
