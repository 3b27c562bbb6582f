"""explain's two accounts, whole: for one import of each kind, the JSON and the text
each account gives, compared entire, so a word, a field or a reason changed is seen;
and what the DNS account says at each boundary (a name the zone holds, one it does
not, a slice without cluster id, each family, a terminating endpoint). Written for the
survivors of ``scripts/mutate clusterset_dns/process/explain.py``."""

from __future__ import annotations

import json
import struct
from collections.abc import Generator
from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import explain
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, ReplaceImports, ReplaceSlices, SetSynced
from clusterset_dns.zone.ops import PutRejected, PutSlice
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, port, service_import

from .helpers import build_cache

NS = "prod"
LONG_PORT = "y" * 63  # "_" + 63 characters: no SRV label; the rest of the import is served
REJECTED_PORT = (f"port '{LONG_PORT}': no _<port>._<proto> SRV name: label longer than 63 "
                 f"bytes: b'_yyyyyyyyyyyyyyyyyyy'...")
CHANGED_SERIAL = 77
SERVING = "not ready (serving: answered with --serve-terminating when no endpoint is ready)"
NO_ID = "no cluster id: in the service's answers, no endpoint name (§5.4)"
VIP_ONLY = "not used: a ClusterSetIP import answers with its IPs (§5.6)"
DNS_ONLY = ("(what DNS reveals only: the objects behind it, not-ready endpoints and "
            "conditions are in the full account, clusterset-dns explain --manifests)")


def q(service: str, *labels: str) -> str:
    return ".".join((*labels, service, NS, "svc", "clusterset.local")) + "."


def rich_cache() -> Cache:
    """A ClusterSetIP import with conditions and its pods; a Headless one with every kind
    of endpoint (ready, down, terminating, IPv6, no cluster id), a port without an SRV
    name and a slice its source could not convert."""
    vip = service_import("vip", NS, "ClusterSetIP", ips=["10.80.9.9"],
                         ports=[HTTP, port(53, "UDP")])
    vip["metadata"]["resourceVersion"] = "42"
    vip["status"] = {"endpointSliceObjects": "Present", "conditions": [
        {"type": "Ready", "status": "True", "reason": "Synced", "message": "msg"},
        {"type": "Valid", "status": "False", "message": "only a message"},
        {"type": "Plain", "status": "Unknown"}]}
    cache = build_cache(
        [vip, service_import("hl", NS, "Headless", ports=[HTTP, port(81, "TCP", LONG_PORT)])],
        [endpoint_slice("vip-1", "vip", NS, "east", resource_version="7", ports=[HTTP],
                        endpoints=[endpoint("10.80.1.1", hostname="vp", zone="za", node="n1",
                                            for_zones=["zb", "za"])]),
         endpoint_slice("hl-1", "hl", NS, "east", ports=[HTTP], endpoints=[
             endpoint("10.80.2.1", hostname="up"),
             endpoint("10.80.2.2", hostname="dn", ready=False),
             endpoint("10.80.2.3", ready=False, serving=True)]),
         endpoint_slice("hl-6", "hl", NS, "west", address_type="IPv6", ports=[HTTP],
                        endpoints=[endpoint("fd00::1", hostname="six")]),
         endpoint_slice("hl-n", "hl", NS, None, ports=[HTTP],
                        endpoints=[endpoint("10.80.3.1"), endpoint("10.80.3.2")])],
        clock=lambda: 1_700_000_000.0)
    cache.apply([PutRejected("EndpointSlice", (NS, "hl-bad"), (NS, "hl"), "no addressType")])
    # When each service last changed (the serial then, and wall time): set here so that
    # the text is fixed.
    for key in cache.changed_at:
        cache.changed_at[key] = (CHANGED_SERIAL, 86_400.0 + 3_661.0)
    return cache


def hl_rows(qtype: str, full: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"cluster": None, "addressType": "IPv4", "endpoints": [
            {"addresses": [ip], "hostname": None,
             "served": qtype == "A", "reason": NO_ID if qtype == "A" else
             "other family (IPv4; asked AAAA)"} for ip in ("10.80.3.1", "10.80.3.2")]},
        {"cluster": "east", "addressType": "IPv4", "endpoints": [
            {"addresses": ["10.80.2.1"], "hostname": "up", "served": qtype == "A",
             "reason": "" if qtype == "A" else "other family (IPv4; asked AAAA)"}]},
        {"cluster": "west", "addressType": "IPv6", "endpoints": [
            {"addresses": ["fd00::1"], "hostname": "six", "served": qtype == "AAAA",
             "reason": "" if qtype == "AAAA" else "other family (IPv6; asked A)"}]}]
    if full:
        rows[1]["endpoints"] += [
            {"addresses": ["10.80.2.3"], "hostname": None, "served": False, "reason": SERVING},
            {"addresses": ["10.80.2.2"], "hostname": "dn", "served": False,
             "reason": "not ready"}]
        for row, name in zip(rows, ("hl-n", "hl-1", "hl-6"), strict=True):
            row.update({"namespace": NS, "name": name, "resourceVersion": "",
                        "ports": ["http/tcp/80"]})
            for e in row["endpoints"]:
                e.update({"zone": None, "nodeName": None, "hints": None})
    return rows


@pytest.mark.parametrize("full", [True, False])
def test_a_clustersetip_import_whole(full: bool) -> None:
    cache = rich_cache()
    result = explain.explain(cache, "VIP.prod.svc.clusterset.local", "a", full=full)
    serial = cache.zone.serial
    imp: dict[str, Any] = {"namespace": NS, "name": "vip", "type": "ClusterSetIP",
                           "ips": ["10.80.9.9"], "ports": ["http/tcp/80", "-/udp/53"],
                           "trafficDistribution": None}
    service: dict[str, Any] = {"namespace": NS, "name": "vip", "import": imp, "slices": [],
                               "endpointsNotListed": 0}
    if full:
        imp.update({"resourceVersion": "42", "unknownTrafficDistribution": None,
                    "endpointSliceObjects": "Present", "conditions": [
                        {"type": "Ready", "status": "True", "reason": "Synced",
                         "message": "msg"},
                        {"type": "Valid", "status": "False", "reason": "",
                         "message": "only a message"},
                        {"type": "Plain", "status": "Unknown", "reason": "", "message": ""}]})
        service["slices"] = [{
            "namespace": NS, "name": "vip-1", "resourceVersion": "7", "cluster": "east",
            "addressType": "IPv4", "ports": ["http/tcp/80"], "endpoints": [{
                "addresses": ["10.80.1.1"], "hostname": "vp", "served": False,
                "reason": VIP_ONLY, "zone": "za", "nodeName": "n1",
                "hints": {"forZones": ["za", "zb"], "forNodes": []}}]}]
        service["rejected"] = []
        service["lastChange"] = {"serial": CHANGED_SERIAL, "time": "1970-01-02T01:01:01Z"}
    largest = ({"records": 3, "rrset": "hl.prod.svc.clusterset.local. A"} if full
               else {"records": 3})
    assert result == {
        "account": "full" if full else "dns",
        "question": {"name": "vip.prod.svc.clusterset.local.", "type": "A"},
        "answer": {"rcode": "NOERROR",
                   "answer": ["vip.prod.svc.clusterset.local. 5 IN A 10.80.9.9"],
                   "authority": [], "additional": [], "ede": None, "recordsNotListed": 0},
        "zone": {"serial": serial, "synced": True, "largestRRset": largest},
        "service": service}
    head = ["vip.prod.svc.clusterset.local. A: NOERROR",
            "  vip.prod.svc.clusterset.local. 5 IN A 10.80.9.9"]
    if full:
        assert explain.text(result).splitlines() == [*head,
            f"zone: serial {serial}, synced; largest RRset hl.prod.svc.clusterset.local. A, "
            "3 records",
            "ServiceImport prod/vip (resourceVersion 42): ClusterSetIP, IPs 10.80.9.9, "
            "ports http/tcp/80, -/udp/53",
            "  endpointSliceObjects: Present",
            "  condition Ready=True (Synced; msg)",
            "  condition Valid=False (only a message)",
            "  condition Plain=Unknown",
            f"  last changed: serial {CHANGED_SERIAL} at 1970-01-02T01:01:01Z",
            "EndpointSlice prod/vip-1 (resourceVersion 7, cluster east, IPv4): 1 endpoints",
            f"  10.80.1.1 vp: left out: {VIP_ONLY}"]
    else:
        assert explain.text(result).splitlines() == [*head,
            f"zone: serial {serial}, synced; largest RRset 3 records",
            "ServiceImport prod/vip: ClusterSetIP, IPs 10.80.9.9, ports http/tcp/80, -/udp/53",
            "no endpoint served by name", DNS_ONLY]


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("qtype", ["A", "AAAA"])
def test_a_headless_import_whole(qtype: str, full: bool) -> None:
    cache = rich_cache()
    result = explain.explain(cache, q("hl"), qtype, full=full)
    records = (["hl.prod.svc.clusterset.local. 5 IN A 10.80.2.1",
                "hl.prod.svc.clusterset.local. 5 IN A 10.80.3.1",
                "hl.prod.svc.clusterset.local. 5 IN A 10.80.3.2"] if qtype == "A"
               else ["hl.prod.svc.clusterset.local. 5 IN AAAA fd00::1"])
    imp: dict[str, Any] = {"namespace": NS, "name": "hl", "type": "Headless", "ips": [],
                           "ports": ["http/tcp/80", "-/tcp/81"], "trafficDistribution": None}
    service: dict[str, Any] = {"namespace": NS, "name": "hl", "import": imp,
                               "slices": hl_rows(qtype, full), "endpointsNotListed": 0}
    if full:
        imp.update({"resourceVersion": "", "unknownTrafficDistribution": None,
                    "endpointSliceObjects": "", "conditions": []})
        service["rejected"] = [
            {"kind": "EndpointSlice", "namespace": NS, "name": "hl-bad",
             "reason": "no addressType", "served": False},
            {"kind": "ServiceImport", "namespace": NS, "name": "hl",
             "reason": REJECTED_PORT, "served": True}]
        service["lastChange"] = {"serial": CHANGED_SERIAL, "time": "1970-01-02T01:01:01Z"}
    assert result["service"] == service
    assert result["answer"] == {"rcode": "NOERROR", "answer": records, "authority": [],
                                "additional": [], "ede": None, "recordsNotListed": 0}
    lines = explain.text(result).splitlines()
    assert lines[:len(records) + 1] == [f"hl.prod.svc.clusterset.local. {qtype}: NOERROR",
                                        *(f"  {r}" for r in records)]
    a = qtype == "A"
    if full:
        assert lines[len(records) + 2:] == [
            "ServiceImport prod/hl (resourceVersion ?): Headless, IPs none, "
            "ports http/tcp/80, -/tcp/81",
            "  endpointSliceObjects: (not set)",
            f"  last changed: serial {CHANGED_SERIAL} at 1970-01-02T01:01:01Z",
            "EndpointSlice prod/hl-n (resourceVersion ?, cluster (none), IPv4): 2 endpoints",
            *(f"  10.80.3.{i}: served: {NO_ID}" if a
              else f"  10.80.3.{i}: left out: other family (IPv4; asked AAAA)" for i in (1, 2)),
            "EndpointSlice prod/hl-1 (resourceVersion ?, cluster east, IPv4): 3 endpoints",
            "  10.80.2.1 up: served" if a
            else "  10.80.2.1 up: left out: other family (IPv4; asked AAAA)",
            f"  10.80.2.3: left out: {SERVING}",
            "  10.80.2.2 dn: left out: not ready",
            "EndpointSlice prod/hl-6 (resourceVersion ?, cluster west, IPv6): 1 endpoints",
            "  fd00::1 six: left out: other family (IPv6; asked A)" if a
            else "  fd00::1 six: served",
            "rejected: EndpointSlice prod/hl-bad: no addressType",
            f"rejected: ServiceImport prod/hl: {REJECTED_PORT} (the rest of it is served)"]
    else:
        assert lines[len(records) + 2:] == [
            "ServiceImport prod/hl: Headless, IPs none, ports http/tcp/80, -/tcp/81",
            "cluster (none), IPv4: 2 endpoints served",
            *(f"  10.80.3.{i}: served: {NO_ID}" if a
              else f"  10.80.3.{i}: left out: other family (IPv4; asked AAAA)" for i in (1, 2)),
            "cluster east, IPv4: 1 endpoints served",
            "  10.80.2.1 up: served" if a
            else "  10.80.2.1 up: left out: other family (IPv4; asked AAAA)",
            "cluster west, IPv6: 1 endpoints served",
            "  fd00::1 six: left out: other family (IPv6; asked A)" if a
            else "  fd00::1 six: served",
            DNS_ONLY]


@pytest.mark.parametrize("full", [True, False])
def test_a_name_outside_every_service(full: bool) -> None:
    cache = rich_cache()
    result = explain.explain(cache, "x.clusterset.local.", "TXT", full=full)
    assert result["service"] is None
    assert result["answer"]["rcode"] == "NXDOMAIN"
    assert explain.text(result).splitlines() == [
        "x.clusterset.local. TXT: NXDOMAIN, no records",
        f"zone: serial {cache.zone.serial}, synced; largest RRset "
        + ("hl.prod.svc.clusterset.local. A, 3 records" if full else "3 records"),
        "no service: the name is not below <svc>.<ns>.svc.<zone>"]
    assert json.dumps(result)  # JSON-ready as it is


# -- the question: what is refused, what is quoted back ----------------------------------------

@pytest.mark.parametrize(("text", "quoted"), [
    ("x" * explain.ECHO_MAX, repr("x" * explain.ECHO_MAX)),  # the longest quoted whole
    ("x" * (explain.ECHO_MAX + 1),
     f"{'x' * explain.ECHO_MAX!r}... ({explain.ECHO_MAX + 1} characters)"),
])
def test_echo_quotes_at_most_echo_max_characters(text: str, quoted: str) -> None:
    assert explain._echo(text) == quoted


@pytest.mark.parametrize(("name", "labels"), [
    (" Web.Prod.svc.clusterset.local. ", (b"web", b"prod", b"svc", b"clusterset", b"local")),
    ("a", (b"a",)),
    ("a.", (b"a",)),
])
def test_a_name_is_read_as_dns_reads_it(name: str, labels: tuple[bytes, ...]) -> None:
    assert explain._labels(name) == labels


@pytest.mark.parametrize(("name", "error"), [
    ("", "no name given: ask for a name, e.g. name=web.prod.svc.clusterset.local"),
    (" . ", "no name given: ask for a name, e.g. name=web.prod.svc.clusterset.local"),
    ("é.local", "'é.local' is not a DNS name: 'ascii' codec can't encode character "
                "'\\xe9' in position 0: ordinal not in range(128)"),
    ("a..b", "'a..b' is not a DNS name: empty label"),
])
def test_a_name_dns_cannot_ask_is_refused_saying_why(name: str, error: str) -> None:
    with pytest.raises(explain.ExplainError) as caught:
        explain.explain(build_cache(), name)
    assert str(caught.value) == error


def test_an_unknown_type_is_refused_naming_the_types() -> None:
    with pytest.raises(explain.ExplainError) as caught:
        explain.explain(build_cache(), "a.clusterset.local", "MX")
    assert str(caught.value) == "type 'MX': choose from A, AAAA, SRV, TXT, SOA, NS, ANY"


def test_the_query_is_one_a_client_sends() -> None:
    """Recursion desired, one question of class IN, an OPT record (EDNS 0, 1232 bytes,
    no DO): the answer shown is the one such a client gets, EDE included."""
    wire_query = explain._query((b"a", b"b"), explain.TYPES["SRV"])
    assert wire_query == (b"\x45\x58\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01"
                          b"\x01a\x01b\x00\x00\x21\x00\x01"
                          b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00")


# -- the answer as a client reads it: rcode, EDE, the records listed and the steps ------------

def response(rcode: int = 0, answers: int = 0, authority: int = 0, additional: int = 0,
             opts: tuple[bytes, ...] = (), extended: int = 0) -> bytes:
    """A response to ``a.`` A with as many A records in each section (each at 10.0.0.1),
    then an OPT record with ``opts`` as its options, one such record per ``extended``
    value given (the upper bits of the rcode)."""
    head = struct.pack("!HHHHHH", 1, 0x8400 | rcode, 1, answers, authority,
                       additional + (1 if opts or extended else 0))
    question = b"\x01a\x00\x00\x01\x00\x01"
    record = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01"
    body = record * (answers + authority + additional)
    if opts or extended:
        rdata = b"".join(opts)
        body += b"\x00" + struct.pack("!HHIH", 41, 1232, extended << 24, len(rdata)) + rdata
    return head + question + body


def option(code: int, value: bytes) -> bytes:
    return struct.pack("!HH", code, len(value)) + value


def answered(message: bytes) -> tuple[dict[str, Any], int]:
    """_answer's result, and how many steps it took."""
    work, steps = explain._answer(message), 0
    while True:
        try:
            next(work)
        except StopIteration as done:
            return done.value, steps
        steps += 1


@pytest.mark.parametrize(("rcode", "extended", "text"), [
    (0, 0, "NOERROR"), (3, 0, "NXDOMAIN"), (5, 0, "REFUSED"), (2, 0, "SERVFAIL"),
    (1, 0, "FORMERR"), (4, 0, "NOTIMP"),
    (0, 1, "BADVERS"),  # 16: the OPT's upper bits count
    (6, 0, "6"),  # not in the table: its number
    (7, 1, "23"),
])
def test_the_rcode_is_read_with_the_opt_bits(rcode: int, extended: int, text: str) -> None:
    result, _ = answered(response(rcode, opts=(b"",) if not extended else (),
                                  extended=extended))
    assert result["rcode"] == text


def test_without_an_opt_record_the_rcode_is_the_header_s() -> None:
    result, _ = answered(response(3))
    assert (result["rcode"], result["ede"]) == ("NXDOMAIN", None)


EDE_CASES = [
    ((option(15, b"\x00\x00no ready endpoint"),),
     {"code": 0, "name": "Other Error", "text": "no ready endpoint"}),
    ((option(15, b"\x00\x0enot ready"),), {"code": 14, "name": "Not Ready", "text": "not ready"}),
    ((option(15, b"\x00\x18bad"),), {"code": 24, "name": "Invalid Data", "text": "bad"}),
    ((option(15, b"\x01\x02"),), {"code": 258, "name": "", "text": ""}),  # no text: still one
    ((option(15, b"\x00\x00\xff!"),), {"code": 0, "name": "Other Error", "text": "\ufffd!"}),
    ((option(10, b"\x01" * 8), option(15, b"\x00\x00after a cookie")),
     {"code": 0, "name": "Other Error", "text": "after a cookie"}),
    ((option(10, b""), option(15, b"\x00\x0e")), {"code": 14, "name": "Not Ready", "text": ""}),
    ((option(15, b"\x00\x00why"), option(10, b"\x01" * 8)),  # the next one not read into
     {"code": 0, "name": "Other Error", "text": "why"}),
    ((option(10, b"\x01" * 8), option(11, b""), option(15, b"\x00\x0eat 16")),
     {"code": 14, "name": "Not Ready", "text": "at 16"}),  # offsets add up: 0, 12, 16
    ((option(65001, b"x" * 40_000), option(15, b"\x00\x00past a long one")),  # >= 0x8000
     {"code": 0, "name": "Other Error", "text": "past a long one"}),
    ((option(15, b"\x00"),), None),  # too short to hold a code
    ((option(14, b"\x00\x00xyz"),), None),  # another option
    ((b"",), None),  # no option at all
]


@pytest.mark.parametrize(("options", "ede"), EDE_CASES)
def test_the_ede_is_the_first_ede_option_whole(options: tuple[bytes, ...],
                                               ede: dict[str, Any] | None) -> None:
    result, _ = answered(response(3, opts=options))
    assert result["ede"] == ede


@pytest.mark.parametrize("ede", ["Other Error", ""])
def test_the_text_names_the_ede(ede: str) -> None:
    result = explain.explain(build_cache(), "a.clusterset.local")
    result["answer"]["ede"] = {"code": 0 if ede else 7, "name": ede, "text": "why"}
    line = explain.text(result).splitlines()[1]
    assert line == ("  EDE 0 (Other Error): why" if ede else "  EDE 7 (unknown): why")


@pytest.mark.parametrize(("sections", "listed", "skipped"), [
    ((explain.MAX_RECORDS, 0, 0), (explain.MAX_RECORDS, 0, 0), 0),  # all that may be
    ((explain.MAX_RECORDS + 1, 0, 0), (explain.MAX_RECORDS, 0, 0), 1),
    ((explain.MAX_RECORDS - 2, 1, 1), (explain.MAX_RECORDS - 2, 1, 1), 0),  # every section
    ((explain.MAX_RECORDS - 1, 1, 1), (explain.MAX_RECORDS - 1, 1, 0), 1),  # counts
])
def test_records_listed_stop_at_max_records(sections: tuple[int, int, int],
                                            listed: tuple[int, int, int],
                                            skipped: int) -> None:
    result, _ = answered(response(0, *sections, opts=(b"",)))
    assert (len(result["answer"]), len(result["authority"]),
            len(result["additional"])) == listed
    assert result["recordsNotListed"] == skipped
    assert result["answer"][:1] == ["a. 5 IN A 10.0.0.1"]


@pytest.mark.parametrize(("listed", "opts", "steps"), [
    # a record printed costs RECORD_COST + 1, an OPT record walked past 1: a step ends
    # when the work reaches WORK_STEP (512 = 30 * 17 + 2), not before, not after
    (30, 1, 0), (30, 2, 1), (31, 0, 1),
    (61, 1, 1),  # a step at the 31st record; then 30 * 17 + 1 = 511, short of the next
    (61, 2, 2),
])
def test_the_answer_gives_the_loop_back_at_work_step(listed: int, opts: int,
                                                     steps: int) -> None:
    message = response(0, listed)
    opt = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)
    count = struct.unpack_from("!H", message, 10)[0] + opts
    message = message[:10] + struct.pack("!H", count) + message[12:] + opt * opts
    assert answered(message)[1] == steps


def steps_of(work: Generator[None, None, Any]) -> tuple[int, Any]:
    """How many steps a generator of explain took, and its result."""
    count = 0
    while True:
        try:
            next(work)
        except StopIteration as done:
            return count, done.value
        count += 1


@pytest.mark.parametrize("items", [503, 504, 505, 1015, 1016, 1017])
def test_render_gives_the_loop_back_every_work_step_pieces(items: int) -> None:
    result = {"list": list(range(items))}
    pieces = len(list(json.JSONEncoder(indent=1).iterencode(result)))
    steps, rendered = steps_of(explain.render(result))
    assert (steps, rendered) == (pieces // explain.WORK_STEP,
                                 (json.dumps(result, indent=1) + "\n").encode())
    assert items != 504 or pieces == explain.WORK_STEP  # the boundary itself is here


# -- which service a name is of ----------------------------------------------------------------

@pytest.mark.parametrize(("name", "key"), [
    ("web.prod.svc.clusterset.local", ("prod", "web")),
    ("h.east.web.prod.svc.clusterset.local", ("prod", "web")),
    ("_http._tcp.web.prod.svc.clusterset.local", ("prod", "web")),
    ("prod.svc.clusterset.local", None),  # a namespace: no service
    ("svc.clusterset.local", None),
    ("web.prod.svd.clusterset.local", None),
    ("web.prod.clusterset.local", None),
    ("*.prod.svc.clusterset.local", None),  # no object is named so
    ("web.*.svc.clusterset.local", None),
])
def test_the_service_of_a_name(name: str, key: tuple[str, str] | None) -> None:
    assert explain._service_of(build_cache(), explain._labels(name)) == key


# -- the endpoints listed: at most MAX_ENDPOINTS, the rest counted -------------------------------

def headless(*groups: tuple[str | None, list[dict[str, Any]]]) -> Cache:
    """One Headless import "big", a slice of each (cluster, endpoints)."""
    return build_cache([service_import("big", NS, "Headless", ports=[HTTP])], [
        endpoint_slice(f"big-{i}", "big", NS, cluster, endpoints=eps, ports=[HTTP])
        for i, (cluster, eps) in enumerate(groups)])


def many(count: int, first: int = 0, **fields: Any) -> list[dict[str, Any]]:
    return [endpoint(f"10.9{first}.{i >> 8}.{i & 255}", **fields) for i in range(count)]


@pytest.mark.parametrize(("groups", "rows", "skipped"), [
    ([("east", many(explain.MAX_ENDPOINTS))], explain.MAX_ENDPOINTS, 0),
    ([("east", many(explain.MAX_ENDPOINTS + 1))], explain.MAX_ENDPOINTS, 1),
    ([("east", many(explain.MAX_ENDPOINTS - 1)), ("west", many(3, 1))],
     explain.MAX_ENDPOINTS, 2),  # the next slice's are counted
    ([("east", many(explain.MAX_ENDPOINTS - 1) + many(3, 1, ready=False))],
     explain.MAX_ENDPOINTS, 2),  # and the next group's
    ([("east", many(explain.MAX_ENDPOINTS - 1) + many(3, 1, ready=False)),
      ("west", many(4, 2))], explain.MAX_ENDPOINTS, 6),
])
def test_endpoints_listed_stop_at_max_endpoints(
        groups: list[tuple[str | None, list[dict[str, Any]]]], rows: int,
        skipped: int) -> None:
    result = explain.explain(headless(*groups), q("big"), "A")
    assert sum(len(s["endpoints"]) for s in result["service"]["slices"]) == rows
    assert result["service"]["endpointsNotListed"] == skipped
    text = explain.text(result)
    assert text.endswith(f"\n(+{skipped} endpoints not listed)\n") == (skipped > 0)
    assert ("endpoints not listed" in text) == (skipped > 0)


# -- local-first: ranking the endpoints gives the loop back too ---------------------------------

def near(unnamed: int) -> Cache:
    """A Headless import, local first, seen from cluster east: one endpoint of east (tier
    0), and ``unnamed`` endpoints of a slice without cluster id (another cluster's tier:
    no name, not in the service's answers; the DNS account passes them at 1 unit each)."""
    imp = convert.service_import(service_import("near", NS, "Headless", ports=[HTTP],
                                                traffic_distribution="PreferClose"))
    pieces = [convert.endpoint_slice(endpoint_slice(
                  "near-e", "near", NS, "east", ports=[HTTP],
                  endpoints=[endpoint("10.81.0.1", hostname="e-0")])),
              convert.endpoint_slice(endpoint_slice(
                  "near-x", "near", NS, None, ports=[HTTP], endpoints=many(unnamed)))]
    cache = Cache(ZoneNames("clusterset.local"), 5, cluster_id="east")
    cache.apply([ReplaceImports({(NS, "near"): imp}),
                 ReplaceSlices({(p.namespace, p.name): p for p in pieces if p is not None}),
                 SetSynced(True)])
    return cache


@pytest.mark.parametrize(("unnamed", "ranking", "listing"), [
    # ranking: a unit an endpoint (unnamed + 1 in all); listing: the ranking's steps,
    # then the unnamed ones (a unit each) and the east one (a unit, then listed)
    (510, 0, 0), (511, 1, 2), (1022, 1, 2), (1023, 2, 4),
])
def test_ranking_and_listing_give_the_loop_back_at_work_step(
        unnamed: int, ranking: int, listing: int) -> None:
    snap = explain._Snapshot(near(unnamed), (NS, "near"), True)
    assert steps_of(explain._best(snap)) == (ranking, {4: 0})
    steps, (rows, skipped) = steps_of(explain._slices(snap, explain.TYPES["A"], False))
    assert (steps, skipped) == (listing, 0)
    assert rows == [{"cluster": "east", "addressType": "IPv4", "endpoints": [
        {"addresses": ["10.81.0.1"], "hostname": "e-0", "served": True, "reason": "",
         "tier": 0, "tierWhy": "the local cluster"}]}]


def near_named() -> Cache:
    """Local first from east: a named endpoint in east (tier 0) and in west (tier 1)."""
    cache = near(0)
    west = convert.endpoint_slice(endpoint_slice(
        "near-w", "near", NS, "west", ports=[HTTP],
        endpoints=[endpoint("10.81.1.1", hostname="w-0")]))
    assert west is not None
    cache.apply([PutSlice((NS, "near-w"), west)])
    return cache


LOWER = "local-first tier 1: the service's addresses are tier 0's"


@pytest.mark.parametrize(("qname", "qtype", "west"), [
    (q("near"), "A", (False, LOWER)),  # the service's addresses: tier 0's only
    (q("near"), "SRV", (True, "")),  # every named endpoint, by priority
    (q("near"), "TXT", (True, "")),
    (q("near", "w-0", "west"), "A", (True, "")),  # its own name answers it
    (q("near"), "AAAA", (False, "other family (IPv4; asked AAAA)")),
])
def test_the_local_first_reason_is_given_where_the_tier_decides(
        qname: str, qtype: str, west: tuple[bool, str]) -> None:
    for full in (True, False):
        result = explain.explain(near_named(), qname, qtype, full=full)
        rows = {e["addresses"][0]: (e["served"], e["reason"], e["tier"])
                for s in result["service"]["slices"] for e in s["endpoints"]}
        assert rows["10.81.1.1"] == (*west, 1)
        assert rows["10.81.0.1"][2] == 0


def test_the_zone_line_says_sync_and_the_largest_rrset_given() -> None:
    cache = build_cache(synced=False)
    serial = cache.zone.serial
    for largest, line in [
            ((0, b""), f"zone: serial {serial}, NOT synced"),
            ((40, b"\x01a\x00\x00\x21\x00\x01"), f"zone: serial {serial}, NOT synced; "
                                         "largest RRset a. SRV, 40 records")]:
        result = explain.explain(cache, "a.clusterset.local", largest=largest)
        assert explain.text(result).splitlines()[2] == line
        dns = explain.explain(cache, "a.clusterset.local", largest=largest, full=False)
        assert dns["zone"]["largestRRset"] == (
            {"records": largest[0]} if largest[0] else None)


def dual_stack() -> Cache:
    """Local first from east in zone za: IPv4 at tier 0 (east, za); IPv6 at tier 1 (east,
    zb) and tier 2 (west); a not-ready IPv6 endpoint in za; two slices without endpoints,
    one of a cluster whose name sorts before "east", one without cluster id."""
    imp = convert.service_import(service_import("near", NS, "Headless", ports=[HTTP],
                                                traffic_distribution="PreferClose"))
    raws = [endpoint_slice("near-e4", "near", NS, "east", ports=[HTTP], endpoints=[
                endpoint("10.81.0.1", hostname="e-4", zone="za")]),
            endpoint_slice("near-e6", "near", NS, "east", address_type="IPv6", ports=[HTTP],
                           endpoints=[endpoint("fd00::1", hostname="e-6", zone="zb"),
                                      endpoint("fd00::3", hostname="e-d", zone="za",
                                               ready=False)]),
            endpoint_slice("near-w6", "near", NS, "west", address_type="IPv6", ports=[HTTP],
                           endpoints=[endpoint("fd00::2", hostname="w-6")]),
            endpoint_slice("near-1", "near", NS, "1a", ports=[HTTP]),
            endpoint_slice("near-x", "near", NS, None, ports=[HTTP])]
    pieces = [convert.endpoint_slice(raw) for raw in raws]
    cache = Cache(ZoneNames("clusterset.local"), 5, cluster_id="east", topology_zone="za")
    cache.apply([ReplaceImports({(NS, "near"): imp}),
                 ReplaceSlices({(p.namespace, p.name): p for p in pieces if p is not None}),
                 SetSynced(True)])
    return cache


def test_each_family_has_its_own_best_tier() -> None:
    """AAAA: the IPv6 addresses answered are tier 1's (the IPv4 ones, tier 0, do not
    count); the not-ready endpoint has no tier; a slice without endpoints is listed (as
    IPv4: the model keeps no addressType, and no address tells), the one without cluster
    id first."""
    result = explain.explain(dual_stack(), q("near"), "AAAA")
    assert result["answer"]["answer"] == ["near.prod.svc.clusterset.local. 5 IN AAAA fd00::1"]
    lines = explain.text(result).splitlines()
    assert lines[lines.index("  endpointSliceObjects: (not set)") + 2:] == [
        "EndpointSlice prod/near-x (resourceVersion ?, cluster (none), IPv4): 0 endpoints",
        "EndpointSlice prod/near-1 (resourceVersion ?, cluster 1a, IPv4): 0 endpoints",
        "EndpointSlice prod/near-e4 (resourceVersion ?, cluster east, IPv4): 1 endpoints",
        "  10.81.0.1 e-4: left out (tier 0: in this server's zone: zone): other family "
        "(IPv4; asked AAAA)",
        "EndpointSlice prod/near-e6 (resourceVersion ?, cluster east, IPv6): 2 endpoints",
        "  fd00::1 e-6: served (tier 1: the local cluster, elsewhere by zone)",
        "  fd00::3 e-d: left out: not ready",
        "EndpointSlice prod/near-w6 (resourceVersion ?, cluster west, IPv6): 1 endpoints",
        "  fd00::2 w-6: left out (tier 2: another cluster): local-first tier 2: the "
        "service's addresses are tier 1's"]
    down = result["service"]["slices"][3]["endpoints"][1]
    assert down["reason"] == "not ready" and not {"tier", "tierWhy"} & down.keys()


def test_steps_ask_a_by_default() -> None:
    cache = rich_cache()
    assert explain.run(explain.steps(cache, q("hl"))) == explain.explain(cache, q("hl"), "A")


def test_the_text_of_an_account_that_does_not_say_which_is_the_full_one() -> None:
    """An older server's JSON has no "account": it only gave the full one."""
    result = explain.explain(rich_cache(), q("vip"))
    older = {k: v for k, v in result.items() if k != "account"}
    assert explain.text(older) == explain.text(result)
    assert "(resourceVersion 42)" in explain.text(older)


def test_the_text_joins_what_there_are_several_of() -> None:
    imp = service_import("two", NS, "ClusterSetIP", ips=["10.9.0.1", "10.9.0.2"])
    near_ = service_import("hl", NS, "Headless", ports=[HTTP],
                           traffic_distribution="PreferClose")
    cache = build_cache([imp, near_, service_import("lone", NS, "Headless")], [
        endpoint_slice("hl-1", "hl", NS, "east", ports=[HTTP], endpoints=[
            endpoint("10.9.1.1", "10.9.1.2", hostname="pair")])])
    two = explain.text(explain.explain(cache, q("two"))).splitlines()
    assert two[4] == ("ServiceImport prod/two (resourceVersion ?): ClusterSetIP, "
                      "IPs 10.9.0.1, 10.9.0.2, ports none")
    assert two[-1] == "no EndpointSlice"
    hl = explain.text(explain.explain(cache, q("hl"), full=False)).splitlines()
    assert hl[4:7] == ["ServiceImport prod/hl: Headless, IPs none, ports http/tcp/80, "
                       "local-first: zone first",
                       "cluster east, IPv4: 1 endpoints served",
                       "  10.9.1.1 10.9.1.2 pair: served"]
    lone = explain.text(explain.explain(cache, q("lone"), full=False)).splitlines()
    assert lone[-2:] == ["no endpoint served by name", DNS_ONLY]


def test_the_text_counts_the_records_not_listed() -> None:
    result = explain.explain(rich_cache(), q("hl"))
    result["answer"]["recordsNotListed"] = 7
    lines = explain.text(result).splitlines()
    assert lines[1:5] == ["  hl.prod.svc.clusterset.local. 5 IN A 10.80.2.1",
                          "  hl.prod.svc.clusterset.local. 5 IN A 10.80.3.1",
                          "  hl.prod.svc.clusterset.local. 5 IN A 10.80.3.2",
                          "  (+7 records not listed)"]
