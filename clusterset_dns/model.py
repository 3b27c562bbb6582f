"""The DNS-visible part of the API objects, cut down as they arrive.

Everything here is immutable so that a snapshot handed to the record builder
(or pickled to a worker process) can never change under it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

IP = IPv4Address | IPv6Address


class ServiceType(enum.Enum):
    CLUSTER_SET_IP = "ClusterSetIP"
    HEADLESS = "Headless"


@dataclass(frozen=True, slots=True)
class Port:
    name: str  # lower-cased; "" when the port is unnamed
    protocol: str  # lower-cased: "tcp", "udp" or "sctp"
    port: int


@dataclass(frozen=True, slots=True)
class ServiceImport:
    namespace: str
    name: str
    type: ServiceType
    ips: tuple[IP, ...]
    ports: tuple[Port, ...]
    # trafficDistribution is PreferClose: a Headless import answers with the local
    # cluster's (and zone's) endpoints when it has ready ones (see records.closest).
    prefer_close: bool = False


@dataclass(frozen=True, slots=True)
class Endpoint:
    addresses: tuple[IP, ...]
    hostname: str | None  # lower-cased; None: derive from the address
    zone: str | None = None  # the endpoint's topology zone, as the slice gives it


@dataclass(frozen=True, slots=True)
class EndpointSlice:
    namespace: str
    name: str
    service: str  # value of multicluster.kubernetes.io/service-name
    cluster: str | None  # value of multicluster.kubernetes.io/source-cluster
    endpoints: tuple[Endpoint, ...]  # ready endpoints only
    ports: tuple[Port, ...]


# Keys of the two object stores: (namespace, object name).
ObjectKey = tuple[str, str]
