"""Values that would make the chart unsafe or stuck, with the real Helm: a value never
adds an argument or a field (each is checked, or quoted so it stays one scalar), a
PodDisruptionBudget is rendered only when it lets a pod go, and the default memory
request and limit (the chart's and the overlays') are the row the sizing table marks,
whose figures are the measured ones."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterset_dns.process.cli import build_parser, to_config
from clusterset_dns_testkit import markdown
from clusterset_dns_testkit.helm import CHART, OVERLAYS, chart_objects, overlay_objects, template

REPO = Path(__file__).resolve().parents[2]
SIZING_DOCS = [CHART / "README.md", REPO / "deploy" / "README.md"]
INJECTED_FLAG = "--allow-transfer=0.0.0.0/0"
# Each ends a scalar and starts a new line at the indentation of the container's args
# (or of the pod spec): unquoted, the rest becomes an argument or a field of its own.
PAYLOADS = [f"east\n            - {INJECTED_FLAG}", f'east"\n            - {INJECTED_FLAG}',
            "15\n      hostNetwork: true", f"east\n- {INJECTED_FLAG}"]
TSIG = {"transfer": {"tsigKey": {"value": "hmac-sha256:k:c2VjcmV0c2VjcmV0c2VjcmV0"}}}


def _set(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    values: dict[str, Any] = json.loads(json.dumps(base or {}))
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return values


# Every value that the templates write into an object, alone or in a list.
VALUE_PATHS = [
    ("locality.clusterId", False, None), ("transfer.allowTransfer", True, None),
    ("transfer.notify", True, None), ("transfer.journalChanges", False, None),
    ("transfer.tsigKey.secretKey", False, TSIG), ("transfer.tsigKey.existingSecret", False, None),
    ("transfer.tsigKey.value", False, None), ("logFormat", False, None), ("lameduck", False, None),
    ("terminationGracePeriodSeconds", False, None), ("replicas", False, None),
    ("podDisruptionBudget.minAvailable", False, None), ("nameOverride", False, None),
    ("image.repository", False, None), ("image.tag", False, None),
    ("image.pullPolicy", False, None), ("priorityClassName", False, None),
    ("extraArgs", True, None),
]


def _injected(node: Any) -> list[str]:
    """Where a payload escaped its scalar: an argument or a hostNetwork field of its own."""
    found = []
    if isinstance(node, dict):
        found += ["hostNetwork"] if "hostNetwork" in node else []
        for value in node.values():
            found += _injected(value)
    elif isinstance(node, list):
        found += [item for item in node if item == INJECTED_FLAG]
        for item in node:
            found += _injected(item)
    return found


@pytest.mark.parametrize(("path", "is_list", "base"), VALUE_PATHS, ids=[p[0] for p in VALUE_PATHS])
def test_a_value_is_refused_or_stays_one_scalar(path: str, is_list: bool,
                                                base: dict[str, Any] | None) -> None:
    for payload in PAYLOADS:
        out = template(_set(path, [payload] if is_list else payload, base), check=False)
        if out.returncode != 0:
            assert "Error:" in out.stderr  # refused by a check or by Kubernetes' schema
            continue
        objects = [d for d in yaml.safe_load_all(out.stdout) if d]
        assert _injected(objects) == [], f"{path}={payload!r}"


@pytest.mark.parametrize("cluster_id", [
    f"east\n{INJECTED_FLAG}", "a..b", "has space", "x" * 64, "z\u00e9", ".", "a/b",
    ".".join(["a" * 63] * 4) + "a",  # 256 characters
])
def test_a_cluster_id_that_is_not_a_dns_name_is_refused(cluster_id: str) -> None:
    out = template({"locality": {"clusterId": cluster_id}}, check=False)
    assert out.returncode != 0
    assert "locality.clusterId must be a DNS name" in out.stderr


@pytest.mark.parametrize(("values", "message"), [
    ({"transfer": {"allowTransfer": ["10.0.0.0/8 --notify=1.2.3.4:53"]}},
     "transfer.allowTransfer: "),
    ({"transfer": {"allowTransfer": ["any"]}}, "transfer.allowTransfer: "),
    ({"transfer": {"notify": ["ns1.example:53"]}}, "transfer.notify: "),
    ({"transfer": {"notify": ["10.0.0.1"]}}, "transfer.notify: "),
    ({"transfer": {"tsigKey": {"value": "k", "secretKey": "../../etc/passwd"}}},
     "transfer.tsigKey.secretKey must be a Secret key"),
    ({"transfer": {"tsigKey": {"value": "k", "secretKey": ".."}}},
     "transfer.tsigKey.secretKey must be a Secret key"),
    ({"transfer": {"tsigKey": {"existingSecret": "Mine!"}}},
     "transfer.tsigKey.existingSecret must be a Secret name"),
    ({"transfer": {"journalChanges": 1.5}}, "transfer.journalChanges must be a whole number"),
    ({"transfer": {"journalChanges": "100"}}, "transfer.journalChanges must be a whole number"),
    ({"replicas": "2"}, "replicas must be a number"),
    ({"nameOverride": "DNS"}, "nameOverride must be a DNS label"),
    ({"podDisruptionBudget": {"minAvailable": "half"}},
     "podDisruptionBudget.minAvailable must be a number or a percentage"),
])
def test_values_that_are_not_what_they_name_are_refused(values: dict[str, Any],
                                                        message: str) -> None:
    out = template(values, check=False)
    assert out.returncode != 0
    assert message in out.stderr


def test_valid_names_networks_and_targets_reach_the_server_whole() -> None:
    values = {"locality": {"clusterId": "East.EU_1"},
              "transfer": {"allowTransfer": ["10.0.0.0/8", "fd00::/8", "192.0.2.7"],
                           "notify": ["10.0.3.17:53", "[fd00::1]:5353"]}}
    [args] = [c["args"] for o in chart_objects(values) if o["kind"] == "Deployment"
              for c in o["spec"]["template"]["spec"]["containers"]]
    config = to_config(build_parser().parse_args(args), {})
    assert config.cluster_id == "east.eu_1"
    assert [str(n) for n in config.allow_transfer] == ["10.0.0.0/8", "fd00::/8",
                                                        "192.0.2.7/32"]
    assert config.notify == (("10.0.3.17", 53), ("fd00::1", 5353))


def _budgets(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "PodDisruptionBudget"]


@pytest.mark.parametrize(("replicas", "min_available", "rendered"), [
    (1, 1, False), (2, 1, True), (2, 2, False), (3, 2, True), (0, 1, False),
    (1, "50%", False), (2, "50%", True), (3, "67%", False), (3, "66%", True),
    (4, "100%", False), (4, "75%", True),
])
def test_a_budget_is_rendered_only_when_it_lets_a_pod_go(
        replicas: int, min_available: int | str, rendered: bool) -> None:
    """minAvailable rounded up, as the disruption controller does: 3 x 67% needs 3."""
    objects = chart_objects({"replicas": replicas,
                             "podDisruptionBudget": {"minAvailable": min_available}})
    budgets = _budgets(objects)
    assert bool(budgets) is rendered
    if budgets:
        assert budgets[0]["spec"]["minAvailable"] == min_available


def test_no_budget_for_the_daemonset_or_when_disabled() -> None:
    assert _budgets(chart_objects({"mode": "daemonset"})) == []
    assert _budgets(chart_objects({"podDisruptionBudget": {"enabled": False}})) == []


@pytest.mark.parametrize("overlay", sorted(p.name for p in OVERLAYS.iterdir() if p.is_dir()))
def test_every_overlays_budget_lets_a_pod_go(overlay: str) -> None:
    objects = overlay_objects(overlay)
    workloads = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    for budget in _budgets(objects):
        replicas = workloads[budget["metadata"]["name"]]["spec"]["replicas"]
        assert isinstance(budget["spec"]["minAvailable"], int)
        assert budget["spec"]["minAvailable"] < replicas


def _mib(text: str) -> int:
    m = re.fullmatch(r"([\d,]+) MiB|(\d+)Mi", text)
    assert m, text
    return int((m.group(1) or m.group(2)).replace(",", ""))


def sizing_table(doc: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The measured result the table names, and its rows."""
    text = doc.read_text(encoding="utf-8")
    section = text[text.index("## Memory sizing"):]
    [link] = re.findall(r"\]\(([^)]*bench/results/kube_scale/[^)]+\.json)\)", section)
    rows = [{"endpoints": int(r[1].replace(",", "")), "after": _mib(r[2]), "peak": _mib(r[3]),
             "request": _mib(r[4]), "limit": _mib(r[5]), "default": r[6] == "default"}
            for r in markdown.table_after(text, "Memory sizing")]
    return (doc.parent / link).resolve(), rows


def test_the_sizing_tables_are_the_measured_figures() -> None:
    (result, rows), *others = [sizing_table(doc) for doc in SIZING_DOCS]
    assert all(other == (result, rows) for other in others)  # one table, written twice
    runs = json.loads(result.read_text())["data"]["runs"]
    measured = {r["objects"]["headless"] * r["objects"]["endpoints_per_headless"]:
                r["clusterset_dns"] for r in runs}
    assert sorted(measured) == [row["endpoints"] for row in rows]
    for row in rows:
        ours = measured[row["endpoints"]]
        assert (row["after"], row["peak"]) == (round(ours["rss_mib"]), round(ours["peak_mib"]))
        # the stated rules: the request is what the process holds, the limit 1.5x its peak
        assert row["request"] == 32 * math.ceil(ours["rss_mib"] / 32)
        assert row["limit"] == 256 * math.ceil(1.5 * ours["peak_mib"] / 256)
    assert sum(row["default"] for row in rows) == 1


def _memory(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["resources"]["requests"]["memory"], c["resources"]["limits"]["memory"])
            for o in objects if o["kind"] in ("Deployment", "DaemonSet")
            for c in o["spec"]["template"]["spec"]["containers"]]


def test_the_default_memory_is_the_tables_default_row() -> None:
    _, rows = sizing_table(SIZING_DOCS[0])
    [row] = [r for r in rows if r["default"]]
    want = (f"{row['request']}Mi", f"{row['limit']}Mi")
    shipped = _memory(chart_objects()) + _memory(chart_objects({"mode": "daemonset"}))
    for overlay in sorted(p.name for p in OVERLAYS.iterdir() if p.is_dir()):
        shipped += _memory(overlay_objects(overlay))
    assert len(shipped) == 5
    assert set(shipped) == {want}


@pytest.mark.parametrize("source", ["chart-deployment", "chart-daemonset",
                                    *sorted(p.name for p in OVERLAYS.iterdir() if p.is_dir())])
def test_the_service_asks_for_both_families(source: str) -> None:
    """A ClusterIP of each family where the cluster has both, so IPv6-only clients reach
    the server (the dual-stack cluster test asks it over its IPv6 ClusterIP); the one
    family in a single-stack cluster (PreferDualStack, never RequireDualStack)."""
    objects = (chart_objects({"mode": source.removeprefix("chart-")})
               if source.startswith("chart-") else overlay_objects(source))
    [service] = [o for o in objects if o["kind"] == "Service"]
    assert service["spec"]["ipFamilyPolicy"] == "PreferDualStack"
    assert "ipFamilies" not in service["spec"]  # the cluster's order: its primary first
