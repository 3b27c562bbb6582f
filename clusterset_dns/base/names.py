"""Domain-name helpers: the rules a name must follow, wire encoding, the names of the zone.

Pure functions only. Names are handled as tuples of lower-case ``bytes``
labels (most specific first, root omitted), which is what the wire encoder and
the answer keys use.

The rules (enforced here, applied by :mod:`convert` to each field that becomes
a label and by the cache to every whole name an object makes under the zone):

- a label is 1..63 bytes of ASCII letters, digits, ``-`` and ``_`` (upper case
  is folded): what Kubernetes names, label values and port names can hold that
  is also safe in any resolver; a space, a dot inside a label, ``*``, ``@`` or a
  non-ASCII character is refused;
- a name is at most 255 bytes in wire form (RFC 1035 2.3.4), root included.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

IP = IPv4Address | IPv6Address  # an address, as the zone's model and the config hold it

Labels = tuple[bytes, ...]

MAX_LABEL = 63
MAX_NAME_WIRE = 255
MAX_DERIVED_HOSTNAME = 40  # endpoint_hostname() of any address: 39 (IPv6) + a "0"


class InvalidName(ValueError):
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
            raise InvalidName("empty label")
        if len(label) > MAX_LABEL:
            raise InvalidName(f"label longer than {MAX_LABEL} bytes: {label[:20]!r}...")
    if wire_length(labels) > MAX_NAME_WIRE:
        raise InvalidName(f"name longer than {MAX_NAME_WIRE} bytes on the wire")
    return labels


def wire_length(labels: Labels) -> int:
    return sum(map(len, labels)) + len(labels) + 1


def to_wire(labels: Labels) -> bytes:
    # A loop into a bytearray: start-up encodes a few hundred thousand names, and this
    # takes 40% of the time a generator of small bytes objects joined would.
    out = bytearray()
    for label in labels:
        out.append(len(label))
        out += label
    out.append(0)
    return bytes(out)


def wire_to_text(wire: bytes) -> str:
    """An uncompressed wire-format name as absolute text (zone files, log lines); the
    one decoder of names to text. Stops at the end of ``wire`` if the name runs off."""
    labels, offset = [], 0
    while offset < len(wire) and wire[offset]:
        labels.append(wire[offset + 1 : offset + 1 + wire[offset]])
        offset += 1 + wire[offset]
    return to_text(tuple(labels))


def to_text(labels: Labels) -> str:
    return ".".join(label.decode("ascii") for label in labels) + "."


_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def label(text: str) -> bytes:
    """``"Web"`` -> ``b"web"``; raises :class:`InvalidName` unless ``text`` is one label."""
    low = text.lower()
    if not 0 < len(low) <= MAX_LABEL:
        raise InvalidName(f"{text[:70]!r} is not 1..{MAX_LABEL} characters long")
    if not low.isascii() or not _LABEL_CHARS.issuperset(low):
        raise InvalidName(f"{text[:70]!r} is not a DNS label (letters, digits, '-', '_')")
    return low.encode("ascii")


def is_label(text: str) -> bool:
    """Whether ``text`` is one label by the rules above."""
    try:
        label(text)
    except InvalidName:
        return False
    return True


def subdomain(text: str) -> Labels:
    """A dotted name of labels (a cluster id, KEP-2149): ``"East.EU"`` -> ``(b"east", b"eu")``.
    One trailing dot is allowed; empty (``""``, ``"."``) is not."""
    parts = (text[:-1] if text.endswith(".") else text).split(".")
    return check(tuple(label(part) for part in parts))


def endpoint_hostname(address: IPv4Address | IPv6Address) -> str:
    """The name an endpoint gets when it has no hostname: ``10.1.2.3`` -> ``10-1-2-3``.

    IPv6 uses the compressed form (``fd00::1`` -> ``fd00--1``); a name ending in
    ``-`` would not be a valid label, so it gets a ``0`` appended.
    """
    text = str(address).replace(".", "-").replace(":", "-")
    return text + "0" if text.endswith("-") else text


def packed_hostname(packed: bytes) -> str:
    """:func:`endpoint_hostname` of a packed address (4 or 16 bytes), as the model
    stores them: an IPv4 one without an address object (most of a zone's names)."""
    if len(packed) == 4:
        return "-".join(map(str, packed))
    return endpoint_hostname(IPv6Address(packed))


class EndpointNames:
    """The endpoint names of one cluster under one service, ``<hostname>.<cluster
    id>.<service>``, each with its wire form: the part they share is checked and
    encoded once (start-up names a hundred thousand endpoints)."""

    __slots__ = ("_room", "_tail", "_tail_wire")

    def __init__(self, service: Labels, cluster: Labels) -> None:
        self._tail: Labels = check((*cluster, *service))
        self._tail_wire = to_wire(self._tail)
        self._room = MAX_NAME_WIRE - 1 - len(self._tail_wire)  # for the first label

    def name(self, hostname: str) -> tuple[Labels, bytes]:
        """What :meth:`ZoneNames.endpoint` gives, and its :func:`to_wire`."""
        head = hostname.encode("ascii")
        if not 0 < len(head) <= min(MAX_LABEL, self._room):
            check((head, *self._tail))  # raises, saying why
        return (head, *self._tail), bytes((len(head),)) + head + self._tail_wire


class ZoneNames:
    """The names of one zone, built once from the zone name."""

    __slots__ = ("_room", "_svc_wire", "apex", "dns_version", "ns", "svc")

    def __init__(self, zone: str) -> None:
        self.apex: Labels = split(zone)
        self.svc: Labels = (b"svc", *self.apex)
        self.dns_version: Labels = (b"dns-version", *self.apex)
        self.ns: Labels = (b"ns", b"dns", *self.apex)
        self._svc_wire = to_wire(self.svc)
        # bytes left for a service's two labels and their length bytes: the zone's labels
        # were checked once here, so a service name only checks its own two
        self._room = MAX_NAME_WIRE - len(self._svc_wire) - 2

    # Every name an object makes is built by one of these three, and each checks the
    # lengths of the whole name: the object-level rule (cache admission) calls them
    # too. The syntax of each part was checked by label() when the field was read.

    def _service_labels(self, namespace: str, name: str) -> tuple[bytes, bytes]:
        # label() checks each part (1..63 bytes): only the whole name's length is left
        # (check() would walk the zone's labels again: start-up names every import twice)
        first, second = label(name), label(namespace)
        if len(first) + len(second) > self._room:
            raise InvalidName(f"name longer than {MAX_NAME_WIRE} bytes on the wire")
        return first, second

    def service(self, namespace: str, name: str) -> Labels:
        return (*self._service_labels(namespace, name), *self.svc)

    def service_wire(self, namespace: str, name: str) -> bytes:
        """``to_wire(self.service(namespace, name))``, lower case, without the tuple."""
        first, second = self._service_labels(namespace, name)
        return b"".join((bytes((len(first),)), first, bytes((len(second),)), second,
                         self._svc_wire))

    def port_srv(self, service: Labels, port_name: str, protocol: str) -> Labels:
        """``_<port>._<proto>.<service>``: a 63-character port name (legal in Kubernetes)
        makes a 64-byte label, which this refuses."""
        return check((b"_" + port_name.encode("ascii"), b"_" + protocol.encode("ascii"),
                      *service))

    def endpoint(self, service: Labels, hostname: str, cluster: Labels) -> Labels:
        """``<hostname>.<cluster id>.<service>``; ``cluster`` comes from :func:`subdomain`."""
        return check((hostname.encode("ascii"), *cluster, *service))
