"""The zone the handler reads: the answer dicts and how a name stands in them.

The dicts keep their identity for the process's life; :mod:`cache` changes them in
place inside one synchronous call.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.responses import ResponseMemory

NEGATIVES_CAP = 16_384

# How an import stands (Cache.states): answers something; has no ready endpoint (or
# no usable IP); never converted (only its rejection is known).
SERVED, NO_ENDPOINT, REJECTED = "served", "no_endpoint", "rejected"

# How a name stands in the zone (Zone.lookup).
MISSING, EMPTY, HAS_RECORDS = 0, 1, 2

# Every type a name can own records of here, as key suffixes (type, class IN).
TYPE_SUFFIXES = tuple(struct.pack("!HH", t, wire.CLASS_IN)
                      for t in (wire.A, wire.AAAA, wire.SRV, wire.TXT, wire.SOA, wire.NS))


def owns_records(answers: Mapping[bytes, wire.Answer], name: bytes) -> bool:
    # A loop, not any(): this runs for every negative answer on the fast path.
    for suffix in TYPE_SUFFIXES:  # noqa: SIM110
        if name + suffix in answers:
            return True
    return False


@dataclass(slots=True)
class Zone:
    """What the handler reads. The dicts keep their identity for the process's life."""

    apex_wire: bytes
    answers: dict[bytes, wire.Answer] = field(default_factory=dict)
    # Names that exist without records (ENTs, ...) -> reference count; a name with
    # records is known by its answers, so it is not kept here a second time.
    names: dict[bytes, int] = field(default_factory=dict)
    any_answer: wire.Answer | None = None  # RFC 8482's HINFO, the same for every name
    nxdomain: wire.Answer | None = None
    nodata: wire.Answer | None = None
    synced: bool = False
    serial: int = 0
    # NXDOMAIN/NODATA answers the handler worked out, keyed like ``answers`` (at most
    # NEGATIVES_CAP). They depend on the serial (the SOA in them), on which names
    # exist and on ``synced``: :meth:`changed` empties them whenever any of these moves.
    negatives: dict[bytes, wire.Answer] = field(default_factory=dict)
    # Whole UDP responses the handler built (responses.ResponseMemory). Same lifetime
    # rule.
    responses: ResponseMemory = field(default_factory=ResponseMemory)
    # Names whose negative answers carry an EDE (RFC 8914): name -> wire.ede(...).
    # Changed only with answers (a new serial), so the memories above stay right.
    explained: dict[bytes, bytes] = field(default_factory=dict)
    # How the answers that can exceed a UDP client's size are cut (truncate.Cuts), by
    # answer key; changed with the answers. ``cut_forms``: the truncated forms served so
    # far, by (key, rotation, room), bounded in bytes (truncate.FORMS_BUDGET); emptied
    # like the others.
    cuts: dict[bytes, truncate.Cuts] = field(default_factory=dict)
    cut_forms: truncate.FormMemory = field(default_factory=truncate.FormMemory)
    # Moves with every change (a transfer's shared snapshot is reused while it holds).
    generation: int = 0

    def changed(self) -> None:
        """Called after every change to what the zone answers (the serial moves with
        every rebuild; ``synced`` can flip without one)."""
        self.generation += 1
        self.negatives.clear()
        self.responses.clear()
        self.cut_forms.clear()

    def lookup(self, name: bytes) -> int:
        """HAS_RECORDS, EMPTY (exists, no records: an empty non-terminal) or MISSING,
        for a lower-case wire-format name. The one place existence is decided."""
        if owns_records(self.answers, name):
            return HAS_RECORDS
        return EMPTY if name in self.names else MISSING

    def exists(self, name: bytes) -> bool:
        return owns_records(self.answers, name) or name in self.names
