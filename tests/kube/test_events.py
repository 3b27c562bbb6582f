"""--events against a real API server: three servers share one Lease; the holder
writes one Warning Event on a rejected ServiceImport (found by its uid, as kubectl
describe finds it); no replica writes a second, neither while it runs nor after the
holder stops and another takes the Lease over. A new holder after many rejections
reports a new one at once; a rejected ClusterProperty is reported as one."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clusterset_dns.sources import convert, events
from clusterset_dns.zone.cache import IMPORT, Rejection
from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.objects import (
    ABOUT_V1BETA1,
    CLUSTER_ID,
    HTTP,
    V1BETA1,
    cluster_property,
    service_import,
)
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
    assert {("", "events", "create"), ("", "events", "list"),
            ("coordination.k8s.io", "leases", "create"),
            ("coordination.k8s.io", "leases", "get"),
            ("coordination.k8s.io", "leases", "update")} <= grants(events)
    for other in ("forward-target", "daemonset"):
        assert not {g for g in grants(overlay_objects(other)) if g[1] in ("events", "leases")}
    (deployment,) = [o for o in events if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert to_config(build_parser().parse_args(args), environ={}).events is True
    forward = {(o["kind"], o["metadata"]["name"]) for o in overlay_objects("forward-target")}
    assert forward <= {(o["kind"], o["metadata"]["name"]) for o in events}


def previous_holders_event(api: KubeAPI, obj: dict[str, Any]) -> None:
    """The Event a previous Lease holder wrote on a rejected object, as the server
    names and writes it."""
    try:
        convert.service_import(obj)
        raise AssertionError("the object converts")
    except convert.InvalidObject as exc:
        reason = str(exc)
    key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
    api.create(events.event_body(IMPORT, key, Rejection(key, reason, False, True, (
        V1BETA1, obj["metadata"]["uid"])), "previous-holder"))


def test_after_a_handover_a_new_rejection_gets_its_event_at_once(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """What a handover leaves: OLD rejected imports with the Events a previous holder
    wrote. The new holder lists them and sends none again; a rejection made then gets
    its Event within a few scans (before: the repeats went first, each refused one spent
    a token, and it waited (OLD - 20) x 6 s = 60 s)."""
    old = 30
    for i in range(old):
        previous_holders_event(api, api.apply(service_import(
            f"old{i}.x", namespace, ports=[HTTP], type_="Headless")))
    server = server_for("--events", "--events-namespace", namespace, "--namespace",
                        namespace).start()
    server.wait_ready()
    wait_for(lambda: holder(api, namespace) != "", 20, "the Lease taken")
    api.apply(service_import("new.x", namespace, ports=[HTTP], type_="Headless"))
    wait_for(lambda: events_of(api, namespace, "new.x"), 10, "the new rejection's Event")
    seen = re.search(r"events: (\d+) Events exist already", server.log_text())
    assert seen is not None and int(seen.group(1)) >= old, server.log_text()[-2000:]
    (event,) = events_of(api, namespace, "new.x")
    assert event["reportingInstance"] == holder(api, namespace)
    for i in range(old):  # none written again
        assert [e["reportingInstance"] for e in events_of(api, namespace, f"old{i}.x")] == [
            "previous-holder"]


@pytest.fixture
def about_api(api: KubeAPI) -> Iterator[KubeAPI]:
    api.install_crds(["about-api"])
    yield api
    api.delete(ABOUT_V1BETA1, "ClusterProperty", None, CLUSTER_ID)


def test_a_rejected_cluster_property_gets_its_own_event(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """ClusterProperty is cluster-scoped: the Event names its kind and apiVersion and no
    namespace, and is written in default (the namespace the Event API requires), where
    kubectl describe clusterproperty finds it by uid (before: an EndpointSlice in
    default, which it never showed)."""
    api = about_api
    server = server_for("--events", "--events-namespace", namespace, "--namespace",
                        namespace).start()
    server.wait_ready()
    uid = api.apply(cluster_property("not an id"))["metadata"]["uid"]

    def found() -> list[dict[str, Any]]:
        return [e for e in api.list("v1", "Event", "default")["items"]
                if e["involvedObject"].get("uid") == uid]

    wait_for(found, 30, "the ClusterProperty's Event")
    (event,) = found()
    assert event["involvedObject"] == {"apiVersion": ABOUT_V1BETA1, "kind": "ClusterProperty",
                                       "name": CLUSTER_ID, "uid": uid}
    assert event["reason"] == "NotServedByDNS" and "cluster id" in event["message"]
