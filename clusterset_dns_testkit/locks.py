"""The dependency locks under ``requirements/`` (written by ``scripts/lock``) as data,
and the checks the set-up scripts run after installing from them.

A lock is pip's requirements format as uv writes it: ``name==version`` with one
``--hash`` per file of that version, and ``# via`` lines naming who asked for it
(``clusterset-dns (pyproject.toml)`` for a direct dependency).

    python3 -m clusterset_dns_testkit.locks installed requirements/test.txt
        this Python holds exactly the locked versions (exit 1 and the differences if not)
    python3 -m clusterset_dns_testkit.locks freeze requirements/server.txt < FREEZE
        FREEZE (`pip freeze` output) lists exactly the locked packages and versions,
        besides clusterset-dns itself

Standard library only: it runs right after ``scripts/setup`` installed the server's
lock, before any test extra is there.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "requirements" / "server.txt"
TEST = REPO / "requirements" / "test.txt"
PROJECT = "clusterset-dns"
PYPROJECT_VIA = f"{PROJECT} (pyproject.toml)"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


def canonical(name: str) -> str:
    """PEP 503: ``PyYAML``, ``pyyaml`` and ``py_yaml`` name the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Pin:
    name: str  # canonical
    version: str
    hashes: frozenset[str]
    via: frozenset[str]  # canonical names, PYPROJECT_VIA, or "-c FILE"


def read(path: Path) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    current: tuple[str, str] | None = None
    hashes: set[str] = set()
    via: set[str] = set()

    def close() -> None:
        if current is not None:
            pins[current[0]] = Pin(current[0], current[1], frozenset(hashes), frozenset(via))

    in_via = False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        pin = _PIN.match(line)
        if pin:
            close()
            current, hashes, via, in_via = (canonical(pin[1]), pin[2]), set(), set(), False
        elif line.startswith("--hash="):
            hashes.update(_HASH.findall(line))
        elif line.startswith("# via"):
            rest = line.removeprefix("# via").strip()
            in_via = not rest
            if rest:
                via.add(_via_name(rest))
        elif in_via and line.startswith("#   "):
            via.add(_via_name(line.removeprefix("#").strip()))
        elif line and not line.startswith("#"):
            raise ValueError(f"{path}: not a line of a lock: {raw!r}")
    close()
    return pins


def _via_name(text: str) -> str:
    return text if text.startswith("-c ") or text == PYPROJECT_VIA else canonical(text)


def differences(locked: Mapping[str, Pin], found: Mapping[str, str]) -> list[str]:
    """What ``found`` (canonical name -> version) gets wrong about ``locked``."""
    problems = [f"{n}: {found[n]} installed, {p.version} locked"
                for n, p in sorted(locked.items()) if n in found and found[n] != p.version]
    problems += [f"{n}: not installed ({p.version} locked)"
                 for n, p in sorted(locked.items()) if n not in found]
    return problems


def installed(names: Iterable[str]) -> dict[str, str]:
    """The version this Python imports for each name (the first on sys.path)."""
    found: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


def frozen(text: str) -> dict[str, str]:
    """``pip freeze`` output as canonical name -> version (editable and URL lines are
    kept by name with the whole line as the version, so they never equal a pin)."""
    found: dict[str, str] = {}
    editable = None  # pip names an editable install without VCS in a comment above it
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# Editable install"):
            named = re.search(r"\(([A-Za-z0-9._-]+)==", line)
            editable = named[1] if named else None
        if not line or line.startswith("#"):
            continue
        pin = _PIN.match(line)
        egg = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
        if pin:
            found[canonical(pin[1])] = pin[2]
        elif line.startswith("-e "):  # by its egg fragment, or the comment above
            name = egg[1] if egg else editable
            found[canonical(name) if name else line] = line
        else:
            found[canonical(re.split(r"[\s@=<>]", line, maxsplit=1)[0])] = line
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("installed", "freeze"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    locked = read(path)
    if argv[0] == "installed":
        problems = differences(locked, installed(locked))
    else:
        found = frozen(sys.stdin.read())
        found.pop(PROJECT, None)
        problems = differences(locked, found)
        problems += [f"{n}: {v} installed, not in the lock" for n, v in sorted(found.items())
                     if n not in locked]
    for line in problems:
        print(f"locks: {path}: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
