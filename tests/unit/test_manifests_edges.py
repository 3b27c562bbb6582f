"""The manifest source at its edges: what one poll returns, what the run loop applies,
what the error lines say (the file's reason, each unlistable directory with its
system error), found missing by scripts/mutate on manifests.py."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.sources import convert
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone.cache import Cache
from clusterset_dns.zone.ops import ReplaceImports, SetSynced
from clusterset_dns_testkit.objects import service_import

from .fakeclock import FakeClock
from .helpers import ZONE
from .test_manifests import WEB, write

LOGGER = "clusterset_dns.sources.manifests"


def source_over(path: Path, apply: Any = lambda ops: None) -> ManifestSource:
    return ManifestSource(path, apply, 0, frozenset({convert.GROUP}))


def test_a_poll_returns_what_changed_and_then_nothing(tmp_path: Path) -> None:
    """poll() is the threaded half of run(): the ops of what changed, [] when nothing did."""
    web = write(tmp_path / "web.yaml", [WEB])
    source = source_over(tmp_path)
    ops = source.poll()
    assert isinstance(ops[-1], SetSynced) and isinstance(ops[0], ReplaceImports)
    assert list(ops[0].objects) == [("prod", "web")]
    assert source.poll() == []
    write(web, [WEB, service_import("new", ips=["10.4.0.1"])])
    ops = source.poll()
    assert isinstance(ops[0], ReplaceImports)
    assert sorted(ops[0].objects) == [("prod", "new"), ("prod", "web")]


def test_the_run_loop_applies_what_its_poll_found(tmp_path: Path) -> None:
    write(tmp_path / "web.yaml", [WEB])
    clock = FakeClock()
    cache = Cache(ZoneNames(ZONE), 5)
    source = ManifestSource(tmp_path, cache.apply, 5.0, clock=clock)

    async def main() -> None:
        task = asyncio.create_task(source.run())
        try:
            for _ in range(500):  # the poll runs in a thread: wait for its first sleep
                await asyncio.sleep(0.01)
                if clock.pending():
                    break
            assert clock.pending() == [clock.now + 5.0]
        finally:
            task.cancel()

    asyncio.run(main())
    assert sorted(cache.imports) == [("prod", "web")] and cache.zone.synced


def test_a_file_that_cannot_be_used_is_logged_with_its_reason(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"kind: \xff\n")
    source = source_over(tmp_path)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        source.scan()
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith(f"{bad}: cannot be used (parse), keeping its (no) objects: "
                           "not UTF-8: 'utf-8' codec can't decode byte 0xff"), line


def test_each_directory_that_cannot_be_listed_is_named_with_its_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path / "a" / "web.yaml", [WEB])
    write(tmp_path / "b" / "api.yaml", [WEB])
    real = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path).name in ("a", "b"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    source = source_over(tmp_path)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        source.scan()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    # the walk pops directories from the end of its list: b is tried before a
    assert lines == [f"cannot list {tmp_path / 'b'}: Permission denied; "
                     f"{tmp_path / 'a'}: Permission denied; keeping the objects of the "
                     "files known there until a walk succeeds"]
