"""Extended DNS Errors (RFC 8914) on empty answers: the fast path, the slow path and
the remembered answers and responses give the same bytes; sizes stay within the
client's limit; the reasons follow the data (docs/dns-behaviour.md §3.8)."""

from __future__ import annotations

from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest

from clusterset_dns.serving import handler as handler_module
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone import wire
from clusterset_dns.zone.cache import IMPORT, SLICE, PutImport, PutRejected, PutSlice, SetSynced
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, build_cache, query

Z = "svc.clusterset.local."
WEB, DB, GONE = f"web.prod.{Z}", f"db.prod.{Z}", f"gone.prod.{Z}"
TERM = f"term.prod.{Z}"

IMPORTS = [
    service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")]),
    service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
    service_import("gone", type_="Headless"),
    # only terminating endpoints (not ready, still serving): without --serve-terminating
    # they are not answered, and are counted as not ready
    service_import("term", type_="Headless"),
]
SLICES = [
    endpoint_slice("db-a", "db", cluster="east", ports=[port(5432, "TCP", "pg")],
                   endpoints=[endpoint("10.2.0.1", hostname="db-0"),
                              endpoint("10.2.0.2", hostname="db-1", ready=False)]),
    endpoint_slice("gone-a", "gone", cluster="west",
                   endpoints=[endpoint("10.3.0.1", ready=False)]),
    endpoint_slice("term-a", "term", cluster="east",
                   endpoints=[endpoint("10.4.0.1", hostname="t-0", ready=False, serving=True),
                              endpoint("10.4.0.2", ready=False, serving=True)]),
]
NO_V6 = (0, "no IPv6 address: this name has IPv4 addresses only")

# (name, type, rcode, (code, text) or None)
CASES: list[tuple[str, str, int, tuple[int, str] | None]] = [
    (WEB, "AAAA", dns.rcode.NOERROR, NO_V6),
    (f"db-0.east.{DB}", "AAAA", dns.rcode.NOERROR, NO_V6),
    (f"db-1.east.{DB}", "A", dns.rcode.NXDOMAIN,
     (0, "endpoint not ready (EndpointSlice prod/db-a)")),
    (GONE, "A", dns.rcode.NXDOMAIN, (0, "no ready endpoint: 1 not ready (west 1)")),
    (f"west.{GONE}", "SRV", dns.rcode.NXDOMAIN,
     (0, "no ready endpoint in cluster west: 1 not ready")),
    (TERM, "A", dns.rcode.NXDOMAIN, (0, "no ready endpoint: 2 not ready (east 2)")),
    (f"east.{TERM}", "SRV", dns.rcode.NXDOMAIN,
     (0, "no ready endpoint in cluster east: 2 not ready")),
    (f"t-0.east.{TERM}", "A", dns.rcode.NXDOMAIN,
     (0, "endpoint not ready (EndpointSlice prod/term-a)")),
    (f"10-4-0-2.east.{TERM}", "AAAA", dns.rcode.NXDOMAIN,
     (0, "endpoint not ready (EndpointSlice prod/term-a)")),
    (f"nope.prod.{Z}", "A", dns.rcode.NXDOMAIN, None),
    (f"x.{GONE}", "A", dns.rcode.NXDOMAIN, None),
    (WEB, "TXT", dns.rcode.NOERROR, None),
    # type 284 = 0x011C: its low byte is AAAA's (28), and it is not AAAA
    (WEB, "TYPE284", dns.rcode.NOERROR, None),
]
VARIANTS: list[dict[str, Any]] = [
    {"qid": 1}, {"qid": 2, "rd": False, "cd": True}, {"qid": 3, "edns": 0},
    {"qid": 4, "edns": 0, "do": True}, {"qid": 5, "edns": 0, "payload": 512, "cd": True},
]


def fresh(synced: bool = True) -> Handler:
    return Handler(build_cache(IMPORTS, SLICES, synced=synced).zone, DEFAULT_UDP_CAP)


def ede_of(response: bytes) -> tuple[int, str] | None:
    msg = dns.message.from_wire(response)
    found = [o for o in msg.options if o.otype == dns.edns.OptionType.EDE]
    assert len(found) <= 1
    return (int(found[0].code), found[0].text or "") if found else None


@pytest.mark.parametrize(("qname", "qtype", "rcode", "want"), CASES,
                         ids=[f"{n}-{t}" for n, t, _, _ in CASES])
def test_every_path_gives_the_same_explained_bytes(qname: str, qtype: str, rcode: int,
                                                   want: tuple[int, str] | None) -> None:
    handler = fresh()
    for kw in VARIANTS:
        data = query(qname, qtype, **kw)
        slow = handler._slow(data, False)
        first = handler.handle(data, False)  # works it out (fast path), remembers it
        again = handler.handle(data, False)  # the remembered response
        other_id = handler.handle(b"\x77\x77" + data[2:], False)
        assert slow == first == again, kw
        assert other_id == b"\x77\x77" + first[2:]  # type: ignore[index]
        assert first is not None
        msg = dns.message.from_wire(first)
        assert msg.rcode() == rcode
        assert ede_of(first) == (want if "edns" in kw else None), kw
        assert (msg.opt is not None) == ("edns" in kw)
        if "edns" in kw:  # our OPT's DO follows the query's, explained or not
            assert bool(msg.ednsflags & dns.flags.DO) == ("do" in kw), kw


def test_the_opt_records_of_a_text_are_made_once_and_their_number_is_bounded() -> None:
    handler = fresh()
    cap = handler_module._MAX_EXPLAINED_OPTS
    first = handler._opts(wire.ede(wire.EDE_OTHER, "reason 0"))
    assert handler._opts(wire.ede(wire.EDE_OTHER, "reason 0")) is first  # not made again
    for i in range(1, cap):
        handler._opts(wire.ede(wire.EDE_OTHER, f"reason {i}"))
    assert len(handler._explained_opts) == cap  # the last one that fits
    handler._opts(wire.ede(wire.EDE_OTHER, f"reason {cap}"))
    assert list(handler._explained_opts) == [wire.ede(wire.EDE_OTHER, f"reason {cap}")]


def test_tcp_answers_carry_it_too() -> None:
    handler = fresh()
    data = query(GONE, "A", edns=0)
    response = handler.handle(data, True)
    assert response is not None and response == handler._slow(data, True)
    assert ede_of(response) == (0, "no ready endpoint: 1 not ready (west 1)")


def test_not_synced_servfail_and_nodata_are_not_ready() -> None:
    handler = fresh(synced=False)
    servfail = handler.handle(query(f"nope.prod.{Z}", "A", edns=0), False)
    assert servfail is not None and dns.message.from_wire(servfail).rcode() == dns.rcode.SERVFAIL
    assert ede_of(servfail) == (14, "not synced: the first full list of ServiceImports and "
                                    "EndpointSlices has not completed yet")
    plain = handler.handle(query(f"nope.prod.{Z}", "A"), False)
    assert plain is not None and dns.message.from_wire(plain).opt is None
    nodata = handler.handle(query(WEB, "TXT", edns=0), False)
    assert nodata is not None and ede_of(nodata) is not None and ede_of(nodata)[0] == 14  # type: ignore[index]
    # The first sync empties the memories: the same question is no longer "not ready".
    handler.zone.synced = True
    handler.zone.changed()
    assert ede_of(handler.handle(query(WEB, "TXT", edns=0), False) or b"") is None


def _long_names() -> tuple[Handler, str]:
    """A 63-byte hostname under a 63-byte cluster id and service: a question of about
    220 bytes, whose explained NXDOMAIN needs more than 512 bytes."""
    svc, cluster, host = "s" * 63, "c" * 63, "h" * 63
    handler = Handler(build_cache(
        [service_import(svc, type_="Headless")],
        [endpoint_slice("p" * 200, svc, cluster=cluster,
                        endpoints=[endpoint("10.2.0.1", hostname=host, ready=False)])]).zone,
        DEFAULT_UDP_CAP)
    return handler, f"{host}.{cluster}.{svc}.prod.{Z}"


@pytest.mark.parametrize("payload", [512, 600, 700, 1232])
@pytest.mark.parametrize("tcp", [False, True])
def test_sizes_stay_within_the_limit_and_only_the_option_gives_way(payload: int,
                                                                   tcp: bool) -> None:
    handler, name = _long_names()
    data = query(name, "A", edns=0, payload=payload)
    for response in (handler.handle(data, tcp), handler.handle(data, tcp),
                     handler._slow(data, tcp)):
        assert response is not None
        msg = dns.message.from_wire(response)
        assert msg.rcode() == dns.rcode.NXDOMAIN and not msg.flags & dns.flags.TC
        assert len(msg.authority) == 1 and msg.opt is not None
        explained = ede_of(response)
        if not tcp:
            assert len(response) <= payload
        if explained is None:  # left out only when it would not have fitted
            assert not tcp and len(response) + 6 + wire.EDE_TEXT_MAX > payload
        else:
            assert len(explained[1].encode()) == wire.EDE_TEXT_MAX
        assert (explained is None) == (payload == 512 and not tcp)


def test_the_option_goes_along_when_it_fits_to_the_byte() -> None:
    """The slow path's explained NXDOMAIN (a query with an option other than the OPT's
    payload takes it) keeps the EDE in exactly as many bytes as it takes, loses it (and
    only it: no TC) in one byte less; each answer is counted, with the EDE or without."""
    handler, name = _long_names()
    cookie = [dns.edns.GenericOption(10, b"\x01" * 8)]

    def ask_udp(payload: int) -> bytes | None:
        return handler.handle(query(name, "A", edns=0, payload=payload, options=cookie,
                                    qid=7), False)

    whole = handler.handle(query(name, "A", edns=0, options=cookie, qid=7), True)
    assert whole is not None
    explained = ede_of(whole)
    assert explained is not None
    size = len(whole)
    assert 512 < size < DEFAULT_UDP_CAP  # the client's payload is the limit
    option = 4 + 2 + len(explained[1].encode())  # code, length, info-code, text
    for _ in range(2):
        assert ask_udp(size) == whole
        without = ask_udp(size - 1)
        assert without is not None and ede_of(without) is None
        msg = dns.message.from_wire(without)
        assert msg.rcode() == dns.rcode.NXDOMAIN and not msg.flags & dns.flags.TC
        assert len(without) == size - option and len(msg.authority) == 1
    counts = {counters.slot_of(i): n for i, n in enumerate(handler.stats.requests) if n}
    assert counts == {("A", "tcp", wire.EDE_OTHER, wire.NXDOMAIN): 1,
                      ("A", "udp", wire.EDE_OTHER, wire.NXDOMAIN): 2,
                      ("A", "udp", None, wire.NXDOMAIN): 2}


def test_text_is_cut_on_a_character_boundary() -> None:
    option = wire.ede(0, "é" * 150)  # 300 bytes of UTF-8
    text = option[8:]
    assert len(text) <= wire.EDE_TEXT_MAX and text.endswith(b"...")
    text.decode("utf-8")  # whole characters only
    assert int.from_bytes(option[:2]) == len(option) - 2  # RDLENGTH
    assert int.from_bytes(option[4:6]) == len(option) - 6  # OPTION-LENGTH


def test_reasons_follow_rejections_and_deletions() -> None:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    bad = f"bad.prod.{Z}"
    assert ede_of(handler.handle(query(bad, "A", edns=0), False) or b"") is None
    cache.apply([PutRejected(IMPORT, ("prod", "bad"), ("prod", "bad"), "type 'X' is wrong")])
    assert ede_of(handler.handle(query(bad, "A", edns=0), False) or b"") == (
        24, "ServiceImport prod/bad rejected: type 'X' is wrong")
    assert cache.states[("prod", "bad")] == "rejected"
    # A slice of "gone" refused: its empty answers name it.
    cache.apply([PutRejected(SLICE, ("prod", "gone-b"), ("prod", "gone"), "no addressType")])
    assert ede_of(handler.handle(query(GONE, "A", edns=0), False) or b"") == (
        24, "no ready endpoint; EndpointSlice prod/gone-b rejected: no addressType")
    # Fixed: a valid import under that key serves, and the text goes.
    cache.apply([PutImport(("prod", "bad"), convert.service_import(
        service_import("bad", ips=["10.9.9.9"])))])
    reply = handler.handle(query(bad, "A", edns=0), False)
    assert reply is not None and dns.message.from_wire(reply).answer
    assert cache.states[("prod", "bad")] == "served"
    assert ("ServiceImport", ("prod", "bad")) not in cache.rejections
    # The refused slice deleted (PutRejected None), and the import deleted: no text left.
    cache.apply([PutRejected(SLICE, ("prod", "gone-b"), None, None),
                 PutImport(("prod", "gone"), None), PutSlice(("prod", "gone-a"), None)])
    assert ede_of(handler.handle(query(GONE, "A", edns=0), False) or b"") is None
    assert not any(name.startswith(b"\x04gone") for name in cache.zone.explained)
    assert cache.rejections == {}


def test_slices_absent_and_not_arrived() -> None:
    absent = service_import("a", type_="Headless")
    absent["status"] = {"endpointSliceObjects": "Absent"}
    cache = build_cache([absent, service_import("b", type_="Headless")])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert ede_of(handler.handle(query(f"a.prod.{Z}", "A", edns=0), False) or b"") == (
        0, "no EndpointSlices: ServiceImport status.endpointSliceObjects is Absent")
    assert ede_of(handler.handle(query(f"b.prod.{Z}", "A", edns=0), False) or b"") == (
        0, "no EndpointSlice for ServiceImport prod/b has arrived")


def test_a_change_of_the_text_alone_moves_the_serial() -> None:
    """Remembered answers and responses are emptied by a new serial (§8.2): a slice
    whose not-ready endpoints change must bring one, or the old text would stay."""
    cache = build_cache(IMPORTS, SLICES)
    serial = cache.zone.serial
    cache.apply([PutSlice(("prod", "gone-a"), convert.endpoint_slice(endpoint_slice(
        "gone-a", "gone", cluster="west",
        endpoints=[endpoint("10.3.0.1", ready=False), endpoint("10.3.0.2", ready=False)])))])
    assert cache.zone.serial != serial
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert ede_of(handler.handle(query(GONE, "A", edns=0), False) or b"") == (
        0, "no ready endpoint: 2 not ready (west 2)")
    # Conditions and resourceVersions only: nothing DNS shows, no new serial.
    serial = cache.zone.serial
    changed = service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")])
    changed["metadata"]["resourceVersion"] = "77"
    changed["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    cache.apply([PutImport(("prod", "web"), convert.service_import(changed)), SetSynced(True)])
    assert cache.zone.serial == serial
    assert cache.imports[("prod", "web")].resource_version == "77"


def _families(cache: Any, handler: Handler) -> dict[str, dict[tuple[str, ...], float]]:
    from clusterset_dns.process.collector import ServerCollector

    out: dict[str, dict[tuple[str, ...], float]] = {}
    for family in ServerCollector(cache, handler.stats).collect():
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sample.labels.values())] = sample.value
    return out


def test_requests_and_ede_are_counted_on_every_path() -> None:
    """Fast path, remembered response, slow path (an option), TCP, an error: each answer
    counted once under its type, transport and rcode; EDE answers under their code."""
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    sent = [(query(GONE, "A", edns=0), False)] * 3  # worked out, then remembered twice
    sent += [(query(GONE, "A"), False)]  # no OPT: NXDOMAIN without EDE
    sent += [(query(WEB, "AAAA", edns=0, options=[dns.edns.ECSOption("10.0.0.0", 8)]), False)]
    sent += [(query(WEB, "A", edns=0), True), (query(WEB, "SRV"), False)]
    sent += [(query(WEB, "MX"), True), (query("x.example.", "A"), False)]  # NODATA, REFUSED
    for data, tcp in sent:
        assert handler.handle(data, tcp) is not None
    families = _families(cache, handler)
    assert families["clusterset_dns_requests_total"] == {
        ("A", "udp", "NXDOMAIN"): 4, ("AAAA", "udp", "NOERROR"): 1,
        ("A", "tcp", "NOERROR"): 1, ("SRV", "udp", "NOERROR"): 1,
        ("other", "tcp", "NOERROR"): 1, ("A", "udp", "REFUSED"): 1}
    assert families["clusterset_dns_answers_ede_total"] == {("0",): 4, ("14",): 0, ("24",): 0}
    assert families["clusterset_dns_responses_total"][("NXDOMAIN",)] == 4
    assert families["clusterset_dns_imports"] == {("served",): 2, ("no_endpoint",): 2,
                                                  ("rejected",): 0}


def _down(name: str, cluster: str | None, count: int = 1) -> dict[str, Any]:
    return endpoint_slice(f"e-{cluster}", "e", cluster=cluster, ports=[port(80, "TCP", "web")],
                          endpoints=[endpoint(f"10.8.{i}.1", ready=False) for i in range(count)])


E = f"e.prod.{Z}"
TWO = [endpoint_slice(f"e-a-{i}", "e", cluster="a", ports=[port(80, "TCP", "web")],
                      endpoints=[endpoint(f"10.9.0.{i}", hostname="h", ready=False)])
       for i in (1, 2)]
READY = endpoint_slice("e-1", "e", cluster="a", ports=[port(80, "TCP", "web")],
                       endpoints=[endpoint("10.7.0.1")])
NAMELESS = endpoint_slice("e-1", "e", cluster=None, ports=[port(80, "TCP", "web")],
                          endpoints=[endpoint("10.7.0.1", ready=False)])
DOWN_B = endpoint_slice("e-2", "e", cluster="b", ports=[port(80, "TCP", "web")],
                        endpoints=[endpoint("10.8.0.1", hostname="h", ready=False)])
# (what, the slices of Headless import e (port web/TCP 80), name, type, the EDE text)
TEXTS: list[tuple[str, list[dict[str, Any]], str, str, str]] = [
    ("three clusters are all named", [_down("c", "c"), _down("a", "a", 2), _down("b", "b")],
     E, "A", "no ready endpoint: 4 not ready (a 2, b 1, c 1)"),
    ("a fourth is counted, not named",
     [_down("a", "a"), _down("b", "b"), _down("c", "c"), _down("d", "d", 3)],
     E, "A", "no ready endpoint: 6 not ready (a 1, b 1, c 1, +1 more)"),
    ("a slice without a cluster id", [_down("x", None, 2)], E, "A",
     "no ready endpoint: 2 not ready ((no cluster id) 2)"),
    ("slices that list no endpoint", [_down("a", "a", 0), _down("b", "b", 0)], E, "A",
     "no ready endpoint: its EndpointSlices list no endpoint"),
    # the port names of the service carry the service's reason
    ("the port name", [_down("a", "a"), _down("b", "b")], f"_web._tcp.{E}", "SRV",
     "no ready endpoint: 2 not ready (a 1, b 1)"),
    ("the port name, no endpoint listed", [_down("a", "a", 0)], f"_web._tcp.{E}", "SRV",
     "no ready endpoint: its EndpointSlices list no endpoint"),
    # two slices of one cluster, each with a not-ready endpoint named h: counted
    # together; the endpoint's name keeps the first slice's reason
    ("two slices of a cluster: the service", TWO, E, "A",
     "no ready endpoint: 2 not ready (a 2)"),
    ("two slices of a cluster: the cluster", TWO, f"a.{E}", "SRV",
     "no ready endpoint in cluster a: 2 not ready"),
    ("two slices of a cluster: the endpoint", TWO, f"h.a.{E}", "A",
     "endpoint not ready (EndpointSlice prod/e-a-1)"),
    # a slice with nothing down, or without a cluster id (no names), listed before the
    # one whose endpoint is down: the later slice's names are still explained
    ("after a slice with every endpoint ready", [READY, DOWN_B], f"h.b.{E}", "A",
     "endpoint not ready (EndpointSlice prod/e-2)"),
    ("after a slice without a cluster id", [NAMELESS, DOWN_B], f"h.b.{E}", "A",
     "endpoint not ready (EndpointSlice prod/e-2)"),
]


@pytest.mark.parametrize(("what", "slices", "qname", "qtype", "text"), TEXTS,
                         ids=[t[0] for t in TEXTS])
def test_the_texts_of_an_import_without_a_ready_endpoint(
        what: str, slices: list[dict[str, Any]], qname: str, qtype: str, text: str) -> None:
    imp = service_import("e", type_="Headless", ports=[port(80, "TCP", "web")])
    handler = Handler(build_cache([imp], slices).zone, DEFAULT_UDP_CAP)
    response = handler.handle(query(qname, qtype, edns=0), False)
    assert response is not None
    assert dns.message.from_wire(response).rcode() == dns.rcode.NXDOMAIN
    assert ede_of(response) == (0, text)


def test_a_nodata_before_the_first_sync_is_counted_under_not_ready() -> None:
    """_why's slot for the reason's code: 14 (Not Ready) is not the default slot (that
    of 0, Other)."""
    cache = build_cache(IMPORTS, SLICES, synced=False)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert handler.handle(query(WEB, "TXT", edns=0), False) is not None  # the fast path
    assert handler._slow(query(WEB, "MX", edns=0), False) is not None  # and the slow one
    families = _families(cache, handler)
    assert families["clusterset_dns_answers_ede_total"] == {("0",): 0, ("14",): 2, ("24",): 0}


def test_a_remembered_negative_is_used_not_worked_out_again() -> None:
    """Over TCP (no remembered response), the second miss finds the negative answer the
    first one remembered: the same object, not one made again."""
    handler = fresh()
    for data, key in [(query(GONE, "A"), query(GONE, "A")[12:]),
                      (query(GONE, "SRV", edns=0), query(GONE, "SRV")[12:])]:
        assert handler.handle(data, True) is not None
        first = handler.negatives[key]
        assert handler.handle(data, True) is not None
        assert handler.negatives[key] is first
