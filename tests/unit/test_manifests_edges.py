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
from clusterset_dns.sources import convert, manifests, yamlsafe
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone.cache import Cache
from clusterset_dns.zone.ops import ReplaceImports, SetClusterId, SetSynced
from clusterset_dns_testkit.objects import (
    cluster_property,
    endpoint,
    endpoint_slice,
    service_import,
)

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


# -- pending(): whether a poll has anything to read --------------------------------------------


def test_a_missing_path_is_pending_until_reported_once(tmp_path: Path) -> None:
    source = source_over(tmp_path / "nowhere")
    assert source.pending()  # never read: the first poll says it is missing
    assert source.scan() is False and source.missing_reported and not source.synced
    assert not source.pending()  # said once: nothing to do until it appears
    write(tmp_path / "nowhere" / "web.yaml", [WEB])
    assert source.pending()


def test_a_walk_that_works_again_is_pending_once(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The recovery is collect's to report: pending() says so although no file changed."""
    write(tmp_path / "sub" / "web.yaml", [WEB])
    source = source_over(tmp_path)
    source.scan()
    real = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path).name == "sub":
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert source.pending()
    source.scan()
    assert source.walk_error is not None
    monkeypatch.undo()
    assert source.pending()
    source.scan()
    assert source.walk_error is None and not source.pending()


def test_a_dangling_link_does_not_hide_the_files_after_it(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", [WEB])
    (tmp_path / "b.yaml").symlink_to(tmp_path / "gone.yaml")
    source = source_over(tmp_path)
    source.scan()
    assert not source.pending()
    write(tmp_path / "c.yaml", [service_import("new", ips=["10.4.0.1"])])
    assert source.pending()  # c sorts after the dangling b


def test_a_file_that_cannot_be_stated_is_not_pending_again(tmp_path: Path) -> None:
    """A link to itself (ELOOP on stat and open): reported once, then left alone until
    something changes."""
    write(tmp_path / "a.yaml", [WEB])
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    errors: list[str] = []
    source = ManifestSource(tmp_path, lambda ops: None, 0, frozenset({convert.GROUP}),
                            error=errors.append)
    assert source.scan() and errors == ["read"]
    assert not source.pending()
    assert source.scan() is False and errors == ["read"]


# -- which documents are Lists -------------------------------------------------------------


def test_documents_that_are_not_lists_of_objects(tmp_path: Path) -> None:
    """A List is a mapping whose kind ends in List AND whose items are a list: a kind List
    without items, or a top-level sequence, is one (ignored) document, not an error."""
    bad = write(tmp_path / "x.yaml", [{"apiVersion": "v1", "kind": "List"},
                                      ["not", "an", "object"],
                                      {"kind": "Other", "items": [WEB]},
                                      {"kind": "ServiceImportList",
                                       "items": [service_import("new", ips=["10.4.0.1"])]}])
    errors: list[str] = []
    source = ManifestSource(tmp_path, lambda ops: None, 0, frozenset({convert.GROUP}),
                            error=errors.append)
    assert source.scan() and errors == []
    assert list(source.files[bad].imports) == [("prod", "new")]


# -- reading one file: each reason, its message, the size bound to the byte --------------------


def read(path: Path) -> manifests.FileObjects:
    return manifests.read_file(path, (0, 0, 0), frozenset({convert.GROUP}), frozenset(),
                               lambda kind: None)


def failure(path: Path) -> tuple[str, str]:
    with pytest.raises(manifests.FileError) as caught:
        read(path)
    return caught.value.reason, str(caught.value)


def test_what_each_unreadable_file_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert failure(fifo) == ("not-regular", "not a regular file")
    denied = write(tmp_path / "denied.yaml", [WEB])
    real_open = os.open

    def refuse(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == denied:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    assert failure(denied) == ("read", "cannot open: Permission denied")


def test_a_file_is_opened_read_only_non_blocking_and_closed_on_exec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """O_NONBLOCK: a FIFO is refused at once, not waited on (a blocking open of one
    with no writer never returns); O_CLOEXEC: no child process inherits the file."""
    path = write(tmp_path / "web.yaml", [WEB])
    flags: list[int] = []
    real_open = os.open

    def recording(name: Any, how: int, *args: Any, **kwargs: Any) -> int:
        flags.append(how)
        return real_open(name, how, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording)
    read(path)
    [how] = flags
    assert how & os.O_ACCMODE == os.O_RDONLY
    assert how & os.O_NONBLOCK and how & os.O_CLOEXEC


class Reader:
    """The file object _read_text reads through: counts the bytes it hands over, or fails."""

    def __init__(self, real: Any, fail: bool, counted: list[int]) -> None:
        self.real, self.fail, self.counted = real, fail, counted

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()

    def read(self, size: int = -1) -> bytes:
        if self.fail:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        data: bytes = self.real.read(size)
        self.counted.append(len(data))
        return data


def reading(monkeypatch: pytest.MonkeyPatch, fail: bool = False,
            size: int | None = None) -> list[int]:
    """os.fdopen's files counted (or failing), and os.fstat's size replaced by ``size``
    (a file that grows between the two)."""
    counted: list[int] = []
    real_fdopen, real_fstat = os.fdopen, os.fstat
    monkeypatch.setattr(manifests.os, "fdopen",
                        lambda fd, mode: Reader(real_fdopen(fd, mode), fail, counted))
    if size is not None:
        def fstat(fd: int) -> os.stat_result:
            st = list(real_fstat(fd))
            st[6] = size  # st_size
            return os.stat_result(st)
        monkeypatch.setattr(manifests.os, "fstat", fstat)
    return counted


def test_a_read_error_is_a_read_failure(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "web.yaml", [WEB])
    reading(monkeypatch, fail=True)
    assert failure(path) == ("read", "cannot read: Input/output error")


def test_the_size_limit_to_the_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 200
    monkeypatch.setattr(manifests, "MAX_FILE_BYTES", limit)
    body = "kind: Other\n"
    fits = tmp_path / "fits.yaml"
    fits.write_text("#" * (limit - len(body) - 1) + "\n" + body, encoding="utf-8")
    assert fits.stat().st_size == limit
    counted = reading(monkeypatch)
    read(fits)
    assert counted == [limit]  # read whole: the last byte of the limit is kept
    over = tmp_path / "over.yaml"
    over.write_text("#" * (limit - len(body)) + "\n" + body, encoding="utf-8")
    assert failure(over) == ("too-large", f"{limit + 1} bytes, more than {limit}")


def test_a_file_that_grew_past_the_limit_is_read_one_byte_past_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 200
    monkeypatch.setattr(manifests, "MAX_FILE_BYTES", limit)
    grown = tmp_path / "grown.yaml"
    grown.write_text("#" * (10 * limit) + "\n", encoding="utf-8")
    counted = reading(monkeypatch, size=10)  # small when stated, large when read
    assert failure(grown) == ("too-large", f"more than {limit} bytes")
    assert counted == [limit + 1]  # never more than the one byte that tells


def test_a_file_is_read_from_its_target_and_named_by_its_path(tmp_path: Path) -> None:
    """read_from: the resolved target of a link the walk named (read once, whole)."""
    target = write(tmp_path / "..data" / "web.yaml", [WEB])
    named = tmp_path / "web.yaml"  # the name the walk saw; no file there now
    objects = manifests.read_file(named, (0, 0, 0), frozenset({convert.GROUP}), frozenset(),
                                  lambda kind: None, target)
    assert list(objects.imports) == [("prod", "web")]


def test_a_parse_error_says_what_the_parser_said(tmp_path: Path) -> None:
    text = "kind: [\n"
    with pytest.raises(yamlsafe.DocumentError) as parsed:
        yamlsafe.documents(text, False)
    path = write(tmp_path / "bad.yaml", text)
    assert failure(path) == (parsed.value.reason, str(parsed.value))


def test_what_a_file_gives_besides_imports(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """A slice whose conversion warns (an address dropped) keeps the rest; a
    ClusterProperty naming the cluster gives its id by its name."""
    path = write(tmp_path / "x.yaml", [
        endpoint_slice("db-east", "db", cluster="east",
                       endpoints=[endpoint("10.2.0.1"), endpoint("not-an-ip")]),
        cluster_property("east"), cluster_property("other", name="unrelated.example.com")])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        objects = read(path)
    assert list(objects.slices) == [("prod", "db-east")]
    assert objects.cluster_ids == {"cluster.clusterset.k8s.io": "east"}
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: EndpointSlice prod/db-east: endpoints[1]: address 'not-an-ip' does not "
        "parse, dropped"]


def test_what_each_rejected_object_leaves(tmp_path: Path) -> None:
    """An invalid ServiceImport or EndpointSlice is kept as a rejection (its service,
    why); an invalid ClusterProperty is only counted; every one is counted by kind."""
    bad_import = service_import("web", type_="Bogus")
    bad_slice = endpoint_slice("db-east", "db", cluster="east", address_type="Bogus",
                               endpoints=[endpoint("10.2.0.1")])
    bad_property = cluster_property(7)
    path = write(tmp_path / "x.yaml", [bad_import, bad_slice, bad_property, WEB])
    why = {}
    for obj, to_model in ((bad_import, convert.service_import),
                          (bad_slice, convert.endpoint_slice)):
        with pytest.raises(convert.InvalidObject) as caught:
            to_model(obj, lambda message: None)
        why[convert.kind_of(obj)] = str(caught.value)
    invalid: list[str] = []
    objects = manifests.read_file(path, (0, 0, 0), frozenset({convert.GROUP}), frozenset(),
                                  invalid.append)
    assert invalid == ["ServiceImport", "EndpointSlice", "ClusterProperty"]
    assert objects.rejected == {
        ("ServiceImport", ("prod", "web")): (("prod", "web"), why["ServiceImport"]),
        ("EndpointSlice", ("prod", "db-east")): (("prod", "db"), why["EndpointSlice"])}
    assert list(objects.imports) == [("prod", "web")] and objects.cluster_ids == {}


@pytest.mark.parametrize(("raised", "expected"), [
    (ValueError("boom"), ("convert", "a document: ValueError: boom")),
    (RecursionError("deep"), ("limits", "a document: nested too deeply"))])
def test_a_failure_before_any_object_is_named_a_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception,
        expected: tuple[str, str]) -> None:
    path = write(tmp_path / "web.yaml", [WEB])

    def describe(obj: Any) -> str:
        raise raised

    monkeypatch.setattr(convert, "describe", describe)
    assert failure(path) == expected


def test_a_duplicate_is_logged_with_both_files(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    a = write(tmp_path / "a.yaml", [WEB])
    b = write(tmp_path / "b.yaml", [WEB])
    c = write(tmp_path / "c.yaml", [WEB])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        source_over(tmp_path).scan()
    # each file that sorts later takes the name over from the one before
    assert [r.getMessage() for r in caplog.records] == [
        f"prod/web is in {a} and {b}; using {b}", f"prod/web is in {b} and {c}; using {c}"]


def test_files_name_the_cluster_unless_told_not_to(tmp_path: Path) -> None:
    """By default a ClusterProperty in the files sets the cluster id (--cluster-id, which
    wins, turns that off)."""
    write(tmp_path / "about.yaml", [cluster_property("east")])
    ops = source_over(tmp_path).poll()
    assert isinstance(ops[0], SetClusterId) and ops[0].cluster_id == "east"
    told = ManifestSource(tmp_path, lambda ops: None, 0, frozenset({convert.GROUP}),
                          cluster_property=False)
    assert not any(isinstance(op, SetClusterId) for op in told.poll())


# -- a path that is a link to a directory ------------------------------------------------------


def test_a_linked_directory_keeps_the_names_under_the_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Files and failed directories are named under the path given, not its target."""
    real = tmp_path / "real"
    web = write(real / "web.yaml", [WEB])
    write(real / "sub" / "api.yaml", [service_import("api", ips=["10.9.0.1"])])
    link = tmp_path / "link"
    link.symlink_to(real)
    errors: list[str] = []
    source = ManifestSource(link, lambda ops: None, 0, frozenset({convert.GROUP}),
                            error=errors.append)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert source.scan()
    assert sorted(source.files) == [link / "sub" / "api.yaml", link / "web.yaml"]
    # the first read: no walk failed before it, so none "can be listed again"
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"{link / 'sub' / 'api.yaml'}: 1 ServiceImports, 0 EndpointSlices",
        f"{link / 'web.yaml'}: 1 ServiceImports, 0 EndpointSlices"]
    scandir = os.scandir

    def failing(path: Any) -> Any:
        if Path(path).name == "sub":
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", failing)
    write(web, [WEB, service_import("new", ips=["10.4.0.1"])])
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert source.scan()
    assert errors == ["walk"] and source.walk_error == \
        f"{link / 'sub'}: {os.strerror(errno.EMFILE)}"
    # sub's file is kept: its directory could not be listed, so it is not gone
    assert sorted(source.files) == [link / "sub" / "api.yaml", link / "web.yaml"]


def test_a_dangling_link_is_skipped_and_the_files_after_it_read(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", [WEB])
    (tmp_path / "b.yaml").symlink_to(tmp_path / "gone.yaml")
    write(tmp_path / "c.yaml", [service_import("new", ips=["10.4.0.1"])])
    source = source_over(tmp_path)
    assert source.scan()
    assert sorted(source.files) == [tmp_path / "a.yaml", tmp_path / "c.yaml"]


def test_a_first_read_with_one_directory_unlisted_syncs_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a walk that could not list the path itself leaves the source unsynced."""
    write(tmp_path / "web.yaml", [WEB])
    write(tmp_path / "sub" / "api.yaml", [service_import("api", ips=["10.9.0.1"])])
    scandir = os.scandir

    def failing(path: Any) -> Any:
        if Path(path).name == "sub":
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", failing)
    source = source_over(tmp_path)
    assert source.scan() and source.synced
    assert sorted(source.files) == [tmp_path / "web.yaml"]


def test_each_file_is_read_through_the_target_resolved_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ConfigMap volume's layout (web.yaml -> ..data/web.yaml, ..data -> ..v1): the
    link swapped to ..v2 while the file is read and back before the links are checked
    again. The file is read through the target resolved first, so what is kept is one
    generation's (a read through the link's name would take ..v2's, unnoticed)."""
    path = tmp_path / "cfg"
    write(path / "..v1" / "web.yaml", [WEB])
    write(path / "..v2" / "web.yaml", [service_import("web", ips=["10.7.0.7"])])
    (path / "..data").symlink_to("..v1")
    (path / "web.yaml").symlink_to("..data/web.yaml")

    def point(target: str) -> None:
        (path / "..next").symlink_to(target)
        os.replace(path / "..next", path / "..data")

    real_read = manifests.read_file

    def swapping(*args: Any) -> manifests.FileObjects:
        point("..v2")
        try:
            return real_read(*args)
        finally:
            point("..v1")

    monkeypatch.setattr(manifests, "read_file", swapping)
    source = source_over(path)
    assert source.scan()
    [objects] = source.files.values()
    assert [i.ips for i in objects.imports.values()] == \
        [i.ips for i in read(path / "..v1" / "web.yaml").imports.values()]


def test_a_linked_path_is_read_through_the_directory_resolved_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git-sync's layout (the path a link to one revision's directory of plain files):
    the link swapped while a file is read and back before it is checked again."""
    write(tmp_path / "rev1" / "web.yaml", [WEB])
    write(tmp_path / "rev2" / "web.yaml", [service_import("web", ips=["10.7.0.7"])])
    path = tmp_path / "current"
    path.symlink_to("rev1")

    def point(target: str) -> None:
        (tmp_path / "next").symlink_to(target)
        os.replace(tmp_path / "next", path)

    real_read = manifests.read_file

    def swapping(*args: Any) -> manifests.FileObjects:
        point("rev2")
        try:
            return real_read(*args)
        finally:
            point("rev1")

    monkeypatch.setattr(manifests, "read_file", swapping)
    source = source_over(path)
    assert source.scan()
    assert sorted(source.files) == [path / "web.yaml"]
    assert [i.ips for i in source.files[path / "web.yaml"].imports.values()] == \
        [i.ips for i in read(tmp_path / "rev1" / "web.yaml").imports.values()]


def test_a_linked_path_swapped_during_a_read_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git-sync's layout with the path's link moved to the next revision while a file is
    read (and left there): no file is a link, so only the path's own re-check sees it;
    what was read is dropped and the new revision read whole."""
    write(tmp_path / "rev1" / "web.yaml", [WEB])
    write(tmp_path / "rev2" / "web.yaml", [service_import("web", ips=["10.7.0.7"])])
    path = tmp_path / "current"
    path.symlink_to("rev1")
    real_read = manifests.read_file
    reads: list[Path | None] = []

    def swapping(*args: Any) -> manifests.FileObjects:
        reads.append(args[-1])
        if len(reads) == 1:
            (tmp_path / "next").symlink_to("rev2")
            os.replace(tmp_path / "next", path)
        return real_read(*args)

    monkeypatch.setattr(manifests, "read_file", swapping)
    source = source_over(path)
    assert source.scan()
    assert reads == [tmp_path / "rev1" / "web.yaml", tmp_path / "rev2" / "web.yaml"]
    assert [i.ips for i in source.files[path / "web.yaml"].imports.values()] == \
        [i.ips for i in read(tmp_path / "rev2" / "web.yaml").imports.values()]


def test_the_cluster_id_is_set_once_until_it_changes(tmp_path: Path) -> None:
    """A change of another file leaves the cluster id as it was set: no SetClusterId."""
    write(tmp_path / "about.yaml", [cluster_property("east")])
    source = source_over(tmp_path)
    assert [op.cluster_id for op in source.poll() if isinstance(op, SetClusterId)] == ["east"]
    write(tmp_path / "web.yaml", [WEB])
    ops = source.poll()
    assert ops and not any(isinstance(op, SetClusterId) for op in ops)
    write(tmp_path / "about.yaml", [cluster_property("west")])
    assert [op.cluster_id for op in source.poll() if isinstance(op, SetClusterId)] == ["west"]
