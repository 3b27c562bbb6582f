"""The object stores and the zone of ready-made answers built from them.

Sources (manifest files, the Kubernetes watch) describe changes as a list of :data:`Op`;
:meth:`Cache.apply` applies one list and rebuilds the services it touched before
returning. The answer dicts are changed in place inside that one synchronous call, so on
the event loop a query sees either all of an update or none of it. The ops are
:mod:`ops`'; the dicts the handler reads, :mod:`table`'s; a first list's services may
wait for their answers in :mod:`pending`'s list.

Every object is admitted before it is stored (:mod:`admission`): each name it would make
under the zone must fit DNS. An object that cannot be served whole is not stored (a port
whose ``_<port>._<proto>`` name cannot exist only loses that name); either way
:meth:`Cache.apply` reports it in :class:`Applied`, and never stops the rest of the
update for it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from clusterset_dns.base.clock import SYSTEM
from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.zone import delta, serials, table, wire
from clusterset_dns.zone.admission import Admission
from clusterset_dns.zone.model import (
    IP,
    EndpointSlice,
    ObjectKey,
    Prefer,
    ServiceImport,
    ServiceType,
)
from clusterset_dns.zone.ops import (
    IMPORT,
    SLICE,
    Applied,
    Change,
    Footprint,
    Op,
    PutImport,
    PutRejected,
    PutSlice,
    RebuildError,
    Rejected,
    Rejection,
    ReplaceImports,
    ReplaceRejected,
    ReplaceSlices,
    SetClusterId,
    SetSerial,
    SetSynced,
    SetTopologyZone,
)
from clusterset_dns.zone.pending import Pending
from clusterset_dns.zone.records import Built, RecordBuilder
from clusterset_dns.zone.table import (
    EMPTY,
    HAS_RECORDS,
    MISSING,
    NEGATIVES_CAP,
    NO_ENDPOINT,
    REJECTED,
    SERVED,
    SRV_SUFFIX,
    Zone,
    owns_records,
)

# The op vocabulary and the zone table live in their own modules; their names stay
# importable from here, where the cache's callers have always found them.
__all__ = [
    "EMPTY", "HAS_RECORDS", "IMPORT", "MISSING", "NEGATIVES_CAP", "NO_ENDPOINT", "REJECTED",
    "SERVED", "SLICE", "Applied", "Cache", "Change", "Footprint", "Op", "PutImport",
    "PutRejected", "PutSlice", "RebuildError", "Rejected", "Rejection", "ReplaceImports",
    "ReplaceRejected", "ReplaceSlices", "SetClusterId", "SetSerial", "SetSynced",
    "SetTopologyZone", "Zone",
]

log = logging.getLogger(__name__)


class Cache:
    def __init__(self, zone_names: ZoneNames, ttl: int, ns_addresses: Iterable[IP] = (),
                 log_rejected: bool = True, cluster_id: str | None = None,
                 topology_zone: str | None = None, node_name: str | None = None,
                 serve_terminating: bool = False,
                 clock: Callable[[], float] = SYSTEM.time,
                 on_change: Callable[[int, int, list[Change] | None], None] | None = None,
                 record_programming: bool = False, lazy: bool = True, defer: bool = False
                 ) -> None:
        """``log_rejected=False``: a worker process, whose parent already logged what
        the same update rejected (the result still reports it). ``cluster_id`` and
        ``topology_zone``: where the server runs, as configured (changed later by ops);
        ``node_name`` and ``serve_terminating``: as configured, never changed.
        ``clock``: unix time, for the serial (:mod:`serials`).

        ``on_change``: a journal's (IXFR), called after every serial change with the
        answer keys that changed; None keeps updates free of that bookkeeping. None
        instead of the keys: the change happened before the first sync (a first list
        applied page by page), whose half-loaded serials keep no history.

        ``record_programming`` (the serving parent): slices changed by apply() that
        carry a last-change-trigger-time are listed in ``programmed``, as (service
        kind, trigger time); the caller measures the programming delay once their
        answers are served, and empties the list. ``defer``: see :mod:`pending`."""
        self.clock = clock
        self.builder = RecordBuilder(zone_names, ttl, cluster_id, topology_zone, node_name,
                                     serve_terminating)
        # Imports whose trafficDistribution is not understood (answered without a
        # preference): their value, for the metric; each is logged once.
        self.unknown_traffic: dict[ObjectKey, str] = {}
        self.names = zone_names
        self.zone = Zone(apex_wire=to_wire(zone_names.apex), any_answer=self.builder.any_answer,
                         address_heads=self.builder.address_heads)
        # Endpoint names with one address answered on first use (Zone.hosts); False:
        # every answer encoded at update time (tests compare the two).
        self.lazy = lazy
        self.imports: dict[ObjectKey, ServiceImport] = {}
        self.slices: dict[ObjectKey, EndpointSlice] = {}
        self._slices_of: dict[ObjectKey, dict[ObjectKey, EndpointSlice]] = {}
        self._built: dict[ObjectKey, Footprint] = {}
        self._failed: set[ObjectKey] = set()  # services whose last rebuild raised
        self._ns_addresses = list(ns_addresses)
        self._log_rejected = log_rejected
        self.admission = Admission(zone_names, log_rejected)
        self._apex: Footprint | None = None
        self._forced_serial: int | None = None
        self.on_change = on_change
        self._changes: list[Change] = []
        # Refused objects: (kind, key) -> why (the admission's own dict).
        self.rejections = self.admission.rejections
        # When each service's answers were last rebuilt: (serial after it, Unix time).
        self.changed_at: dict[ObjectKey, tuple[int, float]] = {}
        # How each service stands (SERVED, NO_ENDPOINT, REJECTED), for the metrics.
        self.states: dict[ObjectKey, str] = {}
        self.record_programming = record_programming
        self.programmed: list[tuple[str, float]] = []
        # Large Headless services changed after the sync are updated by difference
        # (delta.py) from at least this many endpoint names; None: always rebuilt whole.
        self.incremental_min: int | None = delta.INCREMENTAL_MIN
        self._headless: dict[ObjectKey, delta.Headless] = {}
        self._touched: dict[ObjectKey, set[ObjectKey]] = {}  # their slices changed since
        self._may_start = False  # the rebuild in progress may start a delta.Headless
        self.defer, self._quiet = defer, False  # _quiet: a pending service is being built
        self.pending = Pending(zone_names, self.zone, self._build_deferred, self._failed)
        self._set_serial(serials.at(clock()))

    # -- applying changes ----------------------------------------------------------------

    def apply(self, ops: Iterable[Op]) -> Applied:
        """Applies ``ops`` and rebuilds what they touched. Invalid objects are reported in
        the result, never raised; a bug raises, after every touched service was rebuilt
        (or kept whole, with its previous answers)."""
        dirty: set[ObjectKey] = set(self._failed)
        rejected: list[Rejected] = []
        self._forced_serial = None
        old_serial = self.zone.serial
        was_synced = self.zone.synced
        if self.pending and was_synced and self.on_change is not None:
            self.pending.touched(ops, self.slices)
        try:
            for op in ops:
                self._apply_one(op, dirty, rejected)
        finally:
            # Even when an op raised (a bug): what was stored so far gets its answers.
            failures = self._rebuild_all(dirty, not was_synced and self.zone.synced,
                                         self.defer and not was_synced)
            if self.zone.serial != old_serial and self.on_change is not None:
                changes, self._changes = self._changes, []
                # No history from before the first sync (half-loaded zones), nor of the
                # update that completes it: the serial before it is this start's, which
                # a previous run (or another replica) may have handed out for other data,
                # and an IXFR from it would replay this load onto that.
                history = was_synced and self.zone.synced
                self.on_change(old_serial, self.zone.serial, changes if history else None)
            self._changes = []
        if failures:
            raise RebuildError(f"{len(failures)} service(s) could not be rebuilt, e.g. "
                               f"{failures[0][0]}: {failures[0][1]!r}") from failures[0][1]
        return Applied(len(dirty), tuple(rejected))

    def _apply_one(self, op: Op, dirty: set[ObjectKey], rejected: list[Rejected]) -> None:
        if isinstance(op, PutImport):
            self._put_import(op.key, op.obj, dirty, rejected)
        elif isinstance(op, PutSlice):
            self._put_slice(op.key, op.obj, dirty, rejected)
        elif isinstance(op, ReplaceImports):
            for old_key in [k for k in self.imports if k not in op.objects]:
                self._put_import(old_key, None, dirty, rejected)
            for new_key, imp in op.objects.items():
                self._put_import(new_key, imp, dirty, rejected)
        elif isinstance(op, ReplaceSlices):
            for old_key in [k for k in self.slices if k not in op.objects]:
                self._put_slice(old_key, None, dirty, rejected)
            for new_key, piece in op.objects.items():
                self._put_slice(new_key, piece, dirty, rejected)
        elif isinstance(op, SetClusterId | SetTopologyZone):
            self._set_locality(op, dirty)
        elif isinstance(op, SetSerial):
            self._forced_serial = op.serial & 0xFFFFFFFF
        elif isinstance(op, PutRejected):
            self.admission.note(op.kind, op.key, None if op.reason is None
                       else Rejection(op.service, op.reason, False, True, op.reference), dirty)
        elif isinstance(op, ReplaceRejected):
            for old in [k for k, r in self.rejections.items()
                        if r.source and k not in op.objects]:
                self.admission.note(*old, None, dirty)
            for (kind, key), (service, reason) in op.objects.items():
                self.admission.note(kind, key, Rejection(service, reason, False, True), dirty)
        else:
            self.zone.synced = op.synced
            self.zone.changed()

    def _set_locality(self, op: SetClusterId | SetTopologyZone, dirty: set[ObjectKey]) -> None:
        builder = self.builder
        if isinstance(op, SetClusterId):
            if builder.cluster_id == op.cluster_id:
                return
            builder.cluster_id = op.cluster_id
        else:
            if builder.topology_zone == op.zone:
                return
            builder.topology_zone = op.zone
        # Only preferring imports depend on where the server runs; a ClusterSetIP one
        # is rebuilt too (its answers come out the same): rarer than worth a check.
        dirty.update(key for key, imp in self.imports.items()
                     if imp.prefer is not Prefer.NOTHING)


    def _put_import(self, key: ObjectKey, obj: ServiceImport | None, dirty: set[ObjectKey],
                    rejected: list[Rejected]) -> None:
        self.admission.note(IMPORT, key, None, dirty)  # valid now, or deleted
        if obj is not None:
            obj = self.admission.admit_import(key, obj, rejected, dirty)
            if obj is None:
                return  # keeps serving the last version that fitted, if any
        old = self.imports.get(key)
        if old == obj:
            if old is not None and obj is not None and old is not obj:
                self.imports[key] = obj  # what only explain shows: conditions, version
            return  # no DNS-visible change (status conditions, annotations, ...)
        if obj is None:
            del self.imports[key]
        else:
            self.imports[key] = obj
        self._note_traffic(key, obj)
        dirty.add(key)

    def _note_traffic(self, key: ObjectKey, imp: ServiceImport | None) -> None:
        """Logs a trafficDistribution value not understood once per import (and value)."""
        unknown = imp.unknown_traffic if imp is not None else None
        if unknown is None:
            self.unknown_traffic.pop(key, None)
            return
        if self.unknown_traffic.get(key) == unknown:
            return
        self.unknown_traffic[key] = unknown
        if self._log_rejected:
            log.warning("ServiceImport %s/%s: trafficDistribution %r is not understood "
                        "(PreferClose, PreferSameZone, PreferSameNode are); answered without "
                        "a preference", *key, unknown)

    def _put_slice(self, key: ObjectKey, obj: EndpointSlice | None, dirty: set[ObjectKey],
                   rejected: list[Rejected]) -> None:
        self.admission.note(SLICE, key, None, dirty)
        if obj is not None:
            obj = self.admission.admit_slice(key, obj, rejected, dirty)
            if obj is None:
                return
        old = self.slices.get(key)
        if old == obj:
            if old is not None and obj is not None and old is not obj:
                # Only explain's fields changed (resourceVersion): keep the newer one.
                self.slices[key] = obj
                self._slices_of[(obj.namespace, obj.service)][key] = obj
            return
        if old is not None:
            service = (old.namespace, old.service)
            self._touch(service, key)
            self._slices_of[service].pop(key, None)
            if not self._slices_of[service]:
                del self._slices_of[service]
            dirty.add(service)
            del self.slices[key]
        if obj is not None:
            self.slices[key] = obj
            service = (obj.namespace, obj.service)
            self._slices_of.setdefault(service, {})[key] = obj
            self._touch(service, key)
            dirty.add(service)
            imp = self.imports.get(service)
            if self.record_programming and obj.trigger_time is not None and imp is not None:
                self.programmed.append((imp.type.value, obj.trigger_time))

    def _touch(self, service: ObjectKey, key: ObjectKey) -> None:
        if service in self._headless:
            self._touched.setdefault(service, set()).add(key)

    # -- rebuilding -----------------------------------------------------------------------

    def _rebuild_all(self, dirty: set[ObjectKey], syncing: bool = False,
                     deferring: bool = False) -> list[tuple[ObjectKey, Exception]]:
        """Rebuilds every service in ``dirty``, each on its own: one that raises keeps its
        previous answers whole and does not stop the others. ``syncing``: this update
        completes the sync (the serial steps); ``deferring``: a new import waits (pending)."""
        failures: list[tuple[ObjectKey, Exception]] = []
        forced = self._forced_serial
        if not dirty and not (syncing and forced is None):
            if forced is not None and forced != self.zone.serial:
                self._set_serial(forced)
            return failures
        # Not while a first list loads: the lists cost start-up time and memory for
        # services that may never change.
        self._may_start = self.zone.synced and not syncing
        for service in dirty:
            if self.pending.wait(service, deferring and service in self.imports
                                 and service not in self._built):
                continue
            try:
                self._rebuild(service)
            except Exception as exc:  # a bug: reported by apply, after the others
                failures.append((service, exc))
                self._failed.add(service)
            else:
                self._failed.discard(service)
        # The clock's serial, always increasing (RFC 1982 arithmetic never sees a step
        # back). app.Sink applies updates at most once a tick, so this is the clock's
        # tick. The sync steps a second past it: every serial a previous run of this
        # server (or another replica) handed out was at most its clock, so a restart,
        # however quick, starts above them; the next update then waits for the clock.
        ahead = serials.TICKS if syncing else 0
        self._set_serial(forced if forced is not None else serials.later(
            (serials.at(self.clock()) + ahead) & 0xFFFFFFFF, self.zone.serial + 1))
        # Wall time for explain (not ``clock``, the serial's, which tests move by hand).
        stamp = (self.zone.serial, SYSTEM.time())  # one tuple for the whole update
        for service in dirty:
            if service in self._built or service in self.pending:
                self.changed_at[service] = stamp
            else:
                self.changed_at.pop(service, None)
        return failures

    def snapshot(self) -> list[Op]:
        """The whole state as ops: what a new (or restarted) worker starts from."""
        builder = self.builder
        return [SetClusterId(builder.cluster_id), SetTopologyZone(builder.topology_zone),
                ReplaceImports(dict(self.imports)), ReplaceSlices(dict(self.slices)),
                SetSynced(self.zone.synced), SetSerial(self.zone.serial)]

    def slices_of(self, service: ObjectKey) -> list[EndpointSlice]:
        return list(self._slices_of.get(service, {}).values())

    def rejections_of(self, service: ObjectKey) -> dict[tuple[str, ObjectKey], Rejection]:
        return dict(self.admission.of_service.get(service, {}))

    def rejected_texts(self, service: ObjectKey) -> list[str]:
        """Why objects of ``service`` are not served, as its empty answers say it."""
        return self.admission.rejected_texts(service)

    def _rebuild(self, service: ObjectKey) -> None:
        imp = self.imports.get(service)
        state = self._headless.pop(service, None)
        if state is not None:
            if imp is not None and self._update(service, state, imp):
                return
            footprint = self._built[service]
            self._built[service] = (delta.all_keys(state), *footprint[1:])
        built = Built()
        if imp is not None:
            # A large Headless service that may be updated by difference from now on
            # (delta.py keeps its endpoint names' answers encoded) is built whole.
            self.builder.lazy = self.lazy and not (
                self._may_start and self.incremental_min is not None
                and imp.type is ServiceType.HEADLESS
                and sum(len(piece.endpoints) for piece in self._slices_of.get(service, {})
                        .values()) >= self.incremental_min)
            built = self.builder.service(imp, self._slices_of.get(service, {}).values(),
                                         self.rejected_texts(service))
        else:
            rejection = self.rejections.get((IMPORT, service))
            if rejection is not None and not rejection.served:
                built = self.builder.rejected_import(*service, rejection.reason)
        self._built[service] = footprint = self._swap(self._built.pop(service, None), built)
        if imp is None and not built.explained:
            del self._built[service]
            self.states.pop(service, None)
            return
        self.states[service] = (REJECTED if imp is None else SERVED if built.answers
                                else NO_ENDPOINT)
        if (self._may_start and self.incremental_min is not None and imp is not None
                and imp.type is ServiceType.HEADLESS):
            state = delta.start(self.builder, imp, self._slices_of.get(service, {}), built,
                                self.incremental_min)
            if state is not None:
                self._headless[service] = state
                self._built[service] = (state.keys, *footprint[1:])

    def _build_deferred(self, service: ObjectKey) -> None:
        """A service of ``pending``, built as it stood all along: no journal entry."""
        self._quiet, may_start, self._may_start = True, self._may_start, False
        try:
            self._rebuild(service)
        finally:
            self._quiet, self._may_start = False, may_start

    def _update(self, service: ObjectKey, state: delta.Headless, imp: ServiceImport) -> bool:
        """Applies the difference of the service's changed slices (delta.py); False when
        it must be rebuilt whole (``state`` unchanged)."""
        assert self.incremental_min is not None
        touched = self._touched.pop(service, set())
        answers = self.zone.answers
        try:
            diff = delta.update(self.builder, state, imp, self._slices_of.get(service, {}),
                                touched, answers, self.incremental_min)
        except Exception:
            # A bug: which lists it left half-changed is unknown, so the rebuild's
            # footprint is read from the zone (the service's names end in its own).
            footprint = self._built[service]
            self._built[service] = (tuple(key for key in answers
                                          if key[:-4].endswith(state.svc_wire)),
                                    *footprint[1:])
            raise
        if diff is None:
            return False
        diff.put(answers, self.zone.cuts, self._changes
                 if self.on_change is not None and self.zone.synced else None)
        explained = self.zone.explained
        footprint = self._built[service]
        for name in footprint[2]:
            explained.pop(name, None)
        explained.update(diff.explained)
        self._built[service] = (footprint[0], footprint[1], tuple(diff.explained),
                                *footprint[3:])
        self._headless[service] = state
        self.states[service] = SERVED
        return True

    def _swap(self, old: Footprint | None, new: Built) -> Footprint:
        """Puts ``new`` in place of ``old``; returns what to remember of ``new``."""
        answers, zone_names = self.zone.answers, self.zone.names
        # A name with records is known by its answers: only the others are counted.
        empty = tuple(name for name in new.names if not owns_records(new.answers, name)
                      and name + SRV_SUFFIX not in new.derived)
        if self.on_change is not None and self.zone.synced and not self._quiet:
            self._note_changes(old, new)
        if old is not None:
            for key in old[0]:
                if key not in new.answers:
                    del answers[key]
            for name in old[1]:
                count = zone_names[name] - 1
                if count:
                    zone_names[name] = count
                else:
                    del zone_names[name]
        answers.update(new.answers)
        cuts = self.zone.cuts
        if old is not None and cuts:
            for key in (*old[0], *old[4]):
                cuts.pop(key, None)
        cuts.update(new.cuts)
        self.zone.replace_derived(old[4] if old is not None else (), new.derived)
        for name in empty:
            zone_names[name] = zone_names.get(name, 0) + 1
        explained = self.zone.explained
        if old is not None:
            for name in old[2]:
                explained.pop(name, None)
        explained.update(new.explained)
        self.zone.replace_hosts(old[3] if old is not None else (), new.hosts)
        # Only the keys are kept per service (tuples: 8 bytes a key, no second dict).
        return (tuple(new.answers), empty, tuple(new.explained), tuple(new.hosts),
                tuple(new.derived))

    def _note_changes(self, old: Footprint | None, new: Built) -> None:
        self._changes.extend(table.changes(self.zone, old[0] if old is not None else (),
                                           old[3] if old is not None else (), new.answers,
                                           new.hosts, old[4] if old is not None else (),
                                           new.derived))

    def _set_serial(self, serial: int) -> None:
        serial &= 0xFFFFFFFF
        zone = self.zone
        zone.serial = serial
        apex = self.builder.apex(serial, self._ns_addresses)
        self._apex = self._swap(self._apex, apex)
        zone.nxdomain = self.builder.negative(serial, wire.NXDOMAIN)
        zone.nodata = self.builder.negative(serial, wire.NOERROR)
        zone.changed()  # every change to names or answers passes here (a new serial)

    # -- reading ------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {
            "imports": len(self.imports),
            "slices": len(self.slices),
            "answers": self.zone.count(),
            "names": len(self.zone.names),
        }
