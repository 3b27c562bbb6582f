"""The DNS cases of the mcs-api conformance suite (conformance/*_dns.go),
re-expressed with dig against the objects of objects/core.

* ClusterSetIP: ``<svc>.<ns>.svc.clusterset.local`` resolves to the clusterset
  IP; the SRV query on that name returns exactly one record (the "hello"
  service exports tcp/42 and udp/42: same target, same port).
* Headless: ``<svc>.<ns>...`` returns exactly the ready endpoint addresses of
  all clusters; ``<hostname>.<clusterid>.<svc>...`` returns that endpoint's
  address; the SRV query returns one record per ready endpoint whose target
  starts with the endpoint's host name, with the service port.
"""

from __future__ import annotations

import pytest

from .csdns_testlib import Dig, a_records, aaaa_records, check, svc

HELLO = svc("hello")
DB = svc("db")

# ready endpoints of conf/db: (hostname, cluster id, address)
DB_READY = [
    ("db-0", "east", "10.1.0.1"),
    ("db-1", "east", "10.1.0.2"),
    ("10-2-0-1", "west", "10.2.0.1"),
    ("10-2-0-2", "west", "10.2.0.2"),
    ("10-2-0-4", "west", "10.2.0.4"),
]


def test_clusterset_ip_a_resolves_to_clusterset_ip(dig: Dig) -> None:
    check(dig(HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"]))


def test_clusterset_ip_aaaa_resolves_to_clusterset_ip(dig: Dig) -> None:
    check(dig(HELLO, "AAAA"), answer=aaaa_records(HELLO, ["fd00:42::10"]))


def test_clusterset_ip_srv_exactly_one_record_for_tcp_and_udp_42(dig: Dig) -> None:
    res = dig(HELLO, "SRV")
    check(res)
    assert len(res.answer) == 1, f"expected exactly one SRV record\n{res.describe()}"
    name, _ttl, _cls, rtype, _prio, _weight, port, target = res.answer[0].split()
    assert (name, rtype, port, target) == (HELLO, "SRV", "42", HELLO), res.describe()


def test_headless_a_returns_ready_addresses_of_all_clusters(dig: Dig) -> None:
    check(dig(DB, "A"), answer=a_records(DB, [addr for _h, _c, addr in DB_READY]))


@pytest.mark.parametrize(
    ("hostname", "cluster", "address"), DB_READY, ids=[f"{h}.{c}" for h, c, _ in DB_READY]
)
def test_headless_endpoint_name_returns_its_address(
    dig: Dig, hostname: str, cluster: str, address: str
) -> None:
    name = f"{hostname}.{cluster}.db.conf.svc.clusterset.local."
    check(dig(name, "A"), answer=a_records(name, [address]))


def test_headless_srv_one_record_per_ready_endpoint(dig: Dig) -> None:
    res = dig(DB, "SRV")
    check(res)
    assert len(res.answer) == len(DB_READY), res.describe()
    got = {}
    for line in res.answer:
        name, _ttl, _cls, rtype, _prio, _weight, port, target = line.split()
        assert (name, rtype, port) == (DB, "SRV", "5432"), res.describe()
        got[target] = port
    for hostname, cluster, _addr in DB_READY:
        assert f"{hostname}.{cluster}.db.conf.svc.clusterset.local." in got, (
            f"no SRV target for endpoint {hostname} of cluster {cluster}\n{res.describe()}"
        )
