"""docs/benchmark.md and the README's performance table are what bench/report.py makes of
the committed results, and the results pipeline picks what it should."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns_testkit.bench import page
from clusterset_dns_testkit.bench import results as res

ROOT = Path(__file__).resolve().parents[2]


def test_committed_page_is_generated_from_the_results() -> None:
    assert (ROOT / "docs" / "benchmark.md").read_text(encoding="utf-8") == page.page()


def test_readme_table_is_generated_from_the_results() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert page.replace_readme_table(readme, page.readme_table()) == readme
    assert page.readme_table() in readme


def test_every_committed_result_is_a_full_run_with_its_facts() -> None:
    files = sorted(res.RESULTS.glob("*/*.json"))
    assert files, "no results committed"
    for path in files:
        result = res.load(path)
        assert path.parent.name == result["benchmark"] in res.BENCHMARKS
        assert result["command"].startswith(f"python bench/{result['benchmark']}.py"), path
        assert not result["quick"], f"{path}: a --quick run is not a result to publish"
        assert result["versions"].get("clusterset-dns"), path
        assert result["machine"].get("cpus"), path


def run_result(qps: float, when: str, quick: bool = False) -> dict[str, Any]:
    def row(key: str, server: str, q: float) -> dict[str, Any]:
        return {"key": key, "server": server, "mix": "standard", "qps": q,
                "cpu_s_per_100k": 100_000 / q, "rss_mib": 40.0, "p50_ms": 0.05,
                "p99_ms": 0.5, "p50_common_ms": 0.05, "p99_common_ms": 0.4,
                "avg_common_ms": 0.07, "common_rate": 50_000.0, "server_busy_pct": 99.0,
                "dnsperf_busy_pct": 50.0, "warnings": []}
    meta = {"dataset": {"imports": 1000, "headless": 100, "endpoints": 10, "clusters": 2,
                        "namespaces": 10, "n_queries": 100_000},
            "dnsperf_args": "-B -c 16", "duration": 10.0, "rounds": 1}
    return res.envelope(
        "run", {"meta": meta, "rows": [row("ours1", "clusterset-dns, 1 worker", qps),
                                       row("knot", "Knot DNS", 100_000.0)]},
        quick=quick, argv=["bench/run.py"] + (["--quick"] if quick else []),
        when=dt.datetime.strptime(when, "%Y-%m-%d %H:%M").replace(tzinfo=dt.UTC))


def test_pipeline_takes_the_newest_full_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    older = res.write(run_result(111_111, "2026-12-01 10:00"), results)
    newest = res.write(run_result(222_222, "2026-12-02 10:00"), results)
    res.write(run_result(333_333, "2026-12-03 10:00", quick=True), results)
    assert older.name == "20261201T1000Z.json"
    assert res.latest("run", results) == (newest, res.load(newest))
    table = page.readme_table(results)
    assert "222,222" in table and "| 2.22 | 0.45 |" in table  # q/s and CPU vs Knot
    assert "333,333" in page.readme_table(results, include_quick=True)
    text = page.page(results, page_dir=tmp_path / "docs")
    assert "222,222" in text and "111,111" not in text and "333,333" not in text
    assert "(../results/run/20261202T1000Z.json)" in text
    assert "No result yet: run `python bench/storm.py`." in text


def test_a_written_result_names_no_path_of_this_machine(tmp_path: Path) -> None:
    result = run_result(111_111, "2026-12-01 10:00")
    home, repo = Path.home(), res.REPO
    result["data"]["meta"]["ours_cmd"] = f"{home}/.venv/bin/python3 -m clusterset_dns"
    result["data"]["meta"]["crds"] = f"{repo}/tests/crds"
    text = res.write(result, tmp_path / "results").read_text()
    assert f"{home}/" not in text and f"{repo}/" not in text
    meta = json.loads(text)["data"]["meta"]
    assert meta["ours_cmd"] == "~/.venv/bin/python3 -m clusterset_dns"
    assert meta["crds"] == "./tests/crds"


def test_a_file_that_is_not_a_result_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x.json").write_text(json.dumps({"meta": {}, "rows": []}))
    with pytest.raises(ValueError, match="not a benchmark result"):
        res.latest("run", tmp_path)


def test_check_finds_a_hand_edited_table(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    edited = tmp_path / "README.md"
    # one figure of the generated block changed (Knot's own ratio, 1.00 whatever was measured)
    start = readme.index(page.README_BEGIN)
    cut = readme.index(" | 1.00 |", start)
    assert cut < readme.index(page.README_END)
    edited.write_text(readme[:cut] + " | 1.01 |" + readme[cut + len(" | 1.00 |"):],
                      encoding="utf-8")
    assert edited.read_text(encoding="utf-8") != readme
    committed_page = ROOT / "docs" / "benchmark.md"
    assert page.regenerate(res.RESULTS, committed_page, edited, write=False) == [edited]
    assert page.regenerate(res.RESULTS, committed_page, ROOT / "README.md", write=False) == []
    fixed = page.replace_readme_table(edited.read_text(encoding="utf-8"), page.readme_table())
    assert fixed == readme


def kube_run(scale: int, ours: float, coredns: float) -> dict[str, Any]:
    def server(t: float, rss: float) -> dict[str, float]:
        return {"first_answer_s": t, "rss_mib": rss, "peak_mib": rss * 1.2}
    return {"scale": scale, "load_s": 10.0 * scale,
            "objects": {"imports": 10000 * scale, "headless": 1000 * scale,
                        "endpoints_per_headless": 100},
            "clusterset_dns": server(ours * scale, 100.0 * scale),
            "coredns": server(coredns * scale, 200.0 * scale)}


def test_a_scale_run_shows_the_curve_on_the_page_and_in_the_readme(tmp_path: Path) -> None:
    results = tmp_path / "results"
    res.write(run_result(111_111, "2026-12-01 10:00"), results)
    runs = [kube_run(1, 2.0, 3.0), kube_run(3, 2.5, 3.0), kube_run(10, 3.0, 3.0)]
    res.write(res.envelope("kube_scale", {"runs": runs}, argv=["bench/kube_scale.py",
                                                               "--scale", "1,3,10"],
                           when=dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)), results)
    rows = ["| 10,000 + 1,000 | 100,000 | 2.00 s / 100 / 120 MiB | 3.00 s / 200 / 240 MiB | "
            "0.67 | 0.50 | 1.20 |",
            "| 100,000 + 10,000 | 1,000,000 | 30.00 s / 1,000 / 1,200 MiB | "
            "30.00 s / 2,000 / 2,400 MiB | 1.00 | 0.50 | 1.20 |"]
    table = page.readme_table(results)
    text = page.page(results, page_dir=tmp_path / "docs")
    for row in rows:
        assert row in table and row in text
    assert "`python bench/kube_scale.py --scale 1,3,10`" in table
    assert "| peak resident memory (VmHWM) | 360 MiB | 720 MiB |" in text  # the 3x set's


def test_the_load_is_taken_when_the_benchmark_starts(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    # a long run's envelope is made at its end: the start's load is the one read at import
    loads = iter([(9.5, 0.0, 0.0)])
    monkeypatch.setattr(res.os, "getloadavg", lambda: next(loads))
    monkeypatch.setattr(res, "START_LOAD", 1.25)
    made = res.envelope("startup", {})
    assert (made["machine"]["load_average_1m"], made["machine"]["load_average_1m_end"]) == \
        (1.25, 9.5)
    facts = page._facts(tmp_path / "r.json", made, tmp_path)
    assert "load average 1.25 at the start, 9.50 at the end" in facts[1]
    del made["machine"]["load_average_1m_end"]  # results written before the end was kept
    assert page._facts(tmp_path / "r.json", made, tmp_path)[1].endswith(
        "load average 1.25 at the start")
