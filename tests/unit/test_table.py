"""zone/table.py's pieces on their own: an SRV answer shifted to a longer question
(``shifted``), and the compact index's names (``Names``). How the zone answers through
them is tested in test_lazy.py (against answers encoded at update time) and
test_hostindex.py."""

from __future__ import annotations

from typing import cast

import pytest

from clusterset_dns.zone import firstuse, table, truncate, wire
from clusterset_dns.zone.firstuse import FirstUse

HEADS = wire.heads(0, 1, 0, 2)
ANSWER_SECTION = b"\xc0\x0c" + b"\x00\x21\x00\x01" + b"\x00\x00\x00\x05" + b"\x00\x08" + bytes(8)


def _glue(pointer: int, address: bytes) -> bytes:
    """One glue record: its owner a pointer, type A or AAAA, class IN, TTL 5."""
    rtype = wire.A if len(address) == 4 else wire.AAAA
    return (pointer.to_bytes(2, "big") + rtype.to_bytes(2, "big") + b"\x00\x01"
            + b"\x00\x00\x00\x05" + len(address).to_bytes(2, "big") + address)


def _srv(glue: bytes, at: int = len(ANSWER_SECTION)) -> wire.WithAdditional:
    return wire.WithAdditional(HEADS, ANSWER_SECTION[:at] + glue, 0, at)


V4, V6 = bytes([10, 0, 0, 1]), bytes(15) + b"\x01"


def test_nothing_to_move_is_the_same_answer() -> None:
    plain = wire.Answer(HEADS, ANSWER_SECTION, 0)  # no additional section (glue_at -1)
    assert table.shifted(plain, 5) is plain
    srv = _srv(_glue(0xC030, V4))
    assert table.shifted(srv, 0) is srv


@pytest.mark.parametrize("at", [0, len(ANSWER_SECTION)])  # glue from the first byte, after
def test_every_glue_owner_moves_by_the_shift(at: int) -> None:
    # the same sizes (one addition, a carry across the pointer's low byte) and mixed ones
    for before, after in [
            ([(0xC030, V4), (0xC0FF, V4)], [(0xC033, V4), (0xC102, V4)]),
            ([(0xC030, V4), (0xC0FE, V6), (0xC040, V4)], [(0xC033, V4), (0xC101, V6),
                                                          (0xC043, V4)])]:
        srv = _srv(b"".join(_glue(p, a) for p, a in before), at)
        moved = table.shifted(srv, 3)
        assert isinstance(moved, wire.WithAdditional)
        assert moved.body == srv.body[:at] + b"".join(_glue(p, a) for p, a in after)
        assert (moved.heads, moved.rcode, moved.glue_at) == (srv.heads, srv.rcode, at)


def test_a_glue_owner_not_a_pointer_or_a_pointer_past_two_bytes_is_refused() -> None:
    named = b"\x01a\x00" + _glue(0xC030, V4)[2:]  # an owner name, then the same record
    with pytest.raises(ValueError, match=r"^a glue owner that is not a pointer$"):
        table.shifted(_srv(_glue(0xC030, V6) + named), 1)
    with pytest.raises(OverflowError):
        table.shifted(_srv(_glue(0xFFFE, V4) + _glue(0xC030, V6)), 2)
    # of one size: the last pointer's carry is not added to the one before it
    for pointers, shift in [((0xC030, 0xFFFF), 1), ((0xFFFE, 0xC030), 2), ((0xC030, 0xFF00), 256)]:
        with pytest.raises(OverflowError):
            table.shifted(_srv(b"".join(_glue(p, V4) for p in pointers)), shift)
    # the largest pointers that fit, and a last pointer with its high byte at the edge
    for pointers, shift, moved in [((0xC030, 0xFFFE), 1, (0xC031, 0xFFFF)),
                                   ((0xFEFF, 0xC030), 256, (0xFFFF, 0xC130)),
                                   ((0xC030, 0xFEFF), 255, (0xC12F, 0xFFFE))]:
        srv = _srv(b"".join(_glue(p, V4) for p in pointers))
        assert table.shifted(srv, shift).body == ANSWER_SECTION + b"".join(
            _glue(p, V4) for p in moved)
    # record by record: each record's length read from its two RDLENGTH bytes
    long = b"\xc0\x30\x00\x10\x00\x01\x00\x00\x00\x05\x01\x00" + bytes(256)
    srv = _srv(long + _glue(0xC040, V4))
    assert table.shifted(srv, 1).body == ANSWER_SECTION + b"\xc0\x31" + long[2:] + _glue(
        0xC041, V4)
    empty = _srv(b"")  # an additional section with no record
    assert table.shifted(empty, 3).body == empty.body


def test_names_show_their_labels_and_addresses() -> None:
    labels = {b"\x01a": V4, b"\x01b": V6}
    assert repr(table.Names(labels)) == "Names(" + repr(labels) + ")"


BARE = b"\x03web\x04prod\x03svc\x0aclusterset\x05local\x00\x00\x21\x00\x01"
PORT = b"\x05_http\x04_tcp" + BARE  # 11 bytes longer
CUTS = cast(truncate.Cuts, object())


def _theirs(glue: bytes = _glue(0xC030, V4) + _glue(0xC040, V4)) -> wire.WithAdditional:
    return _srv(glue)


def _built(mine: wire.Answer, theirs: wire.Answer | None = None, cut: str = ""
           ) -> tuple[dict[bytes, wire.Answer], dict[bytes, truncate.Cuts], dict[bytes, bytes]]:
    """share() on one build: ``cut`` names which of the two keys have cuts."""
    answers = {PORT: mine} | ({BARE: theirs} if theirs is not None else {})
    cuts = {key: CUTS for key, name in ((PORT, "port"), (BARE, "bare")) if name in cut}
    derived: dict[bytes, bytes] = {}
    table.share(answers, cuts, derived, BARE, PORT)
    return answers, cuts, derived


@pytest.mark.parametrize("cut", ["", "port bare"])
def test_a_port_name_answered_as_its_service_name_shifted_is_shared(cut: str) -> None:
    theirs = _theirs()
    answers, cuts, derived = _built(table.shifted(theirs, len(PORT) - len(BARE)), theirs, cut)
    assert answers == {BARE: theirs} and derived == {PORT: BARE}
    assert cuts == ({PORT: CUTS, BARE: CUTS} if cut else {})


def _other(answer: wire.WithAdditional, heads: tuple[bytes, ...] | None = None,
           body: bytes | None = None, rcode: int | None = None, glue_at: int | None = None
           ) -> wire.WithAdditional:
    return wire.WithAdditional(answer.heads if heads is None else heads,
                               answer.body if body is None else body,
                               answer.rcode if rcode is None else rcode,
                               answer.glue_at if glue_at is None else glue_at)


MINE = table.shifted(_theirs(), len(PORT) - len(BARE))
assert isinstance(MINE, wire.WithAdditional)


@pytest.mark.parametrize(("mine", "theirs", "cut"), [
    (MINE, None, ""),  # no answer of the service name
    (MINE, _theirs(), "port"),  # cut one way and not the other
    (MINE, _theirs(), "bare"),
    (MINE, _theirs(b"\x01a\x00" + _glue(0xC030, V4)[2:]), ""),  # glue that cannot move
    (_other(MINE, body=MINE.body[:-1] + b"\x09"), _theirs(), ""),  # another address
    (_other(MINE, heads=wire.heads(0, 1, 0, 3)), _theirs(), ""),
    (_other(MINE, rcode=3), _theirs(), ""),
    (_other(MINE, glue_at=MINE.glue_at - 1), _theirs(), ""),
])
def test_a_port_name_not_answered_as_its_service_name_keeps_its_answer(
        mine: wire.Answer, theirs: wire.Answer | None, cut: str) -> None:
    answers, cuts, derived = _built(mine, theirs, cut)
    assert answers[PORT] is mine and derived == {}
    assert (PORT in cuts) == ("port" in cut)


A_LABEL, B_LABEL, C_LABEL = b"\x01a", b"\x01b", b"\x01c"
PARENT = b"\x04east" + BARE[:-4]


def test_names_read_like_the_dict_they_were_made_from() -> None:
    labels = {A_LABEL: V6, B_LABEL: V4, C_LABEL: bytes([10, 0, 0, 2])}
    names = table.Names(labels)
    assert list(names) == [B_LABEL, C_LABEL, A_LABEL]  # IPv4 ones first
    assert dict(names.items()) == labels and len(names) == 3
    assert names[A_LABEL] == V6 and names.get(C_LABEL) == labels[C_LABEL]
    assert names.get(b"\x01d") is None and names.get(b"\x01d", V4) == V4
    assert A_LABEL in names and b"\x01d" not in names
    with pytest.raises(KeyError):
        names[b"\x01d"]
    assert names == table.Names(dict(labels)) and names == labels  # either way equal
    assert names != table.Names({A_LABEL: V6, B_LABEL: V4})
    assert names != table.Names(labels | {C_LABEL: V4})
    assert table.Names({A_LABEL: V4, B_LABEL: V6}) != table.Names({A_LABEL: V6, B_LABEL: V4})
    with pytest.raises(TypeError):
        hash(names)


def test_a_name_is_found_under_its_parent_only() -> None:
    hosts: table.Hosts = {PARENT: table.Names({A_LABEL: V4})}
    assert table.host_of(hosts, A_LABEL + PARENT) == V4
    assert table.host_of(hosts, B_LABEL + PARENT) is None
    assert table.host_of(hosts, A_LABEL + b"\x04west" + PARENT[5:]) is None
    assert table.host_of(hosts, b"") is None
    present = table.Present({b"\x04east" + PARENT}, hosts)
    assert A_LABEL + PARENT in present and b"\x04east" + PARENT in present
    assert B_LABEL + PARENT not in present and b"" not in present
    assert (A_LABEL + PARENT).decode() not in present


@pytest.mark.parametrize("suffix", table.TYPE_SUFFIXES)
def test_a_name_owns_records_of_every_type_it_can_have(suffix: bytes) -> None:
    answers = {PARENT + suffix: wire.Answer(HEADS, b"", 0)}
    assert table.owns_records(answers, PARENT)
    assert not table.owns_records(answers, A_LABEL + PARENT)
    assert not table.owns_records({PARENT + b"\x00\x0f\x00\x01": wire.Answer(HEADS, b"", 0)},
                                  PARENT)  # MX: no type of this zone


V4B, V4C = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 3])
HEADS4 = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04"
KEY1, KEY2, KEY3, KEY4 = (bytes([1, 48 + i]) + BARE[:-4] + b"\x00\x10\x00\x01"
                          for i in range(1, 5))


def _txt(text: bytes, heads: tuple[bytes, ...] = HEADS) -> wire.Answer:
    return wire.Answer(heads, text, 0)


def _key(label: bytes, parent: bytes, address: bytes) -> bytes:
    return label + parent + table.FAMILY_SUFFIX[len(address)]


def _flat(changes: list[tuple[bytes, wire.Answer | None, wire.Answer | None]]
          ) -> list[tuple[bytes, bytes | None, bytes | None]]:
    return [(key, None if old is None else old.body, None if new is None else new.body)
            for key, old, new in changes]


def test_the_changes_of_a_rebuild_are_every_answer_that_differs() -> None:
    gone_parent, kept_parent = b"\x04west" + PARENT[5:], b"\x05north" + PARENT[5:]
    zone = table.Zone(b"\x0aclusterset\x05local\x00")
    zone.address_heads = {4: HEADS4}
    kept_names = table.Names({A_LABEL: V4})
    zone.answers.update({KEY1: _txt(b"same"), KEY2: _txt(b"gone"), KEY3: _txt(b"old"),
                         KEY4: _txt(b"head"), BARE: _theirs()})
    zone.replace_hosts((), {PARENT: table.Names({A_LABEL: V4, B_LABEL: V4B}),
                            gone_parent: table.Names({A_LABEL: V4}), kept_parent: kept_names})
    zone.derived[PORT] = BARE
    old_port = zone.cold(PORT)
    assert old_port is not None
    new_bare = _theirs(_glue(0xC030, V4) + _glue(0xC040, V4B))
    answers = {KEY1: _txt(b"same"), KEY3: _txt(b"new"), KEY4: _txt(b"head", wire.heads(3, 0, 1, 0)),
               b"\x01n" + KEY1[2:]: _txt(b"added"), BARE: new_bare}
    hosts: table.Hosts = {PARENT: table.Names({A_LABEL: V4, B_LABEL: V4C, C_LABEL: V4}),
                          b"\x04south" + PARENT[5:]: table.Names({A_LABEL: V4B}),
                          kept_parent: table.Names({A_LABEL: V4})}
    out = table.changes(zone, [KEY1, KEY2, KEY3, KEY4, BARE], [PARENT, gone_parent, kept_parent],
                        answers, hosts, [PORT], {PORT: BARE})
    new_port = table.shifted(new_bare, len(PORT) - len(BARE))
    south = b"\x04south" + PARENT[5:]
    assert sorted(_flat(out)) == sorted([
        (KEY2, b"gone", None), (KEY3, b"old", b"new"), (KEY4, b"head", b"head"),
        (BARE, _theirs().body, new_bare.body), (PORT, old_port.body, new_port.body),
        (_key(B_LABEL, PARENT, V4B), HEADS4 + V4B, HEADS4 + V4C),
        (_key(C_LABEL, PARENT, V4), None, HEADS4 + V4),
        (_key(A_LABEL, gone_parent, V4), HEADS4 + V4, None),
        (_key(A_LABEL, south, V4B), None, HEADS4 + V4B),
        (b"\x01n" + KEY1[2:], None, b"added")])
    assert len(out) == 10
    # the same answers again: nothing changes; the answer objects are the stored ones
    assert table.changes(zone, list(zone.answers), list(zone.hosts), dict(zone.answers),
                         dict(zone.hosts), [PORT], {PORT: BARE}) == []
    assert [(key, old, new) for key, old, new in out if key == KEY2] == \
        [(KEY2, zone.answers[KEY2], None)]


def test_how_a_name_stands_in_the_zone() -> None:
    zone = table.Zone(b"\x0aclusterset\x05local\x00")
    zone.address_heads = {4: HEADS4}
    zone.answers.update({KEY1: _txt(b"stored"), BARE: _theirs()})
    zone.replace_hosts((), {PARENT: table.Names({A_LABEL: V4})})
    zone.derived[PORT] = BARE
    zone.names[PARENT] = 1  # an empty non-terminal
    host = _key(A_LABEL, PARENT, V4)
    port = zone.cold(PORT)
    assert port is not None and port.body == table.shifted(_theirs(), 11).body != _theirs().body
    assert zone.has(KEY1) and zone.has(host) and zone.has(PORT)
    assert not zone.has(_key(B_LABEL, PARENT, V4)) and not zone.has(host[:-4] + b"\x00\x1c\x00\x01")
    for name, stands in [(KEY1[:-4], table.HAS_RECORDS), (host[:-4], table.HAS_RECORDS),
                         (PORT[:-4], table.HAS_RECORDS), (PARENT, table.EMPTY),
                         (B_LABEL + PARENT, table.MISSING)]:
        assert zone.lookup(name) == stands, name
        assert zone.exists(name) is (stands != table.MISSING)
    assert zone.count() == 2 + 1 + 1


def test_an_address_of_neither_family_is_refused_saying_so() -> None:
    with pytest.raises(ValueError, match=r"^an endpoint address that is neither 4 nor 16 bytes$"):
        table.Names({A_LABEL: V4, B_LABEL: bytes(5)})


def test_answers_encoded_from_the_index_are_plain_successes() -> None:
    zone = table.Zone(b"\x0aclusterset\x05local\x00")
    zone.address_heads = {4: HEADS4}
    zone.replace_hosts((), {PARENT: table.Names({A_LABEL: V4})})
    key = _key(A_LABEL, PARENT, V4)
    [(made_key, made)] = table.host_answers(zone.hosts.items(), zone.address_heads)
    cold = zone.cold(key)
    assert cold is not None and made_key == key
    for answer in (made, cold):
        assert (answer.heads, answer.body, answer.rcode) == (table.ONE_ADDRESS, HEADS4 + V4, 0)


def test_an_answer_used_again_is_the_remembered_one_from_either_half() -> None:
    zone = table.Zone(b"\x0aclusterset\x05local\x00", first_use=FirstUse(budget=10_000))
    zone.address_heads = {4: HEADS4}
    zone.replace_hosts((), {PARENT: table.Names({A_LABEL: V4, B_LABEL: V4B})})
    key, other = _key(A_LABEL, PARENT, V4), _key(B_LABEL, PARENT, V4B)
    first = zone.first(key)
    assert first is not None and zone.first(key) is first  # the recent half's
    zone.first_use.budget = 2 * firstuse.cost(key, first)  # room for one: other turns it
    assert zone.first(other) is not None and zone.first_use.order() == [key, other]
    assert zone.first(key) is first  # taken from the older half, not encoded again
    assert zone.first(_key(C_LABEL, PARENT, V4)) is None


def test_a_change_moves_the_generation_by_one_and_empties_the_memories() -> None:
    zone = table.Zone(b"\x0aclusterset\x05local\x00")
    zone.negatives[KEY1] = _txt(b"no")
    zone.responses.put(b"query", b"response", 0)
    zone.cut_forms.put((KEY1, 0, 512), None)
    zone.changed()
    zone.changed()
    assert zone.generation == 2
    assert not zone.negatives and not len(zone.responses) and not len(zone.cut_forms)


def test_a_replaced_derived_key_is_forgotten_by_the_first_use_memory() -> None:
    zone = table.Zone(b"\x0aclusterset\x05local\x00")
    zone.answers[BARE] = _theirs()
    other = b"\x04_dns\x04_udp" + BARE
    zone.replace_derived((), {PORT: BARE, other: BARE})
    assert zone.first(PORT) is not None and zone.first(other) is not None
    zone.replace_derived([PORT], {})
    assert zone.derived == {other: BARE}
    assert PORT not in zone.first_use and other in zone.first_use
