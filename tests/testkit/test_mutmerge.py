"""scripts/mutate --rejudge and --add (clusterset_dns_testkit/mutmerge.py and the command):
what each adds to a file's recorded entry, and what each refuses."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns_testkit import mutation, mutmerge, mutsource

PATH = "clusterset_dns/zone/a.py"
MODULE = "clusterset_dns.zone.a"
SOURCE = "def f(a):\n    return a + 1\n\n\ndef g(b):\n    return b - 1\n"
STAMP = {"commit": "def5678", "date": "2026-12-05", "tests": ["tests/unit/test_b.py"]}


def survivor(mutant: str, mutation_text: str, kind: str = "survived",
             line: int = 2) -> dict[str, Any]:
    return {"line": line, "mutation": mutation_text, "kind": kind, "mutant": mutant}


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "commit": "abc1234", "date": "2026-12-04", "tests": ["tests/unit/test_a.py"],
        "finished": True, "only": [], "mutants": 10, "killed": 6, "not_run": 0,
        "survivors": [survivor("x_f__mutmut_1", "return a + 1 -> return a - 1"),
                      survivor("x_f__mutmut_2", "return a + 1 -> return a + 2"),
                      survivor("x_g__mutmut_1", "return b - 1 -> return b + 1", line=6),
                      survivor("x_g__mutmut_2", "log(b) -> log(None)", kind="log", line=6)]}
    base.update(changes)
    return base


def test_unjudged_leaves_out_equivalent_and_log_survivors() -> None:
    judged = [{"mutation": "return a + 1 -> return a + 2", "why": "never read"}]
    assert mutmerge.unjudged(entry(), judged) == ["x_f__mutmut_1", "x_g__mutmut_1"]
    assert mutmerge.unjudged(entry(), []) == ["x_f__mutmut_1", "x_f__mutmut_2",
                                              "x_g__mutmut_1"]


def test_a_survivor_now_killed_counts_only_if_its_change_reads_as_recorded() -> None:
    old = entry()
    new, changed = mutmerge.rejudged(old, {
        "x_f__mutmut_1": ("killed", "return a + 1 -> return a - 1"),  # killed, same change
        "x_f__mutmut_2": ("killed", "return a + 3 -> return a + 4"),  # another change now
        "x_g__mutmut_1": ("survived", "return b - 1 -> return b + 1")}, STAMP)
    assert new["killed"] == 7 and new["mutants"] == 10
    assert [s["mutant"] for s in new["survivors"]] == \
        ["x_f__mutmut_2", "x_g__mutmut_1", "x_g__mutmut_2"]
    assert changed == ["x_f__mutmut_2"]
    assert new["rejudged"] == [{**STAMP, "mutants": 3, "killed": 1}]
    assert old["killed"] == 6 and len(old["survivors"]) == 4  # the old entry is left alone
    again, _ = mutmerge.rejudged(new, {"x_g__mutmut_1": ("killed", "return b - 1 -> "
                                                         "return b + 1")}, STAMP)
    assert again["killed"] == 8 and len(again["rejudged"]) == 2
    assert mutmerge.provenance(again) == "survivors run again at def5678, def5678"


def test_a_run_of_new_functions_adds_up_with_the_entry() -> None:
    old = entry(only=[f"{MODULE}.x_f*"], finished=True, mutants=4, killed=2,
                survivors=[survivor("x_f__mutmut_1", "a -> b", line=2),
                           survivor("x_f__mutmut_2", "a -> c", line=2)])
    part = {"mutants": 3, "killed": 1, "not_run": 1,
            "survivors": [survivor("x_g__mutmut_1", "b -> c", line=6)]}
    new = mutmerge.added(old, part, [f"{MODULE}.x_g*"], whole=False, finished=True,
                         stamp=STAMP)
    assert (new["mutants"], new["killed"], new["not_run"]) == (7, 3, 1)
    assert new["finished"] is False  # one not run
    assert new["only"] == [f"{MODULE}.x_f*", f"{MODULE}.x_g*"]
    assert new["tests"] == ["tests/unit/test_a.py", "tests/unit/test_b.py"]
    assert [s["mutant"] for s in new["survivors"]] == \
        ["x_f__mutmut_1", "x_f__mutmut_2", "x_g__mutmut_1"]
    assert [p["commit"] for p in new["parts"]] == ["abc1234", "def5678"]
    assert new["parts"][0]["only"] == [f"{MODULE}.x_f*"]
    part["not_run"] = 0
    done = mutmerge.added(old, part, [f"{MODULE}.x_g*"], whole=True, finished=True,
                          stamp=STAMP)
    assert done["only"] == [] and done["finished"] is True
    assert mutmerge.added(old, part, [f"{MODULE}.x_g*"], whole=True, finished=False,
                          stamp=STAMP)["finished"] is False
    assert mutmerge.provenance(done) == "by parts at abc1234, def5678"
    with pytest.raises(ValueError, match="whole file"):
        mutmerge.added(entry(), part, [f"{MODULE}.x_g*"], True, True, STAMP)


@pytest.fixture
def command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """scripts/mutate in a scratch root whose mutmut is a table of exit codes."""
    (tmp_path / "clusterset_dns/zone").mkdir(parents=True)
    (tmp_path / PATH).write_text(SOURCE)
    monkeypatch.chdir(tmp_path)  # the command's paths are relative to where it runs
    doc = tmp_path / "testing.md"
    doc.write_text(f"{mutation.BEGIN}\n{mutation.END}\n")
    for name, value in (("ROOT", tmp_path), ("WORK", tmp_path / ".mutate"),
                        ("RESULTS", tmp_path / "results.json"),
                        ("EQUIVALENT", tmp_path / "equivalent.json"), ("DOC", doc)):
        monkeypatch.setattr(mutation, name, value)
    monkeypatch.setattr(mutation, "git", lambda *args: "def5678\n")
    monkeypatch.setattr(mutation, "prepare", lambda paths, tests, fresh: ({}, False))
    monkeypatch.setattr(mutsource, "no_mutants", lambda paths, work: [])
    (tmp_path / ".mutate" / "mutants").mkdir(parents=True)
    state: dict[str, Any] = {"codes": {}, "ran": [], "finished": True}
    texts = {"x_f__mutmut_1": ("a + 1", "a - 1"), "x_f__mutmut_2": ("a + 1", "a + 2"),
             "x_g__mutmut_1": ("b - 1", "b + 1"), "x_g__mutmut_3": ("b - 1", "b - 2")}
    state["texts"] = texts

    def run_mutmut(budget: float, jobs: int, log: Path, only: list[str]) -> bool:
        state["ran"].append(list(only))
        return bool(state["finished"])

    def diff(name: str) -> str:
        old, new = texts[name.rsplit(".", 1)[-1]]
        word = old.split()[0]
        return (f"--- a\n+++ b\n@@ -1,2 +1,2 @@\n def x({word}):\n-    return {old}\n"
                f"+    return {new}\n")

    monkeypatch.setattr(mutation, "run_mutmut", run_mutmut)
    monkeypatch.setattr(mutation, "exit_codes", lambda path: dict(state["codes"]))
    monkeypatch.setattr(mutation, "diffs", lambda names: {n: diff(n) for n in names})
    mutation.RESULTS.write_text(json.dumps({PATH: entry()}))
    mutation.EQUIVALENT.write_text(json.dumps({PATH: [
        {"mutation": "return a + 1 -> return a + 2", "why": "never read"}]}))
    return state


def test_rejudge_runs_only_the_unjudged_survivors_and_records_the_kills(
        command: dict[str, Any]) -> None:
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 1, f"{MODULE}.x_g__mutmut_1": 0,
                        f"{MODULE}.x_f__mutmut_2": 0}
    assert mutation.main(["--rejudge", "--report", PATH]) == 1  # one still listed
    assert command["ran"] == [[f"{MODULE}.x_f__mutmut_1", f"{MODULE}.x_g__mutmut_1"]]
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert recorded["killed"] == 7
    assert [s["mutant"] for s in recorded["survivors"]] == \
        ["x_f__mutmut_2", "x_g__mutmut_1", "x_g__mutmut_2"]
    assert recorded["rejudged"] == [{"commit": "def5678", "date": dt.date.today().isoformat(),
                                     "tests": ["tests/unit/test_a.py"], "mutants": 2,
                                     "killed": 1}]
    assert "survivors run again at def5678" in mutation.DOC.read_text()
    command["codes"][f"{MODULE}.x_g__mutmut_1"] = 1
    assert mutation.main(["--rejudge", "--report", PATH]) == 0
    assert json.loads(mutation.RESULTS.read_text())[PATH]["killed"] == 8


def test_rejudge_without_report_writes_nothing(command: dict[str, Any]) -> None:
    before = mutation.RESULTS.read_text()
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 1, f"{MODULE}.x_g__mutmut_1": 1}
    assert mutation.main(["--rejudge", PATH]) == 0
    assert mutation.RESULTS.read_text() == before


def test_rejudge_keeps_a_survivor_not_run(command: dict[str, Any]) -> None:
    """The budget ran out before it: no verdict, so it stays listed."""
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 1, f"{MODULE}.x_g__mutmut_1": None}
    command["finished"] = False
    assert mutation.main(["--rejudge", "--report", PATH]) == 1
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert recorded["killed"] == 7 and recorded["rejudged"][0]["mutants"] == 1


def test_rejudge_of_a_file_never_recorded_is_refused(command: dict[str, Any]) -> None:
    mutation.RESULTS.write_text("{}")
    assert mutation.main(["--rejudge", "--report", PATH]) == 2
    assert command["ran"] == []


def test_add_refuses_a_function_already_recorded(command: dict[str, Any]) -> None:
    f, g = f"{MODULE}.x_f*", f"{MODULE}.x_g*"
    mutation.RESULTS.write_text(json.dumps({PATH: entry(only=[f], mutants=2, killed=0,
                                                        survivors=entry()["survivors"][:2])}))
    before = mutation.RESULTS.read_text()
    h = f"{MODULE}.x_h*"
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 1, f"{MODULE}.x_f__mutmut_2": 1,
                        f"{MODULE}.x_g__mutmut_1": 1, f"{MODULE}.x_g__mutmut_3": 0,
                        f"{MODULE}.x_h__mutmut_1": 1}
    tests = ["--tests", "tests/unit/test_a.py"]
    assert mutation.main(["--add", "--report", PATH, "--mutants", f, *tests]) == 2
    assert mutation.main(["--add", "--report", PATH, "--mutants", g, f, *tests]) == 2
    assert mutation.RESULTS.read_text() == before
    assert mutation.main(["--add", "--report", PATH, "--mutants", g, *tests]) == 1
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert (recorded["mutants"], recorded["killed"], recorded["only"]) == (4, 1, [f, g])
    assert [s["mutant"] for s in recorded["survivors"]] == \
        ["x_f__mutmut_1", "x_f__mutmut_2", "x_g__mutmut_3"]
    # h's run: every function covered, the entry is the whole file's
    assert mutation.main(["--add", "--report", PATH, "--mutants", h, *tests]) == 0
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert (recorded["mutants"], recorded["killed"], recorded["only"]) == (5, 2, [])
    # a whole-file entry has nothing to add to
    assert mutation.main(["--add", "--report", PATH, "--mutants", g, *tests]) == 2


def test_add_needs_patterns_and_report(command: dict[str, Any]) -> None:
    tests = ["--tests", "tests/unit/test_a.py"]
    with pytest.raises(SystemExit):
        mutation.main(["--add", "--report", PATH, *tests])
    with pytest.raises(SystemExit):
        mutation.main(["--add", PATH, "--mutants", f"{MODULE}.x_g*", *tests])
    assert command["ran"] == []


def test_rejudge_finds_a_survivor_numbered_otherwise_in_its_function(
        command: dict[str, Any]) -> None:
    """f changed since: its recorded a + 1 -> a - 1 is mutant 4 now, and 1 is another
    change. Mutant 4 is run in its place; g's survivor is run as recorded."""
    command["texts"].update({"x_f__mutmut_1": ("a + 1", "a * 1"),
                             "x_f__mutmut_4": ("a + 1", "a - 1"),
                             "x_f__mutmut_5": ("a + 1", "a // 1")})
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 0, f"{MODULE}.x_f__mutmut_4": 1,
                        f"{MODULE}.x_f__mutmut_5": 0, f"{MODULE}.x_g__mutmut_1": 0,
                        f"{MODULE}.x_g__mutmut_3": 0}
    assert mutation.main(["--rejudge", "--report", PATH]) == 1  # g's still listed
    assert command["ran"][1] == [f"{MODULE}.x_f__mutmut_4"]
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert recorded["killed"] == 7
    assert [s["mutant"] for s in recorded["survivors"]] == \
        ["x_f__mutmut_2", "x_g__mutmut_1", "x_g__mutmut_2"]


def test_rejudge_leaves_a_survivor_two_mutants_could_be(command: dict[str, Any]) -> None:
    command["texts"].update({"x_f__mutmut_1": ("a + 1", "a * 1"),
                             "x_f__mutmut_4": ("a + 1", "a - 1"),
                             "x_f__mutmut_5": ("a + 1", "a - 1")})
    command["codes"] = {f"{MODULE}.x_f__mutmut_1": 0, f"{MODULE}.x_f__mutmut_4": 1,
                        f"{MODULE}.x_f__mutmut_5": 1, f"{MODULE}.x_g__mutmut_1": 1}
    assert mutation.main(["--rejudge", "--report", PATH]) == 1
    assert len(command["ran"]) == 1  # nothing run in f's place
    recorded = json.loads(mutation.RESULTS.read_text())[PATH]
    assert [s["mutant"] for s in recorded["survivors"]] == ["x_f__mutmut_1", "x_f__mutmut_2",
                                                            "x_g__mutmut_2"]
