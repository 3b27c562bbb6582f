"""Command 1 as a newcomer runs it: an unprivileged user (``nobody`` when the suite
runs as root), a copy of this clone, a fresh venv of a plain Python, then
``scripts/setup`` (the server's lock from PyPI, no root) and
``clusterset-dns serve --manifests examples``; the real ``dig`` gets the example
data's answers, and the venv holds exactly the locked versions.

The only departure from the README's line: the health, ready and metrics ports are
free loopback ports instead of the defaults, so the test can run beside others."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterset_dns_testkit import locks
from clusterset_dns_testkit.peers import free_port

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
# what a newcomer's environment may carry for pip to reach its index
PASSED_ON = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
             "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")

EXPECTED = {  # (name, type) -> the answer section, as zone-file lines
    ("web.demo.svc.clusterset.local", "A"): """
        web.demo.svc.clusterset.local. 5 IN A 10.96.10.1
    """,
    ("db.demo.svc.clusterset.local", "SRV"): """
        db.demo.svc.clusterset.local. 5 IN SRV 0 25 5432 db-0.east.db.demo.svc.clusterset.local.
        db.demo.svc.clusterset.local. 5 IN SRV 0 25 5432 db-0.west.example.com.db.demo.svc.clusterset.local.
        db.demo.svc.clusterset.local. 5 IN SRV 0 25 5432 db-1.east.db.demo.svc.clusterset.local.
        db.demo.svc.clusterset.local. 5 IN SRV 0 25 5432 db-1.west.example.com.db.demo.svc.clusterset.local.
    """,  # noqa: E501
}


class Newcomer:
    """Runs commands as the unprivileged user, with only a newcomer's environment."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.prefix = [] if os.geteuid() != 0 else [
            "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
                    **{k: os.environ[k] for k in PASSED_ON if k in os.environ}}

    def activate(self, venv: Path) -> None:
        self.env = {**self.env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:{self.env['PATH']}"}

    def argv(self, *argv: str) -> list[str]:
        return [*self.prefix, *argv]

    def run(self, *argv: str, cwd: Path | None = None, timeout: float = 240,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.argv(*argv), cwd=cwd or self.home, env=self.env, text=True,
                              capture_output=True, timeout=timeout, check=False)
        if check:
            assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done


@pytest.fixture
def home() -> Iterator[Path]:
    # not pytest's tmp_path: its parents are closed to other users
    d = Path(tempfile.mkdtemp(prefix="csdns-newcomer-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def copy_of_this_clone(dest: Path) -> None:
    """The files git would have in a fresh clone of this work tree as it is now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def make_venv(user: Newcomer, venv: Path) -> None:
    """A venv of a Python >= 3.11 that the user may run: the system's, else this one
    (which may live where the user cannot go)."""
    tried = []
    for python in ("/usr/bin/python3", sys.executable):
        shutil.rmtree(venv, ignore_errors=True)
        done = user.run(python, "-c", "import sys; assert sys.version_info >= (3, 11)",
                        check=False)
        if done.returncode == 0:
            done = user.run(python, "-m", "venv", str(venv), check=False)
            if done.returncode == 0:
                return
        tried.append(f"{python}: {done.stderr.strip()[-300:]}")
    raise AssertionError("no Python >= 3.11 with venv for the user: " + "; ".join(tried))


def dig(port: int, name: str, rdtype: str) -> list[str]:
    out = subprocess.run(["dig", "@127.0.0.1", "-p", str(port), "+norecurse", "+time=2",
                          "+tries=1", "+noall", "+answer", "-t", rdtype, "-q", name],
                         capture_output=True, text=True, timeout=20, check=False)
    return sorted(" ".join(line.split()) for line in out.stdout.splitlines()
                  if line.strip() and not line.startswith(";"))  # ;; no servers could be reached


def test_command_1_as_a_newcomer(home: Path) -> None:
    clone = home / "clusterset-dns"
    copy_of_this_clone(clone)
    if os.geteuid() == 0:
        for path in [home, *home.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
    user = Newcomer(home)
    make_venv(user, home / "venv")
    user.activate(home / "venv")

    setup = user.run("scripts/setup", cwd=clone)
    assert "setup: done" in setup.stdout, setup.stdout + setup.stderr

    port = free_port()
    server = subprocess.Popen(
        user.argv("clusterset-dns", "serve", "--manifests", "examples",
                  "--listen", f"127.0.0.1:{port}", "--health-listen", f"127.0.0.1:{free_port()}",
                  "--ready-listen", f"127.0.0.1:{free_port()}",
                  "--metrics-listen", f"127.0.0.1:{free_port()}"),
        cwd=clone, env=user.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not dig(port, "web.demo.svc.clusterset.local", "A"):
            assert server.poll() is None, server.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "no answer in 60 s"
            time.sleep(0.2)
        for (name, rdtype), text in EXPECTED.items():
            expected = sorted(" ".join(line.split()) for line in text.strip().splitlines())
            assert dig(port, name, rdtype) == expected, (name, rdtype)
    finally:
        server.terminate()
        server.communicate(timeout=30)

    freeze = user.run("python", "-m", "pip", "freeze", "--all", cwd=clone).stdout
    found = locks.frozen(freeze)
    found.pop(locks.PROJECT)  # this clone, editable
    for tool in ("pip", "setuptools", "wheel"):  # the venv's own
        found.pop(tool, None)
    assert locks.differences(locks.read(locks.SERVER), found) == []
    assert set(found) == set(locks.read(locks.SERVER)), freeze
