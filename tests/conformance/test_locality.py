"""Local-first answers (objects/extended/near.yaml, and objects written per test): a
Headless import with ``trafficDistribution: PreferClose`` answers its bare name's A
with the local cluster's ready endpoints (``--cluster-id``), within it those of
``--topology-zone``; SRV lists every cluster's, ranked by priority; every endpoint
name resolves. ``PreferSameNode`` puts ``--node-name``'s endpoints first;
``--serve-terminating`` answers serving endpoints when none is ready.

Only this server reads the field (CoreDNS ignores it): a deliberate, opt-in
deviation. The first test holds for any MCS server: without a cluster id the
answers are the specification's."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .csdns_testlib import (
    OBJECTS_DIR,
    ZONE,
    Dig,
    DigResult,
    ServerProcess,
    a_records,
    check,
    check_nxdomain,
    poll,
    rr,
    run_dig,
    svc,
)

pytestmark = pytest.mark.extended

NEAR, ROOT, DOWN = svc("near", "ext"), svc("near-root", "ext"), svc("near-down", "ext")
E1 = f"10-47-0-1.east.near.ext.svc.{ZONE}."
E2 = f"web-1.east.near.ext.svc.{ZONE}."
W1 = f"10-47-1-1.west.near.ext.svc.{ZONE}."
PORT_SRV = f"_http._tcp.near.ext.svc.{ZONE}."
HELLO = svc("hello")


def srv_set(owner: str, *targets: str) -> list[str]:
    return [rr(owner, "SRV", f"0 {100 // len(targets)} 80 {t}") for t in targets]


def test_without_a_cluster_id_every_cluster_answers(dig: Dig) -> None:
    check(dig(NEAR, "A"), answer=a_records(NEAR, ["10.47.0.1", "10.47.0.2", "10.47.1.1"]))
    check(dig(W1, "A"), answer=a_records(W1, ["10.47.1.1"]))
    check(dig(DOWN, "A"), answer=a_records(DOWN, ["10.47.5.1"]))


@pytest.mark.files_only  # v1alpha2 (near-root): an API server with mcs-api v0.5.0 refuses it
def test_without_a_cluster_id_every_cluster_answers_srv_and_v1alpha2(dig: Dig) -> None:
    check(dig(NEAR, "SRV"), answer=srv_set(NEAR, E1, E2, W1))
    check(dig(ROOT, "A"), answer=a_records(ROOT, ["10.47.2.1", "10.47.3.1"]))


def ranked(owner: str, *tiers: list[str]) -> list[str]:
    """SRV records of ``tiers`` (tier i at priority i, weights within a tier), in the
    order the server lists them: lowest priority first."""
    return [rr(owner, "SRV", f"{priority} {100 // len(tier)} 80 {t}")
            for priority, tier in enumerate(tiers) for t in tier]


def in_priority_order(res: DigResult) -> bool:
    priorities = [int(line.split()[4]) for line in res.answer if " SRV " in line]
    return priorities == sorted(priorities)


@pytest.mark.own_server
@pytest.mark.deviation
def test_cluster_id_keeps_answers_in_the_local_cluster(
        start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--cluster-id", "east")

    def q(name: str, rtype: str = "A") -> DigResult:
        return run_dig(srv.host, srv.port, name, rtype)

    check(q(NEAR), answer=a_records(NEAR, ["10.47.0.1", "10.47.0.2"]))
    # SRV: every cluster's endpoints, east's first (priority 0), west's at 1.
    for owner in (NEAR, PORT_SRV):
        res = q(owner, "SRV")
        check(res, answer=ranked(owner, [E1, E2], [W1]))
        assert in_priority_order(res), res.describe()
    check(q(E2), answer=a_records(E2, ["10.47.0.2"]))
    # The other cluster's endpoint names resolve, as without the field.
    check(q(W1), answer=a_records(W1, ["10.47.1.1"]))
    check(q(f"west.near.ext.svc.{ZONE}."), answer=[])  # NODATA, not NXDOMAIN
    check(q(ROOT), answer=a_records(ROOT, ["10.47.2.1"]))
    # Nothing ready in east: every cluster's ready endpoints.
    check(q(DOWN), answer=a_records(DOWN, ["10.47.5.1"]))
    # An import without the field: unchanged.
    check(q(HELLO), answer=a_records(HELLO, ["10.42.0.10"]))


@pytest.mark.own_server
@pytest.mark.deviation
@pytest.mark.parametrize(("zone", "expected"), [
    ("zone-b", ["10.47.0.2"]),
    ("zone-a", ["10.47.0.1"]),  # not west's zone-a endpoint: the cluster comes first
    ("zone-c", ["10.47.0.1", "10.47.0.2"]),  # no endpoint there: the whole cluster
])
def test_topology_zone_within_the_local_cluster(
        start_server: Callable[..., ServerProcess], zone: str, expected: list[str]) -> None:
    srv = start_server(OBJECTS_DIR, "--cluster-id", "east", "--topology-zone", zone)
    check(run_dig(srv.host, srv.port, NEAR, "A"), answer=a_records(NEAR, expected))


@pytest.mark.own_server
@pytest.mark.deviation
def test_readiness_flip_moves_the_answers_and_back(
        tmp_path: Path, start_server: Callable[..., ServerProcess]) -> None:
    objects = tmp_path / "objects"
    shutil.copytree(OBJECTS_DIR, objects)
    near = objects / "extended" / "near.yaml"
    text = near.read_text()
    # Two processes: the worker gets the updates (and the cluster id) from the parent.
    srv = start_server(objects, "--cluster-id", "east", "--workers", "2")

    def answers(addresses: list[str]) -> None:
        def right(r: DigResult) -> bool:
            return r.rcode == "NOERROR" and sorted(r.answer) == sorted(a_records(NEAR, addresses))

        ok, last, _ = poll(lambda: run_dig(srv.host, srv.port, NEAR, "A"), right, timeout=10)
        assert ok, last.describe()
        # Every process has it: each dig comes from a new port, spread over both.
        ok, last, _ = poll(lambda: [run_dig(srv.host, srv.port, NEAR, "A") for _ in range(8)],
                           lambda rs: all(right(r) for r in rs), timeout=10)
        assert ok, [r.describe() for r in last if not right(r)]

    answers(["10.47.0.1", "10.47.0.2"])
    # Both east endpoints stop being ready (only near-east's two have ready: true).
    down = text.replace("    conditions: {ready: true}\n  - addresses: [\"10.47.0.2\"]",
                        "    conditions: {ready: false}\n  - addresses: [\"10.47.0.2\"]")
    down = down.replace("    zone: zone-b\n    conditions: {ready: true}",
                        "    zone: zone-b\n    conditions: {ready: false}")
    assert down.count("ready: false") == text.count("ready: false") + 2
    near.write_text(down)
    answers(["10.47.1.1"])
    near.write_text(text)
    answers(["10.47.0.1", "10.47.0.2"])


# -- objects of their own (tmp_path): PreferSameNode, serving endpoints, ClusterProperties --

def _slice(name: str, service: str, cluster: str, endpoints: str) -> str:
    return f"""---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}
  namespace: ext
  labels:
    multicluster.kubernetes.io/service-name: {service}
    multicluster.kubernetes.io/source-cluster: {cluster}
addressType: IPv4
ports:
  - {{name: http, protocol: TCP, port: 80}}
endpoints:
{endpoints}"""


def _import(name: str, traffic: str | None) -> str:
    field = f"\n  trafficDistribution: {traffic}" if traffic else ""
    return f"""---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {{name: {name}, namespace: ext}}
spec:
  type: Headless{field}
  ports:
    - {{name: http, protocol: TCP, port: 80}}
"""


NS_FILE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ext}\n"
# A StatefulSet "db" in two clusters: db-0 and db-1 in east on node-1 / node-2 (zones
# a / b), db-0 in west on a node also called node-1.
DB_FILE = _import("db", "PreferSameNode") + _slice("db-east", "db", "east", """\
  - {addresses: ["10.48.0.1"], hostname: db-0, nodeName: node-1, zone: zone-a}
  - {addresses: ["10.48.0.2"], hostname: db-1, nodeName: node-2, zone: zone-b}
""") + _slice("db-west", "db", "west", """\
  - {addresses: ["10.48.1.1"], hostname: db-0, nodeName: node-1, zone: zone-a}
""")
DB, DB_PORT = svc("db", "ext"), f"_http._tcp.db.ext.svc.{ZONE}."
DB0_EAST, DB1_EAST = f"db-0.east.db.ext.svc.{ZONE}.", f"db-1.east.db.ext.svc.{ZONE}."
DB0_WEST = f"db-0.west.db.ext.svc.{ZONE}."


def objects_dir(tmp_path: Path, **files: str) -> Path:
    objects = tmp_path / "objects"
    objects.mkdir(exist_ok=True)
    (objects / "00-ns.yaml").write_text(NS_FILE)
    for name, text in files.items():
        (objects / f"{name}.yaml").write_text(text)
    return objects


def every_process_answers(srv: ServerProcess, name: str, rtype: str,
                          right: Callable[[DigResult], bool]) -> None:
    """Polls until ``right``; then 8 digs in a row (each from a new port: spread over
    the worker processes) must all be right."""
    ok, last, _ = poll(lambda: run_dig(srv.host, srv.port, name, rtype), right, timeout=10)
    assert ok, last.describe()
    results = [run_dig(srv.host, srv.port, name, rtype) for _ in range(8)]
    assert all(right(r) for r in results), [r.describe() for r in results if not right(r)]


def same_records(expected: list[str]) -> Callable[[DigResult], bool]:
    return lambda r: r.rcode == "NOERROR" and sorted(r.answer) == sorted(expected)


@pytest.mark.own_server
@pytest.mark.deviation
@pytest.mark.parametrize(("args", "a", "tiers"), [
    # node-2's pod first, then node-1's (zone-a) in east, then west's.
    (["--node-name", "node-2", "--topology-zone", "zone-a"], ["10.48.0.2"],
     [[DB1_EAST], [DB0_EAST], [DB0_WEST]]),
    # A node name west also has: only the local cluster's nodes count.
    (["--node-name", "node-1"], ["10.48.0.1"], [[DB0_EAST], [DB1_EAST], [DB0_WEST]]),
    # A node without pods: the zone, then the cluster.
    (["--node-name", "node-9", "--topology-zone", "zone-b"], ["10.48.0.2"],
     [[DB1_EAST], [DB0_EAST], [DB0_WEST]]),
], ids=["node-then-zone", "node-of-the-local-cluster", "no-pod-on-the-node"])
def test_prefer_same_node_with_node_name_and_two_workers(
        tmp_path: Path, start_server: Callable[..., ServerProcess], args: list[str],
        a: list[str], tiers: list[list[str]]) -> None:
    srv = start_server(objects_dir(tmp_path, db=DB_FILE), "--cluster-id", "east",
                       "--workers", "2", *args)
    every_process_answers(srv, DB, "A", same_records(a_records(DB, a)))
    for owner in (DB, DB_PORT):
        every_process_answers(srv, owner, "SRV", same_records(ranked(owner, *tiers)))
        assert in_priority_order(run_dig(srv.host, srv.port, owner, "SRV"))
    # Every pod's name resolves on every node: the StatefulSet's peers find each other.
    for name, ip in ((DB0_EAST, "10.48.0.1"), (DB1_EAST, "10.48.0.2"),
                     (DB0_WEST, "10.48.1.1")):
        every_process_answers(srv, name, "A", same_records(a_records(name, [ip])))


TERMINATING_FILE = _import("drain", "PreferClose") + _slice("drain-east", "drain", "east", """\
  - {addresses: ["10.49.0.1"], conditions: {ready: false, serving: true, terminating: true}}
  - {addresses: ["10.49.0.2"], conditions: {ready: false, serving: false, terminating: true}}
""") + _slice("drain-west", "drain", "west", """\
  - {addresses: ["10.49.1.1"], conditions: {ready: false, serving: true, terminating: true}}
""")
DRAIN = svc("drain", "ext")


@pytest.mark.own_server
@pytest.mark.deviation
def test_serving_endpoints_answer_only_with_serve_terminating(
        tmp_path: Path, start_server: Callable[..., ServerProcess]) -> None:
    objects = objects_dir(tmp_path, drain=TERMINATING_FILE)
    plain = start_server(objects, "--cluster-id", "east")
    check_nxdomain(run_dig(plain.host, plain.port, DRAIN, "A"))  # the specification's
    srv = start_server(objects, "--cluster-id", "east", "--serve-terminating", "--workers", "2")
    every_process_answers(srv, DRAIN, "A", same_records(a_records(DRAIN, ["10.49.0.1"])))
    owner = DRAIN
    every_process_answers(srv, owner, "SRV", same_records(ranked(
        owner, [f"10-49-0-1.east.drain.ext.svc.{ZONE}."],
        [f"10-49-1-1.west.drain.ext.svc.{ZONE}."])))
    west = f"10-49-1-1.west.drain.ext.svc.{ZONE}."
    check(run_dig(srv.host, srv.port, west, "A"), answer=a_records(west, ["10.49.1.1"]))
    # Not serving: no name.
    check_nxdomain(run_dig(srv.host, srv.port, f"10-49-0-2.east.drain.ext.svc.{ZONE}.", "A"))
    # One endpoint becomes ready: the serving ones are no longer answered.
    drain = objects / "drain.yaml"
    drain.write_text(TERMINATING_FILE.replace(
        '["10.49.1.1"], conditions: {ready: false, serving: true, terminating: true}',
        '["10.49.1.1"], conditions: {ready: true}'))
    every_process_answers(srv, DRAIN, "A", same_records(a_records(DRAIN, ["10.49.1.1"])))
    check_nxdomain(run_dig(srv.host, srv.port, f"10-49-0-1.east.drain.ext.svc.{ZONE}.", "A"))


def property_text(name: str, value: str, version: str) -> str:
    return (f"apiVersion: about.k8s.io/{version}\nkind: ClusterProperty\n"
            f"metadata: {{name: {name}}}\nspec: {{value: {value}}}\n")


@pytest.mark.own_server
@pytest.mark.deviation
def test_both_cluster_property_names(tmp_path: Path,
                                     start_server: Callable[..., ServerProcess]) -> None:
    """id.k8s.io (the MCS DNS specification's name) names the cluster; with
    cluster.clusterset.k8s.io beside it, the newer name wins; removed, the older
    one counts again."""
    near_text = (OBJECTS_DIR / "extended" / "near.yaml").read_text()
    objects = objects_dir(tmp_path, near=near_text,
                          old=property_text("id.k8s.io", "west", "v1alpha1"))
    srv = start_server(objects, "--workers", "2")
    west, east = ["10.47.1.1"], ["10.47.0.1", "10.47.0.2"]
    every_process_answers(srv, NEAR, "A", same_records(a_records(NEAR, west)))
    new = objects / "new.yaml"
    new.write_text(property_text("cluster.clusterset.k8s.io", "East", "v1beta1"))
    every_process_answers(srv, NEAR, "A", same_records(a_records(NEAR, east)))
    new.unlink()
    every_process_answers(srv, NEAR, "A", same_records(a_records(NEAR, west)))


@pytest.mark.own_server
def test_an_unknown_value_answers_as_without_it_logged_once_and_counted(
        tmp_path: Path, start_server: Callable[..., ServerProcess]) -> None:
    objects = objects_dir(tmp_path, db=DB_FILE.replace("PreferSameNode", "PreferSomewhere"))
    srv = start_server(objects, "--cluster-id", "east", "--node-name", "node-2",
                       "--poll-interval", "0.1")
    every = ["10.48.0.1", "10.48.0.2", "10.48.1.1"]
    check(run_dig(srv.host, srv.port, DB, "A"), answer=a_records(DB, every))
    check(run_dig(srv.host, srv.port, DB, "SRV"),
          answer=ranked(DB, [DB0_EAST, DB1_EAST, DB0_WEST]))
    assert srv.metric("clusterset_dns_unknown_traffic_distribution") == 1
    # The file changes (another object in it): the import is the same, not said again.
    (objects / "db.yaml").write_text(objects.joinpath("db.yaml").read_text() + "\n# touched\n")
    ok, _, _ = poll(lambda: srv.log_text().count("db.yaml: 1 ServiceImports"),
                    lambda n: n >= 2, timeout=10)
    assert ok, srv.log_text()
    assert srv.log_text().count("'PreferSomewhere' is not understood") == 1, srv.log_text()
