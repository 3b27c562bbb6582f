"""The DNS-visible part of the API objects, cut down as they arrive.

Everything here is immutable so that a snapshot handed to the record builder
(or pickled to a worker process) can never change under it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

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
    ips: tuple[IP, ...]
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


@dataclass(frozen=True, slots=True)
class Hints:
    """An endpoint's topology hints (``hints.forZones[].name``, ``hints.forNodes[].name``),
    names only: what kube-proxy routes by, and so what local-first tiers follow when
    every local endpoint has them (order.Tiers.following). Shared between endpoints."""

    zones: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Endpoint:
    addresses: tuple[IP, ...]
    hostname: str | None  # lower-cased; None: derive from the address
    zone: str | None = None  # the endpoint's topology zone, as the slice gives it
    node: str | None = None  # the endpoint's nodeName, as the slice gives it
    hints: Hints | None = None  # None: no usable hint (absent, empty or invalid)


@dataclass(frozen=True, slots=True)
class EndpointSlice:
    namespace: str
    name: str
    service: str  # value of multicluster.kubernetes.io/service-name
    cluster: str | None  # value of multicluster.kubernetes.io/source-cluster
    endpoints: tuple[Endpoint, ...]  # ready endpoints only
    ports: tuple[Port, ...]
    # Not ready but serving (terminating): answered only with --serve-terminating, when
    # the import has no ready endpoint at all.
    serving: tuple[Endpoint, ...] = ()
    # Neither ready nor serving: never answered, but an empty answer says how many
    # endpoints are not ready (RFC 8914 EXTRA-TEXT) and explain lists them.
    not_ready: tuple[Endpoint, ...] = ()
    resource_version: str = field(default="", compare=False)
    # endpoints.kubernetes.io/last-change-trigger-time, in Unix seconds (None: absent).
    trigger_time: float | None = field(default=None, compare=False)


# Keys of the two object stores: (namespace, object name).
ObjectKey = tuple[str, str]
