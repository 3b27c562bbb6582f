"""``clusterset-dns explain NAME [TYPE]`` and ``/explain``: the answer a name gets and why.

The answer is the server's own: a query goes through a :class:`Handler` on the
zone and the response is decoded (:mod:`rrs`), so what is shown is what a
client gets, EDE included. The why comes from the objects in the cache: the
ServiceImport behind the name, its EndpointSlices and every endpoint left out
with the reason, what was rejected, and when the service last changed.
Off the DNS path: worked out per request, from the data as it is.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone import names, rrs, wire
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


class ExplainError(ValueError):
    """The question cannot be asked (not a name, an unknown type)."""


def _query(name: str, qtype: int) -> bytes:
    try:
        labels = names.split(name)
        wire_name = names.to_wire(labels)
    except (names.InvalidName, UnicodeError) as exc:
        raise ExplainError(f"{name!r} is not a DNS name: {exc}") from None
    head = struct.pack("!HHHHHH", 0x4558, wire.RD, 1, 0, 0, 1)
    opt = b"\x00" + struct.pack("!HHIH", wire.OPT, 1232, 0, 0)
    return head + wire_name + struct.pack("!HH", qtype, wire.CLASS_IN) + opt


def _answer(cache: Cache, name: str, qtype: int) -> dict[str, Any]:
    handler = Handler(cache.zone, 1232)
    response = handler.handle(_query(name, qtype), True)
    if response is None:
        raise ExplainError("no answer")  # only a malformed query gets none
    rcode, answer, authority, additional = rrs.response_sections(response)
    ede = None
    for record in additional:
        if record.rtype == wire.OPT:
            ede = _ede(record.rdata)
    return {
        "rcode": RCODES.get(rcode, str(rcode)),
        "answer": [rrs.record_text(r) for r in answer],
        "authority": [rrs.record_text(r) for r in authority],
        "additional": [rrs.record_text(r) for r in additional if r.rtype != wire.OPT],
        "ede": ede,
    }


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


def service_of(cache: Cache, name: str) -> tuple[str, str] | None:
    """(namespace, service) of a name at or below ``<svc>.<ns>.svc.<zone>``."""
    try:
        labels = names.split(name)
    except (names.InvalidName, UnicodeError):
        return None
    svc = cache.names.svc
    if len(labels) < len(svc) + 2 or tuple(labels[-len(svc):]) != svc:
        return None
    service, namespace = labels[-len(svc) - 2], labels[-len(svc) - 1]
    return namespace.decode("ascii"), service.decode("ascii")


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _import(imp: ServiceImport) -> dict[str, Any]:
    return {
        "namespace": imp.namespace, "name": imp.name, "resourceVersion": imp.resource_version,
        "type": imp.type.value, "ips": [str(ip) for ip in imp.ips],
        "ports": [f"{p.name or '-'}/{p.protocol}/{p.port}" for p in imp.ports],
        "trafficDistribution": _PREFER[imp.prefer], "unknownTrafficDistribution":
            imp.unknown_traffic, "endpointSliceObjects": imp.slice_objects,
        "conditions": [{"type": c.type, "status": c.status, "reason": c.reason,
                        "message": c.message} for c in imp.conditions],
    }


def _endpoint(endpoint: Endpoint, served: bool, reason: str) -> dict[str, Any]:
    return {"addresses": [str(ip) for ip in endpoint.addresses], "hostname": endpoint.hostname,
            "zone": endpoint.zone, "served": served, "reason": reason}


def _slices(cache: Cache, imp: ServiceImport | None, slices: list[EndpointSlice],
            qtype: int, at_service: bool) -> tuple[list[dict[str, Any]], int]:
    """Each slice with its endpoints, served or left out and why; and how many
    endpoints were not listed (MAX_ENDPOINTS). ``at_service``: the question is the
    service name itself, whose A/AAAA only the best local-first tier answers."""
    builder = cache.builder
    headless = imp is not None and imp.type is ServiceType.HEADLESS
    tiers = builder.tiers(imp) if imp is not None and headless else None
    answering = builder.answering(slices)
    fallback = answering is not slices  # --serve-terminating: the serving ones answer
    best: dict[int, int] = {}  # family -> the best rank present
    if tiers is not None:
        for piece in answering:
            for e in piece.endpoints:
                rank = tiers.rank(piece.cluster == tiers.cluster, e)
                for ip in e.addresses:
                    best[ip.version] = min(best.get(ip.version, rank), rank)
    listed, skipped = 0, 0
    out = []
    for piece in sorted(slices, key=lambda s: (s.cluster or "", s.name)):
        family = 6 if any(ip.version == 6 for e in (*piece.endpoints, *piece.serving,
                                                    *piece.not_ready)
                          for ip in e.addresses) else 4
        other = (qtype == wire.A and family == 6) or (qtype == wire.AAAA and family == 4)
        rows = [(e, "ready") for e in piece.endpoints]
        rows += [(e, "serving") for e in piece.serving]
        rows += [(e, "down") for e in piece.not_ready]
        endpoints = []
        for endpoint, state in rows:
            if listed >= MAX_ENDPOINTS:
                skipped += 1
                continue
            listed += 1
            answers = state == "ready" or (state == "serving" and fallback)
            tier = (tiers.rank(piece.cluster == tiers.cluster, endpoint)
                    if tiers is not None and answers else None)
            reason = ""
            if not headless and imp is not None:
                reason = "not used: a ClusterSetIP import answers with its IPs (§5.6)"
            elif not answers:
                reason = ("not ready (serving: answered with --serve-terminating when no "
                          "endpoint is ready)" if state == "serving" else "not ready")
            elif other:
                reason = f"other family (IPv{family}; asked {_type_text(qtype)})"
            elif (tier is not None and at_service and qtype in (wire.A, wire.AAAA)
                  and tier > best.get(family, tier)):
                reason = (f"local-first tier {tier}: the service's addresses are tier "
                          f"{best[family]}'s")
            elif piece.cluster is None:
                reason = "no cluster id: in the service's answers, no endpoint name (§5.4)"
            served = answers and headless and not other and not reason.startswith("local")
            row = _endpoint(endpoint, served, reason)
            if tier is not None:
                row["tier"] = tier
            endpoints.append(row)
        out.append({"namespace": piece.namespace, "name": piece.name,
                    "resourceVersion": piece.resource_version, "cluster": piece.cluster,
                    "addressType": f"IPv{family}",
                    "ports": [f"{p.name or '-'}/{p.protocol}/{p.port}" for p in piece.ports],
                    "endpoints": endpoints})
    return out, skipped


def _type_text(qtype: int) -> str:
    return next((text for text, number in TYPES.items() if number == qtype), str(qtype))


def explain(cache: Cache, name: str, type_text: str = "A",
            largest: tuple[int, bytes] | None = None) -> dict[str, Any]:
    """The answer to ``name`` ``type_text`` and why, as JSON-ready data. ``largest``:
    the zone's largest RRset as the server last worked it out (rrs.largest_rrset; by
    default worked out here)."""
    qtype = TYPES.get(type_text.upper())
    if qtype is None:
        raise ExplainError(f"type {type_text!r}: choose from {', '.join(TYPES)}")
    name = name if name.endswith(".") else name + "."
    result: dict[str, Any] = {
        "question": {"name": name, "type": type_text.upper()},
        "answer": _answer(cache, name, qtype),
        "zone": {"serial": cache.zone.serial, "synced": cache.zone.synced},
        "service": None,
    }
    count, biggest = (largest if largest is not None
                      else rrs.largest_rrset(cache.zone.answers))
    result["zone"]["largestRRset"] = ({"records": count, "rrset": rrs.key_text(biggest)}
                                      if count else None)
    key = service_of(cache, name)
    if key is None:
        return result
    imp = cache.imports.get(key)
    slices = sorted(cache.slices_of(key), key=lambda s: s.name)
    at_service = names.split(name) == cache.names.service(*key) if imp is not None else False
    listed, skipped = _slices(cache, imp, slices, qtype, at_service)
    changed = cache.changed_at.get(key)
    result["service"] = {
        "namespace": key[0], "name": key[1],
        "import": _import(imp) if imp is not None else None,
        "slices": listed, "endpointsNotListed": skipped,
        "rejected": [{"kind": kind, "namespace": ns, "name": obj, "reason": r.reason,
                      "served": r.served}
                     for (kind, (ns, obj)), r in sorted(cache.rejections_of(key).items())],
        "lastChange": None if changed is None else {"serial": changed[0],
                                                    "time": _stamp(changed[1])},
    }
    return result


def text(result: dict[str, Any]) -> str:
    """The human form of :func:`explain`'s result."""
    q, answer = result["question"], result["answer"]
    lines = [f"{q['name']} {q['type']}: {answer['rcode']}"
             + ("" if answer["answer"] else ", no records")]
    lines += [f"  {line}" for line in answer["answer"]]
    if answer["ede"] is not None:
        ede = answer["ede"]
        lines.append(f"  EDE {ede['code']} ({ede['name'] or 'unknown'}): {ede['text']}")
    zone = result["zone"]
    lines.append(f"zone: serial {zone['serial']}, {'synced' if zone['synced'] else 'NOT synced'}"
                 + (f"; largest RRset {zone['largestRRset']['rrset']}, "
                    f"{zone['largestRRset']['records']} records"
                    if zone.get("largestRRset") else ""))
    service = result["service"]
    if service is None:
        lines.append("no service: the name is not below <svc>.<ns>.svc.<zone>")
        return "\n".join(lines) + "\n"
    imp = service["import"]
    if imp is None:
        lines.append(f"ServiceImport {service['namespace']}/{service['name']}: none served")
    else:
        ips = ", ".join(imp["ips"]) or "none"
        lines.append(f"ServiceImport {imp['namespace']}/{imp['name']} (resourceVersion "
                     f"{imp['resourceVersion'] or '?'}): {imp['type']}, IPs {ips}, ports "
                     f"{', '.join(imp['ports']) or 'none'}"
                     + (f", local-first: {imp['trafficDistribution']}"
                        if imp["trafficDistribution"] else ""))
        lines.append(f"  endpointSliceObjects: {imp['endpointSliceObjects'] or '(not set)'}")
        for c in imp["conditions"]:
            detail = "; ".join(x for x in (c["reason"], c["message"]) if x)
            lines.append(f"  condition {c['type']}={c['status']}"
                         + (f" ({detail})" if detail else ""))
    changed = service["lastChange"]
    if changed is not None:
        lines.append(f"  last changed: serial {changed['serial']} at {changed['time']}")
    for piece in service["slices"]:
        lines.append(f"EndpointSlice {piece['namespace']}/{piece['name']} (resourceVersion "
                     f"{piece['resourceVersion'] or '?'}, cluster {piece['cluster'] or '(none)'}"
                     f", {piece['addressType']}): {len(piece['endpoints'])} endpoints")
        for e in piece["endpoints"]:
            what = " ".join(e["addresses"]) + (f" {e['hostname']}" if e["hostname"] else "")
            state = "served" if e["served"] else "left out"
            tier = f" (tier {e['tier']})" if "tier" in e else ""
            lines.append(f"  {what}: {state}{tier}" + (f": {e['reason']}" if e["reason"] else ""))
    if not service["slices"]:
        lines.append("no EndpointSlice")
    if service["endpointsNotListed"]:
        lines.append(f"(+{service['endpointsNotListed']} endpoints not listed)")
    for r in service["rejected"]:
        lines.append(f"rejected: {r['kind']} {r['namespace']}/{r['name']}: {r['reason']}"
                     + (" (the rest of it is served)" if r["served"] else ""))
    return "\n".join(lines) + "\n"
