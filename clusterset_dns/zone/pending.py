"""Services whose answers are not built yet: the first list's, built after the sync.

A first list applies every object to the model, but building each service's answers
was two thirds of the CPU to the first answer (docs/architecture.md, start-up). With
``Cache(defer=True)`` the services a first list brings are only listed here: the zone
is synced (and /ready) once the model is whole, and the answers are built afterwards
in bounded slices (:meth:`Pending.build_some`, driven by the process between turns of
the event loop). A question about a name of a service not built yet builds that
service first (:meth:`Pending.build_for`, called by ``Zone.first`` and
``Zone.lookup``), so it gets exactly the bytes the prebuilt path gives; whatever
reads the whole zone (dump, transfers) builds them all first (:meth:`build_all`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.zone.model import EndpointSlice, ObjectKey
from clusterset_dns.zone.ops import Op, PutImport, PutSlice, SetSerial, SetSynced
from clusterset_dns.zone.table import MISSING, Zone

log = logging.getLogger(__name__)


class Pending:
    """The services (import keys) whose answers are still to be built, in the order
    they were listed; ``rebuild(key)``: the cache's build of one. One that raises (a bug) is
    logged and left in ``failed``, which the cache's next update rebuilds."""

    def __init__(self, names: ZoneNames, zone: Zone, rebuild: Callable[[ObjectKey], None],
                 failed: set[ObjectKey]) -> None:
        self.names = names
        self.zone = zone
        self.rebuild = rebuild
        self.failed = failed
        # key -> its service name (wire, lower case), and the way back; by namespace,
        # for the names above services (``<ns>.svc.<zone>``, ``svc.<zone>``).
        self.services: dict[ObjectKey, bytes] = {}
        self._by_name: dict[bytes, ObjectKey] = {}
        self._by_namespace: dict[str, dict[ObjectKey, None]] = {}
        self._svc = to_wire(names.svc)

    def __len__(self) -> int:
        return len(self.services)

    def __contains__(self, key: object) -> bool:
        return key in self.services

    def add(self, key: ObjectKey) -> None:
        if key in self.services:
            return
        name = self.names.service_wire(*key)
        self.services[key] = name
        self._by_name[name] = key
        self._by_namespace.setdefault(key[0], {})[key] = None
        self.zone.unbuilt = self

    def wait(self, key: ObjectKey, waits: bool) -> bool:
        """Puts ``key`` on the list when it ``waits``, else takes it off; ``waits``."""
        if waits:
            self.add(key)
        else:
            self.discard(key)
        return waits

    def discard(self, key: ObjectKey) -> bool:
        """Takes ``key`` off the list; whether it was on it."""
        name = self.services.pop(key, None)
        if name is None:
            return False
        del self._by_name[name]
        same = self._by_namespace[key[0]]
        del same[key]
        if not same:
            del self._by_namespace[key[0]]
        if not self.services:
            self.zone.unbuilt = None  # the handler's miss path is back to one test
        return True

    # -- building --------------------------------------------------------------------------

    def build(self, key: ObjectKey) -> None:
        """Builds the waiting service ``key`` (taken off the list first)."""
        self.discard(key)
        try:
            self.rebuild(key)
        except Exception:  # a bug: the next update rebuilds it, and reports it
            log.exception("building the answers of %s/%s", *key)
            self.failed.add(key)

    def build_for(self, name: bytes) -> None:
        """Builds what ``name`` (lower-case wire format, without the type) depends on:
        the service it is under, if that one waits; for a namespace's name
        (``<ns>.svc.<zone>``), its services one at a time, until it exists. Any
        bytes are accepted (the handler calls this before checking the question)."""
        by_name, at, size = self._by_name, 0, len(name)
        while at < size:
            key = by_name.get(name[at:])
            if key is not None:
                self.build(key)
                return
            at += name[at] + 1
        # svc.<zone> itself needs none: the apex makes it (an empty non-terminal).
        svc = self._svc
        if name.endswith(svc) and name[0] + 1 + len(svc) == size:
            namespace = name[1 : size - len(svc)].decode("latin-1")
            while namespace in self._by_namespace and self.zone.state(name) == MISSING:
                self.build(next(iter(self._by_namespace[namespace])))

    def build_all(self) -> None:
        while self.services:
            self.build(next(iter(self.services)))

    def build_some(self, budget: int, cost: Callable[[ObjectKey], int]) -> int:
        """Builds waiting services, first listed first, until their ``cost`` adds up to
        ``budget`` (at least one); returns how many are left."""
        spent = 0
        while self.services and spent < budget:
            key = next(iter(self.services))
            spent += cost(key)
            self.build(key)
        return len(self.services)

    def touched(self, ops: Iterable[Op], slices: Mapping[ObjectKey, EndpointSlice]) -> None:
        """Builds, before ``ops`` change the model, the waiting services they touch (all
        of them for an op that may touch many): the journal compares a service's
        answers before and after an update, and the before must be the real one.
        ``slices``: the stored slices."""
        for op in ops:
            if not self.services:
                return
            if isinstance(op, PutImport):
                keys = [op.key]
            elif isinstance(op, PutSlice):
                keys = [(piece.namespace, piece.service)
                        for piece in (slices.get(op.key), op.obj) if piece is not None]
            elif isinstance(op, SetSerial | SetSynced):
                continue
            else:
                self.build_all()
                return
            for key in keys:
                if key in self.services:
                    self.build(key)
