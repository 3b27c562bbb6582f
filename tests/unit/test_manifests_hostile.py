"""Hostile and broken manifest files: each is read in isolation, keeps the objects it
gave before, never stops the other files, and is reported once per change with a
reason. Also: failing directory walks, duplicate keys across files, a deleted FILE."""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert, manifests, yamlsafe
from clusterset_dns.sources.manifests import ManifestSource, read_file
from clusterset_dns.zone.cache import Cache
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

from .helpers import DEFAULT_UDP_CAP, ZONE, ask, query
from .test_manifests import API, WEB, write

Z = "svc.clusterset.local."
GROUPS = frozenset({convert.GROUP})


class Setup:
    """A source over ``path`` feeding a real cache; records invalid kinds and errors."""

    def __init__(self, path: Path) -> None:
        self.cache = Cache(ZoneNames(ZONE), 5)
        self.invalid: list[str] = []
        self.errors: list[str] = []
        self.source = ManifestSource(path, self.cache.apply, 0, GROUPS, frozenset(),
                                     self.invalid.append, self.errors.append)
        self.handler = Handler(self.cache.zone, DEFAULT_UDP_CAP)

    def scan(self) -> bool:
        return self.source.scan()

    def a(self, qname: str) -> list[str]:
        reply = ask(self.handler, query(qname, "A"), tcp=True)
        return [line.split()[-1] for line in reply.answer]

    def served(self) -> dict[str, list[str]]:
        """The A answers of the names these tests use."""
        return {n: self.a(f"{n}.{Z}") for n in ("web.prod", "api.other", "new.prod")}


def bomb(levels: int = 9) -> str:
    """The classic "billion laughs" in a few hundred bytes: 9^levels strings, as the
    IPs of an otherwise valid ServiceImport."""
    lines = ["apiVersion: multicluster.x-k8s.io/v1beta1", "kind: ServiceImport",
             "metadata: {name: web, namespace: prod}", 'l0: &l0 ["lol","lol","lol","lol",'
             '"lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    lines.append(f"spec: {{type: ClusterSetIP, ips: *l{levels - 1}}}")
    return "\n".join(lines) + "\n"


def nested_yaml(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def nested_json(depth: int) -> str:
    return '{"kind": ' + "[" * depth + "]" * depth + "}"


SLICE_INT_CLUSTER = endpoint_slice("db-east", "db", cluster="east",
                                   endpoints=[endpoint("10.2.0.1")])
SLICE_INT_CLUSTER["metadata"]["labels"][convert.SOURCE_CLUSTER_LABEL] = 123

# (id, file name, how to make the hostile file, reasons it may be counted under)
Maker = Callable[[Path], None]


def text(content: str) -> Maker:
    return lambda path: write(path, content) and None


def raw(data: bytes) -> Maker:
    def make(path: Path) -> None:
        path.write_bytes(data)
        bump(path)
    return make


def bump(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def symlink_to(target: str) -> Maker:
    def make(path: Path) -> None:
        path.unlink()
        path.symlink_to(target)
    return make


def sparse(size: int) -> Maker:
    def make(path: Path) -> None:
        with open(path, "r+b") as f:
            f.truncate(size)
        bump(path)
    return make


# A file is refused either way; which check sees it first is the library's business:
# libyaml as built into PyYAML 6.0.4's wheels stops deep nesting itself (a parse
# error), older builds leave it to our depth limit.
LIMITS_OR_PARSE = ("limits", "parse")

HOSTILE: list[tuple[str, str, Maker, str | tuple[str, ...]]] = [
    ("alias-bomb", "x.yaml", text(bomb()), "limits"),
    ("recursive-alias", "x.yaml", text("a: &a [1, *a]\n"), "limits"),
    ("recursive-alias-mapping", "x.yaml", text("a: &a {b: *a}\n"), "limits"),
    ("deep-yaml", "x.yaml", text(nested_yaml(yamlsafe.MAX_DEPTH + 5)), "limits"),
    ("very-deep-yaml", "x.yaml", text(nested_yaml(50_000)), LIMITS_OR_PARSE),
    ("deep-json", "x.json", text(nested_json(yamlsafe.MAX_DEPTH + 5)), "limits"),
    ("very-deep-json", "x.json", text(nested_json(200_000)), "limits"),
    ("undefined-alias", "x.yaml", text("a: *nowhere\n"), "parse"),
    ("unhashable-key", "x.yaml", text("? [a, b]\n: c\n"), "parse"),
    ("python-tag", "x.yaml", text("a: !!python/object/apply:os.system ['true']\n"), "parse"),
    ("huge-integer", "x.yaml", text("a: " + "1" * 10_000 + "\n"), "parse"),
    ("binary-junk", "x.yaml", raw(bytes(range(256)) * 4), "parse"),
    ("nul-bytes", "x.yaml", raw(b"kind: \x00\x00\x00\n"), "parse"),
    ("json-junk", "x.json", raw(b"\x89PNG\r\n\x1a\n" + bytes(100)), "parse"),
    ("fifo", "x.yaml", fifo, "not-regular"),
    ("device", "x.yaml", symlink_to("/dev/zero"), "not-regular"),
    ("too-large", "x.yaml", sparse(manifests.MAX_FILE_BYTES + 1), "too-large"),
]


def _hostile(case: str) -> tuple[str, Maker, tuple[str, ...]]:
    for i, name, make, reason in HOSTILE:
        if i == case:
            return name, make, (reason,) if isinstance(reason, str) else reason
    raise KeyError(case)


@pytest.fixture(params=["libyaml", "python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """YAML through libyaml or through the pure-Python loader: both must enforce the
    same limits."""
    if request.param == "libyaml":
        assert hasattr(yaml, "CSafeLoader"), "PyYAML was built without libyaml"
        assert yamlsafe.LOADER is yaml.CSafeLoader
    else:
        monkeypatch.setattr(yamlsafe, "LOADER", yaml.SafeLoader)
    return str(request.param)


@pytest.mark.usefixtures("loader")
@pytest.mark.parametrize("case", [c[0] for c in HOSTILE])
def test_hostile_file_keeps_its_objects(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                        case: str) -> None:
    name, make, reasons = _hostile(case)
    hostile = write(tmp_path / name, [WEB] if name.endswith(".yaml") else WEB)
    other = write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    assert setup.scan()
    before = setup.served()
    assert before["web.prod"] == ["10.1.0.1"] and before["api.other"] == ["10.9.0.1"]

    make(hostile)
    with caplog.at_level(logging.ERROR, logger="clusterset_dns.sources.manifests"):
        setup.scan()
    assert setup.served() == before
    assert len(setup.errors) == 1 and setup.errors[0] in reasons, setup.errors
    reason = setup.errors[0]
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1 and str(hostile) in logged[0] and reason in logged[0], logged

    # reported once per change, not once per poll
    assert not setup.source.pending()
    assert not setup.scan()
    assert setup.errors == [reason]

    # the other files go on being read
    write(other, [API, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.served() == {**before, "new.prod": ["10.4.0.1"]}


@pytest.mark.usefixtures("loader")
@pytest.mark.parametrize("case", [c[0] for c in HOSTILE])
def test_hostile_file_at_start(tmp_path: Path, case: str) -> None:
    name, make, reasons = _hostile(case)
    make(write(tmp_path / name, "placeholder: 1\n"))
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    assert setup.scan()
    assert setup.cache.zone.synced
    assert setup.served() == {"web.prod": [], "api.other": ["10.9.0.1"], "new.prod": []}
    assert len(setup.errors) == 1 and setup.errors[0] in reasons, setup.errors


def python_events(text: str) -> None:
    yamlsafe.check_events(text, yaml.SafeLoader)


CHECKERS = [yamlsafe.check_events, python_events]


@pytest.mark.parametrize("check", CHECKERS, ids=["libyaml-events", "python-events"])
@pytest.mark.parametrize(("text", "message"), [
    (bomb(12), "aliases expand to more than"),
    ("a: &a [1, *a]\n", "recursive alias *a"),
    ("a: &a {b: [{c: *a}]}\n", "recursive alias *a"),
    (nested_yaml(yamlsafe.MAX_DEPTH + 1), "nested deeper than"),
    ("- &x [a, [b]]\n- *x\n- " + "[" * 100 + "]" * 100 + "\n",  # the root list is level 1
     "nested deeper than"),
], ids=["bomb", "recursive-sequence", "recursive-mapping", "too-deep", "deep-after-anchors"])
def test_limits_refuse_before_expansion(check: Callable[[str], None], text: str,
                                        message: str) -> None:
    """Refused before anything walks the tree (a 12-level bomb of a few hundred bytes
    would be walked 9**12 times)."""
    with pytest.raises(yamlsafe.DocumentError) as caught:
        check(text)
    assert caught.value.reason == "limits" and message in str(caught.value)


@pytest.mark.parametrize("check", CHECKERS, ids=["libyaml-events", "python-events"])
def test_limits_count_like_the_expansion(check: Callable[[str], None]) -> None:
    """Just under the budget passes, just over fails: the count is the expanded size."""
    lines = ["a: &a [" + ",".join(["x"] * 99) + "]"]  # 100 nodes
    body = "\n".join(lines) + "\nb: [" + ",".join(["*a"] * 1000) + "]\n"  # ~100,000 more
    budget = len(body) + yamlsafe.MAX_ALIAS_EXPANSION
    expanded = 1 + 2 + 100 + 1 + 1000 * 100  # root, keys, a, b, b's items
    assert expanded <= budget
    check(body)  # within the budget
    over = body.replace("b: [", "b: [" + ",".join(["*a"] * 60) + ",")
    assert 60 * 100 + expanded > len(over) + yamlsafe.MAX_ALIAS_EXPANSION
    with pytest.raises(yamlsafe.DocumentError):
        check(over)


@pytest.mark.usefixtures("loader")
def test_modest_aliases_are_allowed(tmp_path: Path) -> None:
    """Anchors used the way people do (shared labels, ports) still load."""
    path = write(tmp_path / "x.yaml", """\
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: web, namespace: prod}
spec: {type: ClusterSetIP, ips: &ips [10.1.0.1], ports: &ports [{port: 80, name: http}]}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: web2, namespace: prod}
spec: {type: ClusterSetIP, ips: [10.1.0.2], ports: &p2 [{port: 80, name: http}]}
""")
    objects = read_file(path, (0, 0, 0), GROUPS, frozenset(), lambda kind: None)
    assert sorted(objects.imports) == [("prod", "web"), ("prod", "web2")]


def test_conversion_raising_anything_costs_only_that_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conversion promises InvalidObject only; if it ever raises something else, the
    file keeps its previous objects (the seam: a conversion that raises TypeError)."""
    hostile = write(tmp_path / "x.yaml", [WEB])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    setup.scan()
    real = convert.service_import

    def broken(obj: Any, warn: Any = None) -> Any:
        if obj["metadata"]["name"] == "boom":
            raise TypeError("unforeseen shape")
        return real(obj, warn) if warn else real(obj)

    monkeypatch.setattr(convert, "service_import", broken)
    write(hostile, [service_import("boom", ips=["10.5.0.1"]), WEB])
    setup.scan()
    assert setup.errors == ["convert"]
    assert setup.served()["web.prod"] == ["10.1.0.1"]
    write(tmp_path / "other.yaml", [API, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.served() == {"web.prod": ["10.1.0.1"], "api.other": ["10.9.0.1"],
                              "new.prod": ["10.4.0.1"]}


def test_label_value_read_as_integer(tmp_path: Path) -> None:
    """``source-cluster: 123`` (YAML reads it as an integer): whether conversion calls
    the slice invalid or the file fails, the other files and the source keep going."""
    write(tmp_path / "x.yaml", [service_import("db", type_="Headless"), SLICE_INT_CLUSTER])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    assert setup.scan()
    assert setup.cache.zone.synced
    assert setup.a(f"api.other.{Z}") == ["10.9.0.1"]
    assert setup.invalid == ["EndpointSlice"] or setup.errors == ["convert"]
    write(tmp_path / "other.yaml", [API, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.a(f"new.prod.{Z}") == ["10.4.0.1"]


def test_file_replaced_by_a_dangling_link_is_removed(tmp_path: Path) -> None:
    path = write(tmp_path / "x.yaml", [WEB])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    setup.scan()
    path.unlink()
    path.symlink_to(tmp_path / "nowhere.yaml")
    assert setup.scan()
    assert setup.served() == {"web.prod": [], "api.other": ["10.9.0.1"], "new.prod": []}
    assert not setup.source.pending()  # and it is not looked at again every poll


def test_directory_named_like_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    write(tmp_path / "dir.yaml" / "inner.yaml", [WEB])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    assert setup.scan()
    assert setup.served()["web.prod"] == ["10.1.0.1"]  # a directory is walked, not read
    assert setup.errors == []


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EACCES on open (the tests run as root, so the seam is os.open)."""
    hostile = write(tmp_path / "x.yaml", [WEB])
    write(tmp_path / "other.yaml", [API])
    setup = Setup(tmp_path)
    setup.scan()
    real = os.open

    def denied(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == hostile:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    write(hostile, [WEB, service_import("new", ips=["10.4.0.1"])])
    setup.scan()
    assert setup.errors == ["read"]
    assert setup.served() == {"web.prod": ["10.1.0.1"], "api.other": ["10.9.0.1"],
                              "new.prod": []}
    monkeypatch.setattr(os, "open", real)
    write(hostile, [WEB, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.served()["new.prod"] == ["10.4.0.1"]


# -- failing directory walks ---------------------------------------------------------------


def failing_scandir(monkeypatch: pytest.MonkeyPatch, failing: Callable[[Path], bool],
                    code: int = errno.EMFILE) -> None:
    real = os.scandir

    def scandir(path: Any) -> Any:
        if failing(Path(path)):
            raise OSError(code, os.strerror(code), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


@pytest.mark.parametrize("code", [errno.EMFILE, errno.EACCES, errno.EIO])
def test_failed_walk_keeps_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture, code: int) -> None:
    write(tmp_path / "web.yaml", [WEB])
    write(tmp_path / "sub" / "api.yaml", [API])
    setup = Setup(tmp_path)
    setup.scan()
    before = setup.served()
    failing_scandir(monkeypatch, lambda p: True, code)
    with caplog.at_level(logging.INFO, logger="clusterset_dns.sources.manifests"):
        assert setup.source.pending()
        assert not setup.scan()
        assert not setup.scan()
    assert setup.served() == before
    assert setup.errors == ["walk", "walk"]  # every failed walk counts ...
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1 and os.strerror(code) in logged[0]  # ... is logged once
    monkeypatch.undo()
    write(tmp_path / "web.yaml", [WEB, service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.served() == {**before, "new.prod": ["10.4.0.1"]}


def test_failed_subdirectory_keeps_only_its_files(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "web.yaml", [WEB])
    write(tmp_path / "sub" / "api.yaml", [API])
    setup = Setup(tmp_path)
    setup.scan()
    failing_scandir(monkeypatch, lambda p: p.name == "sub", errno.EACCES)
    write(tmp_path / "web.yaml", [service_import("new", ips=["10.4.0.1"])])
    assert setup.scan()
    assert setup.served() == {"web.prod": [], "api.other": ["10.9.0.1"], "new.prod": ["10.4.0.1"]}
    assert setup.errors == ["walk"]


def test_failed_walk_at_start_is_not_synced(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "web.yaml", [WEB])
    setup = Setup(tmp_path)
    failing_scandir(monkeypatch, lambda p: True)
    assert not setup.scan()
    assert not setup.cache.zone.synced  # an unreadable directory is not an empty one
    monkeypatch.undo()
    assert setup.scan()
    assert setup.cache.zone.synced and setup.served()["web.prod"] == ["10.1.0.1"]


# -- duplicates ----------------------------------------------------------------------------


def web_with(ip: str) -> dict[str, Any]:
    return service_import("web", ips=[ip])


@pytest.mark.parametrize("order", [("a.yaml", "b.yaml"), ("b.yaml", "a.yaml")])
def test_duplicates_resolved_by_sorted_path(tmp_path: Path, order: tuple[str, str]) -> None:
    """The file that sorts last wins, whichever was read first and whichever changes."""
    ips = {"a.yaml": "10.0.0.1", "b.yaml": "10.0.0.2"}
    setup = Setup(tmp_path)
    setup.scan()
    for name in order:  # one scan per file: the read order is ``order``
        write(tmp_path / name, [web_with(ips[name])])
        assert setup.scan()
        if name == "a.yaml" and order[0] == "a.yaml":
            assert setup.a(f"web.prod.{Z}") == ["10.0.0.1"]
    assert setup.a(f"web.prod.{Z}") == ["10.0.0.2"]
    write(tmp_path / "a.yaml", [web_with("10.0.0.3")])  # the loser changes: still b
    setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.0.0.2"]
    (tmp_path / "b.yaml").unlink()  # the winner goes: a's object
    assert setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.0.0.3"]


def test_duplicates_compare_paths_by_component(tmp_path: Path) -> None:
    """``a/z.yaml`` sorts before ``a.yaml`` (component ``a`` < ``a.yaml``), so a.yaml wins."""
    write(tmp_path / "a.yaml", [web_with("10.0.0.1")])
    write(tmp_path / "a" / "z.yaml", [web_with("10.0.0.2")])
    setup = Setup(tmp_path)
    setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.0.0.1"]


def test_duplicate_in_a_broken_file_keeps_its_place(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", [web_with("10.0.0.1")])
    b = write(tmp_path / "b.yaml", [web_with("10.0.0.2")])
    setup = Setup(tmp_path)
    setup.scan()
    write(b, "kind: [\n")  # b keeps its old objects, and so still wins
    write(tmp_path / "a.yaml", [web_with("10.0.0.3")])
    setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.0.0.2"]


# -- the path itself -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_deleted_path_stops_serving(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("objects.yaml" if kind == "file" else "objects")
    target = path if kind == "file" else path / "web.yaml"
    write(target, [WEB])
    setup = Setup(path)
    setup.scan()
    assert setup.a(f"web.prod.{Z}") == ["10.1.0.1"]
    target.unlink()
    if kind == "directory":
        path.rmdir()
    assert setup.source.pending()
    assert setup.scan()
    assert setup.a(f"web.prod.{Z}") == []
    assert ask(setup.handler, query(f"web.prod.{Z}", "A")).rcode == 3  # NXDOMAIN, still synced
    assert setup.errors == []
    write(target, [API])  # and it comes back
    assert setup.scan()
    assert setup.a(f"api.other.{Z}") == ["10.9.0.1"]


@pytest.mark.usefixtures("loader")
def test_json_and_yaml_limits_do_not_reject_real_data(tmp_path: Path) -> None:
    """A List of many EndpointSlices is well within the limits."""
    slices = [endpoint_slice(f"s{i}", "db", cluster=f"c{i}",
                             endpoints=[endpoint(f"10.{i // 250}.{i % 250}.{j}", hostname=f"h{j}")
                                        for j in range(1, 20)])
              for i in range(300)]
    items = {"apiVersion": "v1", "kind": "List", "items": [
        service_import("db", type_="Headless"), *slices]}
    for name, body in (("x.json", json.dumps(items)), ("x.yaml", yaml.safe_dump(items))):
        path = write(tmp_path / name, body)
        objects = read_file(path, (0, 0, 0), GROUPS, frozenset(), lambda kind: None)
        assert len(objects.slices) == 300, name


@pytest.mark.parametrize("check", CHECKERS, ids=["libyaml-events", "python-events"])
def test_depth_limit_is_exact(check: Callable[[str], None]) -> None:
    check(nested_yaml(yamlsafe.MAX_DEPTH - 1))  # the root mapping + 99 lists = the limit
    with pytest.raises(yamlsafe.DocumentError):
        check(nested_yaml(yamlsafe.MAX_DEPTH))
