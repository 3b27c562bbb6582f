"""The real process warns once synced, when it serves zone transfers, that an RRset of
over 100 records would be refused by BIND secondaries (max-records-per-type), and
exposes the largest RRset's size on /metrics; without transfers it does not warn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

pytestmark = pytest.mark.own_server

WARNING = ("the largest RRset served, big.prod.svc.clusterset.local. A, has 101 records: "
           "BIND 9.18.28 and later refuse")


def manifests(tmp_path: Path, size: int) -> Path:
    items = [service_import("big", "prod", "Headless"),
             endpoint_slice("big-east", "big", "prod", "east",
                            endpoints=[endpoint(f"10.2.{i // 250}.{i % 250 + 1}", ready=True)
                                       for i in range(size)])]
    (tmp_path / "big.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": items}))
    return tmp_path


@pytest.mark.parametrize("transfers", [True, False])
def test_a_warning_when_transfers_meet_a_large_rrset(tmp_path: Path, transfers: bool) -> None:
    extra = ("--allow-transfer", "127.0.0.1/32") if transfers else ()
    with ServerProcess("--manifests", str(manifests(tmp_path, 101)), *extra) as srv:
        srv.wait_ready()
        assert srv.metric("clusterset_dns_largest_rrset_records") == 101
        if transfers:
            wait_for(lambda: WARNING in srv.log_text(), 10, "the warning")
            assert srv.log_text().count(WARNING) == 1
        else:
            assert "largest RRset" not in srv.log_text()
