"""The command line is generated from Config: one place for defaults and validation."""

from __future__ import annotations

import dataclasses
from ipaddress import ip_address
from pathlib import Path

import pytest

from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.process.cli import build_parser, env_name, flag_name, to_config


def config_of(*argv: str, env: dict[str, str] | None = None) -> Config:
    return to_config(build_parser().parse_args(argv), env or {})


def test_no_flags_give_configs_defaults() -> None:
    assert config_of("serve") == Config()


def test_every_field_is_a_serve_flag() -> None:
    help_text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    for f in dataclasses.fields(Config):
        assert flag_name(f) in help_text
        assert env_name(f) in help_text


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (["--ttl", "30"], {}, {"ttl": 30}),
    ([], {"CLUSTERSET_DNS_TTL": "30"}, {"ttl": 30}),
    (["--ttl", "7"], {"CLUSTERSET_DNS_TTL": "30"}, {"ttl": 7}),  # the flag wins
    (["--listen", "127.0.0.1:5353", "--listen", "[::1]:5353"], {},
     {"listen": (("127.0.0.1", 5353), ("::1", 5353))}),
    ([], {"CLUSTERSET_DNS_LISTEN": "127.0.0.1:1,:2"}, {"listen": (("127.0.0.1", 1), ("::", 2))}),
    (["--metrics-listen", "off"], {}, {"metrics_listen": None}),
    (["--namespace", "Prod"], {}, {"namespaces": ("prod",)}),
    (["--ns-address", "10.0.0.1"], {}, {"ns_addresses": (ip_address("10.0.0.1"),)}),
    (["--manifests", "x.yaml"], {}, {"manifests": Path("x.yaml")}),
    (["--serviceimport-api", "fleet.azure.com/v1beta1"], {},
     {"serviceimport_apis": ("fleet.azure.com/v1beta1",)}),
])
def test_flags_and_environment(argv: list[str], env: dict[str, str],
                               expected: dict[str, object]) -> None:
    assert config_of("serve", *argv, env=env) == dataclasses.replace(Config(), **expected)


@pytest.mark.parametrize(("argv", "message"), [
    (["--ttl", "3601"], "--ttl"),
    (["--ttl", "x"], "--ttl"),
    (["--poll-interval", "0"], "--poll-interval"),
    (["--tcp-idle-timeout", "-1"], "--tcp-idle-timeout"),
    (["--workers", "0"], "--workers"),
    (["--edns-udp-size", "511"], "--edns-udp-size"),
    (["--zone", "a..b"], "--zone"),
    (["--zone", "x" * 64], "--zone"),
    (["--zone", "."], "--zone"),
    (["--zone", "z\u00e9"], "--zone"),
    (["--listen", "nope"], "--listen"),
    (["--serviceimport-api", "nogroup"], "--serviceimport-api"),
])
def test_invalid_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_of("serve", *argv)


def test_dump_ignores_serving_variables() -> None:
    """dump has no --listen: a serving-only variable (even a broken one) is not read."""
    config = config_of("dump", "--manifests", "m", env={"CLUSTERSET_DNS_LISTEN": "broken"})
    assert config.manifests == Path("m")
