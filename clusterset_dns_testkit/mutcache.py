"""scripts/mutate's cache of verdicts in ``.mutate/``: which of mutmut's verdicts still hold
after the code or the tests changed, and when its map from functions to tests is stale.

mutmut keeps a verdict while the mutated function's text is unchanged, whatever the rest
of the code and the tests became. Here a file's verdicts are kept while that file and the
rest of ``clusterset_dns/`` are exactly as they were; when only the tests (or the test kit,
or the set of test files judging it) changed, the kills are kept (adding a test cannot make
a killed mutant survive) and every other verdict is tried again. A test weakened or removed
can: then ``--fresh`` drops the file's verdicts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# what to do with a file's cached verdicts
KEEP = "keep"
RETEST = "retest"  # keep the kills, try the others again
DROP = "drop"

# mutmut's exit codes it calls a timeout (mutmut/stats.py): the mutant may have only been
# slow on a busy machine, so it is tried again with the rest when the tests change
TIMEOUTS = frozenset({36, 24, -24, 152, 255})


@dataclass(frozen=True)
class Mark:
    """What a file's verdicts were reached from: the mutated file, the rest of the server,
    the test kit and unit tests, and the test files that judged it."""

    file: str
    code: str
    tests: str
    selection: tuple[str, ...]

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, text: str) -> Mark | None:
        """None for a mark this version did not write (the verdicts are then dropped)."""
        try:
            data = json.loads(text)
            return cls(str(data["file"]), str(data["code"]), str(data["tests"]),
                       tuple(str(t) for t in data["selection"]))
        except (ValueError, KeyError, TypeError):
            return None


def decide(old: Mark | None, new: Mark, fresh: bool = False) -> str:
    """KEEP, RETEST or DROP a file's cached verdicts, reached from ``old``, now at ``new``."""
    if fresh or old is None or old.file != new.file or old.code != new.code:
        return DROP
    if not set(old.selection) <= set(new.selection):
        # a test file no longer judges it: its kills may not be kills any more
        return DROP
    if old.tests != new.tests or old.selection != new.selection:
        return RETEST
    return KEEP


def retest(codes: dict[str, int | None], killed: Iterable[int | None]) -> dict[str, int | None]:
    """The verdicts with all but the kills (``killed``: the exit codes meaning one) set to
    None, which mutmut runs again; a timeout is tried again too."""
    kills = set(killed) - TIMEOUTS
    return {name: code if code in kills else None for name, code in codes.items()}


def digest(files: Iterable[Path], base: Path, extra: Sequence[str] = ()) -> str:
    """One hash of the files' names (relative to ``base``) and contents, and ``extra``."""
    h = hashlib.sha256("\n".join(extra).encode())
    for file in sorted(files):
        h.update(str(file.relative_to(base)).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()


def python_files(roots: Iterable[Path]) -> list[Path]:
    return sorted(f for root in roots for f in root.rglob("*.py") if "__pycache__" not in f.parts)


def mark_of(work: Path, path: str, tests: Sequence[str]) -> Mark:
    """The mark of ``path`` (a file of clusterset_dns/) in the scratch tree ``work``."""
    server = python_files([work / "clusterset_dns"])
    mutated = work / path
    return Mark(file=digest([mutated], work),
                code=digest([f for f in server if f != mutated], work),
                tests=digest(python_files([work / "clusterset_dns_testkit", work / "tests"]), work),
                selection=tuple(sorted(tests)))


def apply(work: Path, path: str, new: Mark, fresh: bool, killed: Iterable[int | None]) -> str:
    """Bring ``path``'s cached verdicts in ``work/mutants`` to what ``new`` allows; the
    decision taken."""
    mark = work / "mutants" / f"{path}.tree"
    meta = work / "mutants" / f"{path}.meta"
    old = Mark.loads(mark.read_text(encoding="utf-8")) if mark.exists() else None
    decision = decide(old, new, fresh)
    if decision == DROP:
        meta.unlink(missing_ok=True)
    elif decision == RETEST and meta.exists():
        data = json.loads(meta.read_text(encoding="utf-8"))
        data["exit_code_by_key"] = retest(data["exit_code_by_key"], killed)
        meta.write_text(json.dumps(data, indent=4), encoding="utf-8")
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(new.dumps(), encoding="utf-8")
    return decision


def stats_mark(work: Path, paths: Sequence[str], tests: Sequence[str]) -> str:
    """What mutmut's map from functions to tests (mutants/mutmut-stats.json) is made from:
    the whole server, the tests, the test files run and the files mutated (mutmut traces
    only the functions of the files it mutates, so a map made for another file has no test
    for this one's)."""
    return digest(python_files([work / "clusterset_dns", work / "clusterset_dns_testkit",
                                work / "tests"]), work,
                  ["paths:", *sorted(paths), "tests:", *sorted(tests)])


def drop_stale_stats(work: Path, paths: Sequence[str], tests: Sequence[str],
                     fresh: bool = False) -> bool:
    """Remove mutmut's stats unless they were made from exactly this code, these tests and
    these files; True if removed (mutmut then makes them again, one run of every test)."""
    stats = work / "mutants" / "mutmut-stats.json"
    mark = work / "mutants" / "mutmut-stats.tree"
    now = stats_mark(work, paths, tests)
    stale = fresh or not mark.exists() or mark.read_text(encoding="utf-8") != now
    if stale and stats.exists():
        stats.unlink()
    else:
        stale = False
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(now, encoding="utf-8")
    return stale


def sync_copies(work: Path, package: str = "clusterset_dns") -> list[str]:
    """Remove mutmut's copies (``work/mutants/PACKAGE``) that are not the server's file as
    it is now: mutmut copies a file only when its copy is missing, so a file changed since
    (or mutated by an earlier run of another file) would be tested as it was. mutmut copies
    them again. The removed files, relative to ``work``."""
    copies = work / "mutants" / package
    removed: list[str] = []
    if not copies.is_dir():
        return removed
    # only the modules: beside them are mutmut's .meta and .spans and this cache's .tree
    for copy in python_files([copies]):
        rel = copy.relative_to(work / "mutants")
        source = work / rel
        if not source.is_file() or source.read_bytes() != copy.read_bytes():
            copy.unlink()
            removed.append(str(rel))
    return removed
