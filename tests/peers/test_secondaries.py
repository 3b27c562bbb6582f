"""BIND, NSD and PowerDNS as real secondaries of our server: each loads the zone by a
TSIG-signed AXFR, takes our NOTIFY, follows a change by IXFR, and answers every name
of the zone as we do (ClusterSetIP, Headless with per-endpoint names, local-first, and
a Headless service of 120 endpoints). BIND refuses that service's RRsets unless its
``max-records-per-type`` is at least the largest RRset we serve."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterset_dns_testkit.daemon import Daemon, serial_at
from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.manifests import headless, write_atomically
from clusterset_dns_testkit.peers import free_port
from clusterset_dns_testkit.secondaries import (
    BindSecondary,
    NsdSecondary,
    PdnsSecondary,
    bind_default_max_records,
)

from .peerlib import (
    BIG,
    BIG_NAME,
    ZONE,
    differences,
    largest_rrset,
    make_objects,
    most_types,
    new_key,
    questions,
    server,
    zone_of,
)

pytestmark = pytest.mark.peers

Key = tuple[str, str]
# each secondary: how to start it (primary's port, key, its own port, our zone's largest
# RRset and most types at a name)
STARTERS: dict[str, Callable[[int, Key, int, int, int], Daemon]] = {
    "bind": lambda primary, key, port, records, types: BindSecondary(
        primary, key, port, max_records=records, max_types=types),
    "nsd": lambda primary, key, port, records, types: NsdSecondary(primary, key, port),
    "pdns": lambda primary, key, port, records, types: PdnsSecondary(primary, key, port),
}
# names that exist nowhere: both must answer NXDOMAIN (or NODATA) alike
ABSENT = [(f"nothing.demo.svc.{ZONE}", "A"), (f"web.demo.svc.{ZONE}", "TXT"),
          (f"x.many.demo.svc.{ZONE}", "AAAA")]


@dataclass
class Primary:
    srv: ServerProcess
    objects: Path
    key: Key
    ports: dict[str, int]  # each secondary's port, in our --notify


@pytest.fixture(scope="module")
def primary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Primary]:
    tmp = tmp_path_factory.mktemp("primary")
    objects = make_objects(tmp)
    key_file, key = new_key(tmp)
    ports = {name: free_port() for name in STARTERS}
    notify = [arg for port in ports.values() for arg in ("--notify", f"127.0.0.1:{port}")]
    with server(objects, "--allow-transfer", "127.0.0.1/32", "--transfer-tsig-key",
                str(key_file), *notify) as srv:
        yield Primary(srv, objects, key, ports)


def _serial(srv: ServerProcess) -> int:
    serial = serial_at(srv.port)
    assert serial is not None
    return serial


@pytest.mark.parametrize("which", list(STARTERS))
def test_secondary_loads_follows_notify_by_ixfr_and_answers_as_we_do(
        primary: Primary, which: str) -> None:
    srv = primary.srv
    zone = zone_of(srv, primary.key)
    assert len(zone.find_rdataset(BIG_NAME, "A")) == BIG
    refused = srv.metric("clusterset_dns_transfers_total", result="notauth")
    with STARTERS[which](srv.port, primary.key, primary.ports[which], largest_rrset(zone),
                         most_types(zone)) as peer:
        peer.wait_serial(_serial(srv))
        assert differences(srv, peer, questions(zone) + ABSENT) == []

        incremental = srv.metric("clusterset_dns_transfers_total", type="ixfr",
                                 result="incremental")
        acknowledged = srv.metric("clusterset_dns_notify_total", result="acknowledged")
        before = _serial(srv)
        address = f"10.60.{list(STARTERS).index(which) + 1}.1"
        write_atomically(primary.objects / "change.yaml", headless("change", [address]))
        after = wait_for(lambda: (s := _serial(srv)) != before and s, 30, "our new serial")
        # The SOA's refresh is 7200 s: only our NOTIFY brings the secondary here.
        peer.wait_serial(after)
        assert srv.metric("clusterset_dns_notify_total", result="acknowledged") > acknowledged
        if which == "bind":  # our NOTIFY carries the SOA (RFC 1996 3.7), read by BIND
            assert re.search(rf"notify from [^ ]+: serial {after}\b", peer.log_text())
            assert "no serial" not in peer.log_text()
        assert srv.metric("clusterset_dns_transfers_total", type="ixfr",
                          result="incremental") > incremental, peer.log_text()[-3000:]
        assert peer.ask(f"change.demo.svc.{ZONE}", "A").answer[0][0].to_text() == address
        changed = zone_of(srv, primary.key)
        assert differences(srv, peer, questions(changed) + ABSENT) == []
    # every transfer was signed with the key (the server refuses any other)
    assert srv.metric("clusterset_dns_transfers_total", result="notauth") == refused


def _bind_loads(primary: Primary, records: int | None, types: int | None) -> bool:
    """Whether a new BIND secondary with these limits loads our zone; False once it
    logged "too many records" (BIND fails the whole transfer)."""
    with BindSecondary(primary.srv.port, primary.key, max_records=records,
                       max_types=types) as bind:
        serial = _serial(primary.srv)
        outcome = wait_for(
            lambda: ("loaded" if bind.serial() == serial else
                     "refused" if "too many records" in bind.log_text() else None),
            30, "BIND to load the zone or refuse it")
        return outcome == "loaded"


def test_bind_needs_max_records_per_type_of_our_largest_rrset(primary: Primary) -> None:
    zone = zone_of(primary.srv, primary.key)
    largest, types = largest_rrset(zone), most_types(zone)
    assert largest == BIG  # the 120-endpoint service's A and SRV RRsets
    # the figure the recipe sets the limit from
    wait_for(lambda: primary.srv.metric("clusterset_dns_largest_rrset_records") == largest,
             60, "clusterset_dns_largest_rrset_records to be the largest RRset")
    assert _bind_loads(primary, largest, types)
    assert not _bind_loads(primary, largest - 1, types)
    assert not _bind_loads(primary, largest, types - 1)


def test_bind_default_limit_refuses_a_headless_service_over_100_endpoints(
        primary: Primary) -> None:
    """Debian 12's BIND (9.18.28 and later) with its default configuration never loads
    a zone holding a 120-record RRset."""
    default = bind_default_max_records()
    assert _bind_loads(primary, None, None) == (default is None or default >= BIG)
