"""Admission: does every name an object would make under the zone fit DNS?

An object that cannot be served whole is refused (a port whose ``_<port>._<proto>``
name cannot exist only loses that name). :class:`Admission` remembers why each
refused object is refused (for explain, EDE texts and Events), by object and by the
service it would feed.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from clusterset_dns.base import names
from clusterset_dns.base.names import Labels, ZoneNames
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, Port, ServiceImport
from clusterset_dns.zone.ops import IMPORT, SLICE, Rejected, Rejection

log = logging.getLogger("clusterset_dns.zone.cache")  # the logger these lines always had


class Admission:
    def __init__(self, zone_names: ZoneNames, log_rejected: bool) -> None:
        """``log_rejected=False``: a worker process, whose parent already logged what the
        same update rejected."""
        self.names = zone_names
        self.log_rejected = log_rejected
        # Refused objects: (kind, key) -> why; and by the service they would feed.
        self.rejections: dict[tuple[str, ObjectKey], Rejection] = {}
        self.of_service: dict[ObjectKey, dict[tuple[str, ObjectKey], Rejection]] = {}

    def note(self, kind: str, key: ObjectKey, rejection: Rejection | None,
              dirty: set[ObjectKey]) -> None:
        """Records (or, None, forgets) why an object is refused; its service is rebuilt
        when that changes what its empty answers say."""
        old = self.rejections.get((kind, key))
        if old == rejection:
            return
        if old is not None:
            del self.rejections[(kind, key)]
            if old.service is not None:
                of = self.of_service[old.service]
                del of[(kind, key)]
                if not of:
                    del self.of_service[old.service]
                dirty.add(old.service)
        if rejection is not None:
            self.rejections[(kind, key)] = rejection
            if rejection.service is not None:
                self.of_service.setdefault(rejection.service, {})[(kind, key)] = rejection
                dirty.add(rejection.service)

    # -- admission: does every name of the object fit? -----------------------------------

    def reject(self, rejected: list[Rejected], kind: str, key: ObjectKey, reason: str,
                served: bool, service: ObjectKey, dirty: set[ObjectKey]) -> None:
        rejected.append(Rejected(kind, key, reason, served))
        old = self.rejections.get((kind, key))
        if old is not None and not old.source and old.served and served:
            reason = f"{old.reason}; {reason}"  # several ports of one object
        self.note(kind, key, Rejection(service, reason, served, False), dirty)
        if not self.log_rejected:
            return
        if served:
            log.warning("%s %s/%s: %s; the rest is served", kind, *key, reason)
        else:
            log.warning("%s %s/%s skipped: %s", kind, *key, reason)

    def _service_name(self, kind: str, key: ObjectKey, namespace: str, name: str,
                      rejected: list[Rejected], dirty: set[ObjectKey]) -> Labels | None:
        try:
            return self.names.service(namespace, name)
        except names.InvalidName as exc:
            self.reject(rejected, kind, key, f"service name does not fit DNS: {exc}", False,
                         (namespace, name), dirty)
            return None

    def _fit_ports(self, kind: str, key: ObjectKey, service: Labels, ports: tuple[Port, ...],
                   rejected: list[Rejected], owner: ObjectKey,
                   dirty: set[ObjectKey]) -> tuple[Port, ...]:
        """The ports, less the names whose ``_<port>._<proto>`` name cannot exist: such a
        port still counts for the bare-name SRV (as an unnamed port would)."""
        fitted: list[Port] | None = None
        for i, port in enumerate(ports):
            if not port.name:
                continue
            try:
                self.names.port_srv(service, port.name, port.protocol)
            except names.InvalidName as exc:
                if fitted is None:
                    fitted = list(ports)
                fitted[i] = Port("", port.protocol, port.port)
                self.reject(rejected, kind, key,
                             f"port {port.name!r}: no _<port>._<proto> SRV name: {exc}", True,
                             owner, dirty)
        return ports if fitted is None else tuple(fitted)

    def admit_import(self, key: ObjectKey, imp: ServiceImport, rejected: list[Rejected],
                      dirty: set[ObjectKey]) -> ServiceImport | None:
        owner = (imp.namespace, imp.name)
        service = self._service_name(IMPORT, key, imp.namespace, imp.name, rejected, dirty)
        if service is None:
            return None
        ports = self._fit_ports(IMPORT, key, service, imp.ports, rejected, owner, dirty)
        return imp if ports is imp.ports else replace(imp, ports=ports)

    def admit_slice(self, key: ObjectKey, piece: EndpointSlice, rejected: list[Rejected],
                     dirty: set[ObjectKey]) -> EndpointSlice | None:
        owner = (piece.namespace, piece.service)
        service = self._service_name(SLICE, key, piece.namespace, piece.service, rejected,
                                     dirty)
        if service is None:
            return None
        if piece.cluster is not None:
            try:
                cluster = names.subdomain(piece.cluster)
                # The longest endpoint name decides; an address's derived name is at
                # most 40 characters, so it is only worked out when room is short.
                room = (names.MAX_NAME_WIRE - names.wire_length(service)
                        - names.wire_length(cluster))
                derived = room <= names.MAX_DERIVED_HOSTNAME
                for endpoints in (piece.endpoints, piece.serving):
                    hostnames = endpoints.hostnames or ()
                    if not derived and max(map(len, filter(None, hostnames)),
                                           default=0) <= room:
                        continue  # the common case, in C
                    packs = endpoints.packs() if derived else None
                    for i, hostname in enumerate(endpoints.hostname_list()):
                        if hostname is not None:
                            longest = len(hostname)
                        elif packs is None:
                            continue
                        else:
                            longest = max((len(names.packed_hostname(one)) for one in packs[i]),
                                          default=0)
                        if longest > room:
                            self.names.endpoint(service, "x" * longest, cluster)  # raises
            except names.InvalidName as exc:
                self.reject(rejected, SLICE, key, f"endpoint names do not fit DNS: {exc}",
                             False, owner, dirty)
                return None
        ports = self._fit_ports(SLICE, key, service, piece.ports, rejected, owner, dirty)
        return piece if ports is piece.ports else replace(piece, ports=ports)

    def rejected_texts(self, service: ObjectKey) -> list[str]:
        """Why objects of ``service`` are not served, as its empty answers say it."""
        return [f"{kind} {key[0]}/{key[1]} rejected: {rejection.reason}"
                for (kind, key), rejection in sorted(self.of_service.get(service, {}).items())
                if not rejection.served]
