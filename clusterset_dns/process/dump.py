"""``clusterset-dns dump``: the records the server would serve, as sorted zone-file text.

It decodes the very answers the server sends (:mod:`rrs`), so what it prints
is what clients get, not a second rendering of the objects.
"""

from __future__ import annotations

import logging
from typing import TextIO

from clusterset_dns.base import names
from clusterset_dns.base.config import Config
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import Cache, Op


def zone_lines(cache: Cache) -> list[str]:
    """Sorted by owner (labels compared from the root down, so a service's names stay
    together), then by the rest of the line. Owners are worked out once each: most
    records share theirs with others (SRV sets, glue)."""
    by_owner: dict[bytes, set[str]] = {}
    for record in rrs.zone_records(cache.zone.every_answer()):
        by_owner.setdefault(record.owner, set()).add(rrs.data_text(record))
    owners = sorted((tuple(reversed(text.rstrip(".").split("."))), text, owner)
                    for owner in by_owner for text in (names.wire_to_text(owner),))
    return [f"{text} {rest}" for _, text, owner in owners for rest in sorted(by_owner[owner])]


def dump(config: Config, out: TextIO) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    assert config.manifests is not None
    cache = Cache(names.ZoneNames(config.zone), config.ttl, config.ns_addresses,
                  cluster_id=config.cluster_id, topology_zone=config.topology_zone,
                  node_name=config.node_name, serve_terminating=config.serve_terminating)

    def apply(ops: list[Op]) -> None:
        cache.apply(ops)  # what it rejects, the cache has logged

    source = ManifestSource(config.manifests, apply, 0,
                            cluster_property=config.cluster_id is None)
    source.scan()
    if not source.synced:
        return 1
    for line in zone_lines(cache):
        out.write(line + "\n")
    count, key = rrs.largest_rrset(cache.zone.answers)
    if count:  # a comment: zone-file readers skip it
        out.write(f"; largest RRset: {rrs.key_text(key)}, {count} records\n")
    return 0
