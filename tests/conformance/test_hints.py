"""Local-first answers follow EndpointSlice topology hints (issue 35), read from the
manifest files and answered by every worker process: ``hints.forNodes`` and
``hints.forZones`` that disagree with ``nodeName`` and ``zone`` win, as kube-proxy
routes; malformed hints are dropped with a warning and the fields rank again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .csdns_testlib import ZONE, ServerProcess, a_records, run_dig, svc
from .test_locality import (
    _import,
    _slice,
    every_process_answers,
    in_priority_order,
    objects_dir,
    ranked,
    same_records,
)

pytestmark = pytest.mark.extended

# east: pin-0 on node-1 in zone-a, pin-1 on node-2 in zone-b; their hints say the
# opposite (the controller may hint an endpoint to another zone to balance them).
PIN_FILE = _import("pin", "PreferSameNode") + _slice("pin-east", "pin", "east", """\
  - {addresses: ["10.50.0.1"], hostname: pin-0, nodeName: node-1, zone: zone-a,
     hints: {forNodes: [{name: node-2}], forZones: [{name: zone-b}]}}
  - {addresses: ["10.50.0.2"], hostname: pin-1, nodeName: node-2, zone: zone-b,
     hints: {forNodes: [{name: node-1}], forZones: [{name: zone-a}]}}
""") + _slice("pin-west", "pin", "west", """\
  - {addresses: ["10.50.1.1"], hostname: pin-0, nodeName: node-1, zone: zone-a}
""")
PIN, PIN_PORT = svc("pin", "ext"), f"_http._tcp.pin.ext.svc.{ZONE}."
P0, P1 = f"pin-0.east.pin.ext.svc.{ZONE}.", f"pin-1.east.pin.ext.svc.{ZONE}."
W0 = f"pin-0.west.pin.ext.svc.{ZONE}."


@pytest.mark.own_server
@pytest.mark.deviation
@pytest.mark.parametrize(("args", "a", "tiers"), [
    # node-1 is pin-0's nodeName, pin-1's node hint.
    (["--node-name", "node-1"], ["10.50.0.2"], [[P1], [P0], [W0]]),
    # no hint for node-9: zone-b is pin-0's zone hint.
    (["--node-name", "node-9", "--topology-zone", "zone-b"], ["10.50.0.1"],
     [[P0], [P1], [W0]]),
], ids=["node-hint", "zone-hint"])
def test_hints_win_over_the_fields_in_every_worker(
        tmp_path: Path, start_server: Callable[..., ServerProcess], args: list[str],
        a: list[str], tiers: list[list[str]]) -> None:
    srv = start_server(objects_dir(tmp_path, pin=PIN_FILE), "--cluster-id", "east",
                       "--workers", "2", *args)
    every_process_answers(srv, PIN, "A", same_records(a_records(PIN, a)))
    for owner in (PIN, PIN_PORT):
        every_process_answers(srv, owner, "SRV", same_records(ranked(owner, *tiers)))
        assert in_priority_order(run_dig(srv.host, srv.port, owner, "SRV"))


@pytest.mark.own_server
@pytest.mark.deviation
def test_malformed_hints_are_dropped_with_a_warning(
        tmp_path: Path, start_server: Callable[..., ServerProcess]) -> None:
    """pin-0's forNodes has nine entries (the API allows eight): its hints go, the
    endpoint stays, and the import ranks by nodeName (node-1: pin-0)."""
    nine = ", ".join(f"{{name: n{i}}}" for i in range(9))
    bad = PIN_FILE.replace("hints: {forNodes: [{name: node-2}]", f"hints: {{forNodes: [{nine}]")
    assert bad != PIN_FILE
    srv = start_server(objects_dir(tmp_path, pin=bad), "--cluster-id", "east",
                       "--node-name", "node-1")
    every_process_answers(srv, PIN, "A", same_records(a_records(PIN, ["10.50.0.1"])))
    every_process_answers(srv, P0, "A", same_records(a_records(P0, ["10.50.0.1"])))
    assert "EndpointSlice ext/pin-east: endpoints[0]: hints ignored: hints.forNodes has 9 " \
        "entries, more than 8" in srv.log_text()
