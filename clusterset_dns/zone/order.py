"""The order answers keep: addresses sorted (IPv4 first, numeric), endpoints ranked
local-first (:class:`Tiers`), and the weight SRV records share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clusterset_dns.zone.model import IP, Endpoint

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
    then the rest; then every other cluster."""

    cluster: str
    node: str | None
    zone: str | None

    def rank(self, local: bool, endpoint: Endpoint) -> int:
        node, zone = self.node, self.zone
        levels = (node is not None) + (zone is not None)  # a local endpoint in neither
        if not local:
            return levels + 1
        if node is not None and endpoint.node == node:
            return 0
        if zone is not None and endpoint.zone == zone:
            return levels - 1
        return levels


FEW_ADDRESSES = 16  # this many A records fit any UDP answer (16 bytes each)


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
