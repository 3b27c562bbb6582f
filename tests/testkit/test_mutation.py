"""scripts/mutate (clusterset_dns_testkit/mutation.py): which tests judge a file, where a
mutant is, and docs/testing.md's table being what the recorded results make (whether the
results are fresh is for whoever runs scripts/mutate --report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterset_dns_testkit import mutation

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
    assert mutation.function_span(SOURCE, mutant) == span


def test_a_mutant_is_described_by_its_line_and_change() -> None:
    diff = "--- m.py\n+++ m.py\n@@ -1,4 +1,4 @@\n def top(a):\n-    if a == 0:\n+    if a != 0:\n"
    assert mutation.describe(SOURCE, "m.x_top__mutmut_1", diff) == (5, "if a == 0: -> if a != 0:")
    removed = "@@ -1,2 +1,2 @@\n-        return b + 1\n+        return None\n"
    assert mutation.describe(SOURCE, "m.xǁCutsǁ_read__mutmut_2", removed) == \
        (12, "return b + 1 -> return None")


@pytest.mark.parametrize(("code", "verdict"), [
    (1, "killed"), (36, "killed"), (-24, "killed"), (0, "survived"), (33, "no tests"),
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
    block = mutation.table(results, equivalent)
    assert "| `zone` | 1 | 12 | 9 | 1 | 1 | 1 | 90% | 1 |" in block
    assert "| `serving` | not run yet |" in block
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
    pieces = mutation.help_text_pieces(HELP_SOURCE)
    assert pieces == {3: '"What it counts, "', 4: '"by reason"'}
    assert mutation.only_help_text(line, change, pieces) is told


def test_survivors_in_log_calls_are_told_apart() -> None:
    source = 'def f(x):\n    log.info("a %s",\n             x)\n    return x\n'
    assert mutation.log_call_lines(source) == {2, 3}


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
