"""scripts/mutate: mutation testing of the server's modules with mutmut (locked in
requirements/test.txt), bounded in time, and the table of docs/testing.md.

mutmut copies the tree it mutates into ``mutants/`` and runs pytest there. Here that tree
is a scratch copy under ``.mutate/`` (ignored by git; mutmut's verdicts are cached there
between runs, by the hash of each function) holding only the server, the test kit and
``tests/unit``: mutants are judged by the tests that need no root, no peer and no cluster.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterset_dns_testkit import mutcache, mutmerge, mutsource

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutate"
RESULTS = ROOT / "docs" / "mutation" / "results.json"
EQUIVALENT = ROOT / "docs" / "mutation" / "equivalent.json"
DOC = ROOT / "docs" / "testing.md"
PACKAGES = ("zone", "base", "serving", "sources", "transfers", "process")
# Copied beside the server for the unit tests: the test kit, and the files some tests
# read (the examples' manifests, a page of the docs)
DATA = ("clusterset_dns_testkit", "examples", "docs")
BEGIN = "<!-- mutation table: made by scripts/mutate --table from docs/mutation; do not edit -->"
END = "<!-- end of the mutation table -->"

# mutmut's exit codes of a mutant's test run (mutmut/stats.py), folded into four verdicts:
# a timeout or a crash is the tests noticing the mutant
KILLED = "killed"
SURVIVED = "survived"
NO_TESTS = "no tests"
NOT_RUN = "not run"
# a survivor inside a call writing a log line (its text or arguments), or one that
# changes only the HELP text of a metric family: prose for people, which the unit tests
# do not pin (they pin families, labels and buckets:
# tests/unit/test_metric_declarations.py); counted apart from the score
LOG = "log"
NO_MUTANTS = "no mutants"  # the note of a file mutmut makes no mutant of
_VERDICTS: dict[int | None, str] = {1: KILLED, 3: KILLED, 36: KILLED, -24: KILLED, 24: KILLED,
                                    152: KILLED, 255: KILLED, -11: KILLED, -9: KILLED,
                                    -6: KILLED,  # SIGABRT: the C library's abort, a crash
                                    37: KILLED, 0: SURVIVED, 5: NO_TESTS, 33: NO_TESTS,
                                    None: NOT_RUN, 2: NOT_RUN}


def verdict(exit_code: int | None) -> str:
    # anything else mutmut calls suspicious or skipped: not counted as killed
    return _VERDICTS.get(exit_code, SURVIVED)


# What mutmut prints when no test reaches any function it mutated (a file whose only
# mutant is in a Protocol's stub, which nothing calls): it then stops before the first
# mutant, leaving every one without an exit code, where a mutant no test reaches among
# others gets 33, "no tests". Such a run is read as mutmut would have judged it.
NO_TEST_REACHES_ANY = "could not find any test case for any mutant"


def untested_run(log: Path) -> bool:
    """Whether mutmut's run stopped early because no test reaches any of its mutants."""
    return log.exists() and NO_TEST_REACHES_ANY in log.read_text(encoding="utf-8",
                                                                 errors="replace")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def default_base() -> str:
    """origin/main where there is one, else main's parent (a checkout without a remote)."""
    probe = subprocess.run(["git", "rev-parse", "--verify", "-q", "origin/main"], cwd=ROOT,
                           capture_output=True)
    return "origin/main" if probe.returncode == 0 else "main~1"


def changed_files(base: str) -> list[str]:
    """The server's Python files changed since ``base`` (from where this branch left it),
    committed or not, and new files not yet added."""
    names = git("diff", "--name-only", "--merge-base", base, "--").split()
    names += git("ls-files", "--others", "--exclude-standard", "clusterset_dns").split()
    return sorted({n for n in names if is_server_module(n) and (ROOT / n).is_file()})


def is_server_module(name: str) -> bool:
    return name.startswith("clusterset_dns/") and name.endswith(".py")


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, by its full name (``from a import b`` counts both
    ``a`` and ``a.b``: b may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def covering_tests(paths: Iterable[str], tests_dir: Path = ROOT / "tests" / "unit",
                   source: Path = ROOT / "clusterset_dns") -> list[str]:
    """The unit test files that import one of the modules of ``paths``; for a module
    no test imports, those importing a module that imports it."""
    wanted = {module_name(p) for p in paths}
    tests = {t: imported_modules(t) for t in sorted(tests_dir.glob("test_*.py"))}
    found = [t for t, imported in tests.items() if imported & wanted]
    base = source.parent
    users = {module_name(os.path.relpath(m, base)) for m in source.rglob("*.py")
             if imported_modules(m) & wanted}
    if not found:
        found = [t for t, imported in tests.items() if imported & users]
    else:
        # and those reaching a class of it through a module that imports it (app.Sink:
        # sink.py's Sink), which the direct importers may test less
        names = class_names([source.parent / p for p in paths])
        used = re.compile(r"\.(?:" + "|".join(map(re.escape, sorted(names))) + r")\b") \
            if names else None
        found += [t for t, imported in tests.items() if t not in found and imported & users
                  and used is not None and used.search(t.read_text(encoding="utf-8"))]
        # and those importing one of its names from a module that imports it
        # (from serving.server import UDPReader: udpplain's)
        again = {f"{user}.{name}" for user in users for name in public_names(paths, source)}
        found += [t for t, imported in tests.items() if t not in found and imported & again]
        found.sort()
    return [os.path.relpath(t, ROOT) for t in found]


def public_names(paths: Iterable[str], source: Path) -> set[str]:
    """The public classes and functions the modules at ``paths`` define."""
    return {node.name for path in paths if (source.parent / path).is_file()
            for node in ast.parse((source.parent / path).read_text(encoding="utf-8")).body
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and not node.name.startswith("_")}


def class_names(paths: Iterable[Path]) -> set[str]:
    """The public classes the modules at ``paths`` define."""
    return {node.name for path in paths if path.is_file()
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_")}


# -- running mutmut ---------------------------------------------------------------------

def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(paths: Sequence[str], tests: Sequence[str],
            fresh: bool = False) -> tuple[dict[str, str], bool]:
    """The scratch tree: this checkout's server, test kit and unit tests, and a
    pyproject.toml telling mutmut what to mutate and which tests judge it. Each file's
    cached verdicts kept, partly kept or dropped (mutcache.decide): the decision by file,
    and whether mutmut's map from functions to tests is to be made again."""
    WORK.mkdir(exist_ok=True)
    for name in ("clusterset_dns", "tests", *DATA):
        shutil.rmtree(WORK / name, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "clusterset_dns", WORK / "clusterset_dns", ignore=ignore)
    for name in DATA:
        shutil.copytree(ROOT / name, WORK / name, ignore=ignore)
    shutil.copytree(ROOT / "tests" / "unit", WORK / "tests" / "unit", ignore=ignore)
    mutcache.sync_copies(WORK)
    restats = mutcache.drop_stale_stats(WORK, paths, tests, fresh)
    kills = [code for code, kind in _VERDICTS.items() if kind == KILLED]
    decisions: dict[str, str] = {}
    for path in paths:
        decisions[path] = mutcache.apply(WORK, path, mutcache.mark_of(WORK, path, tests),
                                         fresh, kills)
        # newer than mutmut's copy: mutated again (copytree kept the checkout's time, and
        # mutmut leaves alone a file whose copy is newer, as after a run that did not
        # mutate it)
        os.utime(WORK / path)
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8") + f"""
[tool.mutmut]
source_paths = ["clusterset_dns"]
only_mutate = {_toml_list(paths)}
also_copy = {_toml_list(DATA)}
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]
pytest_add_cli_args_test_selection = {_toml_list(tests)}
"""
    (WORK / "pyproject.toml").write_text(config, encoding="utf-8")
    return decisions, restats


def run_mutmut(budget: float, jobs: int, log: Path, only: Sequence[str] = ()) -> bool:
    """mutmut run in the scratch tree, niced, stopped when the budget is spent (the
    verdicts reached so far are kept: mutmut saves each). True if it finished.
    ``only``: mutmut's patterns of mutant names (then those are run again)."""
    command = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())",
               "run", "--max-children", str(jobs), *only]
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, cwd=WORK, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: os.nice(10))
        try:
            proc.wait(timeout=budget)
            return True
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # mutmut stops its workers and saves
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return False


def exit_codes(path: str) -> dict[str, int | None]:
    meta = WORK / "mutants" / f"{path}.meta"
    if not meta.exists():
        return {}
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    return codes


def diffs(names: Sequence[str]) -> dict[str, str]:
    """mutmut's diff of each mutant (the function before and after)."""
    if not names:
        return {}
    script = ("import json, sys\nfrom mutmut.__main__ import cli\n"
              "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
              "names = json.load(sys.stdin)\n"
              "print(json.dumps({n: get_diff_for_mutant(n) for n in names}))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=WORK, input=json.dumps(list(names)),
                         capture_output=True, text=True, check=True).stdout
    found: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return found


@dataclass
class FileResult:
    path: str
    killed: int = 0
    not_run: int = 0
    survivors: list[dict[str, Any]] = field(default_factory=list)
    no_mutants: bool = False  # mutmut makes none: run fully, with nothing to judge
    # whether the patterns it was collected with select every mutant of the file
    whole: bool = True

    @property
    def total(self) -> int:
        return self.killed + len(self.survivors) + self.not_run


def selected(name: str, only: Sequence[str]) -> bool:
    return not only or any(fnmatch.fnmatchcase(name, pattern) for pattern in only)


def collect(paths: Sequence[str], only: Sequence[str] = (),
            untested: bool = False) -> list[FileResult]:
    """The verdicts of ``paths``' mutants; ``untested``: mutmut stopped before the first
    because no test reaches any of them (:func:`untested_run`): each is "no tests"."""
    results = []
    for path in paths:
        result, lost = FileResult(path), []
        for name, code in sorted(exit_codes(path).items()):
            if not selected(name, only):
                result.whole = False
                continue
            kind = NO_TESTS if untested and code is None else verdict(code)
            if kind == KILLED:
                result.killed += 1
            elif kind == NOT_RUN:
                result.not_run += 1
            else:
                lost.append((name, kind))
        texts = diffs([name for name, _ in lost])
        source = (ROOT / path).read_text(encoding="utf-8")
        logs = mutsource.log_call_lines(source)
        pieces = mutsource.help_text_pieces(source)
        for name, kind in lost:
            line, text = mutsource.describe(source, name, texts.get(name, ""))
            kind = LOG if line in logs or mutsource.only_help_text(line, text, pieces) else kind
            result.survivors.append({"line": line, "mutation": text, "kind": kind,
                                     "mutant": name.rsplit(".", 1)[-1]})
        result.survivors.sort(key=lambda s: (s["line"], s["mutant"]))
        results.append(result)
    return results


def to_run(paths: Sequence[str], only: Sequence[str]) -> list[str] | None:
    """The mutants of ``paths`` that ``only`` (patterns) names and that have no verdict
    cached (mutmut runs a mutant named to it again even when it has one); None: pass the
    patterns as they are (none given, or a file's verdicts are not known yet)."""
    if not only:
        return None
    found: list[str] = []
    for path in paths:
        codes = exit_codes(path)
        if not codes:
            return None
        found += sorted(name for name, code in codes.items()
                        if code is None and selected(name, only))
    return found


# -- the recorded results and the table ------------------------------------------------------

def load_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def why_equivalent(equivalent: dict[str, Any], path: str, mutation: str) -> str | None:
    for entry in equivalent.get(path, []):
        if entry["mutation"] == mutation:
            return str(entry["why"])
    return None


def combined(previous: dict[str, Any] | None, only: Sequence[str],
             tests: Sequence[str]) -> list[str]:
    """The patterns a run of a file by function (``only``) is collected and recorded
    under: its own and, when the file's recorded entry is also by function and was judged
    by the same test files, that entry's. The verdicts of those are in ``.mutate/`` while
    the file and the tests are unchanged (mutcache); else they are None there again and
    count as not run, so the entry is not finished until they are run again."""
    if not only:
        return []
    if previous and previous.get("only") and list(previous.get("tests", ())) == list(tests):
        return sorted({*previous["only"], *only})
    return list(only)


def record(results: Sequence[FileResult], tests: Sequence[str], finished: bool,
           only: Mapping[str, Sequence[str]] | None = None) -> None:
    """Each file's entry; ``only``: the patterns its results were collected under, by
    file (none: the whole file). Patterns that together select every mutant of the file
    are recorded as a run of the whole file."""
    recorded = load_json(RESULTS)
    commit = git("rev-parse", "--short", "HEAD").strip()
    for r in results:
        patterns = [] if r.whole else list((only or {}).get(r.path, ()))
        recorded[r.path] = {"commit": commit, "date": dt.date.today().isoformat(),
                            "tests": list(tests),
                            "finished": r.no_mutants or (finished and r.not_run == 0),
                            "only": patterns,
                            "mutants": r.total, "killed": r.killed, "not_run": r.not_run,
                            **({"note": NO_MUTANTS} if r.no_mutants else {}),
                            "survivors": r.survivors}
    write_results(recorded)


def write_results(recorded: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n",
                       encoding="utf-8")


def _stamp(tests: Sequence[str]) -> dict[str, Any]:
    return {"commit": git("rev-parse", "--short", "HEAD").strip(),
            "date": dt.date.today().isoformat(), "tests": list(tests)}


def add(results: Sequence[FileResult], recorded: dict[str, Any], patterns: Sequence[str],
        tests: Sequence[str], finished: bool) -> str:
    """--add: each file's run of ``patterns`` added to its by-function entry (mutmerge);
    the reason when refused (nothing is written then)."""
    for r in results:
        entry = recorded.get(r.path)
        if not entry or not entry.get("only"):
            return f"{r.path} has no by-function entry to add to"
        names = list(exit_codes(r.path))
        twice = mutmerge.overlap(names, entry["only"], patterns, selected)
        if twice:
            return f"{r.path}: already recorded by an earlier pattern: {' '.join(twice[:5])}"
        union = [*entry["only"], *patterns]
        part = {"mutants": r.total, "killed": r.killed, "not_run": r.not_run,
                "survivors": r.survivors}
        recorded[r.path] = mutmerge.added(entry, part, patterns,
                                          all(selected(n, union) for n in names),
                                          finished, _stamp(tests))
    write_results(recorded)
    return ""


def rejudge(paths: Sequence[str], args: argparse.Namespace) -> int:
    """--rejudge: the recorded survivors not judged equivalent, run again (mutmerge)."""
    recorded, equivalent = load_json(RESULTS), load_json(EQUIVALENT)
    missing = [p for p in paths if p not in recorded]
    if missing:
        print(f"mutate: nothing recorded for {' '.join(missing)}: run them first",
              file=sys.stderr)
        return 2
    names = {p: [f"{module_name(p)}.{n}"
                 for n in mutmerge.unjudged(recorded[p], equivalent.get(p, []))] for p in paths}
    tests = list(args.tests or dict.fromkeys(t for p in paths for t in recorded[p]["tests"]))
    every = [n for p in paths for n in names[p]]
    print(f"mutate --rejudge: {len(every)} survivor(s) of {' '.join(paths)}\n  judged by "
          f"{len(tests)} test file(s): {' '.join(tests)}")
    if not every:
        return 0
    decisions, _ = prepare(paths, tests, args.fresh)
    for path, decision in decisions.items():
        print(f"  {path}: {_CACHE_NOTES[decision]}")
    finished = run_mutmut(args.budget, args.jobs, WORK / "run.log",
                          to_run(paths, every) or every)
    # a function that changed since may give a recorded change another number: the
    # mutant of the same function that reads as recorded is run in its place
    moved = {p: renamed(p, {f"{module_name(p)}.{s['mutant']}": s["mutation"]
                            for s in recorded[p]["survivors"]
                            if f"{module_name(p)}.{s['mutant']}" in names[p]}) for p in paths}
    again = [n for p in paths for n in moved[p].values()]
    if again and finished:
        finished = run_mutmut(args.budget, args.jobs, WORK / "run.log",
                              to_run(paths, again) or again)
    left = 0
    for path in paths:
        codes = exit_codes(path)
        runs = {n: moved[path].get(n, n) for n in names[path]}
        texts = diffs(list(runs.values()))
        source = (ROOT / path).read_text(encoding="utf-8")
        outcome = {n.rsplit(".", 1)[-1]: (verdict(codes.get(r)),
                                          mutsource.describe(source, r, texts.get(r, ""))[1])
                   for n, r in runs.items() if codes.get(r) is not None}
        for old, new in moved[path].items():
            print(f"  {old.rsplit('.', 1)[-1]} is {new.rsplit('.', 1)[-1]} now")
        entry, changed = mutmerge.rejudged(recorded[path], outcome, _stamp(tests))
        killed = entry["killed"] - recorded[path]["killed"]
        still = len(names[path]) - killed
        left += still
        print(f"{path}: {killed} of {len(names[path])} now killed, {still} still listed"
              + (f" (killed, but the change reads otherwise now: {' '.join(changed)})"
                 if changed else ""))
        recorded[path] = entry
    if not finished:
        print(f"mutate: the budget ({args.budget:.0f} s) ran out; run again to go on")
    if args.report:
        write_results(recorded)
        write_table()
        print(f"mutate: recorded in {os.path.relpath(RESULTS, ROOT)}; docs/testing.md regenerated")
    return 1 if left else 0


def renamed(path: str, wanted: Mapping[str, str]) -> dict[str, str]:
    """For survivors (full name: the change recorded) whose mutant now reads otherwise,
    the one other mutant of the same function that reads as recorded (none: left out)."""
    source = (ROOT / path).read_text(encoding="utf-8")
    texts = diffs(list(wanted))
    moved = {n: text for n, text in wanted.items()
             if mutsource.describe(source, n, texts.get(n, ""))[1] != text}
    if not moved:
        return {}
    def function(name: str) -> str:  # the mutated function's name, without the number
        return name.rsplit("__mutmut_", 1)[0]

    functions = {function(n) for n in moved}
    others = [n for n in exit_codes(path) if function(n) in functions and n not in wanted]
    found, other_texts = {}, diffs(others)
    for name, text in moved.items():
        same = [n for n in others if function(n) == function(name)
                and mutsource.describe(source, n, other_texts.get(n, ""))[1] == text]
        if len(same) == 1:
            found[name] = same[0]
    return found


def server_files(source: Path = ROOT / "clusterset_dns") -> list[str]:
    """Every module of the server a package's figure should cover."""
    return sorted(os.path.relpath(p, ROOT) for p in source.rglob("*.py")
                  if p.name != "__init__.py" and p.parent != source)


def table(results: dict[str, Any], equivalent: dict[str, Any],
          sources: Sequence[str] | None = None) -> str:
    """The Markdown block of docs/testing.md: per package, from the recorded results;
    ``sources``: the server's modules (default: this checkout's), those not run listed."""
    rows = ["| package | files run | files not run yet | mutants run | killed | survived "
            "| judged equivalent | in log calls or HELP texts | killed of the rest "
            "| not run (budget) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes: list[str] = []
    missing = [p for p in (server_files() if sources is None else sources) if p not in results]
    for package in PACKAGES:
        files = {p: r for p, r in sorted(results.items())
                 if p.startswith(f"clusterset_dns/{package}/")}
        left = sum(p.startswith(f"clusterset_dns/{package}/") for p in missing)
        if not files:
            rows.append(f"| `{package}` | not run yet | {left} | | | | | | | |")
            continue
        run = killed = survived = same = logged = not_run = 0
        for path, r in files.items():
            run += r["mutants"] - r["not_run"]
            killed += r["killed"]
            not_run += r["not_run"]
            for s in r["survivors"]:
                why = why_equivalent(equivalent, path, s["mutation"])
                if s["kind"] == LOG:
                    logged += 1
                elif why is None:
                    survived += 1
                else:
                    same += 1
                    notes.append(f"- `{path}:{s['line']}` `{s['mutation']}`: {why}")
        rest = run - same - logged
        score = f"{100 * killed / rest:.0f}%" if rest > 0 else "-"
        rows.append(f"| `{package}` | {len(files)} | {left} | {run} | {killed} | {survived} "
                    f"| {same} | {logged} | {score} | {not_run} |")
    ran = ", ".join(f"`{p.removeprefix('clusterset_dns/')}` ({r['commit']}"
                    + (f"; only {', '.join(_short(o) for o in r['only'])}" if r.get("only")
                       else "") + (f"; {r['note']}" if r.get("note") else "")
                    + (f"; {mutmerge.provenance(r)}" if mutmerge.provenance(r) else "") + ")"
                    for p, r in sorted(results.items()))
    unrun = ", ".join(f"`{p.removeprefix('clusterset_dns/')}`" for p in missing)
    lines = [BEGIN, "", *rows, "", f"Files run (at the commit): {ran or 'none'}.", "",
             f"Files not run yet (a package's figure does not cover them): {unrun or 'none'}.",
             ""]
    if notes:
        lines += ["Survivors judged equivalent (no test can tell them from the code):", "",
                  *notes, ""]
    return "\n".join([*lines, END])


def _short(pattern: str) -> str:
    """A mutant-name pattern as the functions it names (``xǁClassǁmethod*``)."""
    return "`" + pattern.rsplit(".", 1)[-1].replace("ǁ", ".").strip("x._*") + "`"


def replace_table(doc: str, block: str) -> str:
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + block + doc[end:]


def current_table() -> str:
    return table(load_json(RESULTS), load_json(EQUIVALENT))


def write_table() -> None:
    DOC.write_text(replace_table(DOC.read_text(encoding="utf-8"), current_table()),
                   encoding="utf-8")


# -- the command --------------------------------------------------------------------------------

def print_results(results: Sequence[FileResult], equivalent: dict[str, Any]) -> int:
    lost = 0
    for r in results:
        print(f"{r.path}: {r.killed} killed, {len(r.survivors)} survived or untested, "
              f"{r.not_run} not run, of {r.total}" + (f" ({NO_MUTANTS})" if r.no_mutants else ""))
        for s in r.survivors:
            why = why_equivalent(equivalent, r.path, s["mutation"])
            note = f"  (equivalent: {why})" if why else ""
            lost += why is None and s["kind"] != LOG
            tag = "" if s["kind"] == SURVIVED else f" [{s['kind']}]"
            print(f"  {r.path}:{s['line']}: {s['mutation']}{tag}{note}")
    return lost


_CACHE_NOTES = {
    mutcache.KEEP: "cached verdicts kept (code and tests unchanged)",
    mutcache.RETEST: "only the tests changed: kills kept, the other mutants run again",
    mutcache.DROP: "run from the start (first run, the code changed, a test file no longer "
                   "judges it, or --fresh)"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutate", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="files of clusterset_dns/ to mutate "
                        "(default: those changed since --base)")
    parser.add_argument("--base", help="default: origin/main if there is one, else main~1")
    parser.add_argument("--budget", type=float, default=600,
                        help="seconds mutmut may run (default 600); what is left is 'not run'")
    parser.add_argument("-j", "--jobs", type=int, default=1,
                        help="mutants tested at once (default 1: the machine is shared)")
    parser.add_argument("--tests", nargs="+", help="unit test files that judge the mutants "
                        "(default: those under tests/unit importing the mutated modules)")
    parser.add_argument("--mutants", nargs="+", default=[], metavar="GLOB",
                        help="only the mutants whose mutmut names match, e.g. "
                        "'clusterset_dns.transfers.xfr.xǁTransfersǁ_tsig_error*'")
    parser.add_argument("--fresh", action="store_true", help="drop the cached verdicts of "
                        "these files (after a test was weakened or removed: otherwise kills "
                        "are kept while only the tests change)")
    parser.add_argument("--report", action="store_true", help="record the results in "
                        "docs/mutation/results.json and regenerate docs/testing.md's table")
    parser.add_argument("--rejudge", action="store_true", help="run only the recorded "
                        "survivors not judged equivalent, against today's code and tests; "
                        "with --report, those now killed (same change) count as killed")
    parser.add_argument("--add", action="store_true", help="with --mutants and --report: "
                        "add this run of functions to the file's recorded by-function entry "
                        "(refused if an earlier pattern selected one of its mutants)")
    parser.add_argument("--table", action="store_true",
                        help="only regenerate docs/testing.md's table from the recorded results")
    args = parser.parse_args(argv)
    if args.table:
        write_table()
        return 0
    paths = [os.path.relpath(Path(p).resolve(), ROOT) for p in args.paths] or \
        changed_files(args.base or default_base())
    bad = [p for p in paths if not is_server_module(p) or not (ROOT / p).is_file()]
    if bad:
        parser.error(f"not a Python file of clusterset_dns/: {' '.join(bad)}")
    if not paths:
        print("mutate: no file of clusterset_dns/ changed; name the files to mutate")
        return 0
    if args.rejudge:
        return rejudge(paths, args)
    if args.add and not (args.mutants and args.report):
        parser.error("--add needs --mutants and --report")
    tests = args.tests or covering_tests(paths)
    if not tests:
        parser.error("no unit test imports these modules: name them with --tests")
    print(f"mutate: {' '.join(paths)}\n  judged by {len(tests)} test file(s): {' '.join(tests)}"
          f"\n  budget {args.budget:.0f} s, {args.jobs} process(es); mutmut's log in "
          f"{os.path.relpath(WORK, Path.cwd())}/run.log")
    decisions, restats = prepare(paths, tests, args.fresh)
    for path, decision in decisions.items():
        print(f"  {path}: {_CACHE_NOTES[decision]}")
    mutated = [p for p in paths if p not in set(mutsource.no_mutants(paths, WORK))]
    if mutated and (restats or not (WORK / "mutants" / "mutmut-stats.json").exists()):
        print(f"  first, mutmut runs the {len(tests)} test file(s) once to map functions to "
              "tests (a widely imported file: narrow them with --tests)")
    # with none left to run, mutmut still runs the patterns' mutants again: it makes the
    # mutated copies (prepare removed them) that the survivors' diffs are read from
    names = to_run(mutated, args.mutants) or None
    finished = not mutated or run_mutmut(args.budget, args.jobs, WORK / "run.log",
                                         args.mutants if names is None else names)
    # a run by function adds up with the file's earlier ones (same tests) when recorded
    recorded = load_json(RESULTS) if args.report else {}
    only = {p: list(args.mutants) if args.add else combined(recorded.get(p), args.mutants, tests)
            for p in mutated}
    untested = finished and untested_run(WORK / "run.log")
    found = {r.path: r for p in mutated for r in collect([p], only[p], untested)}
    results = [found.get(p) or FileResult(p, no_mutants=True) for p in paths]
    if mutated and not any(r.total for r in found.values()):
        print((WORK / "run.log").read_text(encoding="utf-8", errors="replace")[-3000:])
        print("mutate: mutmut produced no verdict (its log is above)", file=sys.stderr)
        return 2
    equivalent = load_json(EQUIVALENT)
    lost = print_results(results, equivalent)
    if not finished:
        print(f"mutate: the budget ({args.budget:.0f} s) ran out; run again to go on "
              "(verdicts are cached in .mutate/)")
    if args.report and args.add:
        refused = add(results, recorded, args.mutants, tests, finished)
        if refused:
            print(f"mutate: not added: {refused}", file=sys.stderr)
            return 2
        write_table()
        print(f"mutate: added in {os.path.relpath(RESULTS, ROOT)}; docs/testing.md regenerated")
    elif args.report:
        record(results, tests, finished, only)
        write_table()
        print(f"mutate: recorded in {os.path.relpath(RESULTS, ROOT)}; docs/testing.md regenerated")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
