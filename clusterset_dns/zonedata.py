"""One consistent snapshot of the zone as records, for zone transfers.

The snapshot copies the (key, answer) pairs in one synchronous step: answers
are immutable and an update replaces them, so a transfer that yields to the
loop between messages never sees a later change. Records are decoded from the
stored answers (:mod:`rrs`) as they are sent, so a transfer carries exactly
the records ``dump`` prints, and a large zone is not decoded all at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from clusterset_dns import rrs, wire
from clusterset_dns.cache import Zone


@dataclass(frozen=True, slots=True)
class Snapshot:
    serial: int
    soa: rrs.Record  # the apex SOA with ``serial``
    items: list[tuple[bytes, wire.Answer]]

    def records(self) -> Iterator[rrs.Record]:
        """Every record of the zone but the SOA, grouped by RRset."""
        for key, answer in self.items:
            if key[-4:-2] == _SOA_TYPE:
                continue
            yield from rrs.answer_records(key, answer)


_SOA_TYPE = wire.SOA.to_bytes(2, "big")


def soa_key(zone: Zone) -> bytes:
    return zone.apex_wire + wire.SOA.to_bytes(2, "big") + wire.CLASS_IN.to_bytes(2, "big")


def take(zone: Zone) -> Snapshot:
    items = list(zone.answers.items())
    soa = next(iter(rrs.answer_records(soa_key(zone), zone.answers[soa_key(zone)])))
    return Snapshot(zone.serial, soa, items)
