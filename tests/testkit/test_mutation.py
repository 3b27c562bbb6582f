"""scripts/mutate (clusterset_dns_testkit/mutation.py and mutsource.py): which tests judge
a file, where a mutant is, and docs/testing.md's table being what the recorded results
make (whether the results are fresh is for whoever runs scripts/mutate --report)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns_testkit import mutation, mutcache, mutsource

SOURCE = '''import x


def top(a):
    if a == 0:
        return 1
    return a


class Cuts:
    def _read(self, b):
        return b + 1
'''


def test_the_table_in_docs_is_the_recorded_results() -> None:
    doc = mutation.DOC.read_text(encoding="utf-8")
    assert mutation.current_table() in doc, "run scripts/mutate --table"


@pytest.mark.parametrize(("mutant", "span"), [
    ("clusterset_dns.zone.m.x_top__mutmut_3", (4, 7)),
    ("clusterset_dns.zone.m.xǁCutsǁ_read__mutmut_1", (11, 12)),
    ("clusterset_dns.zone.m.x_missing__mutmut_1", None),
])
def test_a_mutant_name_points_at_its_function(mutant: str, span: tuple[int, int] | None) -> None:
    assert mutsource.function_span(SOURCE, mutant) == span


def test_a_mutant_is_described_by_its_line_and_change() -> None:
    diff = "--- m.py\n+++ m.py\n@@ -1,4 +1,4 @@\n def top(a):\n-    if a == 0:\n+    if a != 0:\n"
    assert mutsource.describe(SOURCE, "m.x_top__mutmut_1", diff) == (5, "if a == 0: -> if a != 0:")
    removed = "@@ -1,2 +1,2 @@\n-        return b + 1\n+        return None\n"
    assert mutsource.describe(SOURCE, "m.xǁCutsǁ_read__mutmut_2", removed) == \
        (12, "return b + 1 -> return None")


def test_a_line_standing_twice_is_told_by_where_the_diff_puts_it() -> None:
    source = ("def f(s):\n    t = 0.0\n    for x in s:\n        if t:\n            g(t)\n"
              "            t = 0.0\n        t = x\n")
    second = ("--- m.py\n+++ m.py\n@@ -3,5 +3,5 @@\n     for x in s:\n         if t:\n"
              "             g(t)\n-            t = 0.0\n+            t = 1.0\n         t = x\n")
    first = "--- m.py\n+++ m.py\n@@ -1,3 +1,3 @@\n def f(s):\n-    t = 0.0\n+    t = 1.0\n"
    assert mutsource.describe(source, "m.x_f__mutmut_2", second) == (6, "t = 0.0 -> t = 1.0")
    assert mutsource.describe(source, "m.x_f__mutmut_1", first) == (2, "t = 0.0 -> t = 1.0")


@pytest.mark.parametrize(("code", "verdict"), [
    (1, "killed"), (36, "killed"), (-24, "killed"), (-6, "killed"), (-11, "killed"),
    (0, "survived"), (33, "no tests"),
    (None, "not run"), (35, "survived")])
def test_mutmut_exit_codes(code: int | None, verdict: str) -> None:
    assert mutation.verdict(code) == verdict


def test_the_tests_of_a_file_are_those_importing_it(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("from clusterset_dns.zone import truncate\n")
    (tmp_path / "test_b.py").write_text("import clusterset_dns.zone.truncate as t\n")
    (tmp_path / "test_c.py").write_text("from clusterset_dns.zone.wire import Encoder\n")
    (tmp_path / "helpers.py").write_text("from clusterset_dns.zone import truncate\n")
    found = mutation.covering_tests(["clusterset_dns/zone/truncate.py"], tmp_path)
    assert [Path(p).name for p in found] == ["test_a.py", "test_b.py"]


def test_the_table_counts_equivalent_survivors_apart() -> None:
    results = {"clusterset_dns/zone/a.py": {
        "commit": "abc", "mutants": 13, "killed": 9, "not_run": 1,
        "survivors": [{"line": 3, "mutation": "x -> y", "kind": "survived"},
                      {"line": 4, "mutation": "p -> q", "kind": "survived"},
                      {"line": 5, "mutation": "'a' -> 'XXaXX'", "kind": "log"}]}}
    equivalent = {"clusterset_dns/zone/a.py": [{"mutation": "p -> q", "why": "same bytes"}]}
    sources = ["clusterset_dns/zone/a.py", "clusterset_dns/zone/b.py",
               "clusterset_dns/serving/c.py"]
    block = mutation.table(results, equivalent, sources)
    assert "| `zone` | 1 | 1 | 12 | 9 | 1 | 1 | 1 | 90% | 1 |" in block
    assert "| `serving` | not run yet | 1 |" in block
    assert "Files not run yet (a package's figure does not cover them): `zone/b.py`, " \
        "`serving/c.py`." in block
    assert "- `clusterset_dns/zone/a.py:4` `p -> q`: same bytes" in block
    doc = f"before\n{mutation.BEGIN}\nold\n{mutation.END}\nafter\n"
    assert mutation.replace_table(doc, block) == f"before\n{block}\nafter\n"


def test_a_module_no_test_imports_is_judged_by_the_tests_of_its_importers(
        tmp_path: Path) -> None:
    source = tmp_path / "clusterset_dns"
    (source / "zone").mkdir(parents=True)
    (source / "zone" / "reasons.py").write_text("")
    (source / "zone" / "records.py").write_text("from clusterset_dns.zone import reasons\n")
    tests = tmp_path / "unit"
    tests.mkdir()
    (tests / "test_a.py").write_text("from clusterset_dns.zone.records import Builder\n")
    (tests / "test_b.py").write_text("from clusterset_dns.zone import wire\n")
    found = mutation.covering_tests(["clusterset_dns/zone/reasons.py"], tests, source)
    assert [Path(p).name for p in found] == ["test_a.py"]


HELP_SOURCE = ('def f(r):\n    c = Counter(\n        "c_total", "What it counts, "\n'
               '        "by reason", ["reason"], registry=r)\n    return c\n')


@pytest.mark.parametrize(("line", "change", "told"), [
    (3, '"c_total", "What it counts, " -> "c_total", "XXWhat it counts, XX"', True),
    (4, '"by reason", ["reason"], registry=r) -> "BY REASON", ["reason"], registry=r)', True),
    # the name, the labels, the registry stand beside the text: not the HELP text
    (3, '"c_total", "What it counts, " -> "XXc_totalXX", "What it counts, "', False),
    (4, '"by reason", ["reason"], registry=r) -> "by reason", ["reason"], registry=None)', False),
    (4, '"by reason", ["reason"], registry=r) -> "by reason", ["XXreasonXX"], registry=r)', False),
    (2, 'c = Counter( -> c = None', False),
    (3, '"c_total", "What it counts, " / x -> (removed)', False),
])
def test_survivors_in_help_texts_are_told_apart(line: int, change: str, told: bool) -> None:
    pieces = mutsource.help_text_pieces(HELP_SOURCE)
    assert pieces == {3: '"What it counts, "', 4: '"by reason"'}
    assert mutsource.only_help_text(line, change, pieces) is told


def test_survivors_in_log_calls_are_told_apart() -> None:
    source = 'def f(x):\n    log.info("a %s",\n             x)\n    return x\n'
    assert mutsource.log_call_lines(source) == {2, 3}


def test_a_class_reached_through_an_importer_brings_its_tests(tmp_path: Path) -> None:
    """sink.py's Sink is tested as app.Sink too: those tests judge sink.py's mutants
    beside the direct importers'; a test of app that does not name the class does not."""
    source = tmp_path / "clusterset_dns"
    (source / "process").mkdir(parents=True)
    (source / "process" / "sink.py").write_text("class Sink:\n    pass\n\n\ndef helper():\n"
                                                "    pass\n")
    (source / "process" / "app.py").write_text("from clusterset_dns.process.sink import Sink\n")
    tests = tmp_path / "unit"
    tests.mkdir()
    (tests / "test_sink.py").write_text("from clusterset_dns.process import sink\n")
    (tests / "test_pacing.py").write_text("from clusterset_dns.process import app\n"
                                          "s = app.Sink()\n")
    (tests / "test_app.py").write_text("from clusterset_dns.process import app\n"
                                       "app.helper()\napp.Sinks()\n")
    found = mutation.covering_tests(["clusterset_dns/process/sink.py"], tests, source)
    assert [Path(p).name for p in found] == ["test_pacing.py", "test_sink.py"]


def test_a_name_imported_from_an_importer_brings_its_tests(tmp_path: Path) -> None:
    """udpplain's UDPReader and udp_reader are imported from serving.server by tests that
    never name udpplain: they judge udpplain's mutants too; one importing another name
    of server does not."""
    source = tmp_path / "clusterset_dns"
    (source / "serving").mkdir(parents=True)
    (source / "serving" / "udpplain.py").write_text(
        "class UDPReader:\n    pass\n\n\ndef udp_reader():\n    pass\n\n\ndef _private():\n"
        "    pass\n")
    (source / "serving" / "server.py").write_text(
        "from clusterset_dns.serving.udpplain import UDPReader, udp_reader, _private\n"
        "def make_socket():\n    pass\n")
    tests = tmp_path / "unit"
    tests.mkdir()
    (tests / "test_udpplain.py").write_text("from clusterset_dns.serving import udpplain\n")
    (tests / "test_observe.py").write_text(
        "from clusterset_dns.serving.server import UDPReader\n")
    (tests / "test_udpbatch.py").write_text(
        "from clusterset_dns.serving.server import make_socket, udp_reader\n")
    (tests / "test_tcp.py").write_text("from clusterset_dns.serving.server import make_socket\n")
    (tests / "test_odd.py").write_text("from clusterset_dns.serving.server import _private\n")
    found = mutation.covering_tests(["clusterset_dns/serving/udpplain.py"], tests, source)
    assert [Path(p).name for p in found] == ["test_observe.py", "test_udpbatch.py",
                                             "test_udpplain.py"]


# -- the cache of verdicts (mutcache) ------------------------------------------------------

MARK = mutcache.Mark(file="f1", code="c1", tests="t1", selection=("tests/unit/test_a.py",))


@pytest.mark.parametrize(("old", "fresh", "decision"), [
    (MARK, False, mutcache.KEEP),
    (MARK, True, mutcache.DROP),
    (None, False, mutcache.DROP),  # no mark, or one an older scripts/mutate wrote
    (replace(MARK, file="f0"), False, mutcache.DROP),  # the mutated file changed
    (replace(MARK, code="c0"), False, mutcache.DROP),  # the rest of the server changed
    (replace(MARK, tests="t0"), False, mutcache.RETEST),  # a test added or changed
    # one more test file judges it: kills stay kills
    (replace(MARK, selection=()), False, mutcache.RETEST),
    # a test file no longer judges it: a kill it made is not known to be one
    (replace(MARK, selection=("tests/unit/test_a.py", "tests/unit/test_b.py")), False,
     mutcache.DROP),
    (replace(MARK, tests="t0", code="c0"), False, mutcache.DROP),
])
def test_cached_verdicts_are_kept_while_the_code_is(old: mutcache.Mark | None, fresh: bool,
                                                    decision: str) -> None:
    assert mutcache.decide(old, MARK, fresh) == decision


def test_a_mark_round_trips_and_an_old_one_is_none() -> None:
    assert mutcache.Mark.loads(MARK.dumps()) == MARK
    assert mutcache.Mark.loads("3f9a" * 16) is None
    assert mutcache.Mark.loads('{"file": "f"}') is None


def test_after_a_test_change_only_kills_are_kept() -> None:
    killed = [code for code, kind in mutation._VERDICTS.items() if kind == mutation.KILLED]
    codes: dict[str, int | None] = {"k1": 1, "k3": 3, "crash": -11, "typed": 37, "slow": 36,
                                    "xcpu": -24, "lived": 0, "none": 33, "todo": None,
                                    "odd": 35}
    assert mutcache.retest(codes, killed) == {
        "k1": 1, "k3": 3, "crash": -11, "typed": 37, "slow": None, "xcpu": None,
        "lived": None, "none": None, "todo": None, "odd": None}


def _work(tmp_path: Path) -> Path:
    for name, text in [("clusterset_dns/zone/a.py", "A = 1\n"),
                       ("clusterset_dns/zone/b.py", "B = 1\n"),
                       ("clusterset_dns_testkit/kit.py", "K = 1\n"),
                       ("tests/unit/test_a.py", "def test_a() -> None: ...\n")]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_cache_follows_the_code_and_the_tests(tmp_path: Path) -> None:
    work = _work(tmp_path)
    path, tests = "clusterset_dns/zone/a.py", ["tests/unit/test_a.py"]
    meta = work / "mutants" / f"{path}.meta"
    kills = [1]

    def run(fresh: bool = False) -> str:
        decision = mutcache.apply(work, path, mutcache.mark_of(work, path, tests), fresh, kills)
        if not meta.exists():  # what mutmut would write
            meta.write_text(json.dumps({"exit_code_by_key": {"m1": 1, "m2": 0}}))
        return decision

    def codes() -> dict[str, int | None]:
        return dict(json.loads(meta.read_text())["exit_code_by_key"])

    assert run() == mutcache.DROP
    assert run() == mutcache.KEEP and codes() == {"m1": 1, "m2": 0}
    (work / "tests/unit/test_a.py").write_text("def test_a() -> None: assert True\n")
    assert run() == mutcache.RETEST and codes() == {"m1": 1, "m2": None}
    (work / "clusterset_dns_testkit/kit.py").write_text("K = 2\n")
    meta.write_text(json.dumps({"exit_code_by_key": {"m1": 1, "m2": 0}}))
    assert run() == mutcache.RETEST and codes() == {"m1": 1, "m2": None}
    (work / "clusterset_dns/zone/b.py").write_text("B = 2\n")
    assert run() == mutcache.DROP and codes() == {"m1": 1, "m2": 0}  # a new meta
    (work / path).write_text("A = 2\n")
    assert run() == mutcache.DROP
    assert run(fresh=True) == mutcache.DROP
    assert run() == mutcache.KEEP


def test_stale_stats_are_dropped(tmp_path: Path) -> None:
    work = _work(tmp_path)
    stats = work / "mutants" / "mutmut-stats.json"
    paths, tests = ["clusterset_dns/zone/a.py"], ["tests/unit/test_a.py"]

    def dropped(paths: list[str] = paths, tests: list[str] = tests, fresh: bool = False) -> bool:
        stats.parent.mkdir(exist_ok=True)
        if not stats.exists():  # mutmut makes them again
            stats.write_text("{}")
        gone = mutcache.drop_stale_stats(work, paths, tests, fresh)
        assert stats.exists() is not gone
        return gone

    assert dropped()  # made by an earlier scripts/mutate, from who knows what
    assert not dropped()
    (work / "tests/unit/test_a.py").write_text("def test_a() -> None: assert True\n")
    assert dropped()
    assert not dropped()
    (work / "clusterset_dns/zone/b.py").write_text("B = 2\n")
    assert dropped()
    assert dropped(paths=["clusterset_dns/zone/b.py"])  # made for another file's functions
    assert dropped(tests=["tests/unit/test_a.py", "tests/unit/test_b.py"])
    assert dropped()
    assert dropped(fresh=True)
    assert not dropped(fresh=False)


def test_copies_not_as_the_server_is_now_are_removed(tmp_path: Path) -> None:
    work = _work(tmp_path)
    copies = work / "mutants" / "clusterset_dns" / "zone"
    copies.mkdir(parents=True)
    (copies / "a.py").write_text("A = 1\n")  # as it is
    (copies / "b.py").write_text("B = 0\n")  # changed since it was copied
    (copies / "c.py").write_text("C = 0\n")  # removed since
    for kept in ("a.py.meta", "a.py.spans", "a.py.tree"):
        (copies / kept).write_text("{}")
    assert mutcache.sync_copies(work) == ["clusterset_dns/zone/b.py", "clusterset_dns/zone/c.py"]
    assert sorted(p.name for p in copies.iterdir()) == \
        ["a.py", "a.py.meta", "a.py.spans", "a.py.tree"]


def test_runs_by_function_add_up_to_one_entry_of_the_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--report --mutants: each run by function is recorded with the file's earlier runs
    by function (same tests), their verdicts read from .mutate/; once the patterns select
    every mutant, the entry is the whole file's."""
    path, tests = "clusterset_dns/zone/a.py", ["tests/unit/test_a.py"]
    (tmp_path / "clusterset_dns/zone").mkdir(parents=True)
    (tmp_path / path).write_text("def f(): ...\ndef g(): ...\n")
    meta = tmp_path / ".mutate" / "mutants" / f"{path}.meta"
    meta.parent.mkdir(parents=True)
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    monkeypatch.setattr(mutation, "WORK", tmp_path / ".mutate")
    monkeypatch.setattr(mutation, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(mutation, "git", lambda *args: "abc1234\n")
    f, g = "clusterset_dns.zone.a.x_f*", "clusterset_dns.zone.a.x_g*"

    def report(codes: dict[str, int | None], only: list[str], run_tests: list[str] = tests,
               finished: bool = True) -> dict[str, Any]:
        """What scripts/mutate --report --mutants ONLY does once mutmut has run."""
        meta.write_text(json.dumps({"exit_code_by_key": {
            f"clusterset_dns.zone.a.x_{name}": code for name, code in codes.items()}}))
        recorded = mutation.load_json(mutation.RESULTS)
        patterns = {path: mutation.combined(recorded.get(path), only, run_tests)}
        mutation.record(mutation.collect([path], patterns[path]), run_tests, finished, patterns)
        entry: dict[str, Any] = mutation.load_json(mutation.RESULTS)[path]
        return {k: entry[k] for k in ("only", "finished", "mutants", "killed", "not_run")}

    assert report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": None}, [f]) == \
        {"only": [f], "finished": True, "mutants": 2, "killed": 2, "not_run": 0}
    # g's run: with f's verdicts, every mutant: the whole file, finished
    assert report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": 1}, [g]) == \
        {"only": [], "finished": True, "mutants": 3, "killed": 3, "not_run": 0}
    # a whole-file entry is not added to: the run by function stands alone
    assert report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": 1}, [g])["only"] == [g]
    # f's verdicts lost (the file changed: mutcache dropped them) when g is run: not run
    mutation.RESULTS.unlink()
    report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": None}, [f])
    assert report({"f__mutmut_1": None, "f__mutmut_2": None, "g__mutmut_1": 1}, [g]) == \
        {"only": [], "finished": False, "mutants": 3, "killed": 1, "not_run": 2}
    # judged by other tests: not added to the entry judged by the first ones
    mutation.RESULTS.unlink()
    report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": None}, [f])
    assert report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": 1}, [g],
                  ["tests/unit/test_b.py"])["only"] == [g]
    # a budget that ran out leaves the combined entry unfinished
    mutation.RESULTS.unlink()
    report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": None}, [f])
    assert report({"f__mutmut_1": 1, "f__mutmut_2": 1, "g__mutmut_1": 1}, [g],
                  finished=False)["finished"] is False


# -- a file mutmut makes no mutant of (only declarations: zone/ops.py) ---------------------

def test_mutmut_makes_no_mutant_of_a_file_of_declarations(tmp_path: Path) -> None:
    """Asked of mutmut's own generator: a function body has mutants, a module of
    dataclasses and constants none."""
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["clusterset_dns"]\n')
    zone = tmp_path / "clusterset_dns" / "zone"
    zone.mkdir(parents=True)
    (zone / "ops.py").write_text("from dataclasses import dataclass\n\nLIMIT = 3\n\n\n"
                                 "@dataclass(frozen=True)\nclass Put:\n    key: str = 'a'\n")
    (zone / "m.py").write_text(SOURCE)
    paths = ["clusterset_dns/zone/ops.py", "clusterset_dns/zone/m.py"]
    assert mutsource.no_mutants(paths, tmp_path) == ["clusterset_dns/zone/ops.py"]
    assert mutsource.no_mutants([], tmp_path) == []


def test_a_file_without_mutants_is_recorded_as_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/mutate --report on such a file records it finished, with 0 mutants and
    the note, without running mutmut (whose budget it would not use), and exits 0."""
    path = "clusterset_dns/zone/ops.py"
    results, doc = tmp_path / "results.json", tmp_path / "testing.md"
    doc.write_text(f"before\n{mutation.BEGIN}\n{mutation.END}\n")
    monkeypatch.setattr(mutation, "RESULTS", results)
    monkeypatch.setattr(mutation, "EQUIVALENT", tmp_path / "equivalent.json")
    monkeypatch.setattr(mutation, "DOC", doc)
    monkeypatch.setattr(mutation, "prepare", lambda paths, tests, fresh: ({}, False))
    monkeypatch.setattr(mutsource, "no_mutants", lambda paths, work: list(paths))

    def run_mutmut(*args: object) -> bool:
        raise AssertionError("mutmut run for a file without mutants")

    monkeypatch.setattr(mutation, "run_mutmut", run_mutmut)
    assert mutation.main(["--report", "--budget", "5", path, "--tests",
                          "tests/unit/test_cache.py"]) == 0
    entry = json.loads(results.read_text())[path]
    assert (entry["mutants"], entry["killed"], entry["not_run"], entry["survivors"]) == \
        (0, 0, 0, [])
    assert entry["finished"] is True and entry["note"] == mutation.NO_MUTANTS
    block = doc.read_text()
    assert "| `zone` | 1 |" in block  # a file run
    assert f"`zone/ops.py` ({entry['commit']}; no mutants)" in block
    assert "`zone/ops.py`" not in block.split("Files not run yet")[1]


def test_a_file_without_mutants_counts_as_run_in_the_table() -> None:
    results = {"clusterset_dns/zone/ops.py": {
        "commit": "abc", "mutants": 0, "killed": 0, "not_run": 0, "survivors": [],
        "finished": True, "note": "no mutants"}}
    block = mutation.table(results, {}, ["clusterset_dns/zone/ops.py",
                                         "clusterset_dns/zone/b.py"])
    assert "| `zone` | 1 | 1 | 0 | 0 | 0 | 0 | 0 | - | 0 |" in block
    assert "Files run (at the commit): `zone/ops.py` (abc; no mutants)." in block


def test_a_file_without_mutants_is_finished_when_the_budget_ran_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Named beside a file whose run the budget stopped, it is still done."""
    monkeypatch.setattr(mutation, "RESULTS", tmp_path / "results.json")
    mutation.record([mutation.FileResult("clusterset_dns/zone/ops.py", no_mutants=True),
                     mutation.FileResult("clusterset_dns/zone/a.py", killed=3, not_run=2)],
                    ["tests/unit/test_cache.py"], finished=False)
    recorded = json.loads((tmp_path / "results.json").read_text())
    assert recorded["clusterset_dns/zone/ops.py"]["finished"] is True
    assert recorded["clusterset_dns/zone/ops.py"]["note"] == "no mutants"
    assert recorded["clusterset_dns/zone/a.py"]["finished"] is False
    assert "note" not in recorded["clusterset_dns/zone/a.py"]


def test_a_run_no_test_reaches_is_judged_untested(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """mutmut stops before the first mutant when no test reaches any (resource.py's one
    mutant is in a Protocol's stub): its mutants are "no tests", as mutmut marks one
    among others, not "not run" (which left resource.py without a verdict)."""
    name = "clusterset_dns.sources.resource.xǁClientǁget__mutmut_1"
    monkeypatch.setattr(mutation, "exit_codes", lambda path: {name: None})
    monkeypatch.setattr(mutation, "diffs", lambda names: {})
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    path = "clusterset_dns/sources/resource.py"
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text("class Client:\n    async def get(self): ...\n")
    log = tmp_path / "run.log"
    log.write_text("Stopping early, because we could not find any test case for any "
                   "mutant. It seems that the selected tests do not cover any code\n")
    assert mutation.untested_run(log)
    [result] = mutation.collect([path], untested=mutation.untested_run(log))
    assert (result.killed, result.not_run, [s["kind"] for s in result.survivors]) == \
        (0, 0, ["no tests"])
    log.write_text("done in 3s\n")
    assert not mutation.untested_run(log) and not mutation.untested_run(tmp_path / "none")
    [result] = mutation.collect([path], untested=mutation.untested_run(log))
    assert (result.not_run, result.survivors) == (1, [])


def test_mutants_named_by_pattern_are_run_only_without_a_cached_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mutmut runs every mutant named to it again: scripts/mutate names only those the
    patterns select that have no verdict (None: unknown yet, or reset by mutcache)."""
    path = "clusterset_dns/zone/a.py"
    meta = tmp_path / "mutants" / f"{path}.meta"
    monkeypatch.setattr(mutation, "WORK", tmp_path)
    f, g = "clusterset_dns.zone.a.x_f*", "clusterset_dns.zone.a.x_g*"
    assert mutation.to_run([path], []) is None  # the whole file: mutmut skips the cached
    assert mutation.to_run([path], [f]) is None  # nothing known: the patterns as given
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {
        "clusterset_dns.zone.a.x_f__mutmut_1": 1, "clusterset_dns.zone.a.x_f__mutmut_2": None,
        "clusterset_dns.zone.a.x_g__mutmut_1": None, "clusterset_dns.zone.a.x_g__mutmut_2": 0}}))
    assert mutation.to_run([path], [f]) == ["clusterset_dns.zone.a.x_f__mutmut_2"]
    assert mutation.to_run([path], [f, g]) == ["clusterset_dns.zone.a.x_f__mutmut_2",
                                               "clusterset_dns.zone.a.x_g__mutmut_1"]
    meta.write_text(json.dumps({"exit_code_by_key": {
        "clusterset_dns.zone.a.x_f__mutmut_1": 1, "clusterset_dns.zone.a.x_f__mutmut_2": 0,
        "clusterset_dns.zone.a.x_g__mutmut_1": None}}))
    assert mutation.to_run([path], [f]) == []  # all judged: the patterns run again
