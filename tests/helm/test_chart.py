"""deploy/helm/clusterset-dns with the real Helm (built by scripts/build-peers): it lints,
its defaults render the kustomize overlays' objects (kubectl kustomize, the same
kubectl build), its optional settings become flags the server takes, and values that
cannot work are refused. The install in a real cluster: tests/cluster/test_helm.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterset_dns.process.cli import build_parser, to_config
from clusterset_dns_testkit.helm import (
    CHART,
    chart_objects,
    differences,
    helm,
    overlay_objects,
    substance,
    template,
    values_file,
)

TRANSFER = {"locality": {"clusterId": "east"},
            "transfer": {"allowTransfer": ["10.0.0.0/8", "fd00::/8"],
                         "notify": ["10.0.3.17:53"], "journalChanges": 500,
                         "tsigKey": {"value": "hmac-sha256:xfr-key:c2VjcmV0"}},
            "extraArgs": ["--ttl", "10"]}


@pytest.mark.parametrize("values", [{}, {"mode": "daemonset"}, TRANSFER],
                         ids=["deployment", "daemonset", "transfer"])
def test_helm_lint(values: dict[str, Any]) -> None:
    out = helm("lint", "--strict", str(CHART), "--values", str(values_file(values)))
    assert "0 chart(s) failed" in out.stdout


@pytest.mark.parametrize(("values", "overlay"), [
    ({}, "forward-target"),
    ({"mode": "daemonset"}, "daemonset"),
])
def test_defaults_render_the_overlay(values: dict[str, Any], overlay: str) -> None:
    chart = substance(chart_objects(values))
    kustomize = substance(overlay_objects(overlay))
    assert sorted(chart) == sorted(kustomize)
    problems = [f"{kind}/{name}{d}" for (kind, name), obj in kustomize.items()
                for d in differences(chart[kind, name], obj)]
    assert problems == []


def workload(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [w] = [o for o in objects if o["kind"] in ("Deployment", "DaemonSet")]
    return w


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    c: dict[str, Any] = workload(objects)["spec"]["template"]["spec"]["containers"][0]
    return c


def server_config(args: list[str]) -> Any:
    """The Config the server makes of the rendered args (kubelet expands $(NODE_NAME))."""
    args = [a.replace("$(NODE_NAME)", "node-1") for a in args]
    return to_config(build_parser().parse_args(args), {})


def test_optional_locality_and_transfer_settings_are_flags_the_server_takes() -> None:
    objects = chart_objects(TRANSFER)
    c = container(objects)
    config = server_config(c["args"])
    assert config.cluster_id == "east"
    assert [str(n) for n in config.allow_transfer] == ["10.0.0.0/8", "fd00::/8"]
    assert config.notify == (("10.0.3.17", 53),)
    assert config.journal_changes == 500
    assert config.ttl == 10
    assert str(config.transfer_tsig_key) == "/etc/clusterset-dns/tsig/tsig.key"
    assert c["volumeMounts"] == [{"name": "tsig", "mountPath": "/etc/clusterset-dns/tsig",
                                  "readOnly": True}]
    [secret] = [o for o in objects if o["kind"] == "Secret"]
    assert secret["stringData"] == {"tsig.key": "hmac-sha256:xfr-key:c2VjcmV0"}
    pod = workload(objects)["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "tsig", "secret": {"secretName":
                                                          secret["metadata"]["name"]}}]


def test_an_existing_tsig_secret_is_mounted_not_created() -> None:
    objects = chart_objects({"transfer": {"tsigKey": {"existingSecret": "mine",
                                                       "secretKey": "k"}}})
    assert not [o for o in objects if o["kind"] == "Secret"]
    assert server_config(container(objects)["args"]).transfer_tsig_key == Path(
        "/etc/clusterset-dns/tsig/k")
    pod = workload(objects)["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "tsig", "secret": {"secretName": "mine"}}]


def test_default_args_are_flags_the_server_takes() -> None:
    for mode, zone_from in (("deployment", None), ("daemonset", "node-1")):
        config = server_config(container(chart_objects({"mode": mode}))["args"])
        assert config.listen == (("::", 53),) and config.lameduck == 5
        assert config.topology_zone_from_node == zone_from
        assert config.node_name == zone_from


def test_daemonset_without_the_node_zone_asks_for_no_node_rights() -> None:
    objects = chart_objects({"mode": "daemonset", "locality": {"topologyZoneFromNode": False}})
    assert not [o for o in objects if o["metadata"]["name"].endswith("-node")]
    c = container(objects)
    assert not [a for a in c["args"] if "topology-zone" in a]
    assert server_config(c["args"]).node_name == "node-1"
    objects = chart_objects({"mode": "daemonset", "locality": {"topologyZoneFromNode": False,
                                                               "nodeName": False}})
    c = container(objects)
    assert [e["name"] for e in c["env"]] == ["CLUSTERSET_DNS_NS_ADDRESS"]
    assert not [a for a in c["args"] if "node" in a]


@pytest.mark.parametrize(("values", "message"), [
    ({"mode": "Deployment"}, 'mode must be deployment or daemonset, not "Deployment"'),
    ({"lameduck": 15}, "terminationGracePeriodSeconds must be above lameduck"),
    ({"transfer": {"tsigKey": {"existingSecret": "a", "value": "b"}}},
     "give existingSecret or value, not both"),
])
def test_values_that_cannot_work_are_refused(values: dict[str, Any], message: str) -> None:
    out = template(values, check=False)
    assert out.returncode != 0
    assert message in out.stderr


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        if isinstance(value, dict) and value and key not in ("resources",):
            out += _leaves(value, f"{prefix}{key}.")
        else:
            out.append(prefix + key)
    return out


def test_every_value_is_documented_in_the_charts_readme() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([\w.]+)` \|", readme, re.M))
    assert set(_leaves(values)) == documented


def test_helm_renders_the_chart_as_users_run_it() -> None:
    """`helm template` with no flag at all, as a user types it: the Helm of build-peers
    assumes the Kubernetes of its release, not 1.20 (which our kubeVersion refuses)."""
    out = helm("template", str(CHART))
    assert "kind: Deployment" in out.stdout
    version = helm("version", "--template", "{{.Version}} {{.GitTreeState}}").stdout
    assert re.fullmatch(r"v3\.\d+\.\d+ clean", version), version  # set as a release sets it
