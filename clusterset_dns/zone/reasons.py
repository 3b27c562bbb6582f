"""Why a name of a Headless import answers empty: the EDE texts (RFC 8914) of its
negative answers, worked out with its answers when its objects change.

Only names that would exist if every endpoint were ready get a reason;
any other missing name gets none (it never existed). The handler adds the
option to negative answers of EDNS queries (docs/dns-behaviour.md §3.8).
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from clusterset_dns.base import names
from clusterset_dns.base.names import Labels, ZoneNames
from clusterset_dns.zone import wire
from clusterset_dns.zone.model import Endpoints, EndpointSlice, ServiceImport

Reasons = dict[bytes, bytes]  # lower-case wire name -> wire.ede(...)
_LISTED = 3  # clusters (or rejected objects) named in one text; the rest are counted


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_LISTED])
    return shown + (f", +{len(items) - _LISTED} more" if len(items) > _LISTED else "")


def no_endpoint_text(imp: ServiceImport, every: Sequence[EndpointSlice],
                     rejected: Sequence[str]) -> tuple[int, str]:
    """(INFO-CODE, EXTRA-TEXT) for an import without a ready endpoint."""
    if rejected:
        return wire.EDE_INVALID_DATA, f"no ready endpoint; {_listed(list(rejected))}"
    if not every:
        if imp.slices_absent:
            return wire.EDE_OTHER, ("no EndpointSlices: ServiceImport status."
                                    "endpointSliceObjects is Absent")
        return wire.EDE_OTHER, (f"no EndpointSlice for ServiceImport {imp.namespace}/"
                                f"{imp.name} has arrived")
    by_cluster: dict[str, int] = {}
    for piece in every:
        down = len(piece.serving) + len(piece.not_ready)
        if down:
            cluster = piece.cluster or "(no cluster id)"
            by_cluster[cluster] = by_cluster.get(cluster, 0) + down
    if not by_cluster:
        return wire.EDE_OTHER, "no ready endpoint: its EndpointSlices list no endpoint"
    total = sum(by_cluster.values())
    clusters = [f"{cluster} {count}" for cluster, count in sorted(by_cluster.items())]
    return wire.EDE_OTHER, f"no ready endpoint: {total} not ready ({_listed(clusters)})"


def _port_names(zone: ZoneNames, svc: Labels, imp: ServiceImport,
                every: Sequence[EndpointSlice]) -> list[Labels]:
    found: dict[tuple[str, str], None] = {}
    for port in (*imp.ports, *(p for piece in every for p in piece.ports)):
        if port.name:
            found[(port.name, port.protocol)] = None
    owners = []
    for name, protocol in found:
        try:
            owners.append(zone.port_srv(svc, name, protocol))
        except names.InvalidName:
            continue  # refused at admission: such a name cannot be asked
    return owners


def _endpoint_names(svc: Labels, piece: EndpointSlice,
                    lists: Sequence[Endpoints]) -> tuple[bytes, list[bytes]] | None:
    """(``<cluster>.<svc>``, the endpoints' names) in wire form; None without a
    cluster id (such endpoints have no name)."""
    if piece.cluster is None:
        return None
    try:
        cluster = names.subdomain(piece.cluster)
        tail = names.EndpointNames(svc, cluster)
        found: list[bytes] = []
        for endpoints in lists:
            for packs, hostname in zip(endpoints.packs(), endpoints.hostname_list(),
                                       strict=True):
                hostnames = ([hostname] if hostname is not None
                             else [names.packed_hostname(one) for one in packs])
                found.extend(tail.name(each)[1] for each in hostnames)
    except names.InvalidName:
        return None  # a not-ready endpoint whose name could never exist
    return names.to_wire((*cluster, *svc)), found


def _down(piece: EndpointSlice) -> tuple[Endpoints, Endpoints]:
    """The slice's endpoints that are not ready (serving or not)."""
    return piece.serving, piece.not_ready


def headless(zone: ZoneNames, svc: Labels, present: Container[bytes], imp: ServiceImport,
             every: Sequence[EndpointSlice], rejected: Sequence[str]) -> Reasons:
    """The reasons of a Headless import's names that ``present`` (the names its build
    made) lacks: its service and port names without a ready endpoint, the names of its
    endpoints that are not ready (``every``: all its slices)."""
    out: Reasons = {}

    def put(name: bytes, why: bytes) -> None:
        if name not in present and name not in out:
            out[name] = why

    svc_wire = names.to_wire(svc)
    if svc_wire not in present:
        why = wire.ede(*no_endpoint_text(imp, every, rejected))
        put(svc_wire, why)
        for owner in _port_names(zone, svc, imp, every):
            put(names.to_wire(owner), why)
    for piece in every:
        down = _down(piece)
        if not any(down):
            continue
        found = _endpoint_names(svc, piece, down)
        if found is None:
            continue
        count = sum(len(p.serving) + len(p.not_ready) for p in every
                    if p.cluster == piece.cluster)
        put(found[0], wire.ede(wire.EDE_OTHER, f"no ready endpoint in cluster {piece.cluster}: "
                                               f"{count} not ready"))
        why = wire.ede(wire.EDE_OTHER,
                       f"endpoint not ready (EndpointSlice {piece.namespace}/{piece.name})")
        for name in found[1]:
            put(name, why)
    return out
