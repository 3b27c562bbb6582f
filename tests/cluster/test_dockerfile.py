"""deploy/Dockerfile keeps working for users who build with a registry's base image:
built here by buildah with the base as the build argument BASE (a local image of
scripts/build-images' Debian root file system, as no registry is reachable), it gives
the same user, entrypoint and installed package as the image the cluster tests run.
pip inside the build fetches the dependencies from PyPI (this machine's CA bundle is
mounted for that). Both images hold exactly requirements/server.txt's versions."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterset_dns_testkit import locks
from clusterset_dns_testkit.cluster import image_refs

from .clusterlib import REPO


@pytest.fixture
def buildah() -> Iterator[list[str]]:
    d = Path(tempfile.mkdtemp(prefix="csdns-dockerfile-"))
    argv = ["buildah", "--root", str(d / "root"), "--runroot", str(d / "run"),
            "--storage-driver", "vfs"]
    try:
        yield argv
    finally:
        subprocess.run([*argv, "rm", "--all"], capture_output=True, check=False)
        subprocess.run([*argv, "rmi", "--all", "--force"], capture_output=True, check=False)
        shutil.rmtree(d, ignore_errors=True)


def run(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, f"{' '.join(argv)}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout.strip()


def test_dockerfile_builds_with_base_as_build_arg(buildah: list[str]) -> None:
    container = run([*buildah, "from", "scratch"])
    run([*buildah, "add", container, image_refs()["rootfs"]["archive"], "/"])
    run([*buildah, "commit", "-q", container, "localhost/base-python:test"])
    dockerfile = str(REPO / "deploy" / "Dockerfile")
    run([*buildah, "bud", "-q", "--isolation", "chroot", "-v", "/etc/ssl/certs:/etc/ssl/certs:ro",
         "--build-arg", "BASE=localhost/base-python:test", "-f", dockerfile,
         "-t", "localhost/from-dockerfile:test", str(REPO)])
    config = run([*buildah, "inspect", "--format",
                  "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Cmd}}",
                  "localhost/from-dockerfile:test"])
    assert config == "65532:65532 [clusterset-dns] [serve]"
    built = run([*buildah, "from", "localhost/from-dockerfile:test"])
    version = run([*buildah, "run", "--isolation", "chroot", built, "--", "clusterset-dns",
                   "--version"])
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'version = "{version.split()[-1]}"' in pyproject, version
    assert_holds_the_lock(buildah, built)


def test_built_image_holds_the_locked_versions(buildah: list[str]) -> None:
    """scripts/build-images' image, the one the cluster tests and a user's pod run."""
    archive = image_refs()["clusterset-dns"]["archive"]
    container = run([*buildah, "from", "--pull-never", f"oci-archive:{archive}"])
    assert_holds_the_lock(buildah, container)


def assert_holds_the_lock(buildah: list[str], container: str) -> None:
    """``pip freeze`` of what pip installed equals the server's lock (and the package
    itself), and the image's Python imports exactly those versions (the Debian
    python3-* packages of the base sit later on its path)."""
    def inside(*argv: str) -> str:
        return run([*buildah, "run", "--isolation", "chroot", container, "--", *argv])

    site = inside("python3", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    found = locks.frozen(inside("python3", "-m", "pip", "freeze", "--path", site))
    assert found.pop(locks.PROJECT, None), found  # a file URL: installed from its wheel
    locked = locks.read(locks.SERVER)
    assert locks.differences(locked, found) == [] and set(found) == set(locked), found
    imported = dict(line.split("==") for line in inside("python3", "-c", (
        "import importlib.metadata as m\n"
        f"for n in {sorted(locked)!r}: print(n + '==' + m.version(n))")).splitlines())
    assert locks.differences(locked, imported) == []

