"""The zone the handler reads: the answer dicts and how a name stands in them.

The dicts keep their identity for the process's life; :mod:`cache` changes them in
place inside one synchronous call.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.firstuse import FirstUse
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


SRV_SUFFIX = TYPE_SUFFIXES[2]


_POINTER_BYTES = bytes(range(0xC0, 0x100))  # the first byte of a compression pointer


def shifted(answer: wire.Answer, shift: int) -> wire.Answer:
    """``answer`` (an SRV answer of records.py: every owner the question, ``C0 0C``,
    the targets uncompressed) after a question ``shift`` bytes longer: the same bytes
    but the glue owners, pointers to the targets, each ``shift`` further. So a
    ``_port._proto`` name whose records are its service name's is answered from the
    service name's answer (records.py checks the result byte for byte when it builds).
    When every glue record has the first one's length, the pointers move in one big
    integer addition (a few microseconds for a hundred); otherwise one at a time.
    Raises ValueError (or OverflowError) for an answer not of that shape."""
    at = answer.glue_at
    if at < 0 or not shift:
        return answer
    body = answer.body
    glue = body[at:]
    size = 12 + int.from_bytes(glue[10:12])  # owner pointer, head, RDATA
    count, rest = divmod(len(glue), size)
    if (not rest and glue[10::size] == glue[10:11] * count
            and glue[11::size] == glue[11:12] * count
            and not glue[::size].translate(None, _POINTER_BYTES)
            and max(glue[::size], default=0) << 8 <= 0xFF00 - shift):
        # Every record of one size, each starting with a pointer, none that could pass
        # two bytes (its carry would go into the pointer before it: the loop below
        # raises instead): the pointers, two bytes each, gathered into one number,
        # moved in one addition, put back.
        pointers = bytearray(2 * count)
        pointers[0::2], pointers[1::2] = glue[0::size], glue[1::size]
        sums = (int.from_bytes(pointers) + shift * int.from_bytes(b"\x00\x01" * count)
                ).to_bytes(2 * count)
        out = bytearray(glue)
        out[0::size], out[1::size] = sums[0::2], sums[1::2]
        moved = bytes(out)
    else:
        parts, offset = [], 0
        while offset < len(glue):
            if glue[offset] < 0xC0:
                raise ValueError("a glue owner that is not a pointer")
            end = offset + 12 + int.from_bytes(glue[offset + 10 : offset + 12])
            pointer = int.from_bytes(glue[offset : offset + 2]) + shift
            parts.append(pointer.to_bytes(2) + glue[offset + 2 : end])
            offset = end
        moved = b"".join(parts)
    return wire.WithAdditional(answer.heads, body[:at] + moved, answer.rcode, at)


def share(answers: dict[bytes, wire.Answer], cuts: dict[bytes, truncate.Cuts],
          derived: dict[bytes, bytes], bare: bytes, key: bytes) -> None:
    """Of one build (records.Built's dicts): answers ``key`` from the answer of ``bare``
    (its service name) when that answer, shifted, is its answer byte for byte and they
    are cut alike: the ``_port._proto`` name of a service with one named port, whose
    Headless answer would carry every target and its glue a second time."""
    mine, theirs = answers[key], answers.get(bare)
    if theirs is None or (key in cuts) != (bare in cuts):
        return
    try:
        same = shifted(theirs, len(key) - len(bare))
    except (ValueError, OverflowError):
        return  # glue owners that are not pointers (wire.Encoder's): kept apart
    if (same.body != mine.body or same.heads != mine.heads
            or same.glue_at != mine.glue_at or same.rcode != mine.rcode):
        return
    del answers[key]
    derived[key] = bare
    if key in cuts:  # read from the records, whatever the question's length
        cuts[key] = cuts[bare]


# The header of every answer with one address record (what records.py encodes).
ONE_ADDRESS = wire.heads(0, 1, 0, 0)
# The key suffix of an endpoint name's one address, by the address's packed length.
FAMILY_SUFFIX = {4: TYPE_SUFFIXES[0], 16: TYPE_SUFFIXES[1]}

# Endpoint names' first labels shared by every parent that has them (pod-0, pod-1...
# repeat in every StatefulSet's service): one bytes object each. Bounded, never
# emptied: names past the bound (IP-derived ones, mostly unique) are simply not shared.
SHARED_LABELS_CAP = 8_192
_shared_labels: dict[bytes, bytes] = {}


def shared_label(label: bytes) -> bytes:
    """``label`` itself or the equal bytes object already shared (see above)."""
    known = _shared_labels.get(label)
    if known is not None:
        return known
    if len(_shared_labels) < SHARED_LABELS_CAP:
        _shared_labels[label] = label
    return label


class Names(Mapping[bytes, bytes]):
    """The endpoint names of one parent: first label -> the name's one packed address.
    Packed to save the bytes object of each address (~40 B a name): the addresses sit
    in one bytes per family and each label maps to its position, IPv4 ones first
    (positions below 257 are ints CPython shares). Built whole, never changed."""

    __slots__ = ("_at", "_v4", "_v6")

    def __init__(self, labels: Mapping[bytes, bytes]) -> None:
        v4 = [(label, packed) for label, packed in labels.items() if len(packed) == 4]
        v6 = [(label, packed) for label, packed in labels.items() if len(packed) != 4]
        if any(len(packed) != 16 for _, packed in v6):
            raise ValueError("an endpoint address that is neither 4 nor 16 bytes")
        self._v4 = b"".join(packed for _, packed in v4)
        self._v6 = b"".join(packed for _, packed in v6)
        self._at = {shared_label(label): at
                    for at, (label, _) in enumerate(itertools.chain(v4, v6))}

    def _address(self, at: int) -> bytes:
        fours = len(self._v4) >> 2
        if at < fours:
            return self._v4[at << 2 : (at + 1) << 2]
        at -= fours
        return self._v6[at << 4 : (at + 1) << 4]

    def get(self, label: bytes, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        at = self._at.get(label)
        return default if at is None else self._address(at)

    def __getitem__(self, label: bytes) -> bytes:
        return self._address(self._at[label])

    def __contains__(self, label: object) -> bool:
        return label in self._at

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def items(self) -> Iterator[tuple[bytes, bytes]]:  # type: ignore[override]
        address = self._address
        return ((label, address(at)) for label, at in self._at.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Names) and (self._v4, self._v6, self._at) == (
                other._v4, other._v6, other._at):
            return True  # the same build's layout (the usual case of an unchanged parent)
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Names({dict(self.items())!r})"


# The compact index of endpoint names answered on first use (records.py, ``lazy``):
# parent name (the wire form, lower case, of ``<cluster>.<service>...``) -> its
# names (first label, wire, with its length byte -> the name's one packed address):
# a Names (a plain dict does too). An entry is replaced whole by a rebuild, never
# changed in place, so a transfer's snapshot keeps a consistent copy by keeping the pairs.
Hosts = dict[bytes, Mapping[bytes, bytes]]


def host_answers(hosts: Iterable[tuple[bytes, Mapping[bytes, bytes]]],
                 address_heads: Mapping[int, bytes]) -> Iterator[tuple[bytes, wire.Answer]]:
    """(answer key, answer) of every name of ``hosts``: what an eager build stores."""
    for parent, labels in hosts:
        for label, packed in labels.items():
            yield (label + parent + FAMILY_SUFFIX[len(packed)],
                   wire.Answer(ONE_ADDRESS, address_heads[len(packed)] + packed, 0))


def changes(zone: Zone, old_keys: Iterable[bytes], old_parents: Iterable[bytes],
            answers: Mapping[bytes, wire.Answer], hosts: Hosts,
            old_derived: Iterable[bytes] = (), derived: Mapping[bytes, bytes] | None = None
            ) -> list[tuple[bytes, wire.Answer | None, wire.Answer | None]]:
    """(key, before, after) of every answer of a service that changes from what
    ``zone`` has of it (``old_keys``, ``old_parents``, ``old_derived``) to a new build
    (``answers``, ``hosts``, ``derived``), for the journal. Names of the compact index
    are encoded only under the parents whose names or addresses moved."""
    now = zone.answers
    out: list[tuple[bytes, wire.Answer | None, wire.Answer | None]] = []
    was = {parent: zone.hosts[parent] for parent in old_parents}
    moved = [parent for parent in was.keys() | hosts.keys() if was.get(parent) != hosts.get(parent)]
    before_hosts = dict(host_answers(((p, was[p]) for p in moved if p in was),
                                     zone.address_heads))
    after_hosts = dict(host_answers(((p, hosts[p]) for p in moved if p in hosts),
                                    zone.address_heads))
    # Answers shifted from their service name's (Zone.derived) compare as if stored.
    for key in old_derived:
        before = zone.cold(key)  # the service name's answer before the swap, shifted
        if before is not None:
            before_hosts[key] = before
    for key, bare in (derived or {}).items():
        after_hosts[key] = shifted(answers[bare], len(key) - len(bare))
    kept: set[bytes] = set()
    for key, before in itertools.chain(((key, now[key]) for key in old_keys),
                                       before_hosts.items()):
        kept.add(key)
        after = answers.get(key) or after_hosts.pop(key, None)
        if after is None or after.body != before.body or after.heads[0] != before.heads[0]:
            out.append((key, before, after))
    out.extend((key, None, answer) for key, answer in answers.items() if key not in kept)
    out.extend((key, None, answer) for key, answer in after_hosts.items())
    return out


def host_of(hosts: Hosts, name: bytes) -> bytes | None:
    """The one packed address of the wire-format name ``name`` in the compact index
    ``hosts`` (its first label under its parent), or None."""
    if not name:
        return None
    first = name[0] + 1
    labels = hosts.get(name[first:])
    return None if labels is None else labels.get(name[:first])


class Present:
    """Whether a name exists in what a build made: its names or its compact index."""

    __slots__ = ("hosts", "names")

    def __init__(self, names: set[bytes], hosts: Hosts) -> None:
        self.names = names
        self.hosts = hosts

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, bytes) or not name:
            return False
        return name in self.names or host_of(self.hosts, name) is not None


def owns_records(answers: Mapping[bytes, wire.Answer], name: bytes) -> bool:
    # A loop, not any(): this runs for every negative answer on the fast path.
    for suffix in TYPE_SUFFIXES:  # noqa: SIM110
        if name + suffix in answers:
            return True
    return False


class Unbuilt(Protocol):
    """Services whose answers are built after the sync (pending.Pending)."""

    def build_for(self, name: bytes) -> None: ...

    def build_all(self) -> None: ...


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
    # Answers of the compact index's names encoded on first use (firstuse.FirstUse):
    # they depend only on their name's entry in ``hosts``, so they outlive changes;
    # the cache forgets those whose entries an update replaces.
    first_use: FirstUse = field(default_factory=FirstUse)
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
    # Endpoint names whose answer is encoded on first use (see Hosts), and the record
    # heads (owner pointer, type, class, TTL, length) of those answers, by packed
    # length: the cache sets them from its RecordBuilder.
    hosts: Hosts = field(default_factory=dict)
    address_heads: dict[int, bytes] = field(default_factory=dict)
    # SRV answers of ``_port._proto`` names whose records are their service name's:
    # question key -> the service name's key in ``answers``; encoded on first use
    # (shifted) and remembered in ``first_use``; their ``cuts`` are the service name's.
    derived: dict[bytes, bytes] = field(default_factory=dict)
    # Services whose answers are not built yet (pending.py): a name under one is built
    # before it is looked up, so it answers as if built. None: every answer is built.
    unbuilt: Unbuilt | None = None

    def changed(self) -> None:
        """Called after every change to what the zone answers (the serial moves with
        every rebuild; ``synced`` can flip without one)."""
        self.generation += 1
        self.negatives.clear()
        self.responses.clear()
        self.cut_forms.clear()

    def replace_derived(self, old: Iterable[bytes], derived: dict[bytes, bytes]) -> None:
        """Puts a service's new derived keys in place of its ``old`` ones, forgetting
        what was remembered of the old (their service name's answer was rebuilt)."""
        mine = self.derived
        for key in old:
            del mine[key]
        if self.first_use:
            self.first_use.forget(old)
        mine.update(derived)

    def replace_hosts(self, old_parents: Iterable[bytes], hosts: Hosts) -> None:
        """Puts a service's new compact index entries ``hosts`` in place of its old
        ones (``old_parents``), forgetting the remembered answers of the names whose
        address moved or went; every other name's (of this service too) stays right."""
        index, first_use = self.hosts, self.first_use
        for parent in old_parents:
            labels = index.pop(parent)
            if first_use:
                now = hosts.get(parent, {})
                first_use.forget(label + parent + FAMILY_SUFFIX[len(packed)]
                                 for label, packed in labels.items() if now.get(label) != packed)
        index.update(hosts)

    def host(self, name: bytes) -> bytes | None:
        """The one packed address of an endpoint name of the compact index, or None."""
        return host_of(self.hosts, name)

    def cold(self, key: bytes) -> wire.Answer | None:
        """The answer to the lower-case question key ``key`` when its name is in the
        compact index and has a record of the type, encoded now (a few microseconds:
        the handler remembers it in ``first_use``); None otherwise."""
        bare = self.derived.get(key)
        if bare is not None:
            return shifted(self.answers[bare], len(key) - len(bare))
        packed = self.host(key[:-4])
        if packed is None or key[-4:] != FAMILY_SUFFIX[len(packed)]:
            return None
        return wire.Answer(ONE_ADDRESS, self.address_heads[len(packed)] + packed, 0)


    def first(self, key: bytes) -> wire.Answer | None:
        """:meth:`cold`'s answer through ``first_use``: remembered there (found in its
        older half, moved back to the recent one), else encoded now and remembered;
        None when ``key`` is not answered on first use."""
        memory = self.first_use
        ans = memory.get(key)
        if ans is None:
            if self.unbuilt is not None:
                self.unbuilt.build_for(key[:-4])
                ans = self.answers.get(key)
                if ans is not None:
                    return ans
            ans = memory.take(key) or self.cold(key)
            if ans is not None:
                memory.put(key, ans)  # back into the recent half, or in for the first time
        return ans

    def has(self, key: bytes) -> bool:
        """Whether the question key ``key`` has an answer, stored or encoded on use."""
        return key in self.answers or self.cold(key) is not None

    def every_answer(self) -> Iterator[tuple[bytes, wire.Answer]]:
        """Every (key, answer) of the zone: the stored ones, then those of the compact
        index, encoded as they come (for dump and the tests; transfers snapshot)."""
        if self.unbuilt is not None:
            self.unbuilt.build_all()
        yield from self.answers.items()
        for key, bare in self.derived.items():
            yield key, shifted(self.answers[bare], len(key) - len(bare))
        yield from host_answers(self.hosts.items(), self.address_heads)

    def count(self) -> int:
        """How many answers the zone has, stored or encoded on use."""
        return (len(self.answers) + len(self.derived)
                + sum(len(labels) for labels in self.hosts.values()))

    def lookup(self, name: bytes) -> int:
        """HAS_RECORDS, EMPTY (exists, no records: an empty non-terminal) or MISSING,
        for a lower-case wire-format name. The one place existence is decided."""
        if self.unbuilt is not None:
            self.unbuilt.build_for(name)
        return self.state(name)

    def state(self, name: bytes) -> int:
        """:meth:`lookup` in what is built so far."""
        if (owns_records(self.answers, name) or self.host(name) is not None
                or name + SRV_SUFFIX in self.derived):
            return HAS_RECORDS
        return EMPTY if name in self.names else MISSING

    def exists(self, name: bytes) -> bool:
        return self.lookup(name) != MISSING
