"""Domain-name helpers: label validation, wire encoding, the names of the zone.

Pure functions only. Names are handled as tuples of lower-case ``bytes``
labels (most specific first, root omitted), which is what the wire encoder and
the answer keys use.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

Labels = tuple[bytes, ...]

MAX_LABEL = 63
MAX_NAME_WIRE = 255


class NameError_(ValueError):
    """A name that cannot be put on the wire (label too long, empty, ...)."""


def split(name: str) -> Labels:
    """``"Web.Prod."`` -> ``(b"web", b"prod")``; raises on an invalid name."""
    text = name.strip().rstrip(".").lower()
    if not text:
        return ()
    labels = tuple(part.encode("ascii") for part in text.split("."))
    check(labels)
    return labels


def check(labels: Labels) -> Labels:
    for label in labels:
        if not label:
            raise NameError_("empty label")
        if len(label) > MAX_LABEL:
            raise NameError_(f"label longer than {MAX_LABEL} bytes: {label[:20]!r}...")
    if wire_length(labels) > MAX_NAME_WIRE:
        raise NameError_(f"name longer than {MAX_NAME_WIRE} bytes on the wire")
    return labels


def wire_length(labels: Labels) -> int:
    return sum(len(label) + 1 for label in labels) + 1


def to_wire(labels: Labels) -> bytes:
    return b"".join(bytes((len(label),)) + label for label in labels) + b"\x00"


def to_text(labels: Labels) -> str:
    return ".".join(label.decode("ascii") for label in labels) + "."


def is_label(text: str) -> bool:
    """True for a single non-empty label of at most 63 ASCII characters."""
    return 0 < len(text) <= MAX_LABEL and text.isascii() and "." not in text


def endpoint_hostname(address: IPv4Address | IPv6Address) -> str:
    """The name an endpoint gets when it has no hostname: ``10.1.2.3`` -> ``10-1-2-3``.

    IPv6 uses the compressed form (``fd00::1`` -> ``fd00--1``); a name ending in
    ``-`` would not be a valid label, so it gets a ``0`` appended.
    """
    text = str(address).replace(".", "-").replace(":", "-")
    return text + "0" if text.endswith("-") else text


class ZoneNames:
    """The names of one zone, built once from the zone name."""

    __slots__ = ("apex", "dns_version", "ns", "svc")

    def __init__(self, zone: str) -> None:
        self.apex: Labels = split(zone)
        self.svc: Labels = (b"svc", *self.apex)
        self.dns_version: Labels = (b"dns-version", *self.apex)
        self.ns: Labels = (b"ns", b"dns", *self.apex)

    def service(self, namespace: str, name: str) -> Labels:
        return check((name.lower().encode("ascii"), namespace.lower().encode("ascii"), *self.svc))

    def port_srv(self, service: Labels, port_name: str, protocol: str) -> Labels:
        return check((b"_" + port_name.encode("ascii"), b"_" + protocol.encode("ascii"), *service))

    def endpoint(self, service: Labels, hostname: str, cluster: Labels) -> Labels:
        """``hostname`` and ``cluster`` were checked label by label on the way in."""
        labels = (hostname.encode("ascii"), *cluster, *service)
        if wire_length(labels) > MAX_NAME_WIRE:
            raise NameError_(f"name longer than {MAX_NAME_WIRE} bytes on the wire")
        return labels
