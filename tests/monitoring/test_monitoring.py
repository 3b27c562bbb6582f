"""deploy/monitoring with the real promtool (built by scripts/build-peers from the
Prometheus Go module): the alert rules load and pass their unit tests
(alerts-test.yaml); every query of the Grafana dashboard and of the rules parses
as PromQL and names only metrics a running server exports; the exposition itself
passes promtool's lint."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.peers import cache_dir

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
OBJECTS = REPO / "tests" / "conformance" / "objects"
# Grafana's variables, as a query sent to Prometheus would have them.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$namespace": ".*", "$pod": ".*"}
PROMQL_WORDS = {"sum", "by", "rate", "increase", "max", "min", "histogram_quantile", "or",
                "and", "le", "label_values", "without", "on", "ignoring"}


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    path = cache_dir() / "bin" / "promtool"
    if not path.is_file():
        pytest.fail(f"{path} missing: run `scripts/build-peers promtool`")
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=120,
                          input=stdin, check=False)


def dashboard_queries() -> list[str]:
    board = json.loads((MONITORING / "dashboard.json").read_text())
    queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(queries) >= 10
    return queries


def rule_queries() -> list[str]:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def grafana(query: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    return query


def test_alert_rules_check_and_pass_their_tests() -> None:
    checked = promtool("check", "rules", str(MONITORING / "alerts.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout, checked.stdout
    tested = promtool("test", "rules", str(MONITORING / "alerts-test.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_a_broken_expectation_fails_promtool(tmp_path: Path) -> None:
    """The rule tests can fail: the same tests against a rule with another threshold."""
    rules = (MONITORING / "alerts.yaml").read_text().replace("> 0.01", "> 0.5")
    (tmp_path / "alerts.yaml").write_text(rules)
    (tmp_path / "alerts-test.yaml").write_text((MONITORING / "alerts-test.yaml").read_text())
    tested = promtool("test", "rules", str(tmp_path / "alerts-test.yaml"))
    assert tested.returncode != 0 and "ClusterSetDNSServfailRate" in tested.stdout + tested.stderr


def test_dashboard_queries_parse_as_promql(tmp_path: Path) -> None:
    """promtool parses every dashboard query as the expression of a recording rule."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": grafana(q)}
        for i, q in enumerate(dashboard_queries())]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A query that is not PromQL is refused, so the check above means something.
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "x:y", "expr": "sum by (rate(x[1m])"}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0


def _names(query: str) -> set[str]:
    """The metric names a query reads (Grafana's label_values(METRIC, LABEL) too)."""
    query = re.sub(r"label_values\((.*),\s*\w+\)", r"\1", query)
    query = re.sub(r'"[^"]*"', "", query)  # label values
    query = re.sub(r"\{[^}]*\}", "", query)  # selectors
    query = re.sub(r"\[[^]]*\]", "", query)  # ranges
    query = re.sub(r"\b(by|without)\s*\([^)]*\)", "", query)  # grouping labels
    found = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", query)) - PROMQL_WORDS
    return {n for n in found if not n.startswith("humanize")}


@pytest.fixture(scope="module")
def exposition() -> str:
    with ServerProcess("--manifests", str(OBJECTS)) as server:
        server.wait_ready()
        server.ask("notready.conf.svc.clusterset.local", "A")  # a labelled sample or two
        url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())


def test_every_query_names_exported_metrics(exposition: str) -> None:
    families = set(re.findall(r"^# TYPE (\S+) (\S+)", exposition, re.M))
    exported = {name for name, _ in families}
    for name, kind in families:
        if kind == "histogram":
            exported |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        if kind == "counter":
            exported |= {f"{name}_total", f"{name}_created"}
    board = json.loads((MONITORING / "dashboard.json").read_text())
    variables = [v["query"]["query"] for v in board["templating"]["list"]
                 if isinstance(v.get("query"), dict)]
    for query in [*dashboard_queries(), *rule_queries(), *variables]:
        missing = _names(grafana(query)) - exported
        assert not missing, f"{query}: {sorted(missing)} not exported"


def test_the_exposition_passes_promtools_lint(exposition: str) -> None:
    ours = "\n".join(line for line in exposition.splitlines()
                     if "clusterset_dns_" in line) + "\n"
    linted = promtool("check", "metrics", stdin=ours)
    assert linted.returncode == 0, linted.stdout + linted.stderr
