"""--events against a real API server: three servers share one Lease; the holder
writes one Warning Event on a rejected ServiceImport (found by its uid, as kubectl
describe finds it); no replica writes a second, neither while it runs nor after the
holder stops and another takes the Lease over."""

from __future__ import annotations

import time
from typing import Any

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.objects import HTTP, V1BETA1, service_import
from clusterset_dns_testkit.peers import KubeAPI

LEASE = "clusterset-dns-events"


def events_of(api: KubeAPI, namespace: str, name: str) -> list[dict[str, Any]]:
    items = api.list("v1", "Event", namespace)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def holder(api: KubeAPI, namespace: str) -> str:
    lease = api.get("coordination.k8s.io/v1", "Lease", namespace, LEASE)
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def test_one_replica_writes_one_event(api: KubeAPI, namespace: str,
                                      server_for: type[ServerProcess]) -> None:
    created = api.apply(service_import("web.v2", namespace, ports=[HTTP], type_="Headless"))
    uid = created["metadata"]["uid"]
    api.apply(service_import("ok", namespace, ports=[HTTP], ips=["10.40.0.1"]))
    servers = [server_for("--events", "--events-namespace", namespace, "--namespace",
                          namespace).start() for _ in range(3)]
    for server in servers:
        server.wait_ready()
    wait_for(lambda: events_of(api, namespace, "web.v2"), 20, "the Event")
    pids = {str(s.proc.pid) for s in servers if s.proc is not None}
    leader = holder(api, namespace)
    assert leader.rsplit("_", 1)[-1] in pids, leader
    time.sleep(3)  # every replica scanned several times meanwhile
    (event,) = events_of(api, namespace, "web.v2")
    assert event["type"] == "Warning" and event["reason"] == "NotServedByDNS"
    assert event["involvedObject"]["uid"] == uid
    assert event["involvedObject"]["kind"] == "ServiceImport"
    assert event["involvedObject"]["apiVersion"] == V1BETA1
    assert event["message"].startswith("not served by clusterset-dns: name: "), event["message"]
    assert "web.v2" in event["message"]
    assert event["reportingInstance"] == leader
    assert events_of(api, namespace, "ok") == []
    holding = [s for s in servers if "holding the Lease" in s.log_text()
               and "not holding" not in s.log_text()]
    assert len(holding) == 1, [s.log_text()[-2000:] for s in servers]
    # The holder stops: another takes the Lease over and writes no second Event.
    holding[0].stop()
    wait_for(lambda: holder(api, namespace) not in ("", leader), 40, "a new Lease holder")
    time.sleep(3)
    assert len(events_of(api, namespace, "web.v2")) == 1


def test_only_the_events_overlay_grants_events_and_leases() -> None:
    """deploy/overlays/events (rendered by the real kubectl): forward-target's objects,
    --events on the server, and RBAC for Events and the one Lease; no other overlay
    grants either."""
    from clusterset_dns.process.cli import build_parser, to_config
    from clusterset_dns_testkit.helm import overlay_objects

    def grants(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {(group, resource, verb) for o in objects if o["kind"] in ("Role", "ClusterRole")
                for rule in o["rules"] for group in rule.get("apiGroups", [])
                for resource in rule.get("resources", []) for verb in rule.get("verbs", [])}

    events = overlay_objects("events")
    assert {("", "events", "create"), ("coordination.k8s.io", "leases", "create"),
            ("coordination.k8s.io", "leases", "get"),
            ("coordination.k8s.io", "leases", "update")} <= grants(events)
    for other in ("forward-target", "daemonset"):
        assert not {g for g in grants(overlay_objects(other)) if g[1] in ("events", "leases")}
    (deployment,) = [o for o in events if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert to_config(build_parser().parse_args(args), environ={}).events is True
    forward = {(o["kind"], o["metadata"]["name"]) for o in overlay_objects("forward-target")}
    assert forward <= {(o["kind"], o["metadata"]["name"]) for o in events}
