"""The DNS-visible part of the API objects, cut down as they arrive.

Everything here is immutable so that a snapshot handed to the record builder
(or pickled to a worker process) can never change under it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from typing import Any, NamedTuple, Protocol, overload

from clusterset_dns.base.names import IP as IP  # the zone's addresses (base: config too)


class ServiceType(enum.Enum):
    CLUSTER_SET_IP = "ClusterSetIP"
    HEADLESS = "Headless"


class Prefer(enum.Enum):
    """What a Headless import's trafficDistribution asks of the answers that choose
    among endpoints (order.Tiers): nothing, the server's zone (PreferClose,
    PreferSameZone), or its node, then zone (PreferSameNode)."""

    NOTHING = 0
    ZONE = 1
    NODE = 2


@dataclass(frozen=True, slots=True)
class Port:
    name: str  # lower-cased; "" when the port is unnamed
    protocol: str  # lower-cased: "tcp", "udp" or "sctp"
    port: int


@dataclass(frozen=True, slots=True)
class Condition:
    """One of a ServiceImport's status conditions, as explain shows it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ServiceImport:
    namespace: str
    name: str
    type: ServiceType
    # The IPs in order, packed: each after a byte of its length (4 or 16); ``ips``
    # gives them as objects. Code may pass a sequence of addresses (__post_init__).
    packed_ips: bytes
    ports: tuple[Port, ...]
    # trafficDistribution, as far as it is understood: a Headless import ranks its
    # endpoints local-first (see order.Tiers).
    prefer: Prefer = Prefer.NOTHING
    # A trafficDistribution value not understood (answered as NOTHING; logged once).
    unknown_traffic: str | None = None
    # status.endpointSliceObjects is Absent: the controller says no slice will come
    # (an empty answer then says so, RFC 8914).
    slices_absent: bool = False
    # Shown by explain, never in DNS: a change of these alone rebuilds nothing.
    conditions: tuple[Condition, ...] = field(default=(), compare=False)
    slice_objects: str = field(default="", compare=False)  # endpointSliceObjects as given
    resource_version: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        given: Any = self.packed_ips
        if type(given) is not bytes:
            object.__setattr__(self, "packed_ips", pack_ips(given))

    @property
    def ips(self) -> tuple[IP, ...]:
        return tuple(map(_ip, unpack(self.packed_ips)))


def pack_ips(ips: Iterable[IP]) -> bytes:
    """Addresses of either family packed, each after a byte of its length: one bytes
    object where a tuple and an ``ipaddress`` object each took about 130 bytes."""
    return pack(ip.packed for ip in ips)


def pack(addresses: Iterable[bytes]) -> bytes:
    """:func:`pack_ips` of addresses already packed (4 or 16 bytes each)."""
    return b"".join(bytes((len(packed),)) + packed for packed in addresses)


def unpack(packed: bytes) -> list[bytes]:
    """The addresses :func:`pack_ips` packed, each 4 or 16 bytes."""
    found, i = [], 0
    while i < len(packed):
        size = packed[i]
        found.append(packed[i + 1:i + 1 + size])
        i += 1 + size
    return found


@dataclass(frozen=True, slots=True)
class Hints:
    """An endpoint's topology hints (``hints.forZones[].name``, ``hints.forNodes[].name``),
    names only: what kube-proxy routes by, and so what local-first tiers follow when
    every local endpoint has them (order.Tiers.following). Shared between endpoints."""

    zones: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()


class Located(Protocol):
    """What local-first tiers read of an endpoint (order.Tiers): a :class:`Place`, or
    an :class:`Endpoint` made for explain."""

    @property
    def zone(self) -> str | None: ...
    @property
    def node(self) -> str | None: ...
    @property
    def hints(self) -> Hints | None: ...


class Place(NamedTuple):
    """Where an endpoint runs: its zone and nodeName as the slice gives them, and its
    usable hints (None: absent, empty or invalid). One object per distinct place, shared
    by the endpoints there (convert.py interns them), so a slice stores an index."""

    zone: str | None = None
    node: str | None = None
    hints: Hints | None = None


NOWHERE = Place()


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint as an object: what explain shows and tests write. The model stores
    none (see :class:`Endpoints`); it makes them on the slow paths only."""

    addresses: tuple[IP, ...]
    hostname: str | None  # lower-cased; None: derive from the address
    zone: str | None = None  # the endpoint's topology zone, as the slice gives it
    node: str | None = None  # the endpoint's nodeName, as the slice gives it
    hints: Hints | None = None  # None: no usable hint (absent, empty or invalid)


_ONE_BYTE = 256  # places a one-byte index tells apart; past them, two bytes an endpoint


@dataclass(frozen=True, slots=True)
class Endpoints:
    """One list of a slice's endpoints (ready, serving or not ready) stored by columns,
    with no Python object per endpoint: a million endpoints cost their bytes, not a
    dataclass, a tuple and an ``ipaddress`` object each. Made by :class:`Columns`
    only, so equal lists have equal fields. Reading: :meth:`packs`, :meth:`rows`,
    :meth:`hostname_list`, :meth:`place_list`; iterating or indexing makes
    :class:`Endpoint` objects (explain, tests)."""

    count: int = 0
    # Every address of every endpoint in turn, ``width`` bytes each (4 or 16); width 0:
    # families mixed (objects made in code), each address after a byte of its length.
    packed: bytes = b""
    width: int = 4
    counts: tuple[int, ...] | None = None  # addresses per endpoint; None: one each
    hostnames: tuple[str | None, ...] | None = None  # None: every name derived
    places: tuple[Place, ...] = ()  # the distinct places, in order of first endpoint
    # Endpoint i is at places[where[i]] (two bytes each, big-endian, past 256 places);
    # b"": every endpoint at places[0].
    where: bytes = b""

    @staticmethod
    def of(endpoints: Iterable[Endpoint]) -> Endpoints:
        columns = Columns()
        for e in endpoints:
            columns.add([ip.packed for ip in e.addresses], e.hostname,
                        Place(e.zone, e.node, e.hints))
        return columns.finish()

    def __len__(self) -> int:
        return self.count

    def addresses(self) -> list[bytes]:
        """Every address in turn, packed."""
        packed, width = self.packed, self.width
        if width:
            return [packed[i:i + width] for i in range(0, len(packed), width)]
        return unpack(packed)

    def packs(self) -> list[list[bytes]]:
        """Each endpoint's addresses, packed (4 or 16 bytes)."""
        flat = self.addresses()
        if self.counts is None:
            return [[one] for one in flat]
        out, start = [], 0
        for count in self.counts:
            out.append(flat[start:start + count])
            start += count
        return out

    def hostname_list(self) -> Sequence[str | None]:
        return self.hostnames if self.hostnames is not None else (None,) * self.count

    def place_list(self) -> list[Place]:
        places, where = self.places, self.where
        if not where:
            return [places[0]] * self.count if places else []
        if len(places) <= _ONE_BYTE:
            return [places[i] for i in where]
        return [places[int.from_bytes(where[i:i + 2], "big")] for i in range(0, len(where), 2)]

    def rows(self) -> Iterator[tuple[list[bytes], str | None, Place]]:
        """(packed addresses, hostname, place) of each endpoint."""
        return zip(self.packs(), self.hostname_list(), self.place_list(), strict=True)

    def __iter__(self) -> Iterator[Endpoint]:
        for packs, hostname, place in self.rows():
            yield Endpoint(tuple(map(_ip, packs)), hostname, *place)

    @overload
    def __getitem__(self, index: int) -> Endpoint: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Endpoint, ...]: ...

    def __getitem__(self, index: int | slice) -> Endpoint | tuple[Endpoint, ...]:
        if isinstance(index, slice):
            return tuple(map(self._one, range(*index.indices(self.count))))
        if not -self.count <= index < self.count:
            raise IndexError("endpoint index out of range")
        return self._one(index % self.count)

    def _one(self, i: int) -> Endpoint:
        width = self.width
        packs = ([self.packed[i * width:(i + 1) * width]] if width and self.counts is None
                 else self.packs()[i])
        hostname = None if self.hostnames is None else self.hostnames[i]
        where = self.where
        place = (self.places[0] if not where else self.places[where[i]]
                 if len(self.places) <= _ONE_BYTE
                 else self.places[int.from_bytes(where[2 * i:2 * i + 2], "big")])
        return Endpoint(tuple(map(_ip, packs)), hostname, *place)


def _ip(packed: bytes) -> IP:
    return IPv4Address(packed) if len(packed) == 4 else IPv6Address(packed)


class Columns:
    """Builds :class:`Endpoints` an endpoint at a time (convert.py, Endpoints.of)."""

    __slots__ = ("_addresses", "_counts", "_hostnames", "_places", "_where")

    def __init__(self) -> None:
        self._addresses: list[bytes] = []
        self._counts: list[int] = []
        self._hostnames: list[str | None] = []
        self._places: dict[Place, int] = {}
        self._where: list[int] = []

    def add(self, packed: list[bytes], hostname: str | None, place: Place) -> None:
        self._addresses.extend(packed)
        self._counts.append(len(packed))
        self._hostnames.append(hostname)
        index = self._places.get(place)
        if index is None:
            self._places[place] = index = len(self._places)
        self._where.append(index)

    def finish(self) -> Endpoints:
        counts = self._counts
        if not counts:
            return NO_ENDPOINTS
        addresses = self._addresses
        widths = set(map(len, addresses))
        if len(widths) <= 1:
            width = widths.pop() if widths else 4
            packed = b"".join(addresses)
        else:
            width = 0
            packed = b"".join(bytes((len(one),)) + one for one in addresses)
        hostnames = self._hostnames
        places = tuple(self._places)
        if places == _JUST_NOWHERE:
            places = _JUST_NOWHERE  # the common case: one tuple for every slice
        where = self._where
        index = (b"" if len(places) == 1 else bytes(where) if len(places) <= _ONE_BYTE
                 else b"".join(i.to_bytes(2, "big") for i in where))
        return Endpoints(
            count=len(counts), packed=packed, width=width,
            counts=None if all(count == 1 for count in counts) else tuple(counts),
            hostnames=None if all(name is None for name in hostnames) else tuple(hostnames),
            places=places, where=index)


_JUST_NOWHERE = (NOWHERE,)
NO_ENDPOINTS = Endpoints()


@dataclass(frozen=True, slots=True)
class EndpointSlice:
    namespace: str
    name: str
    service: str  # value of multicluster.kubernetes.io/service-name
    cluster: str | None  # value of multicluster.kubernetes.io/source-cluster
    endpoints: Endpoints  # ready endpoints only
    ports: tuple[Port, ...]
    # Not ready but serving (terminating): answered only with --serve-terminating, when
    # the import has no ready endpoint at all.
    serving: Endpoints = NO_ENDPOINTS
    # Neither ready nor serving: never answered, but an empty answer says how many
    # endpoints are not ready (RFC 8914 EXTRA-TEXT) and explain lists them.
    not_ready: Endpoints = NO_ENDPOINTS
    resource_version: str = field(default="", compare=False)
    # endpoints.kubernetes.io/last-change-trigger-time, in Unix seconds (None: absent).
    trigger_time: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # Slices written in code (tests, tools) may give Endpoint sequences: stored as
        # columns all the same, so that equal slices compare equal.
        for name in ("endpoints", "serving", "not_ready"):
            value = getattr(self, name)
            if type(value) is not Endpoints:
                object.__setattr__(self, name, Endpoints.of(value))


# Keys of the two object stores: (namespace, object name).
ObjectKey = tuple[str, str]
