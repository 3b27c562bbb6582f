"""The command line is generated from Config: one place for defaults and validation."""

from __future__ import annotations

import dataclasses
import math
import typing
from ipaddress import ip_address
from pathlib import Path

import pytest

from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.process.cli import build_parser, env_name, flag_name, main, to_config


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


NUMBERS = [f for f in dataclasses.fields(Config)
           if typing.get_type_hints(Config)[f.name] in (int, float)]


def test_every_number_flag_has_a_finite_range() -> None:
    """`float` reads "inf" and "nan": a number flag without a range would take them."""
    assert len(NUMBERS) >= 12  # the enumeration itself works
    unbounded = [flag_name(f) for f in NUMBERS if f.metadata["bounds"] is None]
    assert unbounded == []
    for f in NUMBERS:
        low, high = f.metadata["bounds"]
        assert math.isfinite(low) and math.isfinite(high) and low <= f.default <= high


def _outside(f: dataclasses.Field[object]) -> list[str]:
    low, high = f.metadata["bounds"]
    if typing.get_type_hints(Config)[f.name] is int:
        return [str(low - 1), str(high + 1), str(10**30)]
    return [repr(math.nextafter(low, -math.inf)), repr(math.nextafter(high, math.inf)),
            "inf", "-inf", "nan", "1e308", "1e400", "-1"]


@pytest.mark.parametrize("f", NUMBERS, ids=flag_name)
def test_number_flags_take_their_range_and_nothing_else(f: dataclasses.Field[object]) -> None:
    low, high = f.metadata["bounds"]
    kind = typing.get_type_hints(Config)[f.name]
    for inside in (low, high):  # both ends belong to the range
        text = str(int(inside)) if kind is int else repr(float(inside))
        assert getattr(config_of("serve", flag_name(f), text), f.name) == inside
    for text in _outside(f):
        with pytest.raises(ConfigError, match=f"^{flag_name(f)}"):
            config_of("serve", f"{flag_name(f)}={text}")  # "=": argparse takes "-inf"
        with pytest.raises(ConfigError, match=f"^{env_name(f)}|^{flag_name(f)}"):
            config_of("serve", env={env_name(f): text})


@pytest.mark.parametrize("f", [f for f in NUMBERS
                               if typing.get_type_hints(Config)[f.name] is float],
                         ids=flag_name)
@pytest.mark.parametrize("text", ["inf", "nan", "-1", "1e12"])
def test_a_duration_out_of_range_exits_2_with_one_line(
        f: dataclasses.Field[object], text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", f"{flag_name(f)}={text}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"clusterset-dns serve: error: {flag_name(f)}")


def test_help_is_for_users() -> None:
    """No developer docstring (reST roles, double back quotes) in any --help."""
    parser = build_parser()
    subs = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for text in [parser.format_help()] + [p.format_help() for p in subs.values()]:
        for marker in (":class:", ":meth:", "``", "->", "Config", "this module"):
            assert marker not in text


def test_dump_help_says_manifests_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    subs = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = " ".join(subs["dump"].format_help().split())
    assert "Kubernetes API" not in text and "(required)" in text
    with pytest.raises(SystemExit) as exit_:
        main(["dump"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "clusterset-dns dump: error: --manifests is required\n"


def test_allow_transfer_help_names_udp_ixfr() -> None:
    subs = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = " ".join(subs["serve"].format_help().split())
    allow = text[text.index("--allow-transfer CIDR "):]
    assert "IXFR over TCP and UDP" in allow[:300]
