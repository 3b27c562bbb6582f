"""bench's choice of interpreter (clusterset_dns_testkit.bench.shipped): the image's,
made once per lock and interpreter version, outside the clone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns_testkit.bench import shipped


def test_the_key_follows_the_lock_and_the_interpreter() -> None:
    base = shipped.key(b"aiohttp==3.14.5\n", "3.11.2 (main, ...) [GCC 12.2.0]")
    assert base == shipped.key(b"aiohttp==3.14.5\n", "3.11.2 (main, ...) [GCC 12.2.0]")
    assert base != shipped.key(b"aiohttp==3.14.6\n", "3.11.2 (main, ...) [GCC 12.2.0]")
    assert base != shipped.key(b"aiohttp==3.14.5\n", "3.11.4 (main, ...) [GCC 12.2.0]")
    # the boundary between the two parts is kept: moving a byte across it is another key
    assert shipped.key(b"a", "b") != shipped.key(b"", "a\0b") != shipped.key(b"a\0", "b")


def test_current_is_the_running_interpreter_and_nothing_else_is_accepted() -> None:
    assert shipped.interpreter("current") == sys.executable
    with pytest.raises(SystemExit, match="'image' or 'current'"):
        shipped.interpreter("python3")


def test_a_missing_debian_python_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"apt-get install python3\.11 python3\.11-venv"):
        shipped.interpreter("image", base=tmp_path / "python3.11")


def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("CLUSTERSET_DNS_CACHE", str(tmp_path))
    monkeypatch.setattr(shipped, "version_of", lambda python: "3.11.2 test build")
    return tmp_path / "shipped-python" / shipped.key(shipped.LOCK.read_bytes(),
                                                      "3.11.2 test build")


def test_a_complete_environment_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    root = _cache(monkeypatch, tmp_path)
    (root / "bin").mkdir(parents=True)
    (root / "complete").write_text("3.11.2 test build\n")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(subprocess, "run", refuse)
    assert shipped.interpreter("image", base=Path(sys.executable)) == str(root / "bin" /
                                                                           "python")


def test_a_half_made_environment_is_made_again(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    root = _cache(monkeypatch, tmp_path)
    root.mkdir(parents=True)
    (root / "left-over").write_text("from a run that was stopped\n")
    ran: list[list[str]] = []

    def record(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert kwargs.get("check") is True and kwargs.get("timeout")
        ran.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            assert not (root / "left-over").exists()  # emptied before it is made
            (root / "bin").mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", record)
    base = Path(sys.executable)
    python = shipped.interpreter("image", base=base)
    assert python == str(root / "bin" / "python")
    assert ran == [
        [str(base), "-m", "venv", str(root)],
        [python, "-m", "pip", "install", "-q", "--no-cache-dir", "--require-hashes",
         "--only-binary", ":all:", "-r", str(shipped.LOCK)],
    ]
    assert (root / "complete").read_text() == "3.11.2 test build\n"


def test_describe_names_the_version_or_gives_the_command_back(tmp_path: Path) -> None:
    version = ".".join(map(str, sys.version_info[:3]))
    assert shipped.describe(sys.executable) == f"{version} ({sys.executable})"
    assert shipped.describe(str(tmp_path / "nothing")) == str(tmp_path / "nothing")


def test_compile_package_writes_the_bytecode_the_image_has(tmp_path: Path) -> None:
    package = tmp_path / "clusterset_dns"
    package.mkdir()
    (package / "mod.py").write_text("VALUE = 1\n")
    (package / "other").mkdir()
    (package / "other" / "deep.py").write_text("VALUE = 2\n")
    shipped.compile_package(sys.executable, tmp_path)
    tag = sys.implementation.cache_tag
    assert (package / "__pycache__" / f"mod.{tag}.pyc").is_file()
    assert (package / "other" / "__pycache__" / f"deep.{tag}.pyc").is_file()


def test_prepare_compiles_every_checkout_for_the_interpreter(tmp_path: Path) -> None:
    checkouts = (tmp_path / "a", tmp_path / "b")
    for checkout in checkouts:
        (checkout / "clusterset_dns").mkdir(parents=True)
        (checkout / "clusterset_dns" / "mod.py").write_text("VALUE = 1\n")
    assert shipped.prepare("current", checkouts) == sys.executable
    tag = sys.implementation.cache_tag
    for checkout in checkouts:
        assert (checkout / "clusterset_dns" / "__pycache__" / f"mod.{tag}.pyc").is_file()
