"""Cache updates: answers follow the objects, names go away with them, the SOA serial moves."""

from __future__ import annotations

from typing import Any

import dns.rcode
import pytest

from clusterset_dns import convert
from clusterset_dns.cache import Op, PutImport, PutSlice, ReplaceImports, ReplaceSlices, SetSynced
from clusterset_dns.handler import Handler

from .helpers import (
    DEFAULT_UDP_CAP,
    SOA,
    ask,
    build_cache,
    endpoint,
    endpoint_slice,
    port,
    query,
    rcode_name,
    service_import,
)

Z = "svc.clusterset.local."
WEB, DB, API = f"web.prod.{Z}", f"db.prod.{Z}", f"api.other.{Z}"

WEB_RAW = service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")])
DB_RAW = service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")])
API_RAW = service_import("api", namespace="other", ips=["10.9.0.1"])
DB_EAST = endpoint_slice("db-east", "db", cluster="east", ports=[port(5432, "TCP", "pg")],
                         endpoints=[endpoint("10.2.0.1", hostname="db-0"), endpoint("10.2.0.2")])
DB_WEST = endpoint_slice("db-west", "db", cluster="west.eu", ports=[port(5432, "TCP", "pg")],
                         endpoints=[endpoint("10.3.0.1", hostname="db-0")])


def imp_op(raw: dict[str, Any]) -> Op:
    model = convert.service_import(raw)
    return PutImport((model.namespace, model.name), model)


def slice_op(raw: dict[str, Any]) -> Op:
    model = convert.endpoint_slice(raw)
    assert model is not None
    return PutSlice((model.namespace, model.name), model)


def delete(kind: str, namespace: str, name: str) -> Op:
    return (PutImport if kind == "import" else PutSlice)((namespace, name), None)


CURRENT: dict[Any, Any] = {}  # stands for the cache's own imports at that step


def answer(handler: Handler, qname: str, qtype: str) -> tuple[str, list[str]]:
    reply = ask(handler, query(qname, qtype), tcp=True)
    if reply.rcode != dns.rcode.NOERROR or not reply.answer:
        assert reply.authority == [SOA.lower()]
    return rcode_name(reply.rcode), reply.answer


def serial(handler: Handler) -> int:
    reply = ask(handler, query("clusterset.local.", "SOA"))
    value = reply.msg.answer[0][0].serial
    negative = ask(handler, query(f"nothere.{Z}", "A"))
    assert negative.msg.authority[0][0].serial == value  # negative answers follow the serial
    return int(value)


def a(owner: str, address: str) -> str:
    return f"{owner} 5 in a {address}"


def nx() -> tuple[str, list[str]]:
    return ("NXDOMAIN", [])


def nodata() -> tuple[str, list[str]]:
    return ("NOERROR", [])


def ok(*lines: str) -> tuple[str, list[str]]:
    return ("NOERROR", sorted(lines))


INITIAL = ([WEB_RAW, DB_RAW, API_RAW], [DB_EAST, DB_WEST])

# (id, ops applied to the INITIAL objects, [(qname, qtype, expected after)])
UPDATES: list[tuple[str, list[Op], list[tuple[str, str, tuple[str, list[str]]]]]] = [
    ("import-ips-change",
     [imp_op({**WEB_RAW, "spec": {**WEB_RAW["spec"], "ips": ["10.1.0.9"]}})],
     [(WEB, "A", ok(a(WEB, "10.1.0.9")))]),
    ("import-gains-ipv6",
     [imp_op({**WEB_RAW, "spec": {**WEB_RAW["spec"], "ips": ["10.1.0.1", "fd00::1"]}})],
     [(WEB, "A", ok(a(WEB, "10.1.0.1"))), (WEB, "AAAA", ok(f"{WEB} 5 in aaaa fd00::1"))]),
    ("import-loses-its-ips",
     [imp_op({**WEB_RAW, "spec": {**WEB_RAW["spec"], "ips": []}})],
     # The names stay (NODATA); SRV records would point at a target with no address.
     [(WEB, "A", nodata()), (WEB, "SRV", nodata()), (f"_http._tcp.{WEB}", "SRV", nodata())]),
    ("import-loses-its-ports",
     [imp_op({**WEB_RAW, "spec": {**WEB_RAW["spec"], "ports": []}})],
     [(f"_http._tcp.{WEB}", "SRV", nx()), (f"_tcp.{WEB}", "A", nx()), (WEB, "SRV", nodata()),
      (WEB, "A", ok(a(WEB, "10.1.0.1")))]),
    ("import-port-renamed",
     [imp_op({**WEB_RAW, "spec": {**WEB_RAW["spec"], "ports": [port(80, "TCP", "www")]}})],
     [(f"_http._tcp.{WEB}", "SRV", nx()),
      (f"_www._tcp.{WEB}", "SRV", ok(f"_www._tcp.{WEB} 5 in srv 0 100 80 {WEB}"))]),
    ("headless-becomes-clustersetip",
     [imp_op({**DB_RAW, "spec": {"type": "ClusterSetIP", "ips": ["10.2.9.9"]}})],
     [(DB, "A", ok(a(DB, "10.2.9.9"))), (f"db-0.east.{DB}", "A", nx()),
      (f"east.{DB}", "A", nx()), (f"_pg._tcp.{DB}", "SRV", nx())]),
    ("delete-headless-import",
     [delete("import", "prod", "db")],
     [(DB, "A", nx()), (DB, "SRV", nx()), (f"_pg._tcp.{DB}", "SRV", nx()),
      (f"_tcp.{DB}", "SRV", nx()), (f"db-0.east.{DB}", "A", nx()), (f"east.{DB}", "A", nx()),
      (f"db-0.west.eu.{DB}", "A", nx()), (f"eu.{DB}", "A", nx()),
      (f"10-2-0-2.east.{DB}", "A", nx()),
      (f"prod.{Z}", "A", nodata()),  # web is still there
      (WEB, "A", ok(a(WEB, "10.1.0.1")))]),
    ("delete-every-import-of-a-namespace",
     [delete("import", "prod", "db"), delete("import", "prod", "web")],
     [(f"prod.{Z}", "A", nx()), (WEB, "A", nx()), (f"_http._tcp.{WEB}", "SRV", nx()),
      (f"other.{Z}", "A", nodata()), (Z, "A", nodata()), (API, "A", ok(a(API, "10.9.0.1")))]),
    ("delete-last-import-of-other-namespace",
     [delete("import", "other", "api")],
     [(f"other.{Z}", "A", nx()), (API, "A", nx()), (f"prod.{Z}", "A", nodata())]),
    ("delete-one-slice",
     [delete("slice", "prod", "db-west")],
     [(DB, "A", ok(a(DB, "10.2.0.1"), a(DB, "10.2.0.2"))), (f"db-0.west.eu.{DB}", "A", nx()),
      (f"west.eu.{DB}", "A", nx()), (f"eu.{DB}", "A", nx()),
      (f"db-0.east.{DB}", "A", ok(a(f"db-0.east.{DB}", "10.2.0.1")))]),
    ("delete-every-slice",
     [delete("slice", "prod", "db-west"), delete("slice", "prod", "db-east")],
     [(DB, "A", nx()), (f"east.{DB}", "A", nx()), (f"prod.{Z}", "A", nodata())]),
    ("endpoint-becomes-not-ready",
     [slice_op({**DB_EAST, "endpoints": [endpoint("10.2.0.1", hostname="db-0", ready=False),
                                         endpoint("10.2.0.2")]})],
     [(f"db-0.east.{DB}", "A", nx()), (f"10-2-0-2.east.{DB}", "A", ok(a(f"10-2-0-2.east.{DB}",
                                                                           "10.2.0.2"))),
      (DB, "A", ok(a(DB, "10.2.0.2"), a(DB, "10.3.0.1")))]),
    ("slice-moves-to-another-service",
     [imp_op(service_import("cache", type_="Headless")),
      slice_op(endpoint_slice("db-west", "cache", cluster="west.eu",
                              endpoints=[endpoint("10.3.0.1", hostname="db-0")]))],
     [(DB, "A", ok(a(DB, "10.2.0.1"), a(DB, "10.2.0.2"))),
      (f"db-0.west.eu.{DB}", "A", nx()),
      (f"cache.prod.{Z}", "A", ok(a(f"cache.prod.{Z}", "10.3.0.1"))),
      (f"db-0.west.eu.cache.prod.{Z}", "A", ok(a(f"db-0.west.eu.cache.prod.{Z}", "10.3.0.1")))]),
    ("slice-moves-to-a-service-without-import",
     [slice_op({**DB_EAST, "metadata": {**DB_EAST["metadata"], "labels": {
         convert.SERVICE_NAME_LABEL: "gone", convert.SOURCE_CLUSTER_LABEL: "east"}}})],
     [(DB, "A", ok(a(DB, "10.3.0.1"))), (f"east.{DB}", "A", nx()),
      (f"gone.prod.{Z}", "A", nx())]),
    ("slice-changes-cluster",
     [slice_op({**DB_EAST, "metadata": {**DB_EAST["metadata"], "labels": {
         convert.SERVICE_NAME_LABEL: "db", convert.SOURCE_CLUSTER_LABEL: "north"}}})],
     [(f"db-0.east.{DB}", "A", nx()), (f"east.{DB}", "A", nx()),
      (f"db-0.north.{DB}", "A", ok(a(f"db-0.north.{DB}", "10.2.0.1")))]),
    ("import-deleted-and-back",
     [delete("import", "prod", "db"), imp_op(DB_RAW)],
     [(f"db-0.east.{DB}", "A", ok(a(f"db-0.east.{DB}", "10.2.0.1"))),
      (f"db-0.west.eu.{DB}", "A", ok(a(f"db-0.west.eu.{DB}", "10.3.0.1")))]),
    ("delete-what-does-not-exist",
     [delete("import", "prod", "nothere"), delete("slice", "prod", "nothere")],
     [(WEB, "A", ok(a(WEB, "10.1.0.1"))), (f"nothere.prod.{Z}", "A", nx())]),
    ("replace-imports-deletes-what-is-gone",
     [ReplaceImports({("prod", "web"): convert.service_import(WEB_RAW)})],
     [(WEB, "A", ok(a(WEB, "10.1.0.1"))), (DB, "A", nx()), (f"db-0.east.{DB}", "A", nx()),
      (API, "A", nx()), (f"other.{Z}", "A", nx())]),
    ("replace-slices-deletes-what-is-gone",
     [ReplaceSlices({("prod", "db-west"): convert.endpoint_slice(DB_WEST)})],
     [(DB, "A", ok(a(DB, "10.3.0.1"))), (f"db-0.east.{DB}", "A", nx()),
      (f"east.{DB}", "A", nx())]),
    ("replace-with-nothing",
     [ReplaceImports({}), ReplaceSlices({})],
     [(WEB, "A", nx()), (DB, "A", nx()), (API, "A", nx()), (f"prod.{Z}", "A", nx()),
      (Z, "A", nodata()), ("clusterset.local.", "SOA", ok(SOA.lower()))]),
]


@pytest.mark.parametrize(("ops", "checks"), [(o, c) for _, o, c in UPDATES],
                         ids=[i for i, _, _ in UPDATES])
def test_update(ops: list[Op], checks: list[tuple[str, str, tuple[str, list[str]]]]) -> None:
    cache = build_cache(*INITIAL)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    before = serial(handler)
    cache.apply(ops)
    got = [(qname, qtype, answer(handler, qname, qtype)) for qname, qtype, _ in checks]
    assert got == [(qname, qtype, (rcode, sorted(x.lower() for x in lines)))
                   for qname, qtype, (rcode, lines) in checks]
    assert serial(handler) >= before


@pytest.mark.parametrize("ops", [
    [delete("slice", "prod", "db-east"), delete("slice", "prod", "db-west")],
    [delete("import", "prod", "db")],
    [ReplaceImports({}), ReplaceSlices({})],
], ids=["slices", "import", "everything"])
def test_emptied_service_leaves_no_trace(ops: list[Op]) -> None:
    """After its objects go, a service leaves no answer and no name behind: the zone is
    the same as one built without it."""
    cache = build_cache(*INITIAL)
    cache.apply(ops)
    remaining_imports = [r for r in INITIAL[0]
                         if (r["metadata"]["namespace"], r["metadata"]["name"]) in cache.imports]
    remaining_slices = [r for r in INITIAL[1]
                        if (r["metadata"]["namespace"], r["metadata"]["name"]) in cache.slices]
    fresh = build_cache(remaining_imports, remaining_slices)
    assert set(cache.zone.answers) == set(fresh.zone.answers)
    assert cache.zone.names == fresh.zone.names  # reference counts included


def test_slice_before_its_import() -> None:
    cache = build_cache([], [DB_EAST])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert answer(handler, DB, "A") == nx()
    cache.apply([imp_op(DB_RAW)])
    assert answer(handler, DB, "A") == ok(a(DB, "10.2.0.1"), a(DB, "10.2.0.2"))
    assert answer(handler, f"db-0.east.{DB}", "A") == ok(a(f"db-0.east.{DB}", "10.2.0.1"))


def test_slices_of_a_clustersetip_import_give_no_names() -> None:
    cache = build_cache([WEB_RAW], [endpoint_slice("web-a", "web", cluster="east",
                                                   endpoints=[endpoint("10.7.0.1")])])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert answer(handler, WEB, "A") == ok(a(WEB, "10.1.0.1"))
    assert answer(handler, f"10-7-0-1.east.{WEB}", "A") == nx()
    assert answer(handler, f"east.{WEB}", "A") == nx()


# -- the SOA serial ---------------------------------------------------------------------------

SERIAL_STEPS: list[tuple[str, list[Op], bool]] = [
    ("new-import", [imp_op(service_import("new", ips=["10.5.0.1"]))], True),
    ("same-import-again", [imp_op(service_import("new", ips=["10.5.0.1"]))], False),
    ("same-import-from-another-layout",
     [imp_op(service_import("new", ips=["10.5.0.1"], layout="status"))], False),
    ("import-ip-changed", [imp_op(service_import("new", ips=["10.5.0.2"]))], True),
    ("same-slice-again", [slice_op(DB_EAST)], False),
    ("slice-changed", [slice_op({**DB_EAST, "endpoints": [endpoint("10.2.0.7")]})], True),
    ("same-replace-again", [ReplaceImports(CURRENT)], False),
    ("synced-again", [SetSynced(True)], False),
    ("delete-nothing", [delete("import", "prod", "nothere")], False),
    ("delete-import", [delete("import", "prod", "new")], True),
    ("delete-again", [delete("import", "prod", "new")], False),
    ("delete-slice", [delete("slice", "prod", "db-west")], True),
    ("two-changes-in-one-update", [delete("slice", "prod", "db-east"), imp_op(WEB_RAW | {
        "spec": {"type": "ClusterSetIP", "ips": ["10.1.0.2"]}})], True),
    ("empty-update", [], False),
]


def test_serial_moves_on_every_change_only() -> None:
    cache = build_cache(*INITIAL)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    last = serial(handler)
    for name, ops, changes in SERIAL_STEPS:
        ops = [ReplaceImports(dict(cache.imports)) if op == ReplaceImports(CURRENT) else op
               for op in ops]
        cache.apply(ops)
        now = serial(handler)
        if changes:
            assert now > last, name
        else:
            assert now == last, name
        last = now
