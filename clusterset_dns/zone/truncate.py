"""Truncated UDP answers that still carry records (RFC 2181 9).

A UDP client whose size limit an answer section exceeds gets TC and as many
whole records as fit, so that a stub resolver that never retries over TCP
(musl, busybox) still gets a usable subset. Which records, for every answer
that can need it, is decided when the data changes (a :class:`Cuts` per
answer key): the records in the order they are cut, and a few rotations of
that order, so that consecutive truncated answers do not hand every such
client the same endpoints. The order in use is the wall clock's second
(:class:`Rotation`), so that every process and replica hands out the same one.
Only the bytes for one client size are joined,
once, when that size first asks, and kept in a :class:`FormMemory` bounded in bytes
(``Zone.cut_forms``).

Every record the cut keeps is position-independent: an owner that is the
question (``C0 0C``) and an uncompressed SRV target (RFC 2782). Glue owners
are pointers to those targets, so they are written again for each cut.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence

from clusterset_dns.base.clock import SYSTEM
from clusterset_dns.zone import wire

ROTATIONS = 4  # truncated orders served in turn, per name: one a second
A_BIT, AAAA_BIT = 1, 2  # the family a Cuts answers
_SRV_HEAD = struct.Struct("!HH")  # rdlength, then the SRV priority
_SRV_TARGET = 6  # priority, weight, port, then the target
_NO_EDNS_ROOM = 512 - 12 - wire.OPT_LEN  # the least room a UDP answer has, less the question

Segment = tuple[int, int]  # records [first, end) of the cut order, in turn
Form = tuple[tuple[bytes, ...], bytes]  # the header variants (wire.heads) and the body
Memo = tuple[bytes, int, int]  # a form's key: (answer key, rotation, room)
# The forms joined so far are bounded in bytes, since clients choose the rooms (an EDNS
# size up to --edns-udp-size, each its own form): each counts as its answer key's and
# body's lengths plus FORM_OVERHEAD (its eight header variants, the tuples, a dict slot:
# measured 720 bytes). When the next form would pass FORMS_BUDGET it starts over.
FORMS_BUDGET = 4 << 20
FORM_OVERHEAD = 800


class Rotation:
    """Which order a name's truncated answers take now: the wall clock's second,
    modulo ROTATIONS, shared by the name's A and AAAA answers. A turn counted per
    process would hand a client's A and AAAA different endpoints whenever the two
    queries reach different processes (--workers share a port by SO_REUSEPORT) or
    replicas (behind a Service); the clock is the same in all of them, so a pair
    asked together gets one order unless it straddles a second (or the replicas'
    clock skew). ``clock`` is the seam tests drive."""

    __slots__ = ("clock",)

    def __init__(self, clock: Callable[[], float] = SYSTEM.time) -> None:
        self.clock = clock

    def take(self) -> int:
        return int(self.clock()) % ROTATIONS


class FormMemory:
    """:data:`Memo` -> the :data:`Form` (None: nothing fits), at most ``budget`` bytes
    counted as above. Owned by the zone (``Zone.cut_forms``), emptied on every change;
    the handler fills it."""

    __slots__ = ("_forms", "budget", "used")

    def __init__(self, budget: int = FORMS_BUDGET) -> None:
        self._forms: dict[Memo, Form | None] = {}
        self.budget = budget
        self.used = 0

    def put(self, memo: Memo, form: Form | None) -> None:
        cost = len(memo[0]) + (len(form[1]) if form is not None else 0) + FORM_OVERHEAD
        used = self.used + cost
        if used > self.budget:
            # Full (a flood of client sizes): start over, so that what is asked now is
            # what gets kept.
            self._forms.clear()
            used = cost
        self.used = used
        self._forms[memo] = form

    def __contains__(self, memo: Memo) -> bool:
        return memo in self._forms

    def __getitem__(self, memo: Memo) -> Form | None:
        return self._forms[memo]

    def __len__(self) -> int:
        return len(self._forms)

    def __iter__(self) -> Iterator[Memo]:
        return iter(self._forms)

    def clear(self) -> None:
        self._forms.clear()
        self.used = 0


class Cuts:
    """One answer's records in cut order, and how each rotation walks them.

    ``body`` holds the answer records in cut order (often the answer's own body
    object), record ``i`` spanning ``offsets[i]:offsets[i + 1]``; ``plans[r]`` lists
    the segments rotation ``r`` takes, in turn. For SRV, ``targets[i]`` is the index
    into ``glue`` of record ``i``'s target, whose address records (without their
    owner) are ``glue[t]``, and ``target_at`` is where in a record its target starts."""

    __slots__ = ("body", "family", "glue", "offsets", "plans", "rcode", "rotation", "target_at",
                 "targets")

    def __init__(self, body: bytes, offsets: Sequence[int], plans: tuple[tuple[Segment, ...], ...],
                 rotation: Rotation, family: int, rcode: int = wire.NOERROR,
                 targets: Sequence[int] = (), glue: Sequence[tuple[bytes, ...]] = (),
                 target_at: Sequence[int] = ()) -> None:
        self.body = body
        self.offsets = offsets
        self.plans = plans
        self.rotation = rotation
        self.family = family
        self.rcode = rcode
        self.targets = targets
        self.glue = glue
        self.target_at = target_at

    def form(self, index: int, room: int, base: int) -> Form | None:
        """The body of rotation ``index`` for ``room`` bytes after a question that ends
        at ``base``: as many whole records as fit, then the glue of the kept targets
        whose addresses fit whole. None when not even one record fits."""
        offsets, body = self.offsets, self.body
        parts: list[bytes] = []
        kept: list[int] = []  # record indices, in the order written (SRV only)
        used = count = 0
        for first, end in self.plans[index]:
            # the last record of the segment that still fits
            last = bisect_right(offsets, offsets[first] + room - used, first, end + 1) - 1
            if last > first:
                parts.append(body[offsets[first] : offsets[last]])
                if self.glue:
                    kept.extend(range(first, last))
                count += last - first
                used += offsets[last] - offsets[first]
            if last < end:
                break
        if not parts:
            return None
        glued = 0
        if self.glue:
            seen: set[int] = set()
            position = base
            for record in kept:
                target = self.targets[record]
                at = position + self.target_at[record]
                position += offsets[record + 1] - offsets[record]
                if target in seen:
                    continue
                seen.add(target)
                tails = self.glue[target]
                size = sum(2 + len(tail) for tail in tails)
                if not tails or used + size > room or at > 0x3FFF:
                    continue
                owner = wire.U16.pack(0xC000 | at)
                parts.extend(owner + tail for tail in tails)
                used += size
                glued += len(tails)
        # Header variants of their own (not wire.heads' shared table): the counts come
        # from the client's size, so they go with the form when the memory starts over.
        return (wire.heads(self.rcode, count, 0, glued, wire.QR | wire.AA | wire.TC, False),
                b"".join(parts))


def needs_cuts(question_len: int, answer_bytes: int, records: int) -> bool:
    """Whether an answer section of ``answer_bytes`` can exceed some UDP client's room."""
    return records > 1 and answer_bytes > _NO_EDNS_ROOM - question_len


def _rotated(first: int, end: int, start: int) -> list[Segment]:
    return [(start, end), (first, start)] if start > first else [(first, end)]


def address_cuts(head: bytes, order: Sequence[bytes], body: bytes | None, ranks: Sequence[int],
                 endpoints: int, rotation: Rotation, family: int) -> Cuts:
    """The cuts of an A or AAAA answer whose records are ``head + packed`` for each
    address of ``order`` (the cut order; ``body`` is that order's bytes when the answer's
    body already is, else None). ``ranks[i]`` is the endpoint rank of ``order[i]``
    (non-decreasing); rotation ``r`` starts at the first address of an endpoint ranked
    at least ``r * endpoints // ROTATIONS``, the same endpoint for both families."""
    if body is None:
        body = b"".join(head + packed for packed in order)
    step = len(head) + (len(order[0]) if order else 0)
    count = len(order)
    offsets = range(0, count * step + 1, step)
    plans = tuple(tuple(_rotated(0, count, bisect_right(ranks, r * endpoints // ROTATIONS - 1)
                                 % max(count, 1)))
                  for r in range(ROTATIONS))
    return Cuts(body, offsets, plans, rotation, family)


def srv_cuts(question: bytes, answer: wire.Answer, rotation: Rotation) -> Cuts:
    """The cuts of an SRV answer (``question``: its key, lower-case name, type, class):
    records in the order listed, rotated only among records of equal priority (lowest
    priority first stays first), each target's glue kept with it."""
    return SrvCuts(question, answer, rotation)


class SrvCuts(Cuts):
    """Read from the answer's bytes when first cut, once per answer, not at every
    rebuild: reading costs about as much as building the answer, which a rebuild
    should not pay for answers no small UDP client may ever ask for."""

    __slots__ = ("answer", "question")

    def __init__(self, question: bytes, answer: wire.Answer, rotation: Rotation) -> None:
        super().__init__(answer.body, (), (), rotation, A_BIT, answer.rcode)
        self.question = question
        self.answer: wire.Answer | None = answer

    def form(self, index: int, room: int, base: int) -> Form | None:
        if self.answer is not None:
            self._read(self.question, self.answer)
            self.answer = None
        return super().form(index, room, base)

    def _read(self, question: bytes, answer: wire.Answer) -> None:
        """The usual shapes (owner ``C0 0C``, glue owners pointing at a target) take no
        name decoding."""
        body = answer.body
        count = int.from_bytes(answer.heads[0][4:6])
        glue_at = answer.glue_at if answer.glue_at >= 0 else len(body)
        base = 12 + len(question)
        offsets = [0]
        target_at: list[int] = []
        targets: list[int] = []
        priorities: list[int] = []
        index: dict[bytes, int] = {}  # a target's bytes -> its index in ``glue``
        pointed: dict[int, int] = {}  # where a target starts in the message -> its index
        unpack = _SRV_HEAD.unpack_from
        at = 0
        for _ in range(count):
            rdata = (at + 2 if body[at] >= 0xC0 else wire.skip_name(body, at)) + 10
            rdlength, priority = unpack(body, rdata - 2)
            name = body[rdata + _SRV_TARGET : rdata + rdlength]
            found = index.get(name)
            if found is None:
                found = index[name] = len(index)
                pointed[base + rdata + _SRV_TARGET] = found
            targets.append(found)
            priorities.append(priority)
            target_at.append(rdata + _SRV_TARGET - at)
            at = rdata + rdlength
            offsets.append(at)
        glue: list[list[bytes]] = [[] for _ in index]
        message = b""
        at = glue_at
        size = len(body)
        while at < size:
            owner = None
            if body[at] >= 0xC0:
                fixed = at + 2
                owner = pointed.get(((body[at] & 0x3F) << 8) | body[at + 1])
            else:
                fixed = wire.skip_name(body, at)
            if owner is None:  # written out, or pointing elsewhere (the question): decode
                message = message or bytes(12) + question + body
                owner = index.get(wire.read_name(message, base + at))
            end = fixed + 10 + wire.RR_HEAD.unpack_from(body, fixed)[3]
            if owner is not None:
                glue[owner].append(body[fixed:end])
            at = end
        groups: list[Segment] = []
        for i, priority in enumerate(priorities):
            if groups and priorities[groups[-1][0]] == priority:
                groups[-1] = (groups[-1][0], i + 1)
            else:
                groups.append((i, i + 1))
        self.plans = tuple(tuple(segment for first, end in groups for segment in _rotated(
            first, end, first + r * (end - first) // ROTATIONS)) for r in range(ROTATIONS))
        self.offsets, self.targets, self.target_at = offsets, targets, target_at
        self.glue = [tuple(g) for g in glue]
