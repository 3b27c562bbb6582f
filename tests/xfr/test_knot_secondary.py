"""Knot DNS as a real secondary: AXFR to load, NOTIFY + IXFR to follow changes, and
the conformance suite answered by Knot from the transferred zone."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterset_dns.zone import serials
from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.manifests import write_atomically
from clusterset_dns_testkit.peers import free_port
from clusterset_dns_testkit.secondary import KnotSecondary, serial_at

from .xfrlib import headless

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "tests" / "conformance" / "objects"


def _start(manifests: Path, *extra: str) -> ServerProcess:
    return ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.1/32",
                         "--poll-interval", "0.1", *extra)


def test_knot_loads_by_axfr_then_follows_notify_by_ixfr(tmp_path: Path) -> None:
    manifests = tmp_path / "objects"
    manifests.mkdir()
    path = manifests / "web.yaml"
    write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1", "10.9.0.2"]))
    # Knot's port is needed by the server (--notify) before Knot knows the server's:
    # start the server first with Knot's port reserved.
    knot_port = free_port()
    with _start(manifests, "--notify", f"127.0.0.1:{knot_port}") as srv:
        srv.wait_ready()
        with KnotSecondary(srv.port, port=knot_port, tmp=tmp_path) as knot:
            first = serial_at(srv.host, srv.port)
            assert first is not None
            knot.wait_serial(first)
            assert "AXFR, incoming" in knot.log_text()
            assert knot.answers("web.ns1.svc.clusterset.local", "A") == {"10.9.0.1",
                                                                          "10.9.0.2"}
            for addresses in (["10.9.0.1", "10.9.0.3"],
                              ["10.9.0.1", "10.9.0.3", "10.9.0.4"]):
                before = serial_at(srv.host, srv.port)
                write_atomically(path, headless("ns1", "web", "east", addresses))
                serial = wait_for(lambda b=before: (s := serial_at(srv.host, srv.port)) != b
                                  and s, 10, "the primary's new serial")
                # No refresh timer fires this soon (Knot's refresh is the SOA's 7200 s):
                # only the NOTIFY brings Knot here.
                knot.wait_serial(serial)
                # The NOTIFY carried the zone's SOA (RFC 1996 3.7): Knot read its serial.
                assert re.search(rf"notify, incoming, remote 127\.0\.0\.1@\d+, serial "
                                 rf"{serial}$", knot.log_text(), re.M), knot.log_text()[-3000:]
                assert knot.answers("web.ns1.svc.clusterset.local", "A") == set(addresses)
                assert (before, serial) in knot.ixfr_refreshes(), knot.log_text()[-3000:]
            assert srv.metric("clusterset_dns_notify_total", result="acknowledged") >= 2
            assert srv.metric("clusterset_dns_transfers_total", type="ixfr",
                              result="incremental") >= 2


@pytest.fixture
def tsig_pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, KnotSecondary]]:
    """Our server (the conformance objects, transfers signed with a new key) and Knot
    with that key, which has loaded the zone."""
    secret = base64.b64encode(os.urandom(32)).decode()
    key_file = tmp_path / "xfr.key"
    key_file.write_text(f"hmac-sha256:xfr-key:{secret}\n")
    knot_port = free_port()
    with _start(OBJECTS, "--transfer-tsig-key", str(key_file),
                "--notify", f"127.0.0.1:{knot_port}") as srv:
        srv.wait_ready()
        serial = serial_at(srv.host, srv.port)
        assert serial is not None
        with KnotSecondary(srv.port, key=("xfr-key", secret), port=knot_port,
                           tmp=tmp_path) as knot:
            knot.wait_serial(serial)
            yield srv, knot


def test_knot_with_tsig(tsig_pair: tuple[ServerProcess, KnotSecondary]) -> None:
    srv, _ = tsig_pair
    assert srv.metric("clusterset_dns_transfers_total", result="notauth") == 0


@pytest.fixture(scope="module")
def knot_serving_conformance(tmp_path_factory: pytest.TempPathFactory
                             ) -> Iterator[KnotSecondary]:
    with _start(OBJECTS) as srv:
        srv.wait_ready()
        serial = serial_at(srv.host, srv.port)
        with KnotSecondary(srv.port, tmp=tmp_path_factory.mktemp("knot")) as knot:
            knot.wait_serial(serial or 0)
            yield knot


# Conformance cases a secondary cannot answer as the primary does, each with why (node-id
# prefixes: every parameter of the case). Zone data is not among them but for the two
# first: they are what a zone file (any secondary's copy) cannot say, or Knot's own way.
KNOT_EXCLUSIONS = {
    "tests/conformance/test_extended.py::test_import_with_only_invalid_ips_exists_without_"
    "addresses": "a name with no records and no names below it cannot be carried by a zone "
    "(transfer or file): Knot answers NXDOMAIN where we answer NODATA",
    "tests/conformance/test_answers.py::test_clusterset_ip_srv_additional_carries_target_"
    "addresses[named.conf]": "Knot repeats the target's A/AAAA once per SRV record when "
    "four SRV records share one target (8 additional records, we send 2)",
    "tests/conformance/test_protocol.py::test_any_on_existing_name_is_minimal_hinfo":
    "ANY is the server's policy (ours: RFC 8482 HINFO), not zone data; Knot answers its own",
    "tests/conformance/test_protocol.py::test_class_other_than_in_refused":
    "classes other than IN are the server's protocol handling, not zone data (Knot 3.2.6 "
    "answers them otherwise than REFUSED)",
    "tests/conformance/test_protocol.py::test_zone_transfer_refused":
    "transfer policy is the secondary's (its acl), not the zone's",
    "tests/conformance/test_transport.py::test_malformed_query_formerr_over_udp":
    "malformed packets are the server's parser's business, not zone data (Knot 3.2.6 does "
    "not answer all of them FORMERR)",
    "tests/conformance/test_transport.py::test_malformed_query_formerr_over_tcp":
    "as above, over TCP",
    "tests/conformance/test_transport.py::test_random_queries_always_get_a_reply":
    "as above: random packets, the server's parser",
    "tests/conformance/test_transport.py::test_opcode_other_than_query_notimp":
    "Knot implements NOTIFY and UPDATE, so it does not answer them NOTIMP",
}


def test_conformance_suite_against_knot(knot_serving_conformance: KnotSecondary) -> None:
    knot = knot_serving_conformance
    deselect = [arg for case in KNOT_EXCLUSIONS for arg in ("--deselect", case)]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance",
         "--dns-server", f"127.0.0.1:{knot.port}", *deselect],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-6000:]


def test_knot_refresh_timer_with_tsig_finds_the_zone_current(
        tsig_pair: tuple[ServerProcess, KnotSecondary]) -> None:
    """RFC 8945 5.3: the SOA query of Knot's refresh (forced here with knotc, as its
    timer would) is signed, so its answer must be: the old code answered unsigned and
    Knot logged a TSIG failure and "no usable master" on every refresh."""
    srv, knot = tsig_pair
    for round_ in range(1, 4):
        knot.refresh()
        wait_for(lambda r=round_: knot.log_text().count("zone is up-to-date") >= r,
                 20, f"Knot's refresh {round_} to find the zone current")
    log = knot.log_text()
    assert "TSIG" not in log and "no usable master" not in log, log[-3000:]
    assert srv.metric("clusterset_dns_transfers_total", type="signed", result="signed") >= 3


def test_knot_follows_an_update_storm_and_a_restart_of_the_primary(tmp_path: Path) -> None:
    """Hundreds of changes in a few seconds, then a restart with a change made while the
    server was down: the serial never goes back, so Knot takes the new data at once.
    The old serial, max(previous + 1, unix time), ran minutes ahead in the storm and
    started again at the clock: Knot kept the old data until the clock caught up."""
    manifests = tmp_path / "objects"
    manifests.mkdir()
    path = manifests / "web.yaml"
    write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1"]))
    knot_port = free_port()
    srv = _start(manifests, "--notify", f"127.0.0.1:{knot_port}", "--poll-interval", "0.01")
    with srv:
        srv.wait_ready()
        with KnotSecondary(srv.port, port=knot_port, tmp=tmp_path) as knot:
            knot.wait_serial(serial_at(srv.host, srv.port) or 0)
            last = ""
            for i in range(300):  # about 3 s of changes, each seen by a poll
                last = f"10.9.{i // 250 + 1}.{i % 250 + 1}"
                write_atomically(path, headless("ns1", "web", "east", [last]))
                time.sleep(0.01)
            wait_for(lambda: srv.answers("web.ns1.svc.clusterset.local")[1]
                     and last in next(iter(srv.answers("web.ns1.svc.clusterset.local")[1])),
                     10, "the last change of the storm answered")
            storm = serial_at(srv.host, srv.port)
            assert storm is not None
            assert not serials.after(storm, serials.at(time.time())), "the serial ran ahead"
            knot.wait_serial(storm)
            srv.stop()
            write_atomically(path, headless("ns1", "web", "east", ["10.9.200.1"]))
            srv.start()
            srv.wait_ready()
            after = serial_at(srv.host, srv.port)
            assert after is not None and 0 < (after - storm) % 2**32 < 2**31, (storm, after)
            # The NOTIFY at start brings Knot to the new data (no refresh timer fires).
            knot.wait_serial(after, timeout=20)
            assert knot.answers("web.ns1.svc.clusterset.local", "A") == {"10.9.200.1"}
