"""Thin command line: flags (each also from CLUSTERSET_DNS_<FLAG>) -> Config -> app.

The flags are generated from :class:`Config`'s fields, which hold the defaults
and the validation; this module only parses text.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

from clusterset_dns import __version__
from clusterset_dns.base.config import Config, ConfigError, flag_of, number_text

ENV_PREFIX = "CLUSTERSET_DNS_"
_FIELDS = dataclasses.fields(Config)


# What `--help` shows users (this module's docstring is for developers).
DESCRIPTION = ("Authoritative DNS for the Kubernetes Multi-Cluster Services zone "
               "clusterset.local. Every flag can also be set by an environment variable "
               "CLUSTERSET_DNS_<FLAG> (upper case, - as _; repeatable flags take a "
               "comma-separated list).")
COMMANDS = {
    "serve": ("run the DNS server",
              "Answer the zone from ServiceImports and EndpointSlices: watched in the "
              "Kubernetes API, or read from --manifests files."),
    "dump": ("print the records the manifests give, as zone text",
             "Print every record the server would serve from --manifests, as sorted "
             "zone-file text."),
    "explain": ("the answer a name gets and why: offline on --manifests, or from a running "
                "server (--server)",
                "Show the answer a name gets and why: worked out from --manifests, or asked "
                "of a running server's /explain endpoint (--server)."),
}


def flag_name(f: dataclasses.Field[Any]) -> str:
    return flag_of(f)


def _help(f: dataclasses.Field[Any], command: str) -> str:
    meta = f.metadata
    text: str = meta["help_for"].get(command, meta["help"])
    if meta["bounds"] is not None:
        low, high = meta["bounds"]
        text += f" ({number_text(low)}..{number_text(high)})"
    return text


def env_name(f: dataclasses.Field[Any]) -> str:
    return ENV_PREFIX + flag_name(f)[2:].replace("-", "_").upper()


def _shown(value: Any) -> str:
    if value is None or value == ():
        return ""
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        value = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in value)
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int):
        host, port = value
        value = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f" (default: {value})"


def _parse(f: dataclasses.Field[Any], raw: str, origin: str) -> Any:
    meta = f.metadata
    try:
        if meta["repeat"]:
            return [meta["parse"](v.strip()) for v in raw.split(",") if v.strip()]
        value = meta["parse"](raw)
    except ValueError as exc:
        raise ConfigError(f"{origin}={raw!r}: {exc}") from None
    if meta["choices"] and value not in meta["choices"]:
        raise ConfigError(f"{origin}={raw!r}: choose from {', '.join(meta['choices'])}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterset-dns", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    subs = {name: commands.add_parser(name, help=short, description=long)
            for name, (short, long) in COMMANDS.items()}
    explain = subs["explain"]
    explain.add_argument("name", help="the name asked, e.g. web.prod.svc.clusterset.local")
    explain.add_argument("type", nargs="?", default="A",
                         help="the type asked: A, AAAA, SRV, TXT, SOA, NS or ANY (default A)")
    explain.add_argument("--json", action="store_true", help="print JSON, for scripts")
    explain.add_argument("--server", metavar="HOST:PORT",
                         help="ask the /explain endpoint of a running server (its health "
                              "port, --health-listen) instead of reading --manifests")
    for f in _FIELDS:
        meta = f.metadata
        for command in meta["commands"]:
            # Values stay text here (default None = not given); _to_config parses them,
            # so a flag and its environment variable go through the same code.
            text = f"{_help(f, command)} [env {env_name(f)}]"
            if meta["switch"]:  # a flag without a value: on when given
                subs[command].add_argument(
                    flag_name(f), dest=f.name, default=None, action="store_const",
                    const="true", help=text)
                continue
            subs[command].add_argument(
                flag_name(f), dest=f.name, default=None,
                action="append" if meta["repeat"] else "store",
                choices=meta["choices"], metavar=meta["metavar"],
                help=text + _shown(f.default))
    return parser


def to_config(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Config:
    """Flags, else environment variables, else Config's defaults; raises ConfigError."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, Any] = {}
    for f in _FIELDS:
        if args.command not in f.metadata["commands"]:
            continue
        given = getattr(args, f.name)  # every flag of the command is there (None: not given)
        if given is not None:
            items = given if f.metadata["repeat"] else [given]
            parsed = [_parse(f, item, flag_name(f)) for item in items]
            values[f.name] = (tuple(v for p in parsed for v in p) if f.metadata["repeat"]
                              else parsed[0])
        elif env_name(f) in environ:
            parsed_env = _parse(f, environ[env_name(f)], env_name(f))
            values[f.name] = tuple(parsed_env) if f.metadata["repeat"] else parsed_env
    return Config(**values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = to_config(args)
    except ConfigError as exc:
        parser.exit(2, f"clusterset-dns {args.command}: error: {exc}\n")
    if args.command == "explain":
        from clusterset_dns.process.offline import explain_command

        return explain_command(config, args.name, args.type, args.server, args.json,
                               sys.stdout, sys.stderr)
    if args.command == "dump":
        from clusterset_dns.process.dump import dump

        if config.manifests is None:
            parser.exit(2, "clusterset-dns dump: error: --manifests is required\n")
        return dump(config, sys.stdout)
    from clusterset_dns.process.app import run

    return run(config)
