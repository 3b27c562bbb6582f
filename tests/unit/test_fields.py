"""The checks a ServiceImport's fields take once and then find by their text
(sources/fields.py's port lists, convert's namespaces) and its addresses packed without
an address object: each gives what the full check gives, warns as it does, and is never
fooled by a value equal to a valid one (True == 1, 1.0 == 1)."""

from __future__ import annotations

import sys
from ipaddress import ip_address
from typing import Any

import pytest

from clusterset_dns.sources import convert, fields
from clusterset_dns.zone.model import Port, pack_ips
from clusterset_dns_testkit.objects import port, service_import


@pytest.fixture(autouse=True)
def empty_tables() -> None:
    """Forked test runs (mutmut) start with what earlier tests left in the tables."""
    fields._checked_ports.clear()
    fields._shared_ports.clear()
    convert._namespaces.clear()


def ports_of(raw: list[Any]) -> tuple[tuple[Port, ...], list[str]]:
    warnings: list[str] = []
    imp = convert.service_import(service_import("web", ports=raw), warnings.append)
    return imp.ports, warnings


def test_a_clean_port_list_is_checked_once_and_found_by_its_text() -> None:
    first, warned = ports_of([port(80, "TCP", "http"), port(53, "UDP")])
    assert first == (Port("http", "tcp", 80), Port("", "udp", 53)) and warned == []
    assert list(fields._checked_ports) == [((80, "TCP", "http"), (53, "UDP", None))]
    again, warned = ports_of([port(80, "TCP", "http"), port(53, "UDP")])
    assert again is first and warned == []
    # another order is another list
    other, _ = ports_of([port(53, "UDP"), port(80, "TCP", "http")])
    assert other == (Port("", "udp", 53), Port("http", "tcp", 80))


@pytest.mark.parametrize("number", [True, 1.0])
def test_a_port_equal_to_a_checked_one_is_still_refused(number: Any) -> None:
    """1 is checked and kept first; True and 1.0 equal it and hash as it does."""
    kept, _ = ports_of([port(1, "TCP", "p")])
    assert kept == (Port("p", "tcp", 1),)
    found, warned = ports_of([port(number, "TCP", "p")])
    assert found == ()
    assert warned == [f"ports[0] skipped: port {number!r} is not in 1..65535"]


def test_a_list_with_a_bad_entry_warns_every_time() -> None:
    """Only clean lists are kept: a kept one would lose its warning the second time."""
    raw = [port(80, "TCP"), port(80, "QUIC")]
    for _ in range(2):
        found, warned = ports_of(raw)
        assert found == (Port("", "tcp", 80),)
        assert warned == ["ports[1] skipped: protocol 'QUIC' is not TCP, UDP or SCTP"]
    assert fields._checked_ports == {}


@pytest.mark.parametrize("entry, message", [
    ({"port": 80, "protocol": ["TCP"]}, "protocol ['TCP'] is not TCP, UDP or SCTP"),
    ({"port": 80, "name": {"a": 1}}, "port name {'a': 1} is not a string"),
    ("80", "not an object"),
])
def test_a_list_that_cannot_be_a_key_takes_the_full_check(entry: Any, message: str) -> None:
    found, warned = ports_of([entry])
    assert found == () and warned == [f"ports[0] skipped: {message}"]
    assert fields._checked_ports == {}


def test_the_checked_port_lists_start_over_past_their_size() -> None:
    cap = fields._CHECKED_PORTS_CAP
    for i in range(cap):
        ports_of([port(i + 1, "TCP")])
    assert len(fields._checked_ports) == cap
    ports_of([port(1, "TCP")])  # known: no change
    assert len(fields._checked_ports) == cap
    ports_of([port(cap + 1, "TCP")])
    assert len(fields._checked_ports) == 1


def test_a_namespace_is_checked_once_lowered_and_shared() -> None:
    first = convert.service_import(service_import("a", namespace="Prod"))
    second = convert.service_import(service_import("b", namespace="".join(["Pro", "d"])))
    assert first.namespace == "prod" and second.namespace is first.namespace
    # the one string slices and keys of that namespace hold too
    assert first.namespace is sys.intern("".join(["pr", "od"]))
    assert convert._namespaces == {"Prod": "prod"}


def test_a_namespace_that_is_no_label_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(convert.InvalidObject, match=r"^namespace: "):
            convert.service_import(service_import("web", namespace="a.b"))
    assert convert._namespaces == {}


def test_the_namespaces_start_over_past_their_size() -> None:
    cap = convert._NAMESPACES_CAP
    for i in range(cap):
        convert._namespace(f"n{i}")
    assert len(convert._namespaces) == cap
    convert._namespace("n0")
    assert len(convert._namespaces) == cap
    convert._namespace(f"n{cap}")
    assert len(convert._namespaces) == 1


# Texts an import's ips may hold: each kept exactly as ipaddress reads it, once, in order.
IP_TEXTS: list[Any] = ["10.1.2.3", " 10.1.2.3 ", "10.1.2.3", "01.2.3.4", "256.1.1.1",
                       "fd00::1", "FD00::1", "::ffff:10.1.2.3", "fe80::1%eth0", "",
                       "1.2.3.4\x00", "\u0661.2.3.4", 7, None, ["10.0.0.1"], "0.0.0.0"]


def test_the_ips_are_packed_as_the_address_parser_reads_them() -> None:
    warnings: list[str] = []
    imp = convert.service_import(service_import("web", ips=IP_TEXTS), warnings.append)
    expected: list[Any] = []
    for text in IP_TEXTS:
        try:
            ip = ip_address(text.strip()) if isinstance(text, str) else None
        except ValueError:
            ip = None
        if ip is not None and not getattr(ip, "scope_id", None) and ip not in expected:
            expected.append(ip)
    assert imp.packed_ips == pack_ips(expected)
    assert [str(ip) for ip in imp.ips] == ["10.1.2.3", "fd00::1", "::ffff:a01:203", "0.0.0.0"]
    assert len(warnings) == 9  # each text dropped says so (duplicates do not)


@pytest.mark.parametrize("count", [fields.SHARED_PORTS_MAX, fields.SHARED_PORTS_MAX + 1])
def test_only_short_port_lists_are_remembered(count: int) -> None:
    """A list as long as the API allows would make the tables hold more than the zone:
    past SHARED_PORTS_MAX ports it is checked each time and shared with nothing."""
    raw = [port(i + 1, "TCP") for i in range(count)]
    first, warned = ports_of(raw)
    again, _ = ports_of(raw)
    assert warned == [] and len(first) == count and again == first
    kept = count <= fields.SHARED_PORTS_MAX
    assert (again is first) == kept
    assert len(fields._checked_ports) == len(fields._shared_ports) == (1 if kept else 0)
