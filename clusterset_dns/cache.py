"""The object stores and the zone of ready-made answers built from them.

Sources (manifest files, the Kubernetes watch) describe changes as a list of
:data:`Op`; :meth:`Cache.apply` applies one list and rebuilds the services it
touched before returning. The answer dicts are changed in place inside that
one synchronous call, so on the event loop a query sees either all of an
update or none of it. Ops are small frozen dataclasses (picklable) so that the
same list can be fanned out to worker processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from clusterset_dns import wire
from clusterset_dns.model import IP, EndpointSlice, ObjectKey, ServiceImport
from clusterset_dns.names import ZoneNames, to_wire
from clusterset_dns.records import Built, RecordBuilder

log = logging.getLogger(__name__)



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


Op = PutImport | PutSlice | ReplaceImports | ReplaceSlices | SetSynced
Footprint = tuple[tuple[bytes, ...], tuple[bytes, ...]]  # a service's answer keys and names


BULK = 1000  # services rebuilt in one apply: a (re)list or a big file


def release_memory() -> None:
    """After a bulk load: moves what survived out of the cyclic garbage collector's
    sight (a full collection over every answer would stall queries for tens of ms;
    the data has no cycles, reference counting frees it), and hands the heap freed
    by the load (raw JSON pages, old answers) back to the OS, so the resident size
    reflects the data kept rather than the peak of a list."""
    gc.collect()
    gc.freeze()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(slots=True)
class Zone:
    """What the handler reads. The dicts keep their identity for the process's life."""

    apex_wire: bytes
    answers: dict[bytes, wire.Answer] = field(default_factory=dict)
    # Names that exist without records (ENTs, ...) -> reference count; a name with
    # records is known by its answers (records.has_records).
    names: dict[bytes, int] = field(default_factory=dict)
    any_answer: wire.Answer | None = None  # RFC 8482's HINFO, the same for every name
    nxdomain: wire.Answer | None = None
    nodata: wire.Answer | None = None
    synced: bool = False
    serial: int = 0


class Cache:
    def __init__(self, zone_names: ZoneNames, ttl: int, ns_addresses: Iterable[IP] = ()) -> None:
        self.builder = RecordBuilder(zone_names, ttl)
        self.zone = Zone(apex_wire=to_wire(zone_names.apex), any_answer=self.builder.any_answer)
        self.imports: dict[ObjectKey, ServiceImport] = {}
        self.slices: dict[ObjectKey, EndpointSlice] = {}
        self._slices_of: dict[ObjectKey, dict[ObjectKey, EndpointSlice]] = {}
        self._built: dict[ObjectKey, Footprint] = {}
        self._ns_addresses = list(ns_addresses)
        self._apex: Footprint | None = None
        self._set_serial(int(time.time()))

    # -- applying changes ----------------------------------------------------------------

    def apply(self, ops: Iterable[Op]) -> None:
        dirty: set[ObjectKey] = set()
        for op in ops:
            if isinstance(op, PutImport):
                self._put_import(op.key, op.obj, dirty)
            elif isinstance(op, PutSlice):
                self._put_slice(op.key, op.obj, dirty)
            elif isinstance(op, ReplaceImports):
                for old_key in [k for k in self.imports if k not in op.objects]:
                    self._put_import(old_key, None, dirty)
                for new_key, imp in op.objects.items():
                    self._put_import(new_key, imp, dirty)
            elif isinstance(op, ReplaceSlices):
                for old_key in [k for k in self.slices if k not in op.objects]:
                    self._put_slice(old_key, None, dirty)
                for new_key, piece in op.objects.items():
                    self._put_slice(new_key, piece, dirty)
            else:
                self.zone.synced = op.synced
        if dirty:
            for service in dirty:
                self._rebuild(service)
            self._set_serial(self.zone.serial + 1)
            if len(dirty) >= BULK:
                release_memory()

    def _put_import(self, key: ObjectKey, obj: ServiceImport | None, dirty: set[ObjectKey]) -> None:
        if self.imports.get(key) == obj:
            return  # no DNS-visible change (status conditions, annotations, ...)
        if obj is None:
            del self.imports[key]
        else:
            self.imports[key] = obj
        dirty.add(key)

    def _put_slice(self, key: ObjectKey, obj: EndpointSlice | None, dirty: set[ObjectKey]) -> None:
        old = self.slices.get(key)
        if old == obj:
            return
        if old is not None:
            service = (old.namespace, old.service)
            self._slices_of[service].pop(key, None)
            if not self._slices_of[service]:
                del self._slices_of[service]
            dirty.add(service)
            del self.slices[key]
        if obj is not None:
            self.slices[key] = obj
            service = (obj.namespace, obj.service)
            self._slices_of.setdefault(service, {})[key] = obj
            dirty.add(service)

    # -- rebuilding -----------------------------------------------------------------------

    def _rebuild(self, service: ObjectKey) -> None:
        imp = self.imports.get(service)
        built = Built()
        if imp is not None:
            built = self.builder.service(imp, self._slices_of.get(service, {}).values())
        self._built[service] = self._swap(self._built.pop(service, None), built)
        if imp is None:
            del self._built[service]

    def _swap(self, old: Footprint | None, new: Built) -> Footprint:
        """Puts ``new`` in place of ``old``; returns what to remember of ``new``."""
        answers, names = self.zone.answers, self.zone.names
        if old is not None:
            for key in old[0]:
                if key not in new.answers:
                    del answers[key]
            for name in old[1]:
                count = names[name] - 1
                if count:
                    names[name] = count
                else:
                    del names[name]
        answers.update(new.answers)
        for name in new.names:
            names[name] = names.get(name, 0) + 1
        # Only the keys are kept per service (tuples: 8 bytes a key, no second dict).
        return tuple(new.answers), tuple(new.names)

    def _set_serial(self, serial: int) -> None:
        serial &= 0xFFFFFFFF
        zone = self.zone
        zone.serial = serial
        apex = self.builder.apex(serial, self._ns_addresses)
        self._apex = self._swap(self._apex, apex)
        zone.nxdomain = self.builder.negative(serial, wire.NXDOMAIN)
        zone.nodata = self.builder.negative(serial, wire.NOERROR)

    # -- reading ------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {
            "imports": len(self.imports),
            "slices": len(self.slices),
            "answers": len(self.zone.answers),
            "names": len(self.zone.names),
        }
