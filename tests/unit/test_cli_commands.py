"""What the command line does with what it parsed (process/cli.py): each command handed
its arguments, the help and errors users read, the defaults shown, choices refused
from a flag and from the environment. The commands themselves are replaced at their
seam (app.run, dump.dump, offline.explain_command). Written for the survivors of
``scripts/mutate clusterset_dns/process/cli.py``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns import __version__
from clusterset_dns.base.config import Config, ConfigError, number_text
from clusterset_dns.process import app, cli, dump, offline
from clusterset_dns.process.cli import build_parser, flag_name, main, to_config


def calls_of(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []

    def record(*args: Any) -> int:
        calls.append(args)
        return 7

    monkeypatch.setattr(module, name, record)
    return calls


def config_of(*argv: str, env: dict[str, str] | None = None) -> Config:
    return to_config(build_parser().parse_args(argv), env or {})


@pytest.mark.parametrize(("argv", "name", "type_", "server", "as_json"), [
    (["web.x"], "web.x", "A", None, False),
    (["web.x", "SRV", "--json"], "web.x", "SRV", None, True),
    (["--server", "127.0.0.1:8080", "web.x", "aaaa"], "web.x", "aaaa", "127.0.0.1:8080", False),
])
def test_explain_is_handed_its_arguments(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                         name: str, type_: str, server: str | None,
                                         as_json: bool) -> None:
    calls = calls_of(monkeypatch, offline, "explain_command")
    assert main(["explain", "--ttl", "9", *argv]) == 7
    assert calls == [(dataclasses.replace(Config(), ttl=9), name, type_, server, as_json,
                      sys.stdout, sys.stderr)]


def test_dump_is_handed_the_config_and_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = calls_of(monkeypatch, dump, "dump")
    assert main(["dump", "--manifests", "m", "--serve-terminating"]) == 7
    assert calls == [(dataclasses.replace(Config(), manifests=Path("m"),
                                          serve_terminating=True), sys.stdout)]


def test_serve_runs_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = calls_of(monkeypatch, app, "run")
    assert main(["serve", "--ttl", "9"]) == 7
    assert calls == [(dataclasses.replace(Config(), ttl=9),)]


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: clusterset-dns [-h] [--version] COMMAND ...\n")
    assert err.endswith("clusterset-dns: error: the following arguments are required: "
                        "COMMAND\n")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == __version__ + "\n"


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """One line a paragraph: argparse wraps at the terminal's width, hyphens included."""
    monkeypatch.setenv("COLUMNS", "100000")


def words(text: str) -> str:
    return " ".join(text.split())


def helps() -> tuple[str, dict[str, str]]:
    parser = build_parser()
    subs = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    return words(parser.format_help()), {n: words(p.format_help()) for n, p in subs.items()}


def test_the_help_of_each_command() -> None:
    top, subs = helps()
    assert top.startswith("usage: clusterset-dns [-h] [--version] COMMAND ...")
    assert words(cli.DESCRIPTION) in top
    for name, (short, long) in cli.COMMANDS.items():
        assert f"{name} {words(short)}" in top
        assert subs[name].startswith(f"usage: clusterset-dns {name} [-h]")
        assert words(long) in subs[name]


def test_the_help_of_explain() -> None:
    text = helps()[1]["explain"]
    assert "[--json] [--server HOST:PORT]" in text and text.count(" name [type]") == 1
    for line in ("name the name asked, e.g. web.prod.svc.clusterset.local",
                 "type the type asked: A, AAAA, SRV, TXT, SOA, NS or ANY (default A)",
                 "--json print JSON, for scripts",
                 "--server HOST:PORT ask the /explain endpoint of a running server (its "
                 "health port, --health-listen) instead of reading --manifests"):
        assert line in text


def test_each_flag_help_shows_its_range_and_default() -> None:
    subs = helps()[1]
    bounded = [f for f in dataclasses.fields(Config) if f.metadata["bounds"] is not None]
    assert len(bounded) > 10
    for f in bounded:
        low, high = f.metadata["bounds"]
        text = words(f.metadata["help"].replace("%%", "%"))  # argparse's escape of %
        assert (f"{text} ({number_text(low)}..{number_text(high)}) "
                f"[env {cli.env_name(f)}] (default: {f.default})"
                in subs["serve"]), flag_name(f)
    # another text for some commands (help_for)
    manifests = next(f for f in dataclasses.fields(Config) if f.name == "manifests")
    assert words(manifests.metadata["help_for"]["dump"]) in subs["dump"]
    assert words(manifests.metadata["help_for"]["dump"]) not in subs["serve"]


@pytest.mark.parametrize(("value", "shown"), [
    (None, ""),
    ((), ""),
    (5, " (default: 5)"),
    ("info", " (default: info)"),
    (("::", 8080), " (default: [::]:8080)"),
    (("0.0.0.0", 53), " (default: 0.0.0.0:53)"),
    ((("::", 53), ("127.0.0.1", 5353)), " (default: [::]:53,127.0.0.1:5353)"),
    (("a", "b"), " (default: ('a', 'b'))"),  # a pair that is not host and port
    (("a", 1, 2), " (default: ('a', 1, 2))"),
])
def test_a_default_as_help_shows_it(value: object, shown: str) -> None:
    assert cli._shown(value) == shown


def test_a_choice_from_the_environment() -> None:
    assert config_of("serve", env={"CLUSTERSET_DNS_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(ConfigError) as raised:
        config_of("serve", env={"CLUSTERSET_DNS_LOG_FORMAT": "xml"})
    assert str(raised.value) == "CLUSTERSET_DNS_LOG_FORMAT='xml': choose from text, json"


def test_a_choice_from_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse refuses it, naming the choices (before any Config is made)."""
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["serve", "--log-format", "xml"])
    assert exit_.value.code == 2
    assert "argument --log-format: invalid choice: 'xml' (choose from 'text', 'json')" in \
        capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "dump", "explain"])
def test_a_switch_on_every_command_it_belongs_to(command: str) -> None:
    extra = ["x"] if command == "explain" else []
    assert config_of(command, "--serve-terminating", *extra).serve_terminating is True
    assert config_of(command, *extra).serve_terminating is False
