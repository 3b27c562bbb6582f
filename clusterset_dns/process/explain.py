"""``clusterset-dns explain NAME [TYPE]`` and ``/explain``: the answer a name gets and why.

The answer is the server's own: a query goes through a :class:`Handler` on the
zone and the response is decoded (:mod:`rrs`), so what is shown is what a
client gets, EDE included. The why comes from the objects in the cache.

Two accounts (docs/explain.md): the full one (``explain --manifests``, offline)
shows every object behind the name: the ServiceImport with its conditions, each
EndpointSlice with every endpoint served or left out and why, what was rejected,
when the service last changed. The DNS one (``/explain`` on the health port,
which every pod can reach) shows only what DNS questions reveal: the answer and
its EDE, the import's type, IPs and ports, and the endpoints DNS serves under the
service's names (their addresses and names), each with why it is or is not in
this answer.

The work is done in steps (:func:`steps` is a generator that yields between
them), each bounded by WORK_STEP units whatever the size of the answer or the
service: the HTTP endpoint runs on the loop that answers DNS and gives the loop
back after each step. Everything the account reads is taken from the cache
before the first step: the objects are immutable and the cache replaces them on
change, so the steps read one consistent state while the cache moves on.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Generator
from typing import Any

from clusterset_dns.base import names
from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import Cache
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Prefer, ServiceImport, ServiceType

TYPES = {"A": wire.A, "AAAA": wire.AAAA, "SRV": wire.SRV, "TXT": wire.TXT, "SOA": wire.SOA,
         "NS": wire.NS, "ANY": wire.ANY}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP",
          5: "REFUSED", 16: "BADVERS"}
EDE_NAMES = {wire.EDE_OTHER: "Other Error", wire.EDE_NOT_READY: "Not Ready",
             wire.EDE_INVALID_DATA: "Invalid Data"}
_PREFER = {Prefer.NOTHING: None, Prefer.ZONE: "zone first",
           Prefer.NODE: "node, then zone first"}
MAX_ENDPOINTS = 500  # endpoints listed per request; the rest are counted
MAX_RECORDS = 500  # records listed per request (every section); the rest are counted
ECHO_MAX = 100  # characters of a rejected name or type quoted back in the error
# The work of one step, in units: a record walked past or an endpoint ranked costs 1,
# a record decoded and printed 16, an endpoint listed 8, a JSON chunk 1. A step is a
# fraction of a millisecond (bench/explain_burst.py).
WORK_STEP = 512
RECORD_COST, ROW_COST = 16, 8

Step = Generator[None, None, Any]


class ExplainError(ValueError):
    """The question cannot be asked (not a name, an unknown type)."""


def _echo(text: str) -> str:
    """``text`` quoted for an error, at most ECHO_MAX characters of it."""
    if len(text) <= ECHO_MAX:
        return repr(text)
    return f"{text[:ECHO_MAX]!r}... ({len(text)} characters)"


def _labels(name: str) -> names.Labels:
    text = name.strip()
    text = text[:-1] if text.endswith(".") else text
    if not text:
        raise ExplainError("no name given: ask for a name, e.g. "
                           "name=web.prod.svc.clusterset.local")
    try:
        labels = tuple(part.lower().encode("ascii") for part in text.split("."))
        return names.check(labels)
    except (names.InvalidName, UnicodeError) as exc:
        raise ExplainError(f"{_echo(name)} is not a DNS name: {exc}") from None


def _query(labels: names.Labels, qtype: int) -> bytes:
    head = struct.pack("!HHHHHH", 0x4558, wire.RD, 1, 0, 0, 1)
    opt = b"\x00" + struct.pack("!HHIH", wire.OPT, 1232, 0, 0)
    return head + names.to_wire(labels) + struct.pack("!HH", qtype, wire.CLASS_IN) + opt


def _answer(response: bytes) -> Step:
    """The response decoded: at most MAX_RECORDS records printed, the others walked past
    and counted (the OPT record, for the EDE, always read)."""
    flags, qd, an, ns, ar = wire.HEADER.unpack_from(response, 2)
    offset = 12
    for _ in range(qd):
        offset = rrs.skip_name(response, offset) + 4  # a question: its name, type, class
    sections: list[list[str]] = [[], [], []]
    ede, high, listed, skipped, work = None, 0, 0, 0, 0
    for index, count in enumerate((an, ns, ar)):
        for _ in range(count):
            rtype, end = rrs.skip_record(response, offset)
            if rtype == wire.OPT:
                record, _ = rrs.record_at(response, offset)
                high, ede = record.ttl >> 24, _ede(record.rdata)
            elif listed < MAX_RECORDS:
                sections[index].append(rrs.record_text(rrs.record_at(response, offset)[0]))
                listed += 1
                work += RECORD_COST
            else:
                skipped += 1
            offset, work = end, work + 1
            if work >= WORK_STEP:
                work = 0
                yield
    rcode = (high << 4) | (flags & 0xF)
    return {"rcode": RCODES.get(rcode, str(rcode)), "answer": sections[0],
            "authority": sections[1], "additional": sections[2], "ede": ede,
            "recordsNotListed": skipped}


def _ede(options: bytes) -> dict[str, Any] | None:
    at = 0
    while at + 4 <= len(options):
        code, length = struct.unpack_from("!HH", options, at)
        value = options[at + 4 : at + 4 + length]
        at += 4 + length
        if code == wire.EDE_OPTION and len(value) >= 2:
            info = int.from_bytes(value[:2])
            return {"code": info, "name": EDE_NAMES.get(info, ""),
                    "text": value[2:].decode("utf-8", "replace")}
    return None


def _service_of(cache: Cache, labels: names.Labels) -> tuple[str, str] | None:
    svc = cache.names.svc
    if len(labels) < len(svc) + 2 or tuple(labels[-len(svc):]) != svc:
        return None
    service, namespace = (label.decode("ascii") for label in labels[-len(svc) - 2:-len(svc)])
    # A label no object's name may be (a wildcard, a space: DNS asks for anything) names
    # no service: names.service would refuse it.
    if not (names.is_label(service) and names.is_label(namespace)):
        return None
    return namespace, service


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _ports(ports: Any) -> list[str]:
    return [f"{p.name or '-'}/{p.protocol}/{p.port}" for p in ports]


def _import(imp: ServiceImport, full: bool) -> dict[str, Any]:
    # What DNS gives: the type (addresses at the service name or endpoint names), the IPs,
    # the ports (SRV), and the local-first rule that the tiers below explain.
    out: dict[str, Any] = {
        "namespace": imp.namespace, "name": imp.name, "type": imp.type.value,
        "ips": [str(ip) for ip in imp.ips], "ports": _ports(imp.ports),
        "trafficDistribution": _PREFER[imp.prefer]}
    if full:
        out.update({"resourceVersion": imp.resource_version,
                    "unknownTrafficDistribution": imp.unknown_traffic,
                    "endpointSliceObjects": imp.slice_objects,
                    "conditions": [{"type": c.type, "status": c.status, "reason": c.reason,
                                    "message": c.message} for c in imp.conditions]})
    return out


def _row(endpoint: Endpoint, served: bool, reason: str, full: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"addresses": [str(ip) for ip in endpoint.addresses],
                           "hostname": endpoint.hostname, "served": served, "reason": reason}
    if full:
        hints = endpoint.hints
        row.update({"zone": endpoint.zone, "nodeName": endpoint.node,
                    "hints": None if hints is None else {"forZones": sorted(hints.zones),
                                                         "forNodes": sorted(hints.nodes)}})
    return row


def _family(piece: EndpointSlice) -> int:
    for group in (piece.endpoints, piece.serving, piece.not_ready):
        if group:
            return 6 if any(len(packed) == 16 for packed in group.packs()[0]) else 4
    return 4


class _Snapshot:
    """What an account reads, taken from the cache at once (objects are immutable)."""

    def __init__(self, cache: Cache, key: tuple[str, str], at_service: bool) -> None:
        builder = cache.builder
        self.imp = cache.imports.get(key)
        self.slices = sorted(cache.slices_of(key), key=lambda s: (s.cluster or "", s.name))
        self.headless = self.imp is not None and self.imp.type is ServiceType.HEADLESS
        answering = builder.answering(self.slices)
        self.tiers = (builder.ranking(self.imp, answering)
                      if self.imp is not None and self.headless else None)
        self.answering = answering
        self.fallback = answering is not self.slices  # --serve-terminating: serving ones answer
        self.rejected = sorted(cache.rejections_of(key).items())
        self.changed = cache.changed_at.get(key)
        self.at_service = at_service


def _best(snap: _Snapshot) -> Generator[None, None, dict[int, int]]:
    """Family -> the best local-first rank present among the answering endpoints."""
    best: dict[int, int] = {}
    tiers, work = snap.tiers, 0
    if tiers is None:
        return best
    for piece in snap.answering:
        local = piece.cluster == tiers.cluster
        for packs, _, place in piece.endpoints.rows():
            rank = tiers.rank(local, place)
            for packed in packs:
                version = 4 if len(packed) == 4 else 6
                best[version] = min(best.get(version, rank), rank)
            work += 1
            if work >= WORK_STEP:
                work = 0
                yield
    return best


def _slices(snap: _Snapshot, qtype: int, full: bool) -> Generator[None, None, tuple[
        list[dict[str, Any]], int]]:
    """Each slice with its endpoints, served or left out and why; and how many
    endpoints were not listed (MAX_ENDPOINTS). The DNS account lists only the
    endpoints of a Headless import whose addresses DNS gives under some name of the
    service, and nothing of a ClusterSetIP import's or an unimported service's."""
    if not full and not snap.headless:
        return [], 0
    best = yield from _best(snap)
    tiers, headless, fallback = snap.tiers, snap.headless, snap.fallback
    listed, skipped, work = 0, 0, 0
    out = []
    for piece in snap.slices:
        family = _family(piece)
        other = (qtype == wire.A and family == 6) or (qtype == wire.AAAA and family == 4)
        groups = [(piece.endpoints, "ready"), (piece.serving, "serving")]
        if full:
            groups.append((piece.not_ready, "down"))
        elif not fallback:
            groups.pop()  # not answering: DNS gives no address of them
        endpoints = []
        for group, state in groups:
            for index, endpoint in enumerate(group):
                if listed >= MAX_ENDPOINTS:
                    skipped += len(group) - index
                    break
                answers = state == "ready" or (state == "serving" and fallback)
                tier = (tiers.rank(piece.cluster == tiers.cluster, endpoint)
                        if tiers is not None and answers else None)
                lower = (tier is not None and tier > best.get(family, tier))
                work += 1
                if work >= WORK_STEP:
                    work = 0
                    yield
                if not full and piece.cluster is None and lower:
                    continue  # no endpoint name and not in the service's answers
                work += ROW_COST
                listed += 1
                reason = ""
                if not headless and snap.imp is not None:
                    reason = "not used: a ClusterSetIP import answers with its IPs (§5.6)"
                elif not answers:
                    reason = ("not ready (serving: answered with --serve-terminating when no "
                              "endpoint is ready)" if state == "serving" else "not ready")
                elif other:
                    reason = f"other family (IPv{family}; asked {_type_text(qtype)})"
                elif lower and snap.at_service and qtype in (wire.A, wire.AAAA):
                    reason = (f"local-first tier {tier}: the service's addresses are tier "
                              f"{best[family]}'s")
                elif piece.cluster is None:
                    reason = "no cluster id: in the service's answers, no endpoint name (§5.4)"
                served = answers and headless and not other and not reason.startswith("local")
                row = _row(endpoint, served, reason, full)
                if tier is not None and tiers is not None:
                    row["tier"] = tier
                    row["tierWhy"] = tiers.why(piece.cluster == tiers.cluster, endpoint)
                endpoints.append(row)
        if full:
            out.append({"namespace": piece.namespace, "name": piece.name,
                        "resourceVersion": piece.resource_version, "cluster": piece.cluster,
                        "addressType": f"IPv{family}", "ports": _ports(piece.ports),
                        "endpoints": endpoints})
        elif endpoints:
            out.append({"cluster": piece.cluster, "addressType": f"IPv{family}",
                        "endpoints": endpoints})
    return out, skipped


def _type_text(qtype: int) -> str:
    return next((text for text, number in TYPES.items() if number == qtype), str(qtype))


def steps(cache: Cache, name: str, type_text: str = "A", full: bool = True,
          largest: tuple[int, bytes] | None = None) -> Step:
    """The account of ``name`` ``type_text`` as JSON-ready data, computed in bounded
    steps (a generator: each ``next`` is one step; the result is its return value).
    Raises ExplainError at the first step for a question that cannot be asked.
    ``full``: the full account, else only what DNS reveals (see the module's doc).
    ``largest``: the zone's largest RRset as the server last worked it out
    (rrs.largest_rrset; by default worked out here, a walk over every answer)."""
    qtype = TYPES.get(type_text.upper())
    if qtype is None:
        raise ExplainError(f"type {_echo(type_text)}: choose from {', '.join(TYPES)}")
    labels = _labels(name)
    # Everything read from the cache is read here, before the first yield.
    response = Handler(cache.zone, 1232).handle(_query(labels, qtype), True)
    if response is None:
        raise ExplainError("no answer")  # only a malformed query gets none
    zone: dict[str, Any] = {"serial": cache.zone.serial, "synced": cache.zone.synced}
    count, biggest = largest if largest is not None else rrs.largest_rrset(cache.zone.answers)
    # Its size only on the health port (the gauge on the metrics port says as much); which
    # RRset it is names a service the asker may never have asked about.
    zone["largestRRset"] = (None if not count else {"records": count, "rrset": rrs.key_text(
        biggest)} if full else {"records": count})
    key = _service_of(cache, labels)
    snap = None
    if key is not None:
        snap = _Snapshot(cache, key, labels == cache.names.service(*key))
    result: dict[str, Any] = {
        "account": "full" if full else "dns",
        "question": {"name": names.to_text(labels), "type": type_text.upper()},
        "answer": (yield from _answer(response)),
        "zone": zone,
        "service": None,
    }
    if snap is None or key is None:
        return result
    listed, skipped = yield from _slices(snap, qtype, full)
    service: dict[str, Any] = {
        "namespace": key[0], "name": key[1],
        "import": _import(snap.imp, full) if snap.imp is not None else None,
        "slices": listed, "endpointsNotListed": skipped}
    if full:
        service["rejected"] = [{"kind": kind, "namespace": ns, "name": obj,
                                "reason": r.reason, "served": r.served}
                               for (kind, (ns, obj)), r in snap.rejected]
        changed = snap.changed
        service["lastChange"] = None if changed is None else {
            "serial": changed[0], "time": _stamp(changed[1])}
    result["service"] = service
    return result


def run(work: Step) -> Any:
    """A generator of steps run to its end, at once (offline, and the tests)."""
    while True:
        try:
            next(work)
        except StopIteration as done:
            return done.value


def explain(cache: Cache, name: str, type_text: str = "A",
            largest: tuple[int, bytes] | None = None, full: bool = True) -> dict[str, Any]:
    """The answer to ``name`` ``type_text`` and why, as JSON-ready data, at once (see
    :func:`steps`)."""
    result: dict[str, Any] = run(steps(cache, name, type_text, full, largest))
    return result


def render(result: dict[str, Any]) -> Generator[None, None, bytes]:
    """``result`` as indented JSON, in steps (the indenting encoder is pure Python)."""
    chunks: list[str] = []
    for chunk in json.JSONEncoder(indent=1).iterencode(result):
        chunks.append(chunk)
        if len(chunks) % WORK_STEP == 0:
            yield
    return ("".join(chunks) + "\n").encode()


def text(result: dict[str, Any]) -> str:
    """The human form of :func:`explain`'s result (either account)."""
    q, answer = result["question"], result["answer"]
    full = result.get("account", "full") == "full"
    lines = [f"{q['name']} {q['type']}: {answer['rcode']}"
             + ("" if answer["answer"] else ", no records")]
    lines += [f"  {line}" for line in answer["answer"]]
    if answer.get("recordsNotListed"):
        lines.append(f"  (+{answer['recordsNotListed']} records not listed)")
    if answer["ede"] is not None:
        ede = answer["ede"]
        lines.append(f"  EDE {ede['code']} ({ede['name'] or 'unknown'}): {ede['text']}")
    zone = result["zone"]
    biggest = zone.get("largestRRset")
    lines.append(f"zone: serial {zone['serial']}, {'synced' if zone['synced'] else 'NOT synced'}"
                 + ("" if not biggest else f"; largest RRset {biggest['rrset']}, "
                    f"{biggest['records']} records" if "rrset" in biggest
                    else f"; largest RRset {biggest['records']} records"))
    service = result["service"]
    if service is None:
        lines.append("no service: the name is not below <svc>.<ns>.svc.<zone>")
        return "\n".join(lines) + "\n"
    imp = service["import"]
    if imp is None:
        lines.append(f"ServiceImport {service['namespace']}/{service['name']}: none served")
    else:
        ips = ", ".join(imp["ips"]) or "none"
        version = f" (resourceVersion {imp['resourceVersion'] or '?'})" if full else ""
        lines.append(f"ServiceImport {imp['namespace']}/{imp['name']}{version}: {imp['type']}, "
                     f"IPs {ips}, ports {', '.join(imp['ports']) or 'none'}"
                     + (f", local-first: {imp['trafficDistribution']}"
                        if imp["trafficDistribution"] else ""))
        if full:
            lines.append(f"  endpointSliceObjects: {imp['endpointSliceObjects'] or '(not set)'}")
        for c in imp.get("conditions", ()):
            detail = "; ".join(x for x in (c["reason"], c["message"]) if x)
            lines.append(f"  condition {c['type']}={c['status']}"
                         + (f" ({detail})" if detail else ""))
    changed = service.get("lastChange")
    if changed is not None:
        lines.append(f"  last changed: serial {changed['serial']} at {changed['time']}")
    for piece in service["slices"]:
        count = f"{len(piece['endpoints'])} endpoints"
        if full:
            lines.append(f"EndpointSlice {piece['namespace']}/{piece['name']} (resourceVersion "
                         f"{piece['resourceVersion'] or '?'}, cluster "
                         f"{piece['cluster'] or '(none)'}, {piece['addressType']}): {count}")
        else:
            lines.append(f"cluster {piece['cluster'] or '(none)'}, {piece['addressType']}: "
                         f"{count} served")
        for e in piece["endpoints"]:
            what = " ".join(e["addresses"]) + (f" {e['hostname']}" if e["hostname"] else "")
            state = "served" if e["served"] else "left out"
            tier = f" (tier {e['tier']}: {e['tierWhy']})" if "tier" in e else ""
            lines.append(f"  {what}: {state}{tier}" + (f": {e['reason']}" if e["reason"] else ""))
    if not service["slices"]:
        lines.append("no EndpointSlice" if full else "no endpoint served by name")
    if service["endpointsNotListed"]:
        lines.append(f"(+{service['endpointsNotListed']} endpoints not listed)")
    for r in service.get("rejected", ()):
        lines.append(f"rejected: {r['kind']} {r['namespace']}/{r['name']}: {r['reason']}"
                     + (" (the rest of it is served)" if r["served"] else ""))
    if not full:
        lines.append("(what DNS reveals only: the objects behind it, not-ready endpoints and "
                     "conditions are in the full account, clusterset-dns explain --manifests)")
    return "\n".join(lines) + "\n"
