"""The interpreter the image runs, for the benchmarks that time our server.

Both images we ship run CPython 3.11 built with profile-guided optimization and
link-time optimization: scripts/build-images installs Debian bookworm's ``python3``
(3.11.2), and deploy/Dockerfile's default base, ``python:3.11-slim``, is configured with
``--enable-optimizations --with-lto``. A development interpreter (pyenv builds without
either, as this machine's ``python`` is) runs the same code about 30% slower per
answer (bench/micro.py: 1.58 against 1.12 us for a name in mixed case). A benchmark
that compares us with Knot or CoreDNS times the server as users run it: on Debian's
``/usr/bin/python3.11`` in a virtual environment holding exactly requirements/server.txt
(hashes checked, wheels only, as the image installs them). The environment is made once
per lock and interpreter version, outside the clone (``CLUSTERSET_DNS_CACHE``, as the
peers' binaries), and made again when either changes.

``--python current`` on the benchmarks times the interpreter running them instead.
Either way the checkout is byte-compiled first (:func:`compile_package`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from clusterset_dns_testkit.peers import cache_dir

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "server.txt"
# The image's interpreter, as Debian packages it (python3.11; python3.11-venv for venv).
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
CURRENT = "current"  # --python: the interpreter running the benchmark
HELP = ("the interpreter that runs clusterset-dns: 'image' (Debian's python3.11, as the "
        "images ship it, in a venv of requirements/server.txt; the default) or "
        "'current' (the one running this script)")


def version_of(python: Path) -> str:
    """``python``'s full version line (interpreter and build), the cache key's part."""
    return subprocess.run([str(python), "-c", "import sys; print(sys.version)"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def key(lock: bytes, version: str) -> str:
    """The environment's folder name: changes with the lock's bytes or the interpreter."""
    return hashlib.sha256(lock + b"\0" + version.encode()).hexdigest()[:16]


def interpreter(choice: str = "image", base: Path = DEBIAN_PYTHON) -> str:
    """The python that runs our server for ``choice`` (``image`` or ``current``)."""
    if choice == CURRENT:
        return sys.executable
    if choice != "image":
        raise SystemExit(f"--python: 'image' or 'current', not {choice!r}")
    if not base.exists():
        raise SystemExit(f"{base} is missing: the images' interpreter (Debian: apt-get "
                         "install python3.11 python3.11-venv), or pass --python current "
                         "to time this one")
    root = cache_dir() / "shipped-python" / key(LOCK.read_bytes(), version_of(base))
    python = root / "bin" / "python"
    if (root / "complete").exists():
        return str(python)
    shutil.rmtree(root, ignore_errors=True)  # a half-made one from an interrupted run
    print(f"making the image's interpreter environment in {root}", file=sys.stderr)
    subprocess.run([str(base), "-m", "venv", str(root)], check=True, timeout=300)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir",
                    "--require-hashes", "--only-binary", ":all:", "-r", str(LOCK)],
                   check=True, timeout=900, env=env)
    (root / "complete").write_text(version_of(base) + "\n")
    return str(python)


def compile_package(python: str, checkout: Path = REPO) -> None:
    """Byte-compiles ``checkout``'s clusterset_dns for ``python``, as installing the
    package into the image does: a server started from a checkout would otherwise compile
    its modules at every start where bytecode is not written (PYTHONDONTWRITEBYTECODE, as
    on this machine and in the image), about 0.08 s of start-up the image never pays."""
    subprocess.run([python, "-m", "compileall", "-q", str(checkout / "clusterset_dns")],
                   check=True, timeout=300, stdout=subprocess.DEVNULL)


def prepare(choice: str, checkouts: tuple[Path, ...] = (REPO,)) -> str:
    """:func:`interpreter` for ``choice``, with each checkout byte-compiled for it: what
    a benchmark runs its servers with."""
    python = interpreter(choice)
    for checkout in checkouts:
        compile_package(python, checkout)
    return python


def describe(python: str) -> str:
    """For a result's versions: the interpreter's version and where it is (the command
    as given when it is not a Python that answers)."""
    try:
        return f"{version_of(Path(python)).split()[0]} ({python})"
    except (OSError, subprocess.SubprocessError, IndexError):
        return python
