"""The manifest-file source: files, documents, lists, broken files, removal, filtering."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert, dirwalk, manifests
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone.cache import Cache
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, ZONE, ask, query

Z = "svc.clusterset.local."


class Setup:
    """A source over ``path`` feeding a real cache; counts invalid objects by kind."""

    def __init__(self, path: Path, namespaces: frozenset[str] = frozenset(),
                 groups: frozenset[str] = frozenset({convert.GROUP})) -> None:
        self.cache = Cache(ZoneNames(ZONE), 5)
        self.invalid: list[str] = []
        self.source = ManifestSource(path, self.cache.apply, 0, groups, namespaces,
                                     self.invalid.append)
        self.handler = Handler(self.cache.zone, DEFAULT_UDP_CAP)

    def scan(self) -> bool:
        return self.source.scan()

    def imports(self) -> list[str]:
        return sorted(f"{ns}/{name}" for ns, name in self.cache.imports)

    def slices(self) -> list[str]:
        return sorted(f"{ns}/{name}" for ns, name in self.cache.slices)

    def a(self, qname: str) -> list[str]:
        reply = ask(self.handler, query(qname, "A"), tcp=True)
        return [line.split()[-1] for line in reply.answer]


_clock = [1_700_000_000]


def write(path: Path, content: Any) -> Path:
    """Writes YAML (a list = several documents) or raw text; moves the mtime forward so
    the change is seen even within the file system's timestamp granularity."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        text = content
    elif path.suffix == ".json":
        text = json.dumps(content)
    else:
        text = yaml.safe_dump_all(content)
    path.write_text(text, encoding="utf-8")
    _clock[0] += 10
    os.utime(path, ns=(_clock[0] * 10**9, _clock[0] * 10**9))
    return path


WEB = service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")])
API = service_import("api", namespace="other", ips=["10.9.0.1"],
                     api_version="multicluster.x-k8s.io/v1alpha1")
ROOT = service_import("root", ips=["10.1.0.3"], layout="root",
                      api_version="multicluster.x-k8s.io/v1alpha2")
DB = service_import("db", type_="Headless")
DB_EAST = endpoint_slice("db-east", "db", cluster="east", endpoints=[endpoint("10.2.0.1")])
DB_WEST = endpoint_slice("db-west", "db", cluster="west", endpoints=[endpoint("10.3.0.1")])
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "prod"}}


def as_list(items: list[Any], kind: str = "List") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "items": items}


# (id, {relative path: content}, expected imports, expected slices)
LAYOUTS: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    ("one-yaml-document", {"web.yaml": [WEB]}, ["prod/web"], []),
    ("multi-document-yaml", {"all.yaml": [WEB, DB, DB_EAST, SERVICE]},
     ["prod/db", "prod/web"], ["prod/db-east"]),
    ("empty-documents", {"all.yaml": "---\n---\n" + yaml.safe_dump(WEB) + "---\n"},
     ["prod/web"], []),
    ("kind-list", {"list.yaml": [as_list([WEB, DB, DB_EAST])]},
     ["prod/db", "prod/web"], ["prod/db-east"]),
    ("typed-list", {"list.yaml": [as_list([WEB, API], "ServiceImportList")]},
     ["other/api", "prod/web"], []),
    ("nested-list", {"list.yaml": [as_list([as_list([WEB]), DB_EAST])]},
     ["prod/web"], ["prod/db-east"]),
    ("json", {"web.json": WEB, "list.json": as_list([DB, DB_EAST])},
     ["prod/db", "prod/web"], ["prod/db-east"]),
    ("yml-and-subdirectory", {"a/web.yml": [WEB], "a/b/db.yaml": [DB, DB_WEST]},
     ["prod/db", "prod/web"], ["prod/db-west"]),
    ("every-api-version", {"v.yaml": [WEB, API, ROOT]}, ["other/api", "prod/root", "prod/web"],
     []),
    ("other-files-ignored",
     {"web.yaml": [WEB], "notes.txt": yaml.safe_dump(DB), ".hidden.yaml": [DB],
      ".git/x.yaml": [API], "db.yaml.bak": [DB]},
     ["prod/web"], []),
    ("other-kinds-and-groups-ignored",
     {"x.yaml": [SERVICE, {**WEB, "apiVersion": "net.gke.io/v1"},
                 {**DB_EAST, "apiVersion": "discovery.k8s.io/v1beta1"}, "just a string", [1, 2]]},
     [], []),
]


@pytest.mark.parametrize(("files", "imports", "slices"), [(f, i, s) for _, f, i, s in LAYOUTS],
                         ids=[i for i, _, _, _ in LAYOUTS])
def test_directory_layouts(tmp_path: Path, files: dict[str, Any], imports: list[str],
                           slices: list[str]) -> None:
    for name, content in files.items():
        write(tmp_path / name, content)
    setup = Setup(tmp_path)
    assert setup.scan()
    assert (setup.imports(), setup.slices()) == (imports, slices)
    assert setup.source.synced and setup.cache.zone.synced
    assert not setup.scan()  # nothing changed: nothing applied


def test_single_file_path(tmp_path: Path) -> None:
    path = write(tmp_path / "objects.yaml", [WEB, DB, DB_EAST])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(path)
    setup.scan()
    assert (setup.imports(), setup.slices()) == (["prod/db", "prod/web"], ["prod/db-east"])
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    assert setup.a(f"db.prod.{Z}") == ["10.2.0.1"]


def test_fork_group_when_configured(tmp_path: Path) -> None:
    write(tmp_path / "x.yaml", [{**service_import("gke", ips=["10.8.0.1"], layout="status"),
                                 "apiVersion": "net.gke.io/v1"}])
    setup = Setup(tmp_path, groups=frozenset({convert.GROUP, "net.gke.io"}))
    setup.scan()
    assert setup.a(f"gke.prod.{Z}") == ["10.8.0.1"]


def test_change_is_picked_up(tmp_path: Path) -> None:
    path = write(tmp_path / "web.yaml", [WEB])
    setup = Setup(tmp_path)
    setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    write(path, [{**WEB, "spec": {**WEB["spec"], "ips": ["10.1.0.2"]}}])
    assert setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.2"]


BROKEN = [
    ("yaml-syntax", "broken.yaml", "apiVersion: v1\nkind: [unclosed\n"),
    ("yaml-tab", "broken.yaml", "a:\n\t- b\n"),
    ("json-syntax", "broken.json", '{"kind": '),
    ("not-utf8", "broken.yaml", b"\xff\xfe\x00kind: x".decode("latin-1")),
]


@pytest.mark.parametrize(("name", "text"), [(n, t) for _, n, t in BROKEN],
                         ids=[i for i, _, _ in BROKEN])
def test_broken_file_keeps_its_objects(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                       name: str, text: str) -> None:
    broken = tmp_path / name
    write(broken, [WEB, DB_EAST] if broken.suffix == ".yaml" else WEB)
    other = write(tmp_path / "other.yaml", [API, DB])
    setup = Setup(tmp_path)
    setup.scan()
    before = (setup.imports(), setup.slices())
    assert "prod/web" in before[0]

    if text.startswith("\xff"):
        broken.write_bytes(text.encode("latin-1"))
        os.utime(broken, ns=(_clock[0] * 10**9 + 5, _clock[0] * 10**9 + 5))
    else:
        write(broken, text)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.manifests"):
        setup.scan()
    assert (setup.imports(), setup.slices()) == before
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and str(broken) in errors[0].getMessage()

    # the other files go on being read
    write(other, [API, DB, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.a(f"new.prod.{Z}") == ["10.4.0.1"]
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]

    # once fixed, its new content replaces the old
    write(broken, [DB_WEST] if broken.suffix == ".yaml" else DB_WEST)
    assert setup.scan()
    assert "prod/web" not in setup.imports()
    assert setup.a(f"web.prod.{Z}") == []
    assert "prod/db-west" in setup.slices()


def test_broken_file_at_start_is_empty_and_synced(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path / "bad.yaml", "kind: [\n")
    write(tmp_path / "good.yaml", [WEB])
    setup = Setup(tmp_path)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.manifests"):
        setup.scan()
    assert setup.imports() == ["prod/web"]
    assert setup.cache.zone.synced
    assert any("bad.yaml" in r.getMessage() for r in caplog.records
               if r.levelno >= logging.ERROR)


INVALID = [
    ("unknown-type", service_import("bad", type_="NodePort"), "ServiceImport prod/bad",
     "ServiceImport"),
    ("no-name", {**service_import("x"), "metadata": {"namespace": "prod"}}, "ServiceImport",
     "ServiceImport"),
    ("slice-without-mcs-label", endpoint_slice("bad-slice", None), "EndpointSlice prod/bad-slice",
     "EndpointSlice"),
]


@pytest.mark.parametrize(("obj", "what", "kind"), [(o, w, k) for _, o, w, k in INVALID],
                         ids=[i for i, _, _, _ in INVALID])
def test_invalid_object_skipped_with_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                             obj: dict[str, Any], what: str, kind: str) -> None:
    path = write(tmp_path / "mixed.yaml", [WEB, obj, DB, DB_EAST])
    setup = Setup(tmp_path)
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.manifests"):
        setup.scan()
    assert (setup.imports(), setup.slices()) == (["prod/db", "prod/web"], ["prod/db-east"])
    assert setup.invalid == [kind]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m and what in m for m in warnings), warnings


def test_partly_bad_object_warns_and_is_kept(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path / "x.yaml", [service_import("web", ips=["10.1.0.1", "10.1.0.999"])])
    setup = Setup(tmp_path)
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.sources.manifests"):
        setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    assert setup.invalid == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m and "ServiceImport prod/web" in m and "10.1.0.999" in m
               for m in warnings), warnings


def test_file_removal_drops_its_objects(tmp_path: Path) -> None:
    write(tmp_path / "web.yaml", [WEB])
    db = write(tmp_path / "db.yaml", [DB, DB_EAST, DB_WEST])
    setup = Setup(tmp_path)
    setup.scan()
    assert setup.a(f"db.prod.{Z}") == ["10.2.0.1", "10.3.0.1"]
    db.unlink()
    assert setup.scan()
    assert (setup.imports(), setup.slices()) == (["prod/web"], [])
    assert setup.a(f"db.prod.{Z}") == []
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]


def test_object_moving_between_files(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", [WEB, DB_EAST])
    write(tmp_path / "b.yaml", [DB])
    setup = Setup(tmp_path)
    setup.scan()
    write(tmp_path / "b.yaml", [DB, DB_EAST])
    first.unlink()
    setup.scan()
    assert (setup.imports(), setup.slices()) == (["prod/db"], ["prod/db-east"])
    assert setup.a(f"db.prod.{Z}") == ["10.2.0.1"]


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_missing_path_then_created(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "later" if kind == "directory" else tmp_path / "later.yaml"
    setup = Setup(path)
    assert not setup.scan()
    assert not setup.source.synced
    assert not setup.cache.zone.synced
    reply = ask(setup.handler, query(f"web.prod.{Z}", "A"))
    assert reply.rcode == 2  # SERVFAIL until synced
    assert not setup.scan()
    write(path / "web.yaml" if kind == "directory" else path, [WEB])
    assert setup.scan()
    assert setup.source.synced and setup.cache.zone.synced
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    reply = ask(setup.handler, query(f"nothere.prod.{Z}", "A"))
    assert reply.rcode == 3  # NXDOMAIN once synced


def test_empty_directory_is_synced(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    assert setup.scan()
    assert setup.cache.zone.synced
    assert ask(setup.handler, query(f"web.prod.{Z}", "A")).rcode == 3


@pytest.mark.parametrize(("namespaces", "imports", "slices"), [
    (frozenset(), ["other/api", "prod/db", "prod/web", "third/x"],
     ["other/o-slice", "prod/db-east"]),
    (frozenset({"prod"}), ["prod/db", "prod/web"], ["prod/db-east"]),
    (frozenset({"other", "third"}), ["other/api", "third/x"], ["other/o-slice"]),
    (frozenset({"nowhere"}), [], []),
], ids=["all", "prod", "other+third", "none"])
def test_namespace_filter(tmp_path: Path, namespaces: frozenset[str], imports: list[str],
                          slices: list[str]) -> None:
    write(tmp_path / "all.yaml", [
        WEB, DB, DB_EAST, API, service_import("x", namespace="Third", ips=["10.0.0.3"]),
        endpoint_slice("o-slice", "api", namespace="other", endpoints=[endpoint("10.9.1.1")]),
    ])
    setup = Setup(tmp_path, namespaces=namespaces)
    setup.scan()
    assert (setup.imports(), setup.slices()) == (imports, slices)


def test_answers_flow_while_many_files_are_polled(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The poll's walk and stats (0.5 s at 20,000 files) ran on the event loop: no answer
    while they ran. Counted, not timed: the answers a client task gets while each walk of
    an unchanged directory is in progress (on the loop that number is 0 by construction)."""
    import asyncio

    for i in range(3000):
        write(tmp_path / f"d{i % 30}" / f"f{i}.yaml", [service_import(f"s{i}", ips=["10.1.0.1"])])
    setup = Setup(tmp_path)
    setup.scan()
    answered = [0]
    during: list[int] = []
    real_find = manifests.find_files

    def observed_find(root: Path) -> dirwalk.Walk:
        before = answered[0]
        walk = real_find(root)
        for path in walk.files:  # as pending() does next: a stat per file
            path.stat()
        during.append(answered[0] - before)
        return walk

    monkeypatch.setattr(manifests, "find_files", observed_find)
    wire = query(f"s1.prod.{Z}", "A")

    async def main() -> None:
        source = asyncio.create_task(setup.source.run())
        try:
            while len(during) < 3:  # three polls of the unchanged directory
                response = setup.handler.handle(wire, False)
                assert response is not None and response[3] & 0x0F == 0  # NOERROR
                answered[0] += 1
                await asyncio.sleep(0)
        finally:
            source.cancel()

    asyncio.run(asyncio.wait_for(main(), 120))
    assert setup.imports()[:1] == ["prod/s0"] and len(setup.imports()) == 3000
    assert all(n > 0 for n in during), f"answers during each poll's walk: {during}"


def generation_files(gen: Path, n: int, filler: int) -> None:
    """Version ``n``: ``keep`` is in every version, in a.yaml or in b.yaml by turns;
    both files carry a marker import with the version's address."""
    address = f"10.0.{n >> 8 & 255}.{n & 255}"
    for name, keep in (("a.yaml", n % 2 == 0), ("b.yaml", n % 2 == 1)):
        docs = [service_import(f"marker-{name[0]}", ips=[address]),
                *(service_import(f"fill-{name[0]}-{i}", ips=["10.2.0.1"]) for i in range(filler))]
        if keep:
            docs.append(service_import("keep", ips=["10.1.0.1"]))
        write(gen / name, docs)


def switch_link(link: Path, target: str) -> None:
    """Points ``link`` at ``target`` by a rename (atomic), removes the old target."""
    old = os.readlink(link) if os.path.lexists(link) else None
    os.symlink(target, link.with_name(link.name + "_tmp"))
    os.replace(link.with_name(link.name + "_tmp"), link)
    if old is not None:
        shutil.rmtree(link.parent / old)


def swap_configmap(directory: Path, n: int, filler: int) -> Path:
    """One update as the kubelet makes it in a ConfigMap volume: a new ``..<gen>``
    directory, ``..data`` switched to it, the old one removed; the files are links
    ``NAME -> ..data/NAME``. Returns the path to serve."""
    generation_files(directory / f"..gen_{n}", n, filler)
    for name in ("a.yaml", "b.yaml"):
        if not os.path.lexists(directory / name):
            os.symlink(f"..data/{name}", directory / name)
    switch_link(directory / "..data", f"..gen_{n}")
    return directory


def swap_git_sync(directory: Path, n: int, filler: int) -> Path:
    """As git-sync does: the served path is a link to a worktree, switched to a new one."""
    generation_files(directory / ".worktrees" / str(n), n, filler)
    switch_link(directory / "repo", f".worktrees/{n}")
    return directory / "repo"


@pytest.mark.parametrize("swap", [swap_configmap, swap_git_sync], ids=["configmap", "git-sync"])
def test_a_swapped_directory_is_read_one_version_whole(
        tmp_path: Path, swap: Callable[[Path, int, int], Path]) -> None:
    """A read that met a swap gave half of one version and half of the next: ``keep``
    (in every version) vanished, and that half state was applied (journaled, NOTIFYed).
    Every update applied here is checked: ``keep`` present, both markers of one version."""
    import threading

    directory = tmp_path / "cm"
    directory.mkdir()
    filler = 150
    served = swap(directory, 0, filler)
    cache = Cache(ZoneNames(ZONE), 5)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    bad: list[str] = []
    applied = [0]

    def apply(ops: list[Any]) -> None:
        cache.apply(ops)
        applied[0] += 1
        keep = [line.split()[-1] for line in ask(handler, query(f"keep.prod.{Z}", "A")).answer]
        markers = {tuple(line.split()[-1] for line in
                         ask(handler, query(f"marker-{x}.prod.{Z}", "A")).answer) for x in "ab"}
        if keep != ["10.1.0.1"] or len(markers) != 1:
            bad.append(f"update {applied[0]}: keep {keep}, markers {markers}")

    source = ManifestSource(served, apply, 0)
    assert source.scan()
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        # 4 s of swaps, longer (at most 30 s) while fewer than 10 updates were read: a
        # loaded machine swaps slowly, and the check below needs reads to have met swaps.
        start = time.monotonic()
        while not stop.is_set() and swaps[0] < 400:
            spent = time.monotonic() - start
            if spent > 30 or (spent > 4 and applied[0] >= 10):
                break
            swaps[0] += 1
            swap(directory, swaps[0], filler)

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        while thread.is_alive():
            source.scan()
    finally:
        stop.set()
        thread.join()
    source.scan()  # the last version, whole
    assert bad == [], f"{len(bad)} of {applied[0]} updates mixed two versions: {bad[:5]}"
    assert applied[0] >= 10, f"only {applied[0]} updates in {swaps[0]} swaps"
    last = f"10.0.{swaps[0] >> 8 & 255}.{swaps[0] & 255}"
    assert [line.split()[-1] for line in
            ask(handler, query(f"marker-a.prod.{Z}", "A")).answer] == [last]


def test_the_poll_waits_on_the_clock(tmp_path: Path) -> None:
    """The poll interval passes on the injected clock: one poll, then none until the
    clock has moved the whole interval."""
    import asyncio

    from .fakeclock import FakeClock

    write(tmp_path / "a.yaml", [service_import("s1", ips=["10.1.0.1"])])
    clock = FakeClock()
    cache = Cache(ZoneNames(ZONE), 5)
    source = ManifestSource(tmp_path, cache.apply, 5.0, clock=clock)
    polls: list[float] = []
    real_poll = source.poll

    def counted() -> Any:
        polls.append(clock.now)
        return real_poll()

    source.poll = counted  # type: ignore[method-assign]

    async def settle() -> None:
        for _ in range(200):
            await asyncio.sleep(0.01)
            if clock.pending():
                return

    async def main() -> None:
        task = asyncio.create_task(source.run())
        try:
            await settle()
            assert polls == [clock.now] and clock.pending() == [clock.now + 5.0]
            clock.advance(4.999)
            await asyncio.sleep(0.05)
            assert len(polls) == 1
            clock.advance(0.001)
            await settle()
            assert len(polls) == 2
        finally:
            task.cancel()
    asyncio.run(main())
