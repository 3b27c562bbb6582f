"""One consistent snapshot of the zone as records, for zone transfers.

The snapshot copies the keys and the answers in one synchronous step (two
lists: 16 bytes a key, against 72 for a list of pairs): answers are immutable
and an update replaces them, so a transfer that yields to the loop between
messages never sees a later change. Transfers of one version of the zone share
its snapshot (see :mod:`xfr`). A transfer sends the answer sections of the
stored answers (copied, or decoded by :mod:`rrs`) as it goes, so it carries
exactly the records ``dump`` prints, and a large zone is never decoded at once.
The endpoint names of the compact index (``Zone.hosts``) are kept as its pairs
(an inner dict is replaced, never changed, by an update) and encoded as they
are sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.table import Zone, host_answers, shifted


@dataclass(frozen=True, slots=True)
class Snapshot:
    serial: int
    soa: rrs.Record  # the apex SOA with ``serial``
    keys: list[bytes]
    answers: list[wire.Answer]
    generation: int  # Zone.generation when taken
    hosts: list[tuple[bytes, Mapping[bytes, bytes]]] = field(default_factory=list)
    address_heads: dict[int, bytes] = field(default_factory=dict)
    # (key, its service name's key and answer) of the keys answered from it (Zone.derived).
    derived: list[tuple[bytes, bytes, wire.Answer]] = field(default_factory=list)

    def pairs(self) -> Iterator[tuple[bytes, wire.Answer]]:
        """Every (question key, answer) of the zone, the SOA's included; the endpoint
        names of the compact index and the derived SRV answers encoded as they come."""
        yield from zip(self.keys, self.answers, strict=True)
        for key, bare, answer in self.derived:
            yield key, shifted(answer, len(key) - len(bare))
        yield from host_answers(self.hosts, self.address_heads)

    def records(self) -> Iterator[rrs.Record]:
        """Every record of the zone but the SOA, grouped by RRset."""
        for key, answer in self.pairs():
            if key[-4:-2] == _SOA_TYPE:
                continue
            yield from rrs.answer_records(key, answer)


_SOA_TYPE = wire.SOA.to_bytes(2, "big")


def soa_key(zone: Zone) -> bytes:
    return zone.apex_wire + wire.SOA.to_bytes(2, "big") + wire.CLASS_IN.to_bytes(2, "big")


def soa(zone: Zone) -> rrs.Record:
    """The apex SOA record as it is now (O(1): no snapshot)."""
    return next(iter(rrs.answer_records(soa_key(zone), zone.answers[soa_key(zone)])))


def take(zone: Zone) -> Snapshot:
    if zone.unbuilt is not None:  # answers still to be built after the sync: all now
        zone.unbuilt.build_all()
    answers = zone.answers
    return Snapshot(zone.serial, soa(zone), list(answers), list(answers.values()),
                    zone.generation, list(zone.hosts.items()), zone.address_heads,
                    [(key, bare, answers[bare]) for key, bare in zone.derived.items()])
