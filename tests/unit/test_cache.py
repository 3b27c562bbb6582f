"""Cache updates: answers follow the objects, names go away with them, the SOA serial moves."""

from __future__ import annotations

import logging
from typing import Any

import dns.rcode
import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import (
    Cache,
    Op,
    PutImport,
    PutSlice,
    RebuildError,
    ReplaceImports,
    ReplaceSlices,
    SetSynced,
)
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, SOA, ask, build_cache, query, rcode_name

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
    assert set(dict(cache.zone.every_answer())) == set(dict(fresh.zone.every_answer()))
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


# -- admission: one object that cannot be served never spoils the others ----------------------

P62, P63 = "p" * 62, "q" * 63  # port names: the second makes a 64-byte _<port> label
LONG_NS, LONG_SVC = "n" * 63, "s" * 63
LONG_SVC_NAME = f"{LONG_SVC}.{LONG_NS}.{Z}"  # 150 bytes on the wire: room for little below
OK_NEIGHBOUR = imp_op(service_import("ok", ips=["10.8.0.1"], ports=[port(80, "TCP", "http")]))
OK_CHECKS = [(f"ok.prod.{Z}", "A", ok(a(f"ok.prod.{Z}", "10.8.0.1"))),
             (f"_http._tcp.ok.prod.{Z}", "SRV", ok(f"_http._tcp.ok.prod.{Z} 5 in srv 0 100 80 "
                                                   f"ok.prod.{Z}"))]

# (id, ops, [(qname, qtype, expected)], [(kind, key, served)] reported as rejected)
ADMISSION: list[tuple[str, list[Op], list[tuple[str, str, tuple[str, list[str]]]],
                      list[tuple[str, tuple[str, str], bool]]]] = [
    ("port-name-63-loses-only-its-srv-name",
     [imp_op(service_import("long", ips=["10.8.0.2"],
                            ports=[port(80, "TCP", P63), port(81, "TCP", P62)])), OK_NEIGHBOUR],
     [(f"_{P62}._tcp.long.prod.{Z}", "SRV",
       ok(f"_{P62}._tcp.long.prod.{Z} 5 in srv 0 100 81 long.prod.{Z}")),
      (f"long.prod.{Z}", "SRV", ok(f"long.prod.{Z} 5 in srv 0 50 80 long.prod.{Z}",
                                   f"long.prod.{Z} 5 in srv 0 50 81 long.prod.{Z}")),
      (f"long.prod.{Z}", "A", ok(a(f"long.prod.{Z}", "10.8.0.2"))), *OK_CHECKS],
     [("ServiceImport", ("prod", "long"), True)]),
    ("slice-port-name-63-loses-only-its-srv-name",
     [imp_op(service_import("hl", type_="Headless")),
      slice_op(endpoint_slice("hl-a", "hl", cluster="east", ports=[port(80, "TCP", P63)],
                              endpoints=[endpoint("10.8.1.1", hostname="h0")])), OK_NEIGHBOUR],
     [(f"_tcp.hl.prod.{Z}", "SRV", nx()),
      (f"hl.prod.{Z}", "SRV", ok(f"hl.prod.{Z} 5 in srv 0 100 80 h0.east.hl.prod.{Z}")),
      (f"h0.east.hl.prod.{Z}", "A", ok(a(f"h0.east.hl.prod.{Z}", "10.8.1.1"))), *OK_CHECKS],
     [("EndpointSlice", ("prod", "hl-a"), True)]),
    ("endpoint-names-too-long-skip-the-slice",
     [imp_op(service_import(LONG_SVC, namespace=LONG_NS, type_="Headless")),
      slice_op(endpoint_slice("too-long", LONG_SVC, namespace=LONG_NS, cluster="c" * 50,
                              endpoints=[endpoint("10.8.2.1", hostname="h" * 63)])),
      slice_op(endpoint_slice("fits", LONG_SVC, namespace=LONG_NS, cluster="east",
                              endpoints=[endpoint("10.8.2.2", hostname="h" * 60)])),
      OK_NEIGHBOUR],
     [(LONG_SVC_NAME, "A", ok(a(LONG_SVC_NAME, "10.8.2.2"))),
      (f"{'h' * 60}.east.{LONG_SVC_NAME}", "A", ok(a(f"{'h' * 60}.east.{LONG_SVC_NAME}",
                                                       "10.8.2.2"))),
      (f"{'c' * 50}.{LONG_SVC_NAME}", "A", nx()), *OK_CHECKS],
     [("EndpointSlice", (LONG_NS, "too-long"), False)]),
    ("derived-endpoint-names-too-long-skip-the-slice",
     [imp_op(service_import(LONG_SVC, namespace=LONG_NS, type_="Headless")),
      slice_op(endpoint_slice("v6", LONG_SVC, namespace=LONG_NS, address_type="IPv6",
                              cluster=f"{'c' * 63}.{'d' * 40}",
                              endpoints=[endpoint("fd00:1:2:3:4:5:6:7")])),
      OK_NEIGHBOUR],
     [(LONG_SVC_NAME, "AAAA", nx()), *OK_CHECKS],
     [("EndpointSlice", (LONG_NS, "v6"), False)]),
    ("valid-objects-around-nothing-rejected",
     [imp_op(service_import("keep", ips=["10.8.3.1"])),
      PutSlice(("prod", "db-east"), convert.endpoint_slice(endpoint_slice(
          "db-east", "db", cluster="east", endpoints=[endpoint("10.2.0.9")]))),
      OK_NEIGHBOUR],
     [(f"keep.prod.{Z}", "A", ok(a(f"keep.prod.{Z}", "10.8.3.1"))),
      (f"10-2-0-9.east.{DB}", "A", ok(a(f"10-2-0-9.east.{DB}", "10.2.0.9"))), *OK_CHECKS],
     []),
]


@pytest.mark.parametrize(("ops", "checks", "rejected"), [(o, c, r) for _, o, c, r in ADMISSION],
                         ids=[i for i, _, _, _ in ADMISSION])
def test_admission(ops: list[Op], checks: list[tuple[str, str, tuple[str, list[str]]]],
                   rejected: list[tuple[str, tuple[str, str], bool]]) -> None:
    cache = build_cache(*INITIAL)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    applied = cache.apply(ops)
    assert [(r.kind, r.key, r.served) for r in applied.rejected] == rejected
    # no 64-byte label
    assert not any(P63.encode() in key for key, _ in cache.zone.every_answer())
    got = [(qname, qtype, answer(handler, qname, qtype)) for qname, qtype, _ in checks]
    assert got == [(qname, qtype, (rcode, sorted(x.lower() for x in lines)))
                   for qname, qtype, (rcode, lines) in checks]
    # Everything of INITIAL is still served as before.
    assert answer(handler, WEB, "A") == ok(a(WEB, "10.1.0.1"))
    assert answer(handler, f"db-0.west.eu.{DB}", "A") == ok(a(f"db-0.west.eu.{DB}", "10.3.0.1"))


def test_object_updated_into_one_that_does_not_fit_keeps_its_last_version() -> None:
    good = endpoint_slice("hl-a", LONG_SVC, namespace=LONG_NS, cluster="east",
                          endpoints=[endpoint("10.8.4.1", hostname="h0")])
    bad = endpoint_slice("hl-a", LONG_SVC, namespace=LONG_NS, cluster="c" * 63,
                         endpoints=[endpoint("10.8.4.2", hostname="h" * 63)])
    cache = build_cache([service_import(LONG_SVC, namespace=LONG_NS, type_="Headless")], [good])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    applied = cache.apply([slice_op(bad)])
    assert [(r.key, r.served) for r in applied.rejected] == [((LONG_NS, "hl-a"), False)]
    assert answer(handler, LONG_SVC_NAME, "A") == ok(a(LONG_SVC_NAME, "10.8.4.1"))
    # ... also when it comes in a full list
    cache.apply([ReplaceSlices({(LONG_NS, "hl-a"): convert.endpoint_slice(bad)})])
    assert answer(handler, LONG_SVC_NAME, "A") == ok(a(LONG_SVC_NAME, "10.8.4.1"))
    cache.apply([delete("slice", LONG_NS, "hl-a")])
    assert answer(handler, LONG_SVC_NAME, "A") == nx()


def test_long_zone_makes_service_names_too_long() -> None:
    """The same objects fit one zone and not another: the whole name is checked."""
    zone = ".".join(["z" * 63] * 2)  # 129 bytes: with 63 + 63 + svc, 259 bytes
    cache = Cache(ZoneNames(zone), 5)
    long_imp = convert.service_import(service_import(LONG_SVC, namespace=LONG_NS,
                                                     ips=["10.8.5.1"]))
    short_imp = convert.service_import(service_import("web", ips=["10.8.5.2"]))
    applied = cache.apply([PutImport((LONG_NS, LONG_SVC), long_imp),
                           PutImport(("prod", "web"), short_imp), SetSynced(True)])
    assert [(r.key, r.served) for r in applied.rejected] == [((LONG_NS, LONG_SVC), False)]
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    reply = ask(handler, query(f"web.prod.svc.{zone}.", "A"), tcp=True)
    assert reply.answer == [f"web.prod.svc.{zone}. 5 in a 10.8.5.2"]
    assert list(cache.imports) == [("prod", "web")]


# -- a bug while rebuilding never leaves the cache half-built ---------------------------------

def _zone_state(cache: Cache) -> tuple[dict[bytes, bytes], dict[bytes, int]]:
    soa_key = b"\x0aclusterset\x05local\x00\x00\x06\x00\x01"
    return ({k: v.body for k, v in dict(cache.zone.every_answer()).items() if k != soa_key},
            dict(cache.zone.names))


def test_bug_in_one_rebuild_raises_after_the_others_are_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = build_cache(*INITIAL)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    real = cache.builder.service

    def broken(imp: Any, slices: Any, *rest: Any) -> Any:
        if imp.name == "db":
            raise RuntimeError("a bug")
        return real(imp, slices, *rest)

    monkeypatch.setattr(cache.builder, "service", broken)
    ops = [imp_op(service_import(f"s{i}", ips=[f"10.9.1.{i}"])) for i in range(1, 20)]
    ops.insert(10, slice_op({**DB_EAST, "endpoints": [endpoint("10.2.0.77")]}))
    with pytest.raises(RebuildError) as caught:
        cache.apply(ops)
    assert isinstance(caught.value.__cause__, RuntimeError)
    for i in range(1, 20):  # every other service of the update was built
        assert answer(handler, f"s{i}.prod.{Z}", "A") == ok(a(f"s{i}.prod.{Z}", f"10.9.1.{i}"))
    # the failed service keeps its previous answers whole
    assert answer(handler, f"db-0.east.{DB}", "A") == ok(a(f"db-0.east.{DB}", "10.2.0.1"))
    # fixed: the next update (any, even an empty one) rebuilds it
    monkeypatch.setattr(cache.builder, "service", real)
    assert cache.apply([]).rebuilt == 1
    assert answer(handler, f"db-0.east.{DB}", "A") == nx()
    assert answer(handler, f"10-2-0-77.east.{DB}", "A") == ok(a(f"10-2-0-77.east.{DB}",
                                                                "10.2.0.77"))
    fresh = build_cache([WEB_RAW, DB_RAW, API_RAW] + [service_import(f"s{i}", ips=[f"10.9.1.{i}"])
                                                      for i in range(1, 20)],
                        [{**DB_EAST, "endpoints": [endpoint("10.2.0.77")]}, DB_WEST])
    assert _zone_state(cache) == _zone_state(fresh)


def test_bug_in_an_op_still_builds_what_was_stored() -> None:
    cache = build_cache(*INITIAL)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    new = imp_op(service_import("new", ips=["10.9.2.1"]))
    with pytest.raises(AttributeError):
        cache.apply([new, "not an op"])  # type: ignore[list-item]
    assert answer(handler, f"new.prod.{Z}", "A") == ok(a(f"new.prod.{Z}", "10.9.2.1"))


@pytest.mark.parametrize("log_rejected", [True, False])
def test_rejections_are_logged_by_the_parent_only(log_rejected: bool,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A worker applies the parent's very updates: it reports what they reject (for its
    metrics) but does not log it a second time."""
    bad = endpoint_slice("hl-a", LONG_SVC, namespace=LONG_NS, cluster="c" * 63,
                         endpoints=[endpoint("10.8.4.2", hostname="h" * 63)])
    cache = Cache(ZoneNames("clusterset.local"), 5, log_rejected=log_rejected)
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.zone.cache"):
        applied = cache.apply([slice_op(bad)])
    assert [(r.key, r.served) for r in applied.rejected] == [((LONG_NS, "hl-a"), False)]
    logged = [r.getMessage() for r in caplog.records if r.name == "clusterset_dns.zone.cache"]
    assert len(logged) == (1 if log_rejected else 0), logged
