"""Our own server only: the configurable parts of docs/dns-behaviour.md §3 (TTL
0..3600, zone, EDNS UDP cap) and the manifests PATH forms (single file)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from .csdns_testlib import (
    DNS_VERSION_TTL,
    OBJECTS_DIR,
    ServerProcess,
    a_records,
    aaaa_records,
    check,
    check_nxdomain,
    rr,
    run_dig,
    svc,
)

pytestmark = pytest.mark.own_server

HELLO = svc("hello")
BIG = svc("big", "bulk")


def test_ttl_option_applies_to_records_and_negative_answers(
    start_server: Callable[..., ServerProcess],
) -> None:
    srv = start_server(OBJECTS_DIR, "--ttl", "60")
    check(run_dig(srv.host, srv.port, HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"], ttl=60))
    check(
        run_dig(srv.host, srv.port, svc("db"), "SRV"),
        answer=[
            rr(svc("db"), "SRV", f"0 20 5432 {h}.db.conf.svc.clusterset.local.", ttl=60)
            for h in ("db-0.east", "db-1.east", "10-2-0-1.west", "10-2-0-2.west", "10-2-0-4.west")
        ],
    )
    soa60 = (
        "clusterset.local. 60 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. "
        "SERIAL 7200 1800 86400 60"
    )
    check(run_dig(srv.host, srv.port, svc("nosuch"), "A"), "NXDOMAIN", answer=[], authority=[soa60])
    check(run_dig(srv.host, srv.port, "clusterset.local.", "SOA"), answer=[soa60])
    name = "dns-version.clusterset.local."
    check(
        run_dig(srv.host, srv.port, name, "TXT"),
        answer=[rr(name, "TXT", '"1.0.0"', ttl=DNS_VERSION_TTL)],
    )


def test_ttl_zero_allowed(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--ttl", "0")
    check(run_dig(srv.host, srv.port, HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"], ttl=0))


@pytest.mark.parametrize("ttl", ["3601", "-1"])
def test_ttl_outside_0_3600_rejected(start_server: Callable[..., ServerProcess], ttl: str) -> None:
    srv = start_server(OBJECTS_DIR, "--ttl", ttl, wait=None)
    assert srv.proc is not None
    try:
        rc = srv.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        rc = None  # still running: reported below
    assert rc not in (None, 0), f"--ttl {ttl} accepted (exit code {rc})\n{srv.log_text()[-3000:]}"


def test_zone_option(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--zone", "mcs.test")
    hello = "hello.conf.svc.mcs.test."
    check(run_dig(srv.host, srv.port, hello, "A"), answer=a_records(hello, ["10.42.0.10"]))
    soa = "mcs.test. 5 IN SOA ns.dns.mcs.test. hostmaster.mcs.test. SERIAL 7200 1800 86400 5"
    check(run_dig(srv.host, srv.port, "mcs.test.", "SOA"), answer=[soa])
    check(
        run_dig(srv.host, srv.port, "mcs.test.", "NS"),
        answer=[rr("mcs.test.", "NS", "ns.dns.mcs.test.")],
    )
    check(
        run_dig(srv.host, srv.port, "nosuch.conf.svc.mcs.test.", "A"),
        "NXDOMAIN",
        answer=[],
        authority=[soa],
    )
    target = "db-0.east.db.conf.svc.mcs.test."
    check(
        run_dig(srv.host, srv.port, "_pg._tcp.db.conf.svc.mcs.test.", "SRV"),
        answer=[
            rr("_pg._tcp.db.conf.svc.mcs.test.", "SRV", f"0 20 5432 {h}.db.conf.svc.mcs.test.")
            for h in ("db-0.east", "db-1.east", "10-2-0-1.west", "10-2-0-2.west", "10-2-0-4.west")
        ],
    )
    check(run_dig(srv.host, srv.port, target, "A"), answer=a_records(target, ["10.1.0.1"]))
    res = run_dig(srv.host, srv.port, HELLO, "A")
    check(res, "REFUSED", answer=[], authoritative=False)


def test_edns_udp_size_option_raises_cap(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--edns-udp-size", "4096")
    res = run_dig(srv.host, srv.port, BIG, "AAAA", "+bufsize=4096", "+ignore")
    check(res, answer=aaaa_records(BIG, [f"fd00:8::{i:x}" for i in range(1, 61)]))
    assert "tc" not in res.flags and res.transport == "UDP", res.describe()
    assert res.msg_size is not None and 1232 < res.msg_size <= 4096, res.describe()
    # the client's smaller size is still honoured
    res = run_dig(srv.host, srv.port, BIG, "AAAA", "+bufsize=1232", "+ignore")
    assert "tc" in res.flags and res.msg_size is not None and res.msg_size <= 1232, res.describe()


def test_edns_udp_size_option_lowers_cap(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, "--edns-udp-size", "512")
    res = run_dig(srv.host, srv.port, BIG, "A", "+bufsize=4096", "+ignore")
    assert res.responded and "tc" in res.flags, res.describe()
    assert res.msg_size is not None and res.msg_size <= 512, res.describe()
    assert res.question == [f"{BIG} IN A"], res.describe()
    check(
        run_dig(srv.host, srv.port, HELLO, "A", "+bufsize=4096"),
        answer=a_records(HELLO, ["10.42.0.10"]),
    )


def test_manifests_single_file(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR / "core" / "db.yaml")
    check(
        run_dig(srv.host, srv.port, svc("db"), "A"),
        answer=a_records(svc("db"), ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"]),
    )
    check_nxdomain(run_dig(srv.host, srv.port, HELLO, "A"))


def test_manifests_single_json_file(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR / "core" / "v4only.json")
    v4 = svc("v4only")
    check(run_dig(srv.host, srv.port, v4, "A"), answer=a_records(v4, ["10.42.0.30"]))


def test_full_data_served_once_ready(start_server: Callable[..., ServerProcess]) -> None:
    """Once /ready says 200 the full data set is served (no partial sync)."""
    srv = start_server(OBJECTS_DIR)
    check(
        run_dig(srv.host, srv.port, BIG, "A", "+tcp"),
        answer=a_records(BIG, [f"10.8.0.{i}" for i in range(1, 61)]),
    )
    check(
        run_dig(srv.host, srv.port, svc("dotted", "ext"), "A"),
        answer=a_records(svc("dotted", "ext"), ["10.5.0.1", "10.5.0.2", "10.5.1.1"]),
    )


@pytest.mark.parametrize(("mode", "shown"), [("batched", "recvmmsg/sendmmsg"),
                                             ("plain", "recvfrom/sendto")])
def test_udp_io_option(start_server: Callable[..., ServerProcess], mode: str, shown: str) -> None:
    """Both UDP paths answer the same; the one in use is in the log and in a metric. (The
    whole suite runs on the default, batched on Linux; scripts/test runs it once more
    with CLUSTERSET_DNS_UDP_IO=plain.)"""
    srv = start_server(OBJECTS_DIR, "--udp-io", mode)
    check(run_dig(srv.host, srv.port, HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"]))
    check_nxdomain(run_dig(srv.host, srv.port, svc("nosuch"), "A"))
    assert srv.metric("clusterset_dns_udp_io", mode=shown) == 1
    assert f"UDP I/O: {shown}" in srv.log_text()
