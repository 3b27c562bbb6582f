"""docs/dns-behaviour.md §3.1-§3.2: answers for ClusterSetIP and Headless imports (objects/core).

Expected records are zone-file text; SRV weights follow the lead's choice
``max(1, 100 // n)`` with n = records in the RRset, priority 0.
"""

from __future__ import annotations

import pytest

from .csdns_testlib import (
    SOA,
    Dig,
    a_records,
    aaaa_records,
    check,
    check_nodata,
    check_nxdomain,
    rr,
    svc,
)

HELLO, NAMED, V4ONLY, UNNAMED = svc("hello"), svc("named"), svc("v4only"), svc("unnamed")
DB, TWOHOST, NOTREADY, NOSLICES = svc("db"), svc("twohost"), svc("notready"), svc("noslices")
V6ONLY, NOLABEL, IGNORED = svc("v6only"), svc("nolabel"), svc("ignored")


def ep(host: str, cluster: str, service: str, ns: str = "conf") -> str:
    return f"{host}.{cluster}.{service}.{ns}.svc.clusterset.local."


def srv(owner: str, weight: int, port: int, target: str) -> str:
    return rr(owner, "SRV", f"0 {weight} {port} {target}")


# ---------------------------------------------------------------- ClusterSetIP

CLUSTERSET_IP_ADDRESSES = [
    (HELLO, "A", ["10.42.0.10"]),
    (HELLO, "AAAA", ["fd00:42::10"]),
    (NAMED, "A", ["10.42.0.20"]),
    (NAMED, "AAAA", ["fd00:42::20"]),
    (V4ONLY, "A", ["10.42.0.30"]),
    (UNNAMED, "A", ["10.42.0.40"]),
]


@pytest.mark.parametrize(
    ("name", "rtype", "addrs"),
    CLUSTERSET_IP_ADDRESSES,
    ids=[f"{n.split('.')[0]}-{t}" for n, t, _ in CLUSTERSET_IP_ADDRESSES],
)
def test_clusterset_ip_address_records(dig: Dig, name: str, rtype: str, addrs: list[str]) -> None:
    check(dig(name, rtype), answer=[rr(name, rtype, a) for a in addrs])


@pytest.mark.parametrize("name", [V4ONLY, UNNAMED], ids=["v4only", "unnamed"])
def test_clusterset_ip_other_family_is_nodata(dig: Dig, name: str) -> None:
    check_nodata(dig(name, "AAAA"))


NAMED_PORT_SRV = [
    (f"_tcp._tcp.{HELLO}", 42, HELLO),
    (f"_udp._udp.{HELLO}", 42, HELLO),
    (f"_http._tcp.{NAMED}", 80, NAMED),  # protocol omitted in the import = TCP
    (f"_dns._udp.{NAMED}", 53, NAMED),
    (f"_dns-tcp._tcp.{NAMED}", 53, NAMED),
    (f"_sig._sctp.{NAMED}", 3868, NAMED),
    (f"_https._tcp.{V4ONLY}", 443, V4ONLY),
]


@pytest.mark.parametrize(
    ("name", "port", "srv_target"),
    NAMED_PORT_SRV,
    ids=[n.split(".svc")[0] for n, _, _ in NAMED_PORT_SRV],
)
def test_clusterset_ip_named_port_srv(dig: Dig, name: str, port: int, srv_target: str) -> None:
    check(dig(name, "SRV"), answer=[srv(name, 100, port, srv_target)])


NO_SUCH_PORT_SRV = [
    f"_dns._tcp.{NAMED}",  # dns is udp only
    f"_http._udp.{NAMED}",  # http is tcp only
    f"_sig._tcp.{NAMED}",  # sig is sctp only
    f"_8443._tcp.{NAMED}",  # unnamed port: no _<port>._<proto> name
    f"_8080._tcp.{UNNAMED}",
    f"_http._tcp.{UNNAMED}",
    f"_tcp._udp.{HELLO}",
    f"_udp._tcp.{HELLO}",
]


@pytest.mark.parametrize(
    "name", NO_SUCH_PORT_SRV, ids=[n.split(".svc")[0] for n in NO_SUCH_PORT_SRV]
)
def test_srv_for_missing_or_unnamed_port_is_nxdomain(dig: Dig, name: str) -> None:
    check_nxdomain(dig(name, "SRV"))


BARE_SRV = [
    (HELLO, [srv(HELLO, 100, 42, HELLO)]),  # tcp/42 + udp/42: one record
    # 80, 53 (udp and tcp: one record), 3868 (sctp), 8443 (unnamed)
    (NAMED, [srv(NAMED, 25, p, NAMED) for p in (80, 53, 3868, 8443)]),
    (UNNAMED, [srv(UNNAMED, 100, 8080, UNNAMED)]),
    (V4ONLY, [srv(V4ONLY, 100, 443, V4ONLY)]),
]


@pytest.mark.parametrize(("name", "answer"), BARE_SRV, ids=[n.split(".")[0] for n, _ in BARE_SRV])
def test_clusterset_ip_bare_name_srv_one_record_per_distinct_port(
    dig: Dig, name: str, answer: list[str]
) -> None:
    check(dig(name, "SRV"), answer=answer)


SRV_ADDITIONAL = [
    (
        f"_http._tcp.{NAMED}",
        a_records(NAMED, ["10.42.0.20"]) + aaaa_records(NAMED, ["fd00:42::20"]),
    ),
    (NAMED, a_records(NAMED, ["10.42.0.20"]) + aaaa_records(NAMED, ["fd00:42::20"])),
    (HELLO, a_records(HELLO, ["10.42.0.10"]) + aaaa_records(HELLO, ["fd00:42::10"])),
    (f"_https._tcp.{V4ONLY}", a_records(V4ONLY, ["10.42.0.30"])),
]


@pytest.mark.parametrize(
    ("name", "additional"), SRV_ADDITIONAL, ids=[n.split(".svc")[0] for n, _ in SRV_ADDITIONAL]
)
def test_clusterset_ip_srv_additional_carries_target_addresses(
    dig: Dig, name: str, additional: list[str]
) -> None:
    check(dig(name, "SRV"), additional=additional)


@pytest.mark.parametrize(
    ("name", "rtype"),
    [(HELLO, "MX"), (HELLO, "TXT"), (HELLO, "CNAME"), (f"_http._tcp.{NAMED}", "A"), (NAMED, "PTR")],
    ids=["hello-MX", "hello-TXT", "hello-CNAME", "srvname-A", "named-PTR"],
)
def test_existing_name_other_type_is_nodata(dig: Dig, name: str, rtype: str) -> None:
    check_nodata(dig(name, rtype))


# ---------------------------------------------------------------- Headless

DB_A = ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"]
DB_TARGETS = [
    (ep("db-0", "east", "db"), "10.1.0.1"),
    (ep("db-1", "east", "db"), "10.1.0.2"),
    (ep("10-2-0-1", "west", "db"), "10.2.0.1"),
    (ep("10-2-0-2", "west", "db"), "10.2.0.2"),
    (ep("10-2-0-4", "west", "db"), "10.2.0.4"),
]


def test_headless_a_each_ready_address_once(dig: Dig) -> None:
    # 10.2.0.2 is listed in two slices of cluster west; 10.1.0.3 / 10.2.0.3 are
    # not ready; the orphan/db slice (other namespace) must not leak in.
    check(dig(DB, "A"), answer=a_records(DB, DB_A))


def test_headless_other_family_nodata(dig: Dig) -> None:
    check_nodata(dig(DB, "AAAA"))


@pytest.mark.parametrize("name", [DB, f"_pg._tcp.{DB}"], ids=["bare", "_pg._tcp"])
def test_headless_srv_targets_and_additional(dig: Dig, name: str) -> None:
    check(
        dig(name, "SRV"),
        answer=[srv(name, 20, 5432, t) for t, _ in DB_TARGETS],
        additional=[rr(t, "A", a) for t, a in DB_TARGETS],
    )


def test_headless_srv_wrong_protocol_nxdomain(dig: Dig) -> None:
    check_nxdomain(dig(f"_pg._udp.{DB}", "SRV"))


ENDPOINT_NAMES = [
    # StatefulSet hostnames
    (ep("db-0", "east", "db"), "A", ["10.1.0.1"]),
    (ep("db-1", "east", "db"), "A", ["10.1.0.2"]),  # conditions absent = ready
    # no hostname: derived from the address
    (ep("10-2-0-1", "west", "db"), "A", ["10.2.0.1"]),
    (ep("10-2-0-2", "west", "db"), "A", ["10.2.0.2"]),  # in two slices, once
    (ep("10-2-0-4", "west", "db"), "A", ["10.2.0.4"]),
    # two endpoints sharing a hostname in one cluster
    (ep("shared", "east", "twohost"), "A", ["10.3.0.1", "10.3.0.2"]),
    (ep("other", "east", "twohost"), "A", ["10.3.0.3"]),
    # IPv6: fd00:6::2 -> fd00-6--2, fd00:6:: -> fd00-6-- -> fd00-6--0
    (ep("v6-0", "east", "v6only"), "AAAA", ["fd00:6::1"]),
    (ep("fd00-6--2", "east", "v6only"), "AAAA", ["fd00:6::2"]),
    (ep("fd00-6--0", "east", "v6only"), "AAAA", ["fd00:6::"]),
    (ep("a", "east", "nolabel"), "A", ["10.6.0.1"]),
    (ep("i-0", "east", "ignored"), "A", ["10.7.0.1"]),
]


@pytest.mark.parametrize(
    ("name", "rtype", "addrs"),
    ENDPOINT_NAMES,
    ids=[n.split(".conf.")[0] for n, _, _ in ENDPOINT_NAMES],
)
def test_endpoint_name_addresses(dig: Dig, name: str, rtype: str, addrs: list[str]) -> None:
    check(dig(name, rtype), answer=[rr(name, rtype, a) for a in addrs])


NO_ENDPOINT_NAMES = [
    ep("db-2", "east", "db"),  # not ready
    ep("10-1-0-3", "east", "db"),  # not ready, and it has a hostname anyway
    ep("10-2-0-3", "west", "db"),  # not ready (serving, terminating)
    ep("db-0", "west", "db"),  # wrong cluster
    ep("10-2-0-1", "east", "db"),  # wrong cluster
    ep("db-0", "nosuch", "db"),  # unknown cluster
    ep("10-1-0-1", "east", "db"),  # has a hostname: no address-derived name
    ep("nr-0", "east", "notready"),
    ep("10-4-0-2", "east", "notready"),
    ep("v4-0", "east", "v6only"),  # not ready
    ep("b", "east", "nolabel"),  # slice without source-cluster: no per-endpoint name
    ep("10-6-0-2", "east", "nolabel"),
    ep("i-1", "east", "ignored"),  # slice labelled kubernetes.io/service-name only
    ep("10-7-0-2", "east", "ignored"),
    ep("i-2", "east", "ignored"),  # FQDN slice
    "x." + ep("db-0", "east", "db"),  # below an endpoint name
]


@pytest.mark.parametrize(
    "name", NO_ENDPOINT_NAMES, ids=[n.split(".svc")[0] for n in NO_ENDPOINT_NAMES]
)
def test_nonexistent_endpoint_name_nxdomain(dig: Dig, name: str) -> None:
    check_nxdomain(dig(name, "A"))


@pytest.mark.parametrize(
    ("name", "rtype"),
    [
        (ep("db-0", "east", "db"), "AAAA"),
        (ep("v6-0", "east", "v6only"), "A"),
        (ep("db-0", "east", "db"), "TXT"),
    ],
    ids=["db-0-AAAA", "v6-0-A", "db-0-TXT"],
)
def test_endpoint_name_other_type_nodata(dig: Dig, name: str, rtype: str) -> None:
    check_nodata(dig(name, rtype))


def test_two_endpoints_sharing_hostname_srv_dedup(dig: Dig) -> None:
    shared, other = ep("shared", "east", "twohost"), ep("other", "east", "twohost")
    check(
        dig(TWOHOST, "SRV"),
        answer=[srv(TWOHOST, 50, 8080, shared), srv(TWOHOST, 50, 8080, other)],
        additional=a_records(shared, ["10.3.0.1", "10.3.0.2"]) + a_records(other, ["10.3.0.3"]),
    )


def test_two_endpoints_sharing_hostname_service_a(dig: Dig) -> None:
    check(dig(TWOHOST, "A"), answer=a_records(TWOHOST, ["10.3.0.1", "10.3.0.2", "10.3.0.3"]))


@pytest.mark.parametrize(
    ("name", "rtype"),
    [
        (NOTREADY, "A"),
        (NOTREADY, "AAAA"),
        (NOTREADY, "SRV"),
        (f"_http._tcp.{NOTREADY}", "SRV"),
        (NOSLICES, "A"),
        (NOSLICES, "SRV"),
    ],
    ids=[
        "notready-A",
        "notready-AAAA",
        "notready-SRV",
        "notready-_http._tcp",
        "noslices-A",
        "noslices-SRV",
    ],
)
def test_headless_without_ready_endpoint_is_nxdomain(dig: Dig, name: str, rtype: str) -> None:
    check_nxdomain(dig(name, rtype))


def test_headless_v6_only_a_is_nodata(dig: Dig) -> None:
    check_nodata(dig(V6ONLY, "A"))


def test_headless_v6_only_aaaa(dig: Dig) -> None:
    check(dig(V6ONLY, "AAAA"), answer=aaaa_records(V6ONLY, ["fd00:6::1", "fd00:6::2", "fd00:6::"]))


def test_headless_v6_only_srv_targets_and_additional(dig: Dig) -> None:
    targets = [
        (ep("v6-0", "east", "v6only"), "fd00:6::1"),
        (ep("fd00-6--2", "east", "v6only"), "fd00:6::2"),
        (ep("fd00-6--0", "east", "v6only"), "fd00:6::"),
    ]
    check(
        dig(V6ONLY, "SRV"),
        answer=[srv(V6ONLY, 33, 80, t) for t, _ in targets],
        additional=[rr(t, "AAAA", a) for t, a in targets],
    )


def test_slice_without_source_cluster_counts_for_service_answers(dig: Dig) -> None:
    check(dig(NOLABEL, "A"), answer=a_records(NOLABEL, ["10.6.0.1", "10.6.0.2"]))


def test_non_mcs_and_fqdn_slices_ignored(dig: Dig) -> None:
    check(dig(IGNORED, "A"), answer=a_records(IGNORED, ["10.7.0.1"]))
    check_nodata(dig(IGNORED, "AAAA"))


@pytest.mark.parametrize(
    "name",
    [svc("db", "orphan"), ep("db-9", "east", "db", "orphan"), "orphan.svc.clusterset.local."],
    ids=["orphan-db", "orphan-db-9", "orphan-ns"],
)
def test_slices_without_import_create_no_names(dig: Dig, name: str) -> None:
    check_nxdomain(dig(name, "A"))


def test_negative_answers_carry_the_zone_soa(dig: Dig) -> None:
    """NXDOMAIN and NODATA both carry exactly the zone's SOA in AUTHORITY."""
    nx = dig(svc("nosuch"), "A")
    nd = dig(V4ONLY, "AAAA")
    check(nx, "NXDOMAIN", answer=[], authority=[SOA])
    check(nd, "NOERROR", answer=[], authority=[SOA])
