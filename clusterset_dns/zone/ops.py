"""The op vocabulary: how sources describe changes to the cache, and what
:meth:`cache.Cache.apply` reports back.

Ops are small frozen dataclasses (picklable) so that the same list can be fanned
out to worker processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clusterset_dns.zone import wire
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, ServiceImport


@dataclass(frozen=True, slots=True)
class PutImport:
    """Store a ServiceImport under ``key``; ``obj`` None deletes it."""

    key: ObjectKey
    obj: ServiceImport | None


@dataclass(frozen=True, slots=True)
class PutSlice:
    """Store an EndpointSlice under ``key``; ``obj`` None deletes it."""

    key: ObjectKey
    obj: EndpointSlice | None


@dataclass(frozen=True, slots=True)
class ReplaceImports:
    """The complete set of ServiceImports (a list): what it lacks is deleted."""

    objects: Mapping[ObjectKey, ServiceImport]


@dataclass(frozen=True, slots=True)
class ReplaceSlices:
    """The complete set of EndpointSlices (a list): what it lacks is deleted."""

    objects: Mapping[ObjectKey, EndpointSlice]


@dataclass(frozen=True, slots=True)
class SetSynced:
    """Every source has delivered its first complete state (or lost it)."""

    synced: bool


@dataclass(frozen=True, slots=True)
class SetClusterId:
    """The id of the cluster this server runs in (as properties.cluster_id writes it), or
    None when unknown: PreferClose imports answer with its endpoints first."""

    cluster_id: str | None


@dataclass(frozen=True, slots=True)
class SetTopologyZone:
    """The topology zone this server runs in, or None: within the local cluster,
    PreferClose imports answer with this zone's endpoints first."""

    zone: str | None


@dataclass(frozen=True, slots=True)
class PutRejected:
    """A source could not convert the object ``kind`` ``key`` (of the service
    ``service``, when it could be read): ``reason`` says why; None: that object is
    gone or valid again. Its service's empty answers say so."""

    kind: str
    key: ObjectKey
    service: ObjectKey | None
    reason: str | None
    reference: tuple[str, str] = ("", "")  # (apiVersion, uid): for Events (--events)


@dataclass(frozen=True, slots=True)
class ReplaceRejected:
    """Every object a source could not convert: (kind, key) -> (service, reason)."""

    objects: Mapping[tuple[str, ObjectKey], tuple[ObjectKey | None, str]]


@dataclass(frozen=True, slots=True)
class SetSerial:
    """The serial the zone has after this update: the parent picks it and its workers
    follow, so that every process of one server answers (and transfers) the same one."""

    serial: int


Op = (PutImport | PutSlice | ReplaceImports | ReplaceSlices | SetSynced | SetClusterId
      | SetTopologyZone | SetSerial | PutRejected | ReplaceRejected)
# One answer key's change: (key, old answer, new answer); None = absent.
Change = tuple[bytes, "wire.Answer | None", "wire.Answer | None"]
# A service's answer keys, names without records, names with a reason (EDE), the
# parents of its endpoint names in the compact index (table.Hosts), and its SRV keys
# answered from its service name's answer (Zone.derived).
Footprint = tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...],
                  tuple[bytes, ...]]

IMPORT, SLICE = "ServiceImport", "EndpointSlice"  # kinds, as the invalid-objects metric says


@dataclass(frozen=True, slots=True)
class Rejected:
    """An object (or part of one) that the zone cannot hold, reported once per put."""

    kind: str  # IMPORT or SLICE
    key: ObjectKey
    reason: str
    served: bool  # True: the rest of the object is served (only a port name was dropped)


@dataclass(frozen=True, slots=True)
class Rejection:
    """What the cache remembers of a refused object, for explain and EDE texts."""

    service: ObjectKey | None  # the import it would feed, when known
    reason: str
    served: bool  # the rest of the object is served (a source's rejection: never)
    source: bool  # reported by the source (conversion) rather than by admission
    reference: tuple[str, str] = ("", "")  # (apiVersion, uid) when known (Events)


@dataclass(frozen=True, slots=True)
class Applied:
    """What one :meth:`Cache.apply` did: the caller decides what follows (metrics, memory)."""

    rebuilt: int  # services whose answers were rebuilt
    rejected: tuple[Rejected, ...] = ()


class RebuildError(RuntimeError):
    """A bug while building answers. Raised after every other service of the update was
    rebuilt; the failed services keep their previous answers and are retried with
    every later update."""
