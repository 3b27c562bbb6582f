"""Extended DNS Errors (RFC 8914, docs/dns-behaviour.md §3.8): empty answers say why.

Each cause gets its own import in a manifests directory written here; every
case reads the EDE's INFO-CODE and EXTRA-TEXT with the real ``dig``. A name
that never existed gets no EDE, and a query without OPT gets none either."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import

from .csdns_testlib import (
    ZONE,
    DigResult,
    ServerProcess,
    check,
    check_nodata,
    check_nxdomain,
    poll,
    run_dig,
)

pytestmark = [pytest.mark.own_server, pytest.mark.deviation]

NS = "ede"
OTHER, NOT_READY, INVALID_DATA = 0, 14, 24


def name(*labels: str) -> str:
    return ".".join((*labels, NS, "svc", ZONE)) + "."


def imp(svc: str, kind: str = "Headless", ips: list[str] | None = None,
        status: dict[str, object] | None = None,
        traffic_distribution: str | None = None) -> dict[str, object]:
    """The import in the spec layout; ``status`` is written beside it (its conditions)."""
    body = service_import(svc, NS, kind, ips=ips or None, ports=[HTTP],
                          traffic_distribution=traffic_distribution)
    if status is not None:
        body["status"] = status
    return body


def piece(slice_name: str, svc: str, cluster: str, endpoints: list[dict[str, object]],
          address_type: str = "IPv4") -> dict[str, object]:
    return endpoint_slice(slice_name, svc, NS, cluster, address_type, endpoints, [HTTP])


def ep(address: str, ready: bool = True, hostname: str | None = None) -> dict[str, object]:
    return endpoint(address, hostname=hostname, ready=ready)


OBJECTS: list[dict[str, object]] = [
    # no ready endpoint: 2 not ready in east, 1 in west
    imp("down"),
    piece("down-east", "down", "east", [ep("10.60.0.1", False, "d-0"), ep("10.60.0.2", False)]),
    piece("down-west", "down", "west", [ep("10.60.1.1", False)]),
    # endpointSliceObjects: Absent, and an import whose slices have not arrived
    imp("absent", status={"endpointSliceObjects": "Absent"}),
    imp("waiting", status={"endpointSliceObjects": "Present"}),
    # one family only: an IPv4 ClusterSetIP import, an IPv4 headless endpoint
    imp("v4", "ClusterSetIP", ["10.60.2.1"]),
    imp("hl"),
    piece("hl-east", "hl", "east", [ep("10.60.3.1", hostname="h-0"), ep("10.60.3.2", False)]),
    # rejected: an import of an unknown type, a slice of an unknown address type
    imp("bogus", "Bogus"),
    imp("badslice"),
    piece("badslice-east", "badslice", "east", [ep("10.60.4.1")], address_type="IPv5"),
    # no usable IP
    imp("noip", "ClusterSetIP"),
    # local-first: with --cluster-id east, west's endpoints rank lower (explain shows it)
    imp("near", traffic_distribution="PreferClose"),
    piece("near-east", "near", "east", [ep("10.60.5.1")]),
    piece("near-west", "near", "west", [ep("10.60.6.1", hostname="w-0")]),
]


def write_objects(where: Path, objects: list[dict[str, object]]) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "ede.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                "items": objects}))
    return where


@pytest.fixture
def ede_server(start_server: Callable[..., ServerProcess], tmp_path: Path) -> ServerProcess:
    return start_server(write_objects(tmp_path / "objects", OBJECTS), "--cluster-id", "east")


# (name, type, rcode, INFO-CODE, EXTRA-TEXT)
CASES = [
    (name("down"), "A", "NXDOMAIN", OTHER, "no ready endpoint: 3 not ready (east 2, west 1)"),
    (name("_http", "_tcp", "down"), "SRV", "NXDOMAIN", OTHER,
     "no ready endpoint: 3 not ready (east 2, west 1)"),
    (name("east", "down"), "A", "NXDOMAIN", OTHER,
     "no ready endpoint in cluster east: 2 not ready"),
    (name("d-0", "east", "down"), "A", "NXDOMAIN", OTHER,
     f"endpoint not ready (EndpointSlice {NS}/down-east)"),
    (name("10-60-0-2", "east", "down"), "AAAA", "NXDOMAIN", OTHER,
     f"endpoint not ready (EndpointSlice {NS}/down-east)"),
    (name("absent"), "A", "NXDOMAIN", OTHER,
     "no EndpointSlices: ServiceImport status.endpointSliceObjects is Absent"),
    (name("waiting"), "SRV", "NXDOMAIN", OTHER,
     f"no EndpointSlice for ServiceImport {NS}/waiting has arrived"),
    (name("v4"), "AAAA", "NOERROR", OTHER, "no IPv6 address: this name has IPv4 addresses only"),
    (name("hl"), "AAAA", "NOERROR", OTHER, "no IPv6 address: this name has IPv4 addresses only"),
    (name("h-0", "east", "hl"), "AAAA", "NOERROR", OTHER,
     "no IPv6 address: this name has IPv4 addresses only"),
    (name("10-60-3-2", "east", "hl"), "A", "NXDOMAIN", OTHER,
     f"endpoint not ready (EndpointSlice {NS}/hl-east)"),
    (name("bogus"), "A", "NXDOMAIN", INVALID_DATA,
     f"ServiceImport {NS}/bogus rejected: type 'Bogus' is neither ClusterSetIP nor Headless"),
    (name("badslice"), "A", "NXDOMAIN", INVALID_DATA,
     f"no ready endpoint; EndpointSlice {NS}/badslice-east rejected: addressType 'IPv5' is "
     "not IPv4, IPv6 or FQDN"),
    (name("noip"), "A", "NOERROR", OTHER, f"no address: ServiceImport {NS}/noip has no usable IP"),
    (name("_http", "_tcp", "noip"), "SRV", "NOERROR", OTHER,
     f"no address: ServiceImport {NS}/noip has no usable IP"),
]


def check_negative(res: DigResult, rcode: str) -> None:
    (check_nxdomain if rcode == "NXDOMAIN" else check_nodata)(res)


def test_every_cause_has_its_code_and_text(ede_server: ServerProcess) -> None:
    for qname, rtype, rcode, code, text in CASES:
        for transport in ((), ("+tcp",)):
            res = run_dig(ede_server.host, ede_server.port, qname, rtype, *transport)
            check_negative(res, rcode)
            assert res.ede == (code, text), res.describe()


def test_names_that_never_existed_get_no_ede(ede_server: ServerProcess) -> None:
    # Beside and below explained names: a typo is not "not ready".
    for qname in (name("nothere"), name("x", "down"), name("x", "east", "down"),
                  name("x", "hl"), name("w-1", "east", "near"), f"nothere.{ZONE}."):
        res = run_dig(ede_server.host, ede_server.port, qname, "A")
        check_nxdomain(res)
        assert res.ede is None, res.describe()
    # A name with records asked for a type it lacks (not an address family): plain.
    res = run_dig(ede_server.host, ede_server.port, name("v4"), "TXT")
    check_nodata(res)
    assert res.ede is None, res.describe()


def test_queries_without_opt_get_no_ede(ede_server: ServerProcess) -> None:
    res = run_dig(ede_server.host, ede_server.port, name("down"), "A", "+noedns")
    check_nxdomain(res)
    assert res.opt is None and res.ede is None, res.describe()


def test_remembered_answers_follow_the_text(ede_server: ServerProcess, tmp_path: Path) -> None:
    """The same query repeated (served from the remembered answers and responses,
    §8) keeps its EDE; a change of only the text (one more endpoint not ready)
    reaches it, and an endpoint becoming ready replaces it with an answer."""
    host, port = ede_server.host, ede_server.port
    want = (OTHER, "no ready endpoint: 3 not ready (east 2, west 1)")
    for _ in range(3):
        assert run_dig(host, port, name("down"), "A").ede == want
    objects = [o for o in OBJECTS if o["metadata"]["name"] != "down-west"]  # type: ignore[index]
    objects.append(piece("down-west", "down", "west", [ep("10.60.1.1", False),
                                                      ep("10.60.1.2", False)]))
    write_objects(tmp_path / "objects", objects)
    four = (OTHER, "no ready endpoint: 4 not ready (east 2, west 2)")
    ok, res, _ = poll(lambda: run_dig(host, port, name("down"), "A"),
                      lambda r: r.ede == four, timeout=10)
    assert ok, res.describe()
    objects[-1] = piece("down-west", "down", "west", [ep("10.60.1.1", True)])
    write_objects(tmp_path / "objects", objects)
    ok, res, _ = poll(lambda: run_dig(host, port, name("down"), "A"),
                      lambda r: r.rcode == "NOERROR", timeout=10)
    assert ok and res.ede is None and res.answer, res.describe()


def test_not_synced_is_not_ready(start_server: Callable[..., ServerProcess],
                                 tmp_path: Path) -> None:
    srv = start_server(tmp_path / "missing", "--startup-timeout", "0", wait="listening")
    res = run_dig(srv.host, srv.port, name("down"), "A")
    check(res, "SERVFAIL", answer=[], authoritative=False)
    assert res.ede is not None and res.ede[0] == NOT_READY, res.describe()
    assert res.ede[1].startswith("not synced"), res.describe()
    # Without OPT: the same SERVFAIL, no option.
    res = run_dig(srv.host, srv.port, name("down"), "A", "+noedns")
    check(res, "SERVFAIL", answer=[], authoritative=False)
    assert res.opt is None, res.describe()
    # Once the files appear, the zone answers (and explains) instead.
    write_objects(tmp_path / "missing", OBJECTS)
    ok, res, _ = poll(lambda: run_dig(srv.host, srv.port, name("down"), "A"),
                      lambda r: r.rcode == "NXDOMAIN", timeout=10)
    assert ok and res.ede is not None and res.ede[0] == OTHER, res.describe()


def test_a_small_udp_size_drops_the_text_not_the_answer(
        start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """RFC 6891 / §3.7: the option is what gives way when a response would exceed
    the client's UDP size; the answer keeps its records and gets no TC."""
    svc, cluster = "s" * 63, "c" * 63  # the longest labels: a 222-byte question
    objects = [imp(svc), piece("p" * 200, svc, cluster, [ep("10.60.0.1", False, "h" * 63)])]
    srv = start_server(write_objects(tmp_path / "objects", objects))
    qname = name("h" * 63, cluster, svc)
    big = run_dig(srv.host, srv.port, qname, "A", "+bufsize=1232")
    check_nxdomain(big)
    assert big.ede is not None and big.msg_size is not None and big.msg_size > 512, \
        big.describe()
    small = run_dig(srv.host, srv.port, qname, "A", "+bufsize=512", "+ignore")
    check_nxdomain(small)
    assert "tc" not in small.flags and small.ede is None and small.opt is not None, \
        small.describe()
    assert small.msg_size is not None and small.msg_size <= 512, small.describe()


def test_two_workers_explain_alike(start_server: Callable[..., ServerProcess],
                                   tmp_path: Path) -> None:
    srv = start_server(write_objects(tmp_path / "objects", OBJECTS), "--workers", "2")
    texts = {run_dig(srv.host, srv.port, name("down"), "A", f"+subnet=10.0.0.{i}/32").ede
             for i in range(20)}  # +subnet: an option, so each query takes the slow path
    texts |= {run_dig(srv.host, srv.port, name("down"), "A").ede for _ in range(20)}
    assert texts == {(OTHER, "no ready endpoint: 3 not ready (east 2, west 1)")}
