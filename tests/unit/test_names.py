"""names: endpoint host names, name validation, the zone's own names (docs/dns-behaviour.md §2)."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

import pytest

from clusterset_dns.base import names
from clusterset_dns.base.names import ZoneNames

ENDPOINT_HOSTNAMES = [
    ("10.1.2.3", "10-1-2-3"),
    ("192.168.0.255", "192-168-0-255"),
    ("0.0.0.0", "0-0-0-0"),
    ("fd00::1", "fd00--1"),
    ("fd00::", "fd00--0"),  # a trailing "-" is not a valid ending: "0" appended
    ("::1", "--1"),
    ("::", "--0"),
    ("FD00::ABCD", "fd00--abcd"),  # the compressed, lower-case form
    ("2001:db8:1:2:3:4:5:6", "2001-db8-1-2-3-4-5-6"),
    ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001-db8--1"),
    ("fd00:1:0:0:1::", "fd00-1-0-0-1--0"),
]


@pytest.mark.parametrize(("address", "expected"), ENDPOINT_HOSTNAMES,
                         ids=[a for a, _ in ENDPOINT_HOSTNAMES])
def test_endpoint_hostname(address: str, expected: str) -> None:
    host = names.endpoint_hostname(ip_address(address))
    assert host == expected
    assert names.is_label(host)
    assert not host.endswith("-")


L63, L62, L61 = "a" * 63, "b" * 62, "c" * 61

SPLIT_VALID = [
    ("Web.Prod.", (b"web", b"prod")),
    ("web.prod", (b"web", b"prod")),
    ("  clusterset.local.  ", (b"clusterset", b"local")),
    ("", ()),
    (".", ()),
    (L63, (L63.encode(),)),
    # 255 bytes on the wire exactly: 3 * (1 + 63) + (1 + 61) + 1
    (f"{L63}.{L63}.{L63}.{L61}", (L63.encode(),) * 3 + (L61.encode(),)),
    ("_http._tcp.web", (b"_http", b"_tcp", b"web")),
    ("WEB.BOX.", (b"web", b"box")),  # only the dots are stripped, before the case is folded
    ("web.prod..", (b"web", b"prod")),
]


@pytest.mark.parametrize(("text", "labels"), SPLIT_VALID, ids=range(len(SPLIT_VALID)))
def test_split_valid(text: str, labels: tuple[bytes, ...]) -> None:
    assert names.split(text) == labels


SPLIT_INVALID = [
    ("label-too-long", "a" * 64 + ".local"),
    ("name-too-long", f"{L63}.{L63}.{L63}.{L62}"),  # 256 bytes on the wire
    ("name-way-too-long", ".".join(["abcdefghij"] * 30)),
    ("empty-label-inside", "web..prod"),
    ("empty-label-first", ".web.prod"),
    ("non-ascii", "wéb.prod"),
]


@pytest.mark.parametrize(("text"), [t for _, t in SPLIT_INVALID],
                         ids=[i for i, _ in SPLIT_INVALID])
def test_split_invalid(text: str) -> None:
    with pytest.raises(ValueError):  # InvalidName (or UnicodeError) are ValueErrors
        names.split(text)


@pytest.mark.parametrize(("labels", "message"), [
    ((b"web", b""), "empty label"),
    ((b"a" * 64,), "label longer than 63 bytes: b'aaaaaaaaaaaaaaaaaaaa'..."),
    ((b"a" * 63,) * 4, "name longer than 255 bytes on the wire"),
])
def test_what_is_wrong_with_a_name_is_said(labels: tuple[bytes, ...], message: str) -> None:
    with pytest.raises(names.InvalidName) as raised:
        names.check(labels)
    assert str(raised.value) == message


@pytest.mark.parametrize(("wire", "text"), [
    (b"\x00", "."),
    (b"", "."),
    (b"\x03web\x04prod\x00", "web.prod."),
    (b"\x03web\x04prod\x00\x03end", "web.prod."),  # the name ends at its root
    (b"\x03web", "web."),  # a name that runs off the end stops there
    (b"\x03web\x04pr", "web.pr."),
    (b"\x01a\x3f" + b"b" * 63 + b"\x00", "a." + "b" * 63 + "."),
])
def test_wire_to_text(wire: bytes, text: str) -> None:
    assert names.wire_to_text(wire) == text


@pytest.mark.parametrize(("address", "expected"), ENDPOINT_HOSTNAMES,
                         ids=[a for a, _ in ENDPOINT_HOSTNAMES])
def test_packed_hostname_is_endpoint_hostname(address: str, expected: str) -> None:
    assert names.packed_hostname(ip_address(address).packed) == expected


@pytest.mark.parametrize(("text", "ok"), [
    ("web", True), ("a" * 63, True), ("a" * 64, False), ("", False), ("a.b", False),
    ("wéb", False), ("_http", True),
])
def test_is_label(text: str, ok: bool) -> None:
    assert names.is_label(text) is ok


@pytest.mark.parametrize(("labels", "wire", "text"), [
    ((), b"\x00", "."),
    ((b"web", b"prod"), b"\x03web\x04prod\x00", "web.prod."),
    ((b"a",), b"\x01a\x00", "a."),
])
def test_wire_and_text(labels: tuple[bytes, ...], wire: bytes, text: str) -> None:
    assert names.to_wire(labels) == wire
    assert names.wire_length(labels) == len(wire)
    assert names.to_text(labels) == text


def _t(labels: tuple[bytes, ...]) -> str:
    return names.to_text(labels)


ZONE_NAMES = [
    ("clusterset.local", lambda z: z.apex, "clusterset.local."),
    ("clusterset.local", lambda z: z.svc, "svc.clusterset.local."),
    ("clusterset.local", lambda z: z.dns_version, "dns-version.clusterset.local."),
    ("clusterset.local", lambda z: z.ns, "ns.dns.clusterset.local."),
    ("ClusterSet.Local.", lambda z: z.apex, "clusterset.local."),
    ("mcs.example.org", lambda z: z.svc, "svc.mcs.example.org."),
    ("clusterset.local", lambda z: z.service("Prod", "Web"), "web.prod.svc.clusterset.local."),
    ("clusterset.local", lambda z: z.port_srv(z.service("prod", "web"), "http", "tcp"),
     "_http._tcp.web.prod.svc.clusterset.local."),
    ("clusterset.local", lambda z: z.port_srv(z.service("prod", "web"), "dns", "udp"),
     "_dns._udp.web.prod.svc.clusterset.local."),
    ("clusterset.local", lambda z: z.endpoint(z.service("prod", "db"), "db-0", names.split("east")),
     "db-0.east.db.prod.svc.clusterset.local."),
    ("clusterset.local",
     lambda z: z.endpoint(z.service("prod", "db"), "db-0", names.split("east.eu.example")),
     "db-0.east.eu.example.db.prod.svc.clusterset.local."),
    ("clusterset.local",
     lambda z: z.endpoint(z.service("prod", "db"), "10-1-2-3", names.split("West.EU")),
     "10-1-2-3.west.eu.db.prod.svc.clusterset.local."),
]


@pytest.mark.parametrize(("zone", "get", "expected"), ZONE_NAMES,
                         ids=[e for _, _, e in ZONE_NAMES])
def test_zone_names(zone: str, get: object, expected: str) -> None:
    assert callable(get)
    assert _t(get(ZoneNames(zone))) == expected


def test_zone_names_reject_names_too_long() -> None:
    zone = ZoneNames("clusterset.local")
    service = zone.service("prod", "web")
    with pytest.raises(names.InvalidName):
        zone.endpoint(service, "a" * 63, names.split(".".join(["b" * 63] * 3)))
    with pytest.raises(names.InvalidName):
        zone.service("prod", "x" * 64)


# -- the rules every name an object makes must follow -----------------------------------------

LABELS = [
    ("web", b"web"), ("Web-0", b"web-0"), ("_http", b"_http"), ("a" * 63, b"a" * 63),
    ("0", b"0"), ("-", b"-"),
    ("", None), ("a" * 64, None), ("a b", None), ("a.b", None), ("*", None), ("wéb", None),
    ("web\x00", None), ("@", None), ("a/b", None), (" web", None),
]


@pytest.mark.parametrize(("text", "expected"), LABELS, ids=[repr(t)[:20] for t, _ in LABELS])
def test_label(text: str, expected: bytes | None) -> None:
    if expected is None:
        with pytest.raises(names.InvalidName):
            names.label(text)
        assert not names.is_label(text)
    else:
        assert names.label(text) == expected
        assert names.is_label(text)


SUBDOMAINS = [
    ("east", (b"east",)), ("East.EU", (b"east", b"eu")), ("east.eu.", (b"east", b"eu")),
    (f"{L63}.{L63}", (L63.encode(), L63.encode())),
    ("", None), (".", None), ("..", None), ("a..b", None), (".east", None), ("a b", None),
    ("east.eu..", None), ("x" * 64, None), (".".join([L63] * 4), None),  # 257 bytes
]


@pytest.mark.parametrize(("text", "expected"), SUBDOMAINS,
                         ids=[repr(t)[:20] for t, _ in SUBDOMAINS])
def test_subdomain(text: str, expected: tuple[bytes, ...] | None) -> None:
    if expected is None:
        with pytest.raises(names.InvalidName):
            names.subdomain(text)
    else:
        assert names.subdomain(text) == expected


def test_port_srv_label_limit() -> None:
    """A 62-character port name makes a 63-byte ``_<port>`` label; 63 characters (legal
    in Kubernetes) make 64 bytes, which no DNS name can hold."""
    zone = ZoneNames("clusterset.local")
    service = zone.service("prod", "web")
    assert zone.port_srv(service, "p" * 62, "tcp")[0] == b"_" + b"p" * 62
    with pytest.raises(names.InvalidName):
        zone.port_srv(service, "p" * 63, "tcp")


def test_endpoint_name_limit_is_the_whole_name() -> None:
    """Each label fits, the name (hostname + dotted cluster id + service) does not."""
    zone = ZoneNames("clusterset.local")
    service = zone.service("n" * 63, "s" * 63)  # 150 bytes on the wire
    cluster = names.subdomain("c" * 40)
    room = names.MAX_NAME_WIRE - names.wire_length(service) - names.wire_length(cluster)
    assert names.wire_length(zone.endpoint(service, "h" * room, cluster)) == 255
    with pytest.raises(names.InvalidName):
        zone.endpoint(service, "h" * (room + 1), cluster)
    assert len(names.endpoint_hostname(
        ip_address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"))) <= names.MAX_DERIVED_HOSTNAME


@pytest.mark.parametrize("service_labels", [("web", "prod"), ("s" * 63, "n" * 63)],
                         ids=["short", "long"])
@pytest.mark.parametrize("cluster_text", ["east", "c" * 40, "east.eu", "c" * 63 + ".dd"])
def test_endpoint_names_agree_with_zone_endpoint(service_labels: tuple[str, str],
                                                 cluster_text: str) -> None:
    """The build-time form (shared part encoded once) gives the same names and wire forms
    as ZoneNames.endpoint + to_wire, and refuses exactly what it refuses."""
    zone = ZoneNames("clusterset.local")
    service = zone.service(service_labels[1], service_labels[0])
    cluster = names.subdomain(cluster_text)
    room = names.MAX_NAME_WIRE - names.wire_length(service) - names.wire_length(cluster)
    fast = names.EndpointNames(service, cluster)
    for length in sorted({1, 2, 62, 63, 64, room - 1, room, room + 1} - {0}):
        if length < 1:
            continue
        hostname = "h" * length
        try:
            labels = zone.endpoint(service, hostname, cluster)
        except names.InvalidName:
            with pytest.raises(names.InvalidName):
                fast.name(hostname)
            continue
        assert fast.name(hostname) == (labels, names.to_wire(labels))
    with pytest.raises(names.InvalidName):
        fast.name("")


LONG_ZONE = ".".join(["a" * 63, "b" * 63, "c" * 50])  # svc under it: 184 bytes on the wire


@pytest.mark.parametrize(("namespace", "name"), [
    ("prod", "web"), ("Prod", "WEB"), ("n" * 63, "s" * 63), ("x", "y" * 63)])
def test_a_service_name_in_wire_form_is_its_labels_encoded(namespace: str, name: str) -> None:
    for zone in (ZoneNames("clusterset.local"), ZoneNames("ClusterSet.Local.")):
        assert zone.service_wire(namespace, name) == names.to_wire(zone.service(namespace, name))


@pytest.mark.parametrize("get", [ZoneNames.service, ZoneNames.service_wire],
                         ids=["labels", "wire"])
def test_a_service_name_is_255_bytes_at_most_to_the_byte(get: Any) -> None:
    """Under a zone of 184 bytes the name and namespace share 255 - 184 - 2 bytes."""
    zone = ZoneNames(LONG_ZONE)
    assert names.wire_length(zone.svc) == 184
    room = 255 - 184 - 2
    fits = get(zone, "n" * 10, "s" * (room - 10))
    wire = fits if isinstance(fits, bytes) else names.to_wire(fits)
    assert len(wire) == 255
    with pytest.raises(names.InvalidName, match=r"^name longer than 255 bytes on the wire$"):
        get(zone, "n" * 10, "s" * (room - 9))
    with pytest.raises(names.InvalidName):  # each label is still checked
        get(zone, "prod", "x" * 64)
    with pytest.raises(names.InvalidName):
        get(zone, "a.b", "web")
