"""One changed EndpointSlice of a large Headless service, applied as a difference.

A full rebuild of a service re-encodes every answer it has: at 5,000 endpoints
and 5 ports about half a second of Python. For the usual shape of a large
Headless service (every slice with a cluster id and the same ports, each endpoint
one address, no two endpoints sharing an address or a name, no preference), the
cache keeps a :class:`Headless` after the first rebuild past the sync, and a
later change of its slices touches only:

- the answers of the endpoint names that came, went or changed address;
- the service's A/AAAA and SRV answers, built from sorted lists kept here:
  joining the records one message holds (an answer larger than a TCP message is
  cut to that anyway, RFC 2181 9), not encoding every endpoint's;
- the EDE texts of the service (reasons.headless: one pass over its slices).

What stays O(endpoints) is C work: inserting into and removing from the sorted
lists (a memmove of pointers) and copying the bytes of answers that list every
endpoint while they fit one message. Anything else (the import, its ports, a
cluster appearing or leaving, a second address, tiers) answers False, and the
cache rebuilds the service whole, as before.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from clusterset_dns.base import names
from clusterset_dns.base.names import Labels
from clusterset_dns.zone import reasons, truncate, wire
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, Port, ServiceImport, ServiceType
from clusterset_dns.zone.order import srv_weight
from clusterset_dns.zone.records import Built, RecordBuilder

# Below this many endpoint names a full rebuild costs about as much as a difference
# (and keeps no lists); above it, it grows with the service.
INCREMENTAL_MIN = 256
# A service name with more addresses than this ranks its endpoints for truncated
# answers (order.FEW_ADDRESSES); the lists assume it does.
_FEW = 16

_SRV_RECORD = struct.Struct("!HHIHHHH")  # type, class, ttl, rdlength, priority, weight, port
_POINTER_MAX = 0x3FFF  # a compression pointer's 14-bit offset
_ADDRESS_SUFFIX = {size: struct.pack("!HH", rtype, wire.CLASS_IN)
                   for size, rtype in ((4, wire.A), (16, wire.AAAA))}
# The least a glue record takes: owner pointer, type..rdlength, an IPv4 address.
_GLUE_MIN = 2 + 10 + 4

Targets = dict[Labels, bytes]  # endpoint name -> its one packed address


@dataclass(slots=True)
class Headless:
    """What a difference needs of one Headless service, as of its last update."""

    imp: ServiceImport
    svc: Labels
    svc_wire: bytes
    ports: tuple[Port, ...]  # every slice's ports
    slices: dict[ObjectKey, EndpointSlice]
    targets: list[Labels]  # every endpoint name, sorted (the SRV records' order)
    packs: list[bytes]  # packs[i]: the one address of targets[i]
    wires: list[bytes]  # wires[i]: the wire form of targets[i]
    families: dict[int, list[bytes]]  # 4 / 16 -> the service's addresses, sorted
    wire_bytes: int  # the wire length of every endpoint name, summed
    clusters: dict[Labels, int]  # endpoint names per cluster
    structure: frozenset[bytes]  # every name of the service but the endpoint names
    srv: tuple[tuple[Labels, tuple[int, ...]], ...]  # SRV owners and their port numbers
    keys: tuple[bytes, ...]  # the answer keys of the names in ``structure``
    # SRV owner -> how many records its answer kept when cut short of its first port's
    # (0: not so): a change past them leaves that answer as it is.
    cut_at: dict[Labels, int] = field(default_factory=dict)


def _targets(svc: Labels, piece: EndpointSlice) -> Targets | None:
    """The slice's endpoint names and addresses; None when it is not of the shape."""
    if piece.cluster is None:
        return None
    tail = names.EndpointNames(svc, names.subdomain(piece.cluster))
    out: Targets = {}
    endpoints = piece.endpoints
    if endpoints.counts is not None and any(count != 1 for count in endpoints.counts):
        return None
    for packed, hostname in zip(endpoints.addresses(), endpoints.hostname_list(),
                                strict=True):
        target = tail.name(hostname if hostname is not None
                           else names.packed_hostname(packed))[0]
        if target in out:
            return None
        out[target] = packed
    return out


def _srv_owners(builder: RecordBuilder, svc: Labels, ports: tuple[Port, ...]
                ) -> tuple[tuple[Labels, tuple[int, ...]], ...]:
    """The SRV answers RecordBuilder._srv_sets makes when every name has every port:
    the bare name with each port number once, then each named port's owner, in the
    order of the sorted records."""
    ordered = sorted(ports, key=lambda p: (p.port, p.protocol, p.name))
    owners: dict[Labels, dict[int, None]] = {}
    if ordered:
        owners[svc] = dict.fromkeys(p.port for p in ordered)
    for port in ordered:
        if port.name:
            owner = builder.zone.port_srv(svc, port.name, port.protocol)
            owners.setdefault(owner, {})[port.port] = None
    return tuple((owner, tuple(numbers)) for owner, numbers in owners.items())


def _structure(builder: RecordBuilder, svc: Labels, clusters: Iterable[Labels],
               srv: tuple[tuple[Labels, tuple[int, ...]], ...]) -> frozenset[bytes]:
    """The names RecordBuilder marks for the service, less its endpoint names."""
    apex = len(builder.zone.apex)
    found: set[bytes] = set()
    for owner in (svc, *((*cluster, *svc) for cluster in clusters),
                  *(owner for owner, _ in srv)):
        for i in range(len(owner) - apex):
            found.add(names.to_wire(owner[i:]))
    return frozenset(found)


def start(builder: RecordBuilder, imp: ServiceImport, slices: Mapping[ObjectKey, EndpointSlice],
          built: Built, minimum: int = INCREMENTAL_MIN) -> Headless | None:
    """The lists of a service just rebuilt into ``built``; None when it is not of the
    shape or has fewer than ``minimum`` endpoint names."""
    if (imp.type is not ServiceType.HEADLESS or builder.tiers(imp) is not None
            or not slices or built.derived):
        return None
    svc = builder.zone.service(imp.namespace, imp.name)
    first = next(iter(slices.values()))
    every: Targets = {}
    clusters: dict[Labels, int] = {}
    for piece in slices.values():
        found = _targets(svc, piece)
        if found is None or piece.ports != first.ports:
            return None
        for target in found:
            cluster = target[1 : len(target) - len(svc)]
            clusters[cluster] = clusters.get(cluster, 0) + 1
        size = len(every)
        every.update(found)
        if len(every) != size + len(found):
            return None  # a name twice
    if len(every) < max(minimum, _FEW + 1):
        return None
    packs = set(every.values())
    if len(packs) != len(every):
        return None  # an address twice
    srv = _srv_owners(builder, svc, first.ports)
    structure = _structure(builder, svc, clusters, srv)
    wires = {names.to_wire(target) for target in every}
    if not wires.isdisjoint(structure) or structure | wires != built.names:
        return None  # an endpoint name that is also a cluster's or a port's
    targets = sorted(every)
    keys = tuple(key for key in built.answers if key[:-4] not in wires)
    return Headless(imp, svc, names.to_wire(svc), first.ports, dict(slices), targets,
                    [every[target] for target in targets],
                    [names.to_wire(target) for target in targets],
                    {4: sorted(p for p in packs if len(p) == 4),
                     16: sorted(p for p in packs if len(p) == 16)},
                    sum(len(wire_) for wire_ in wires), clusters, structure, srv, keys)


def all_keys(state: Headless) -> tuple[bytes, ...]:
    """Every answer key of the service (a full rebuild replaces them)."""
    return state.keys + tuple(target_wire + _ADDRESS_SUFFIX[len(packed)]
                              for target_wire, packed in zip(state.wires, state.packs, strict=True))


@dataclass(slots=True)
class Difference:
    """What one update changes in the zone: answers (None: removed) and their cuts."""

    answers: dict[bytes, wire.Answer | None]
    cuts: dict[bytes, truncate.Cuts | None]
    explained: dict[bytes, bytes]  # the service's EDE texts, all of them

    def put(self, answers: dict[bytes, wire.Answer], cuts: dict[bytes, truncate.Cuts],
            changes: list[tuple[bytes, wire.Answer | None, wire.Answer | None]] | None
            ) -> None:
        """Puts the answers and cuts in the zone's dicts; each answer that changes
        goes to ``changes`` (the journal's; None: not kept) as (key, before, after)."""
        if changes is not None:
            for key, after in self.answers.items():
                before = answers.get(key)
                if before is None and after is None:
                    continue
                if (before is None or after is None or after.body != before.body
                        or after.heads[0] != before.heads[0]):
                    changes.append((key, before, after))
        for key, after in self.answers.items():
            if after is None:
                answers.pop(key, None)
            else:
                answers[key] = after
        for key, cut in self.cuts.items():
            if cut is None:
                cuts.pop(key, None)
            else:
                cuts[key] = cut


class _Present:
    """The names the service has after the update (``top``: the answers it changes, over
    the zone's ``base``), as reasons.headless asks."""

    __slots__ = ("base", "state", "top")

    def __init__(self, state: Headless, top: Mapping[bytes, wire.Answer | None],
                 base: Mapping[bytes, wire.Answer]) -> None:
        self.state, self.top, self.base = state, top, base

    def __contains__(self, name: object) -> bool:
        if name in self.state.structure:
            return True
        assert isinstance(name, bytes)
        for suffix in _ADDRESS_SUFFIX.values():
            key = name + suffix
            if (self.top[key] if key in self.top else self.base.get(key)) is not None:
                return True
        return False


def update(builder: RecordBuilder, state: Headless, imp: ServiceImport,
           slices: Mapping[ObjectKey, EndpointSlice], touched: Iterable[ObjectKey],
           answers: Mapping[bytes, wire.Answer], minimum: int = INCREMENTAL_MIN
           ) -> Difference | None:
    """The difference the slices ``touched`` make (``slices``: every slice of the
    service now; ``answers``: the zone's). None when the update is not of the shape:
    the caller rebuilds the service whole (``state`` is then stale)."""
    if imp != state.imp or builder.tiers(imp) is not None:
        return None
    svc = state.svc
    gone: Targets = {}
    came: Targets = {}
    for key in touched:
        old, new = state.slices.get(key), slices.get(key)
        if old is new:
            continue
        before = _targets(svc, old) if old is not None else {}
        after = _targets(svc, new) if new is not None else {}
        if before is None or after is None or (new is not None and new.ports != state.ports):
            return None
        for target, packed in before.items():
            if after.get(target) != packed:
                gone[target] = packed
        for target, packed in after.items():
            if before.get(target) != packed:
                if target in came:
                    return None
                came[target] = packed
    for target, packed in list(gone.items()):
        if came.get(target) == packed:  # moved between slices: no change of answers
            del gone[target], came[target]
    if not _fits(state, gone, came, minimum):
        return None
    for key in touched:
        new = slices.get(key)
        if new is None:
            state.slices.pop(key, None)
        else:
            state.slices[key] = new
    return _apply(builder, state, imp, slices, gone, came, answers)


def _fits(state: Headless, gone: Targets, came: Targets, minimum: int) -> bool:
    """Whether the service keeps the shape (and every cluster, and both families
    present or absent) after ``gone`` leave and ``came`` join."""
    targets, families = state.targets, state.families
    count = {size: len(family) for size, family in families.items()}
    clusters: dict[Labels, int] = {}
    svc_len = len(state.svc)
    for target, packed in gone.items():
        count[len(packed)] -= 1
        cluster = target[1 : len(target) - svc_len]
        clusters[cluster] = clusters.get(cluster, 0) - 1
    leaving = set(gone.values())
    for target, packed in came.items():
        if target not in gone and _has(targets, target):
            return False  # a name twice
        if packed not in leaving and _has(families[len(packed)], packed):
            return False  # an address twice
        if names.to_wire(target) in state.structure:
            return False
        count[len(packed)] += 1
        cluster = target[1 : len(target) - svc_len]
        clusters[cluster] = clusters.get(cluster, 0) + 1
    if len(set(came.values())) != len(came):
        return False
    for size, family in families.items():
        if (count[size] == 0) != (not family):
            return False  # a family's answer comes or goes: a full rebuild says so
    if sum(count.values()) < max(minimum, _FEW + 1):
        return False
    # A cluster's name (an empty non-terminal) comes and goes with its first and last
    # endpoint name: a full rebuild says so.
    return all(state.clusters.get(cluster, 0) > 0 and state.clusters[cluster] + delta > 0
               for cluster, delta in clusters.items())


def _has(ordered: list[Labels] | list[bytes], item: Labels | bytes) -> bool:
    at = bisect.bisect_left(ordered, item)
    return at < len(ordered) and ordered[at] == item


def _apply(builder: RecordBuilder, state: Headless, imp: ServiceImport,
           slices: Mapping[ObjectKey, EndpointSlice], gone: Targets, came: Targets,
           answers: Mapping[bytes, wire.Answer]) -> Difference:
    changed: dict[bytes, wire.Answer | None] = {}
    svc_len = len(state.svc)
    # The first record each cut SRV answer left out: changes past it leave the answer.
    limits = {owner: state.targets[kept] for owner, kept in state.cut_at.items()
              if 0 < kept < len(state.targets)}
    before = len(state.targets)
    for target, packed in gone.items():
        at = bisect.bisect_left(state.targets, target)
        target_wire = state.wires[at]
        del state.targets[at], state.packs[at], state.wires[at]
        family = state.families[len(packed)]
        del family[bisect.bisect_left(family, packed)]
        state.wire_bytes -= len(target_wire)
        cluster = target[1 : len(target) - svc_len]
        state.clusters[cluster] -= 1
        changed[target_wire + _ADDRESS_SUFFIX[len(packed)]] = None
    for target, packed in came.items():
        at = bisect.bisect_left(state.targets, target)
        target_wire = names.to_wire(target)
        state.targets.insert(at, target)
        state.packs.insert(at, packed)
        state.wires.insert(at, target_wire)
        bisect.insort(state.families[len(packed)], packed)
        state.wire_bytes += len(target_wire)
        cluster = target[1 : len(target) - svc_len]
        state.clusters[cluster] += 1
        key, answer = builder.one_address(target_wire, packed)
        changed[key] = answer
    out = Built()
    rotation = truncate.Rotation()
    v4, v6 = state.families[4], state.families[16]
    after = len(v4) + len(v6)
    for family, first in ((v4, 0), (v6, len(v4))):
        if family:
            builder.family_answer(out, state.svc_wire, family, first, after, rotation)
    kept: set[bytes] = set()
    for owner, numbers in state.srv:
        limit = limits.get(owner)
        if (limit is not None and all(target > limit for target in (*gone, *came))
                and srv_weight(len(numbers) * before) == srv_weight(len(numbers) * after)
                and _records(state, numbers) > _room(owner)):
            kept.add(wire.question_key(owner, wire.SRV))
            continue
        _srv(builder, out, state, owner, numbers)
    changed.update(out.answers)
    cuts: dict[bytes, truncate.Cuts | None] = dict.fromkeys(
        (key for key in state.keys if key not in kept), None)
    cuts.update(out.cuts)
    # The cache's order of the slices, as a rebuild reads them (the first text of a
    # name listed twice wins).
    present = _Present(state, changed, answers)
    explained = reasons.headless(builder.zone, state.svc, present, imp, list(slices.values()),
                                 ())
    return Difference(changed, cuts, explained)


def _srv(builder: RecordBuilder, out: Built, state: Headless, owner: Labels,
         numbers: tuple[int, ...]) -> None:
    """One SRV answer: every endpoint name at each port of ``numbers``, with its address
    as glue; the bytes wire.srv_answer or the Encoder write for it. Past what one
    message holds, only the SRV records that fit are joined (wire.sized drops the glue
    first, then records from the end)."""
    targets, wires = state.targets, state.wires
    count = len(numbers) * len(targets)
    question_len = len(wire.question_key(owner, wire.SRV))
    room = _room(owner)
    records = _records(state, numbers)
    glued = records + _GLUE_MIN * len(targets) <= room  # else the glue cannot fit
    whole = glued or (records <= room and count <= wire.MAX_COUNT)
    weight = srv_weight(count)
    ttl = builder.ttl
    parts: list[bytes] = []
    ends: list[int]  # where each record ends (wire.sized reads it)
    used = 0
    run = 18 * len(wires) + state.wire_bytes  # the bytes of one port's records
    lengths = set(map(len, wires)) if run <= room else set()
    for number in numbers:
        if whole or (used + run <= room and len(parts) + len(wires) <= wire.MAX_COUNT):
            # every target at this port: a comprehension
            heads = {length: b"\xc0\x0c" + _SRV_RECORD.pack(
                wire.SRV, wire.CLASS_IN, ttl, length + 6, 0, weight, number)
                for length in lengths}
            parts += [heads[len(target_wire)] + target_wire for target_wire in wires]
            used += run
            continue
        # the records one message still holds, then stop
        ends = list(itertools.accumulate(map(len, parts)))
        head, head_size = b"", 0
        for target_wire in wires:
            size = 18 + len(target_wire)
            if used + size > room or len(parts) == wire.MAX_COUNT:
                break
            if size != head_size:  # names of one length in a row: one head
                head, head_size = b"\xc0\x0c" + _SRV_RECORD.pack(
                    wire.SRV, wire.CLASS_IN, ttl, size - 12, 0, weight, number), size
            parts.append(head + target_wire)
            used += size
            ends.append(used)
        break
    else:
        ends = list(itertools.accumulate(map(len, parts)))
    state.cut_at[owner] = 0 if whole or len(parts) >= len(targets) else len(parts)
    if not glued:
        flags = wire.QR | wire.AA | (0 if whole else wire.TC)
        answer = wire.Answer(wire.heads(0, len(parts), 0, 0, flags), b"".join(parts), 0)
    else:
        _glue(parts, owner, state, ends, 12 + question_len, ttl)
        answer = wire.sized(question_len, wire.NOERROR, b"".join(parts),
                            (count, 0, len(targets)), used, ends)
    builder.store_srv(out, owner, answer)


def _room(owner: Labels) -> int:
    """The bytes of records one TCP message holds after the question (as wire.sized)."""
    return wire.TCP_MAX - 12 - len(wire.question_key(owner, wire.SRV)) - wire.OPT_LEN


def _records(state: Headless, numbers: tuple[int, ...]) -> int:
    """The bytes of the SRV records of an answer (no glue)."""
    return len(numbers) * (18 * len(state.targets) + state.wire_bytes)


def _glue(parts: list[bytes], owner: Labels, state: Headless, ends: list[int], base: int,
          ttl: int) -> None:
    """Each target's address record, owned by a pointer to the target where it is first
    written (the first port's records: ``ends``) when that is within a pointer's reach;
    past it, by its labels up to a suffix of the question, as the Encoder compresses."""
    wires, packs = state.wires, state.packs
    fixed = {size: wire.RR_HEAD.pack(rtype, wire.CLASS_IN, ttl, size)
             for size, rtype in ((4, wire.A), (16, wire.AAAA))}
    # Where each target starts in the message: increasing, so those within reach come first.
    starts = [base + end - len(target_wire) for end, target_wire in zip(ends, wires,
                                                                       strict=False)]
    reach = bisect.bisect_left(starts, _POINTER_MAX)
    pointer = wire.U16.pack
    parts += [pointer(0xC000 | at) + fixed[len(packed)] + packed
              for at, packed in zip(starts[:reach], packs, strict=False)]
    tails = _Tails(owner)  # what follows the first label, by its wire form
    parts += [target_wire[: 1 + target_wire[0]] + tails[target_wire[1 + target_wire[0]:]]
              + fixed[len(packed)] + packed
              for target_wire, packed in zip(wires[reach:], packs[reach:], strict=True)]


class _Tails(dict[bytes, bytes]):
    """A name's wire form (less its first label) -> that name as the Encoder writes it
    after ``owner``'s question: its labels up to the first suffix of the question."""

    def __init__(self, owner: Labels) -> None:
        super().__init__()
        self.suffixes: dict[Labels, int] = {}
        offset = 12
        for i, label in enumerate(owner):
            self.suffixes[owner[i:]] = offset
            offset += 1 + len(label)

    def __missing__(self, name: bytes) -> bytes:
        labels = []
        at = 0
        while name[at]:
            labels.append(name[at + 1 : at + 1 + name[at]])
            at += 1 + name[at]
        self[name] = found = _compressed(tuple(labels), self.suffixes)
        return found


def _compressed(labels: Labels, suffixes: Mapping[Labels, int]) -> bytes:
    out = bytearray()
    for i, label in enumerate(labels):
        pointer = suffixes.get(labels[i:])
        if pointer is not None:
            return bytes(out) + wire.U16.pack(0xC000 | pointer)
        out.append(len(label))
        out += label
    out.append(0)
    return bytes(out)

