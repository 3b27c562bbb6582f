"""The repository stands on its own: a fresh clone, with nothing beside it, runs
the kube tests; no file refers to anything outside the clone; tests/ and bench/
share code only through clusterset_dns_testkit.

    python -m pytest tests/testkit/test_self_contained.py -q
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterset_dns_testkit import peers

REPO = peers.REPO_ROOT

# Representative kube tests: a released CRD set (fetched into the clone's own
# cache), one of our own layouts (tests/crds) and the server run from the clone.
CLONE_TESTS = [
    "tests/kube/test_versions.py::test_mcs_api_v041_v1alpha1_only",
    "tests/kube/test_versions.py::test_v1alpha2_root_layout_stored_as_v1alpha2",
]


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [REPO / name for name in out.stdout.decode().split("\0") if name]


def _machine_paths() -> list[str]:
    """Absolute paths that exist only on the machine this checkout sits on: the home
    directory and the directories holding the checkout (up to two levels up, short of
    the file-system root and of the usual system directories)."""
    system = {"/", "/tmp", "/home", "/usr", "/var", "/opt", "/srv", "/mnt"}
    found = [str(Path.home())] if str(Path.home()) not in system else []
    found += [str(p) for p in (REPO, REPO.parent, REPO.parent.parent) if str(p) not in system]
    return [p.rstrip("/") + "/" for p in found]


def test_no_file_refers_outside_the_repository() -> None:
    # The directory that once sat beside the checkout; spelt in parts so that this
    # file does not name it.
    forbidden = ["/".join(("..", "shared")), *_machine_paths()]
    hits = []
    for path in _tracked_files():
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            hits += [f"{path.relative_to(REPO)}:{number}: {word!r}"
                     for word in forbidden if word in line]
    assert not hits, "references outside the repository:\n" + "\n".join(hits)


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _path_parts(path: Path) -> set[str]:
    """String constants that name a directory (path building such as ``REPO / "bench"``)."""
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"[\w.-]+", node.value)}


def test_tests_and_bench_share_code_only_through_the_testkit() -> None:
    bench = {p.stem for p in (REPO / "bench").glob("*.py")}
    test_modules = {p.stem for p in (REPO / "tests").rglob("*.py")}
    # These look at bench/ on purpose: this file, and the dead-code test, for which a
    # name a benchmark uses is used.
    on_purpose = {Path(__file__).resolve(), Path(__file__).resolve().with_name("test_dead_code.py")}
    for path in (REPO / "tests").rglob("*.py"):
        if path in on_purpose:
            continue
        assert not _imported_modules(path) & bench, f"{path} imports a bench script"
        assert "bench" not in _path_parts(path), f"{path} builds a path into bench/"
    for path in (REPO / "bench").glob("*.py"):
        assert not _imported_modules(path) & (test_modules | {"tests"}), \
            f"{path} imports from tests/"
        assert "support" not in _path_parts(path), f"{path} builds a path into tests/"
        # What two scripts share lives in the testkit, not in one of them.
        assert not _imported_modules(path) & bench, f"{path} imports another bench script"
    for path in (REPO / "clusterset_dns").rglob("*.py"):
        assert "clusterset_dns_testkit" not in _imported_modules(path), \
            f"{path}: the server must not depend on its test kit"


@pytest.mark.kube
@pytest.mark.timeout(900)
def test_fresh_clone_runs_kube_tests_with_nothing_beside_it(tmp_path: Path) -> None:
    """``git clone`` of this checkout's HEAD into an empty directory; its own
    scripts/fetch-crds fills a fresh cache (only the built peers are lent, as
    scripts/build-peers would rebuild them there); CLUSTERSET_DNS_SHARED unset.
    Representative kube tests must then pass, none skipped."""
    binaries = peers.find_binaries()  # the peers this machine already built
    if shutil.which("go") is None:
        pytest.fail("scripts/fetch-crds needs the go command")
    clone = tmp_path / "empty" / "clusterset-dns"
    clone.parent.mkdir()
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)],
                   check=True, timeout=120)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["clusterset-dns"]

    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    for binary in (binaries.kube_apiserver, binaries.etcd, binaries.coredns):
        (cache / "bin" / binary.name).symlink_to(binary)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLUSTERSET_DNS_SHARED", "KUBEBUILDER_ASSETS", "PYTHONPATH")}
    env["CLUSTERSET_DNS_CACHE"] = str(cache)

    fetch = subprocess.run([str(clone / "scripts" / "fetch-crds")], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=300)
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    assert (cache / "crds" / "mcs-api-v0.5.0").is_dir()
    assert (cache / "crds" / "mcs-api-v0.4.1").is_dir()

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *CLONE_TESTS],
        cwd=clone, env=env, capture_output=True, text=True, timeout=840)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert re.search(rf"\b{len(CLONE_TESTS)} passed\b", summary), summary
    assert "skipped" not in summary and "xfail" not in summary, summary
    # the clone's own code ran: its test kit, not this checkout's
    probe = subprocess.run(
        [sys.executable, "-c", "import clusterset_dns, clusterset_dns_testkit; "
         "print(clusterset_dns.__file__); print(clusterset_dns_testkit.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True, timeout=60)
    assert all(Path(line).is_relative_to(clone) for line in probe.stdout.split()), probe.stdout
