"""The compact index's packed form (table.Names): every name gives back its own
address whatever its family and position, and a rebuild replaces it right."""

from __future__ import annotations

import ipaddress

import pytest

from clusterset_dns.zone import table
from clusterset_dns.zone.table import FAMILY_SUFFIX, Names, Zone, host_of

PARENT = b"\x04east\x03web\x04prod\x03svc\x0aclusterset\x05local\x00"


def _label(text: str) -> bytes:
    return bytes([len(text)]) + text.encode()


def _v4(n: int) -> bytes:
    return ipaddress.IPv4Address(0x0A000000 + n).packed


def _v6(n: int) -> bytes:
    return ipaddress.IPv6Address((0xFD00 << 112) + n).packed


def _zone(hosts: dict[bytes, dict[bytes, bytes]]) -> Zone:
    zone = Zone(b"\x0aclusterset\x05local\x00")
    zone.address_heads = {4: b"\xc0\x0c" + b"\x00" * 8 + b"\x00\x04",
                          16: b"\xc0\x0c" + b"\x00" * 8 + b"\x00\x10"}
    zone.replace_hosts((), {parent: Names(labels) for parent, labels in hosts.items()})
    return zone


def test_a_parent_with_ipv4_and_ipv6_names_gives_each_its_own() -> None:
    # Interleaved on purpose: the packed form puts every IPv4 address first.
    plain = {_label("a"): _v6(1), _label("b"): _v4(1), _label("c"): _v6(2),
             _label("d"): _v4(2)}
    names = Names(plain)
    assert len(names) == 4 and set(names) == set(plain)
    assert dict(names.items()) == plain and {k: names[k] for k in names} == plain
    for label, packed in plain.items():
        assert names.get(label) == packed and label in names
        assert host_of({PARENT: names}, label + PARENT) == packed
    assert names.get(_label("e")) is None and _label("e") not in names
    assert host_of({PARENT: names}, _label("e") + PARENT) is None
    with pytest.raises(KeyError):
        names[_label("e")]
    assert names == plain and plain == names
    assert names != {**plain, _label("d"): _v4(3)} and names != Names({})


def test_more_than_256_names_of_each_family() -> None:
    plain = {_label(f"pod-{n}"): _v4(n) for n in range(300)}
    plain.update({_label(f"six-{n}"): _v6(n) for n in range(300)})
    names = Names(plain)
    assert len(names) == 600
    assert all(names.get(label) == packed for label, packed in plain.items())
    assert dict(names.items()) == plain


def test_an_address_that_is_neither_family_is_refused() -> None:
    with pytest.raises(ValueError):
        Names({_label("a"): b"\x01\x02\x03"})


def test_labels_are_shared_across_parents_up_to_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh table: earlier tests of the run may have filled the process's.
    monkeypatch.setattr(table, "_shared_labels", {})
    # Equal labels from distinct bytes objects (as a build slices them).
    one = Names({bytes(bytearray(_label("shared-x"))): _v4(1)})
    two = Names({bytes(bytearray(_label("shared-x"))): _v4(2)})
    assert next(iter(one)) is next(iter(two))
    monkeypatch.setattr(table, "SHARED_LABELS_CAP", 1)
    three = Names({bytes(bytearray(_label("over-the-cap"))): _v4(1)})
    four = Names({bytes(bytearray(_label("over-the-cap"))): _v4(1)})
    assert next(iter(three)) is not next(iter(four)) and three == four


def test_a_moved_name_is_forgotten_and_answers_its_new_address() -> None:
    zone = _zone({PARENT: {_label("a"): _v4(1), _label("b"): _v4(2), _label("c"): _v6(3)}})
    keys = {name: _label(name) + PARENT + suffix for name, suffix in
            (("a", FAMILY_SUFFIX[4]), ("b", FAMILY_SUFFIX[4]), ("c", FAMILY_SUFFIX[16]))}
    for key in keys.values():
        assert zone.first(key) is not None
    # b moves to a new address, c goes from IPv6 to IPv4, a stays.
    zone.replace_hosts([PARENT], {PARENT: Names(
        {_label("a"): _v4(1), _label("b"): _v4(9), _label("c"): _v4(3)})})
    assert keys["a"] in zone.first_use
    assert keys["b"] not in zone.first_use and keys["c"] not in zone.first_use
    assert zone.host(_label("b") + PARENT) == _v4(9)
    assert zone.host(_label("c") + PARENT) == _v4(3)
    assert zone.cold(keys["c"]) is None  # no AAAA any more
    answer = zone.first(keys["b"])
    assert answer is not None and answer.body.endswith(_v4(9))
    assert sorted(key for key, _ in zone.every_answer()) == sorted(
        [keys["a"], keys["b"], _label("c") + PARENT + FAMILY_SUFFIX[4]])


def test_an_emptied_parent_has_no_names_left() -> None:
    other = b"\x04west" + PARENT[5:]
    zone = _zone({PARENT: {_label("a"): _v4(1), _label("b"): _v6(2)},
                  other: {_label("a"): _v4(7)}})
    key = _label("a") + PARENT + FAMILY_SUFFIX[4]
    kept = _label("a") + other + FAMILY_SUFFIX[4]
    assert zone.first(key) is not None and zone.first(kept) is not None
    zone.replace_hosts([PARENT], {})
    assert PARENT not in zone.hosts and key not in zone.first_use
    assert zone.host(_label("a") + PARENT) is None and zone.host(_label("b") + PARENT) is None
    assert zone.host(_label("a") + other) == _v4(7) and kept in zone.first_use
    assert zone.count() == 1
    assert zone.cold(key) is None
