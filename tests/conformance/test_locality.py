"""Local-first answers (objects/extended/near.yaml): a Headless import with
``trafficDistribution: PreferClose`` answers with the local cluster's ready
endpoints (``--cluster-id``), within it those of ``--topology-zone``; without
a cluster id, or with nothing ready locally, every cluster's endpoints.

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


@pytest.mark.own_server
@pytest.mark.deviation
def test_cluster_id_keeps_answers_in_the_local_cluster(
        start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--cluster-id", "east")

    def q(name: str, rtype: str = "A") -> DigResult:
        return run_dig(srv.host, srv.port, name, rtype)

    check(q(NEAR), answer=a_records(NEAR, ["10.47.0.1", "10.47.0.2"]))
    check(q(NEAR, "SRV"), answer=srv_set(NEAR, E1, E2))
    check(q(PORT_SRV, "SRV"), answer=srv_set(PORT_SRV, E1, E2))
    check(q(E2), answer=a_records(E2, ["10.47.0.2"]))
    # The other cluster's endpoint names follow the bare name: not there.
    check_nxdomain(q(W1))
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
