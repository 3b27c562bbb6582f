"""``clusterset-dns dump``: the records the server would serve, as sorted zone-file text.

It decodes the very answers the server sends (with dnslib), so what it prints
is what clients get, not a second rendering of the objects.
"""

from __future__ import annotations

import logging
from typing import TextIO

from dnslib import QTYPE, DNSRecord

from clusterset_dns import names
from clusterset_dns.cache import Cache, Op
from clusterset_dns.config import Config
from clusterset_dns.manifests import ManifestSource


def zone_lines(cache: Cache) -> list[str]:
    lines: set[str] = set()
    for key, ans in cache.zone.answers.items():
        message = b"\x00\x00" + ans.heads[0] + key + ans.body
        for rr in DNSRecord.parse(message).rr:
            rdata = rr.rdata.toZone()
            lines.add(f"{str(rr.rname).lower()} {rr.ttl} IN {QTYPE[rr.rtype]} {rdata}")
    return sorted(lines, key=_order)


def _order(line: str) -> tuple[tuple[str, ...], str]:
    owner, rest = line.split(" ", 1)
    return tuple(reversed(owner.rstrip(".").split("."))), rest


def dump(config: Config, out: TextIO) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    assert config.manifests is not None
    cache = Cache(names.ZoneNames(config.zone), config.ttl, config.ns_addresses)

    def apply(ops: list[Op]) -> None:
        cache.apply(ops)  # what it rejects, the cache has logged

    source = ManifestSource(config.manifests, apply, 0)
    source.scan()
    if not source.synced:
        return 1
    for line in zone_lines(cache):
        out.write(line + "\n")
    return 0
