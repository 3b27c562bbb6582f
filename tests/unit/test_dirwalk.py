"""dirwalk.find_files on real trees: which files --manifests reads. Symbolic links to
directories are not followed (a loop, or a link out of the tree, would read what the
operator never pointed at); links to files are read; the root itself may be a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterset_dns.sources import dirwalk

# (what, the tree: path -> file content, "->target" for a symbolic link, "/" for a
#  directory; the files found, relative to the root)
TREES: list[tuple[str, dict[str, str], list[str]]] = [
    ("a link to a directory is not followed",
     {"a.yaml": "", "real/b.yaml": "", "link": "->real"}, ["a.yaml", "real/b.yaml"]),
    ("nor one named like a manifest",
     {"real/b.yaml": "", "link.yaml": "->real"}, ["real/b.yaml"]),
    ("a link to a directory out of the tree",
     {"a.yaml": "", "out": "->../outside"}, ["a.yaml"]),
    ("a loop: a link to the root",
     {"a.yaml": "", "sub/loop": "->..", "sub/c.json": ""}, ["a.yaml", "sub/c.json"]),
    ("a link to a file is read",
     {"real/b.yaml": "", "b-link.yml": "->real/b.yaml"}, ["b-link.yml", "real/b.yaml"]),
    ("a dangling link with a manifest's name is listed (reading it reports it)",
     {"gone.yaml": "->nowhere.yaml"}, ["gone.yaml"]),
    ("a directory named like a manifest is walked, not read",
     {"d.yaml/e.yaml": "", "f.txt": ""}, ["d.yaml/e.yaml"]),
    ("a link to itself (it cannot be classified) with a manifest's name is listed",
     {"loop.yaml": "->loop.yaml", "a.yaml": ""}, ["a.yaml", "loop.yaml"]),
    ("dot files and dot directories (a ConfigMap's ..data) are skipped",
     {"..data/a.yaml": "", ".hidden.yaml": "", "a.yaml": "->..data/a.yaml"}, ["a.yaml"]),
]


def make(root: Path, tree: dict[str, str]) -> None:
    root.mkdir()
    (root.parent / "outside").mkdir()
    (root.parent / "outside" / "x.yaml").write_text("")
    for name, content in sorted(tree.items(), key=lambda kv: kv[1].startswith("->")):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("->"):
            os.symlink(content[2:], path)
        else:
            path.write_text(content)


@pytest.mark.parametrize(("what", "tree", "found"), TREES, ids=[t[0] for t in TREES])
def test_which_files_a_tree_gives(tmp_path: Path, what: str, tree: dict[str, str],
                                  found: list[str]) -> None:
    root = tmp_path / "manifests"
    make(root, tree)
    walk = dirwalk.find_files(root)
    assert [str(p.relative_to(root)) for p in walk.files] == found
    assert walk.failed == []


def test_the_root_may_be_a_link_to_a_directory(tmp_path: Path) -> None:
    """--manifests naming a link (a mounted volume's usual shape) is walked."""
    make(tmp_path / "real", {"a.yaml": "", "sub/b.yml": ""})
    (tmp_path / "root").symlink_to(tmp_path / "real")
    walk = dirwalk.find_files(tmp_path / "root")
    assert [str(p.relative_to(tmp_path / "root")) for p in walk.files] == ["a.yaml", "sub/b.yml"]


def test_the_root_may_be_a_file_and_missing_is_empty(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("")
    assert dirwalk.find_files(tmp_path / "one.txt") == dirwalk.Walk([tmp_path / "one.txt"], [])
    assert dirwalk.find_files(tmp_path / "nowhere") == dirwalk.Walk([], [])


def test_a_directory_that_cannot_be_listed_is_reported_and_the_rest_walked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Root reads any directory: the refusal is made at the os.scandir seam.)"""
    root = tmp_path / "manifests"
    make(root, {"a/x.yaml": "", "b/y.yaml": "", "c/z.yaml": ""})
    refused = PermissionError(13, "Permission denied")
    real = os.scandir

    def scandir(path: Path) -> object:
        if Path(path) == root / "b":
            raise refused
        return real(path)

    monkeypatch.setattr(dirwalk.os, "scandir", scandir)
    walk = dirwalk.find_files(root)
    assert walk == dirwalk.Walk([root / "a/x.yaml", root / "c/z.yaml"], [(root / "b", refused)])
    assert walk.covers(root / "b" / "y.yaml") and not walk.covers(root / "a" / "x.yaml")


def test_a_root_that_cannot_be_read_is_reported(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    refused = PermissionError(13, "Permission denied")

    def stat(path: Path) -> os.stat_result:
        raise refused

    monkeypatch.setattr(dirwalk.os, "stat", stat)
    walk = dirwalk.find_files(tmp_path)
    assert walk == dirwalk.Walk([], [(tmp_path, refused)])
    assert walk.covers(tmp_path / "x.yaml")
