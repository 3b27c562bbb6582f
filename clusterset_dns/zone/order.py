"""The order answers keep: addresses sorted (IPv4 first, numeric), endpoints ranked
local-first (:class:`Tiers`), and the weight SRV records share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from clusterset_dns.zone.model import IP, Located

# Inside the builder an address is its packed form (4 or 16 bytes): computed once per
# address, hashed and sorted in C. IPv4 first, each family in numeric order (the
# bytes are big-endian): the order of (version, int(ip)).
Packed = bytes


def sorted_ips(ips: Iterable[IP]) -> list[Packed]:
    return sorted_packed({ip.packed for ip in ips})


def sorted_packed(packed: Iterable[Packed]) -> list[Packed]:
    return sorted(sorted(set(packed)), key=len)  # stable: numeric order within a family


def best_per_family(addresses: list[Packed], ranks: list[int]) -> list[Packed]:
    """The addresses of the best rank present in each family (``ranks[i]`` is that of
    ``addresses[i]``): a tier without an address of a family is empty for it
    (kube-proxy decides per family too)."""
    best: dict[int, int] = {}
    for packed, rank in zip(addresses, ranks, strict=True):
        if rank < best.get(len(packed), rank + 1):
            best[len(packed)] = rank
    return [packed for packed, rank in zip(addresses, ranks, strict=True)
            if rank == best[len(packed)]]


@dataclass(frozen=True, slots=True)
class Tiers:
    """Where the server runs, as one preferring import ranks endpoints: of the local
    cluster, on the server's node (``node``: PreferSameNode only), then in its zone,
    then the rest; then every other cluster.

    Which local endpoints are on the node, or in the zone: by their hints when
    ``node_hints`` / ``zone_hints`` (see :meth:`following`), else by their
    ``nodeName`` / ``zone`` fields."""

    cluster: str
    node: str | None
    zone: str | None
    node_hints: bool = False
    zone_hints: bool = False

    def following(self, local: Iterable[Located]) -> Tiers:
        """These tiers for an import whose local answering endpoints are at ``local``
        (their places, each distinct one once is enough): a level follows the hints
        when every one of them has hints of that level, as
        kube-proxy routes by hints only then (pkg/proxy/topology.go). One endpoint
        without them, and that level reads the fields of all, as without hints."""
        nodes, zones = self.node is not None, self.zone is not None
        for endpoint in local:
            hints = endpoint.hints
            if hints is None:
                return self
            nodes = nodes and bool(hints.nodes)
            zones = zones and bool(hints.zones)
            if not (nodes or zones):
                return self
        # (No local endpoint: the flags rank nothing.)
        return replace(self, node_hints=nodes, zone_hints=zones)

    def on_node(self, endpoint: Located) -> bool:
        if self.node_hints:
            return endpoint.hints is not None and self.node in endpoint.hints.nodes
        return endpoint.node == self.node

    def in_zone(self, endpoint: Located) -> bool:
        if self.zone_hints:
            return endpoint.hints is not None and self.zone in endpoint.hints.zones
        return endpoint.zone == self.zone

    def rank(self, local: bool, endpoint: Located) -> int:
        node, zone = self.node, self.zone
        levels = (node is not None) + (zone is not None)  # a local endpoint in neither
        if not local:
            return levels + 1
        if node is not None and self.on_node(endpoint):
            return 0
        if zone is not None and self.in_zone(endpoint):
            return levels - 1
        return levels

    def why(self, local: bool, endpoint: Located) -> str:
        """Why the endpoint has its rank, naming the rule and never a node or zone
        (explain shows it on the health port too)."""
        if not local:
            return "another cluster"
        if self.node is not None and self.on_node(endpoint):
            return ("on this server's node: hints.forNodes" if self.node_hints
                    else "on this server's node: nodeName")
        if self.zone is not None and self.in_zone(endpoint):
            return ("in this server's zone: hints.forZones" if self.zone_hints
                    else "in this server's zone: zone")
        read = [*(["hints.forNodes" if self.node_hints else "nodeName"]
                  if self.node is not None else []),
                *(["hints.forZones" if self.zone_hints else "zone"]
                  if self.zone is not None else [])]
        return "the local cluster" + (f", elsewhere by {' and '.join(read)}" if read else "")


FEW_ADDRESSES = 8  # fit any UDP answer, as AAAA under a 255-byte name too: 224 <= 489 - 259


def endpoint_ranks(endpoints: list[list[Packed]]) -> dict[Packed, int]:
    """Each address's endpoint rank: endpoints ordered by their first address (IPv4
    first, numeric), an address of several endpoints taking the lowest rank. A truncated
    A or AAAA answer keeps endpoints in this order, so both families keep the same."""
    firsts = sorted(range(len(endpoints)), key=lambda i: min(
        (len(packed), packed) for packed in endpoints[i]))
    ranks: dict[Packed, int] = {}
    for rank, i in enumerate(firsts):
        for packed in endpoints[i]:
            ranks.setdefault(packed, rank)
    return ranks


def srv_weight(count: int) -> int:
    """CoreDNS's rule: the RRset's records share a weight of 100."""
    return max(1, 100 // count)
