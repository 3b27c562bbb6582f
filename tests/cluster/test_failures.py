"""Pods that cannot work must say why: a broken flag, or an API server that cannot be
reached. Both use the pod template of deploy/base (through the forward-target overlay,
rendered by kustomize), run as single pods in a namespace of their own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clusterset_dns_testkit.cluster import NODE_IP, Cluster

from .clusterlib import Overlay

NAMESPACE = "csdns-fail"


@pytest.fixture(scope="module")
def template(cluster: Cluster) -> Iterator[dict[str, Any]]:
    overlay = Overlay(cluster, "forward-target")
    try:
        docs = overlay.render()
    finally:
        overlay.delete()  # nothing was applied; removes the temporary directory
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    cluster.kubectl("create", "namespace", NAMESPACE)
    try:
        yield deployment["spec"]["template"]
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def run_pod(cluster: Cluster, template: dict[str, Any], name: str, args: list[str],
            env: list[dict[str, str]] | None = None) -> None:
    spec = json.loads(json.dumps(template["spec"]))
    spec["serviceAccountName"] = "default"  # the namespace has no clusterset-dns account
    spec.pop("priorityClassName", None)     # system-* classes are for kube-system
    container = spec["containers"][0]
    container["args"] = args
    container["env"] = container.get("env", []) + (env or [])
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NAMESPACE,
                        "labels": {"app.kubernetes.io/name": "clusterset-dns-broken"}},
           "spec": spec}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))


def status_of(cluster: Cluster, name: str) -> dict[str, Any]:
    pod = cluster.kubectl_json("-n", NAMESPACE, "get", "pod", name)
    st: dict[str, Any] = pod.get("status") or {}
    return st


def test_broken_flag_is_reported_not_hidden_by_the_crash_loop(
        cluster: Cluster, template: dict[str, Any]) -> None:
    run_pod(cluster, template, "bad-flag", ["serve", "--listen", ":53", "--no-such-flag"])
    deadline = time.monotonic() + 120
    while True:
        st = status_of(cluster, "bad-flag")
        cs = (st.get("containerStatuses") or [{}])[0]
        last = (cs.get("lastState") or {}).get("terminated")
        if last and cs.get("restartCount", 0) >= 1:
            break
        assert time.monotonic() < deadline, st
        time.sleep(1)
    # the reason stays on the pod through the restarts: exit code 2, the flag named
    assert last["exitCode"] == 2, last
    assert "unrecognized arguments: --no-such-flag" in last.get("message", ""), last
    assert not cs.get("ready")
    # and `kubectl logs --previous` shows it (the kubelet swaps the dead container out at
    # each restart, so one ask may fall between two of them)
    previous = ""
    for _ in range(20):
        previous = cluster.kubectl("-n", NAMESPACE, "logs", "bad-flag", "--previous",
                                   check=False).stdout
        if "--no-such-flag" in previous:
            break
        time.sleep(1)
    assert "unrecognized arguments: --no-such-flag" in previous, previous


def test_unreachable_api_server_logs_stays_unready_and_does_not_restart(
        cluster: Cluster, template: dict[str, Any]) -> None:
    # the in-cluster config points at a port of the node where nothing listens
    run_pod(cluster, template, "no-api", template["spec"]["containers"][0]["args"], env=[
        {"name": "KUBERNETES_SERVICE_HOST", "value": NODE_IP},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "1"}])
    deadline = time.monotonic() + 120
    while True:
        st = status_of(cluster, "no-api")
        cs = (st.get("containerStatuses") or [{}])[0]
        if "running" in (cs.get("state") or {}):
            break
        assert time.monotonic() < deadline, st
        time.sleep(1)
    # long enough for several readiness probes (2 s) and two liveness periods (10 s)
    time.sleep(25)
    st = status_of(cluster, "no-api")
    cs = st["containerStatuses"][0]
    assert cs["restartCount"] == 0, cs
    assert "running" in cs["state"], cs
    assert not cs["ready"], cs
    ready = {c["type"]: c["status"] for c in st["conditions"]}["Ready"]
    assert ready == "False"
    log = cluster.kubectl("-n", NAMESPACE, "logs", "no-api").stdout
    # the retried failure names the address (the words around it are aiohttp's)
    assert any(f"{NODE_IP}:1" in line and "retrying in" in line for line in log.splitlines()), \
        log[-3000:]
    events = cluster.kubectl("-n", NAMESPACE, "get", "events", "--field-selector",
                             "involvedObject.name=no-api", "-o", "json").stdout
    assert "Readiness probe failed: HTTP probe failed with statuscode: 503" in events
