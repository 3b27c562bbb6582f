"""Answers built when data changes: one service's records, and the zone's own.

Everything a query can be answered with is built here, ahead of time, as an
:class:`~clusterset_dns.zone.wire.Answer` under its question key. Negative answers
are not built here per name: a name either exists (then a missing type is NODATA)
or it does not (NXDOMAIN); the handler works them out and the zone keeps the ones
asked for until the next change (``Zone.negatives``); see :mod:`clusterset_dns.zone.cache`.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from clusterset_dns.base import names
from clusterset_dns.base.names import Labels, ZoneNames
from clusterset_dns.zone import reasons, truncate, wire
from clusterset_dns.zone.model import (
    IP,
    EndpointSlice,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
    unpack,
)
from clusterset_dns.zone.order import (
    FEW_ADDRESSES,
    Packed,
    Tiers,
    best_per_family,
    endpoint_ranks,
    sorted_ips,
    sorted_packed,
    srv_weight,
)
from clusterset_dns.zone.table import Hosts, Names, Present, share
from clusterset_dns.zone.wire import HINFO, SRV, Encoder, question_key

log = logging.getLogger(__name__)

SCHEMA_VERSION = b"1.0.0"  # MCS DNS schema version served at dns-version.<zone>
SCHEMA_VERSION_TTL = 28800
HINFO_RFC8482 = (b"RFC8482", b"")
_QTYPE_CLASS = {t: struct.pack("!HH", t, wire.CLASS_IN) for t in (wire.A, wire.AAAA)}


@dataclass(slots=True)
class Built:
    """What one service (or the apex) puts into the zone."""

    answers: dict[bytes, wire.Answer] = field(default_factory=dict)
    # Every name that exists, with records or without (empty non-terminals, an import
    # with no address); the zone decides which it needs to keep.
    names: set[bytes] = field(default_factory=set)
    # Names whose negative answers say why (RFC 8914): name -> EDE (wire.ede).
    explained: dict[bytes, bytes] = field(default_factory=dict)
    # How the answers that can be too large for a UDP client are cut (truncate.py).
    cuts: dict[bytes, truncate.Cuts] = field(default_factory=dict)
    # Endpoint names with one address, answered on first use (table.Hosts): they are
    # not in ``answers`` nor in ``names``.
    hosts: Hosts = field(default_factory=dict)
    # ``_port._proto`` SRV keys answered from their service name's SRV answer, shifted
    # (table.Zone.derived): key -> the service name's key. Not in ``answers``.
    derived: dict[bytes, bytes] = field(default_factory=dict)


class RecordBuilder:
    """Builds answers for one zone; holds the per-zone constants."""

    def __init__(self, zone: ZoneNames, ttl: int, cluster_id: str | None = None,
                 topology_zone: str | None = None, node_name: str | None = None,
                 serve_terminating: bool = False) -> None:
        self.zone = zone
        self.ttl = ttl
        self._wires: dict[Labels, bytes] = {}
        # The RFC 8482 answer does not depend on the name (its owner is a pointer to
        # the question), so one object serves every name; its body has the same
        # length whatever the question.
        enc = Encoder(zone.apex)
        enc.text(0, zone.apex, HINFO, ttl, HINFO_RFC8482)
        self.any_answer = enc.finish()
        self.cut = 0  # answers built too large for one message, cut to what fits
        # Where this server runs, for preferring imports (None: unknown, no preference).
        # Set through the cache (SetClusterId, SetTopologyZone), which rebuilds; the
        # node name and --serve-terminating come from the configuration only.
        self.cluster_id = cluster_id
        self.topology_zone = topology_zone
        self.node_name = node_name
        self.serve_terminating = serve_terminating
        # Endpoint names with one address go to the compact index (Built.hosts) instead
        # of being encoded now; False: every answer encoded (delta.py's services, tests).
        self.lazy = True
        self._one_address = wire.heads(0, 1, 0, 0)
        self._address_heads = {  # by the address's packed length
            4: b"\xc0\x0c" + wire.RR_HEAD.pack(wire.A, wire.CLASS_IN, ttl, 4),
            16: b"\xc0\x0c" + wire.RR_HEAD.pack(wire.AAAA, wire.CLASS_IN, ttl, 16),
        }

    # -- helpers ---------------------------------------------------------------------

    def _exists(self, out: Built, owner: Labels) -> None:
        """Marks the owner and every name between it and the apex as existing.

        A name already marked had its ancestors marked with it, so the walk stops
        there: the hundred endpoint names of a cluster share all but their first label."""
        name = self._wire(owner)
        known = out.names
        offset = 0
        for label in owner[: len(owner) - len(self.zone.apex)]:
            suffix = name[offset:]
            if suffix in known:
                break
            known.add(suffix)
            offset += len(label) + 1

    def _addresses(self, out: Built, owner: Labels, ips: list[Packed],
                   ranks: dict[Packed, int] | None = None) -> None:
        """A and AAAA answers for ``owner`` (an absent family is NODATA).

        Every record's owner is the question itself (``C0 0C``), so the body is
        joined directly: this runs once per endpoint name, the bulk of a large zone.
        ``ranks``: each address's endpoint rank (a service name's), which orders the
        records a truncated answer keeps, the same endpoints for both families."""
        key = self._wire(owner)
        if len(ips) == 1:  # most endpoint names: one record, never cut
            packed = ips[0]
            out.answers[key + _QTYPE_CLASS[wire.A if len(packed) == 4 else wire.AAAA]] = \
                wire.Answer(self._one_address, self._address_heads[len(packed)] + packed, 0)
            return
        rotation: truncate.Rotation | None = None
        for size, rtype in ((4, wire.A), (16, wire.AAAA)):
            family = [packed for packed in ips if len(packed) == size]
            if family:
                head = self._address_heads[size]
                body = b"".join(head + packed for packed in family)
                if len(family) * 28 < wire.TCP_MAX // 2:  # fits a message whatever the rest
                    answer = wire.Answer(wire.heads(0, len(family), 0, 0), body, 0)
                else:  # every record is the same size: they end at multiples of it
                    step = len(head) + len(family[0])
                    answer = wire.sized(len(key) + 4, 0, body, (len(family), 0, 0), len(body),
                                        range(step, len(body) + 1, step))
                question = key + _QTYPE_CLASS[rtype]
                if truncate.needs_cuts(len(question), answer.size, len(family)):
                    rotation = rotation or truncate.Rotation()
                    out.cuts[question] = self._address_cuts(
                        answer, head, family, ranks, rotation,
                        truncate.A_BIT if size == 4 else truncate.AAAA_BIT)
                self._store(out, question, answer)

    @staticmethod
    def _address_cuts(answer: wire.Answer, head: bytes, family: list[Packed],
                      ranks: dict[Packed, int] | None, rotation: truncate.Rotation,
                      bit: int) -> truncate.Cuts:
        # The answer's body is the records of ``kept`` in turn (a cut one ends after the
        # last record that fits): the cuts share it whenever they walk that order.
        kept = family[: int.from_bytes(answer.heads[0][4:6])]  # all, unless cut for TCP
        if ranks is None:  # the addresses' own order; one endpoint each
            return truncate.address_cuts(head, kept, answer.body, range(len(kept)), len(kept),
                                         rotation, bit)
        order = sorted(kept, key=lambda packed: ranks[packed])  # stable: numeric within
        return truncate.address_cuts(head, order, answer.body if order == kept else None,
                                     [ranks[packed] for packed in order], len(set(ranks.values())),
                                     rotation, bit)

    def _store(self, out: Built, key: bytes, answer: wire.Answer) -> None:
        if answer.cut:
            self.cut += 1
            log.warning("answer to %s type %d is larger than a DNS message: cut to %d records",
                        names.wire_to_text(key[:-4]), int.from_bytes(key[-4:-2]),
                        int.from_bytes(answer.heads[0][4:6]))
        out.answers[key] = answer

    def _srv(self, out: Built, owner: Labels, targets: list[tuple[Labels, int]],
             glue: dict[Labels, list[Packed]], ranks: dict[Labels, int] | None) -> None:
        """One SRV answer; ``targets`` is (target, port) de-duplicated, in order (lowest
        rank first). ``ranks``: each target's tier (None: one tier). Priorities number
        the tiers present in this answer from 0; weights are computed within a tier."""
        if ranks is None:
            weight = srv_weight(len(targets))
            records = [(target, port, 0, weight) for target, port in targets]
        else:
            counts: dict[int, int] = {}
            for target, _ in targets:
                counts[ranks[target]] = counts.get(ranks[target], 0) + 1
            priority = {rank: i for i, rank in enumerate(sorted(counts))}
            records = [(target, port, priority[ranks[target]], srv_weight(counts[ranks[target]]))
                       for target, port in targets]
        wired = [(self._wire(target), port, prio, weight)
                 for target, port, prio, weight in records]
        distinct = dict.fromkeys(target for target, _ in targets)
        answer = wire.srv_answer(owner, self.ttl, wired,
                                 [(self._wire(target), glue.get(target, ()))
                                  for target in distinct])
        if answer is not None:
            self._store_srv(out, owner, answer)
            return
        # Too large for every glue owner to be a pointer: the general encoder.
        enc = Encoder(owner)
        for target, port, prio, weight in records:
            enc.srv(0, owner, self.ttl, prio, weight, port, target, self._wire(target))
        for target in distinct:
            for packed in glue.get(target, ()):
                enc.address(2, target, self.ttl, packed)
        self._store_srv(out, owner, enc.finish())

    def _store_srv(self, out: Built, owner: Labels, answer: wire.Answer) -> None:
        key = question_key(owner, SRV)
        count = int.from_bytes(answer.heads[0][4:6])
        section = answer.glue_at if answer.glue_at >= 0 else answer.size
        if truncate.needs_cuts(len(key), section, count):
            out.cuts[key] = truncate.srv_cuts(key, answer, truncate.Rotation())
        self._store(out, key, answer)

    def _srv_sets(self, out: Built, service: Labels, records: list[tuple[Labels, Port]],
                  glue: dict[Labels, list[Packed]], ranks: dict[Labels, int] | None = None
                  ) -> None:
        """Bare-name SRV (every port, one per target+port) and ``_port._proto`` SRV."""
        bare: dict[tuple[Labels, int], None] = {}
        named: dict[Labels, dict[tuple[Labels, int], None]] = {}
        owners: dict[tuple[str, str], Labels] = {}  # one name per port, many records
        for target, port in records:
            bare[(target, port.port)] = None
            if port.name:
                owner = owners.get((port.name, port.protocol))
                if owner is None:
                    owner = self.zone.port_srv(service, port.name, port.protocol)
                    owners[(port.name, port.protocol)] = owner
                named.setdefault(owner, {})[(target, port.port)] = None
        if bare:
            self._srv(out, service, list(bare), glue, ranks)
        for owner, targets in named.items():
            self._srv(out, owner, list(targets), glue, ranks)
            self._exists(out, owner)
            if self.lazy and len(targets) == len(bare):  # the same records: maybe shared
                share(out.answers, out.cuts, out.derived, question_key(service, SRV),
                      question_key(owner, SRV))

    # -- pieces of one service's answers, for delta.py --------------------------------

    @property
    def address_heads(self) -> dict[int, bytes]:
        """The record heads of a one-address answer by packed length (Zone's)."""
        return self._address_heads

    def one_address(self, key: bytes, packed: Packed) -> tuple[bytes, wire.Answer]:
        """The answer key and answer of a name with one address (``key``: its wire form)."""
        return (key + _QTYPE_CLASS[wire.A if len(packed) == 4 else wire.AAAA],
                wire.Answer(self._one_address, self._address_heads[len(packed)] + packed, 0))

    def family_answer(self, out: Built, key: bytes, family: list[Packed], first_rank: int,
                      endpoints: int, rotation: truncate.Rotation) -> None:
        """The A or AAAA answer of a service name (``key``: its wire form) whose
        ``endpoints`` endpoints have one address each, all distinct: ``family`` sorted,
        its address ``i`` that of the endpoint ranked ``first_rank + i``. What
        :meth:`_addresses` builds for them, joining only the records one message holds."""
        size = len(family[0])
        head = self._address_heads[size]
        question = key + _QTYPE_CLASS[wire.A if size == 4 else wire.AAAA]
        step = len(head) + size
        room = wire.TCP_MAX - 12 - len(question) - wire.OPT_LEN  # as wire.sized counts
        count = len(family)
        kept = count if count * 28 < wire.TCP_MAX // 2 else min(count, room // step,
                                                                  wire.MAX_COUNT)
        shown = family if kept == count else family[:kept]
        body = head + head.join(shown)  # head + packed, for each: joined in C
        flags = wire.QR | wire.AA | (0 if kept == count else wire.TC)
        answer = wire.Answer(wire.heads(0, kept, 0, 0, flags), body, 0)
        if truncate.needs_cuts(len(question), answer.size, count):
            out.cuts[question] = truncate.address_cuts(
                head, shown, body, range(first_rank, first_rank + kept), endpoints, rotation,
                truncate.A_BIT if size == 4 else truncate.AAAA_BIT)
        self._store(out, question, answer)

    def srv_answer(self, out: Built, owner: Labels, targets: list[tuple[Labels, int]],
                   glue: dict[Labels, list[Packed]]) -> None:
        """:meth:`_srv` without tiers, for a caller outside :meth:`service`."""
        try:
            self._srv(out, owner, targets, glue, None)
        finally:
            self._wires.clear()

    def store_srv(self, out: Built, owner: Labels, answer: wire.Answer) -> None:
        self._store_srv(out, owner, answer)

    # -- services --------------------------------------------------------------------

    def _wire(self, labels: Labels) -> bytes:
        """``to_wire``, remembered for the service being built: an endpoint name is
        needed for its key, its ENTs and every SRV record and glue that names it."""
        found = self._wires.get(labels)
        if found is None:
            self._wires[labels] = found = names.to_wire(labels)
        return found

    def service(self, imp: ServiceImport, slices: Iterable[EndpointSlice],
                rejected: Sequence[str] = ()) -> Built:
        """``rejected``: why objects feeding this import were refused ("EndpointSlice
        ns/name: reason"), for the text of its empty answers."""
        try:
            return self._service(imp, slices, rejected)
        finally:
            self._wires.clear()

    def _service(self, imp: ServiceImport, slices: Iterable[EndpointSlice],
                 rejected: Sequence[str]) -> Built:
        out = Built()
        svc = self.zone.service(imp.namespace, imp.name)
        self._exists(out, svc[1:])  # <ns>.svc.<zone> exists while any import does
        if imp.type is ServiceType.CLUSTER_SET_IP:
            self._cluster_set_ip(out, svc, imp)
        else:
            every = list(slices)
            answering = self.answering(every)
            self._headless(out, svc, answering, self.ranking(imp, answering))
            present = Present(out.names, out.hosts)
            out.explained.update(reasons.headless(self.zone, svc, present, imp, every,
                                                  rejected))
        return out

    def rejected_import(self, namespace: str, name: str, reason: str) -> Built:
        """A ServiceImport that never converted: its name does not exist, and says why."""
        out = Built()
        try:
            svc = self.zone.service(namespace, name)
        except names.InvalidName:
            return out  # no name to explain
        out.explained[self._wire(svc)] = wire.ede(
            wire.EDE_INVALID_DATA, f"ServiceImport {namespace}/{name} rejected: {reason}")
        self._wires.clear()
        return out

    def answering(self, slices: list[EndpointSlice]) -> list[EndpointSlice]:
        """The slices whose endpoints answer: their ready ones; with --serve-terminating,
        when no cluster has a ready endpoint, the serving ones instead (kube-proxy's
        fallback for terminating endpoints)."""
        if not self.serve_terminating or any(piece.endpoints for piece in slices):
            return slices
        return [replace(piece, endpoints=piece.serving) for piece in slices if piece.serving]

    def tiers(self, imp: ServiceImport) -> Tiers | None:
        """How a Headless import ranks its endpoints, or None (one tier: no preference
        asked, or the local cluster unknown). Rank 0 is the most preferred."""
        if imp.prefer is Prefer.NOTHING or self.cluster_id is None:
            return None
        node = self.node_name if imp.prefer is Prefer.NODE else None
        return Tiers(self.cluster_id, node, self.topology_zone)

    def ranking(self, imp: ServiceImport, answering: list[EndpointSlice]) -> Tiers | None:
        """:meth:`tiers`, following the local endpoints' hints where kube-proxy would
        (``answering``: the slices whose endpoints answer, :meth:`answering`)."""
        tiers = self.tiers(imp)
        if tiers is None:
            return None
        cluster = tiers.cluster
        return tiers.following(place for piece in answering if piece.cluster == cluster
                               for place in piece.endpoints.places)

    def _cluster_set_ip(self, out: Built, svc: Labels, imp: ServiceImport) -> None:
        ips = sorted_packed(unpack(imp.packed_ips))
        self._exists(out, svc)
        self._addresses(out, svc, ips)
        if ips:
            self._srv_sets(out, svc, [(svc, port) for port in imp.ports], {svc: ips})
        else:
            # No usable IP: an SRV record would point at a target without addresses.
            # The port names still exist (NODATA), as the import does.
            why = wire.ede(wire.EDE_OTHER,
                           f"no address: ServiceImport {imp.namespace}/{imp.name} has no "
                           "usable IP")
            out.explained[self._wire(svc)] = why
            for port in imp.ports:
                if port.name:
                    owner = self.zone.port_srv(svc, port.name, port.protocol)
                    self._exists(out, owner)
                    out.explained[self._wire(owner)] = why

    def _headless(self, out: Built, svc: Labels, slices: list[EndpointSlice],
                  tiers: Tiers | None) -> None:
        # Every answering endpoint gets its names (§2.4, §2.5) whatever the tiers; the
        # tiers only shape the bare name's A/AAAA (the best tier per family) and the
        # SRV priorities.
        every: list[Packed] = []
        # With tiers only: the rank of each address of ``every``, and an endpoint name's
        # best rank (names may repeat). Without, the bulk of a zone pays nothing for them.
        every_rank: list[int] = []
        ranks: dict[Labels, int] = {}
        hosts: dict[Labels, list[Packed]] = {}
        srv_records: list[tuple[Labels, Port]] = []
        # Each endpoint's addresses, by (cluster, hostname) when it has one.
        endpoints: dict[tuple[str | None, str] | int, list[Packed]] = {}
        for piece in sorted(slices, key=lambda s: (s.cluster or "", s.name)):
            # Admitted by the cache: every endpoint name of the slice fits DNS.
            endpoint_names = (names.EndpointNames(svc, names.subdomain(piece.cluster))
                              if piece.cluster is not None else None)
            wires = self._wires
            local = tiers is not None and piece.cluster == tiers.cluster
            rank = 0
            for packed, hostname, place in piece.endpoints.rows():
                every.extend(packed)
                if tiers is not None:
                    rank = tiers.rank(local, place)
                    every_rank.extend([rank] * len(packed))
                if packed:  # a dual-stack endpoint: one per family, sharing its hostname
                    endpoints.setdefault((piece.cluster, hostname)
                                         if hostname is not None else len(endpoints),
                                         []).extend(packed)
                if endpoint_names is None:
                    continue  # no cluster id: service-level answers only
                named: list[tuple[str, list[Packed]]]
                if hostname is not None:
                    named = [(hostname, packed)]
                else:
                    named = [(names.packed_hostname(one), [one]) for one in packed]
                for hostname, ips in named:
                    target, target_wire = endpoint_names.name(hostname)
                    wires[target] = target_wire  # what self._wire(target) would encode
                    hosts.setdefault(target, []).extend(ips)
                    if tiers is not None and rank < ranks.get(target, rank + 1):
                        ranks[target] = rank
                    srv_records.extend((target, port) for port in piece.ports)
        if not every:
            return  # no ready endpoint anywhere: the service name does not exist
        self._exists(out, svc)
        # Endpoint ranks only where a truncated answer may need them (order.FEW_ADDRESSES).
        address_ranks = (endpoint_ranks(list(endpoints.values()))
                         if len(every) > FEW_ADDRESSES else None)
        self._addresses(out, svc, sorted_packed(
            every if tiers is None else best_per_family(every, every_rank)), address_ranks)
        # Most endpoint names have one address: already sorted.
        glue = {host: ips if len(ips) == 1 else sorted_packed(ips)
                for host, ips in hosts.items()}
        lazy, index = self.lazy, out.hosts
        parents: dict[bytes, dict[bytes, bytes]] = {}
        for owner, ips in sorted(glue.items()):
            if lazy and len(ips) == 1:
                # Most endpoint names: only the index entry, encoded when first asked.
                name = self._wire(owner)
                first = name[0] + 1
                parent = parents.get(name[first:])
                if parent is None:
                    parents[name[first:]] = parent = {}
                    self._exists(out, owner[1:])
                parent[name[:first]] = ips[0]
                continue
            self._exists(out, owner)
            self._addresses(out, owner, ips)
        index.update((name, Names(labels)) for name, labels in parents.items())
        if tiers is None:
            srv_records.sort(key=lambda r: (r[1].port, r[1].protocol, r[1].name, r[0]))
            self._srv_sets(out, svc, srv_records, glue)
        else:  # lowest rank first: a cut answer keeps the preferred tiers
            srv_records.sort(key=lambda r: (ranks[r[0]], r[1].port, r[1].protocol, r[1].name,
                                            r[0]))
            self._srv_sets(out, svc, srv_records, glue, ranks)

    # -- the zone's own records --------------------------------------------------------

    def apex(self, serial: int, ns_addresses: list[IP]) -> Built:
        zone = self.zone
        out = Built()
        out.names.add(names.to_wire(zone.apex))
        self._exists(out, zone.svc)  # svc.<zone> is always an empty non-terminal
        enc = Encoder(zone.apex)
        self._soa(enc, 0, serial)
        out.answers[question_key(zone.apex, wire.SOA)] = enc.finish()
        enc = Encoder(zone.apex)
        enc.ns(0, zone.apex, self.ttl, zone.ns)
        for packed in sorted_ips(ns_addresses):
            enc.address(2, zone.ns, self.ttl, packed)
        out.answers[question_key(zone.apex, wire.NS)] = enc.finish()
        enc = Encoder(zone.dns_version)
        enc.text(0, zone.dns_version, wire.TXT, SCHEMA_VERSION_TTL, (SCHEMA_VERSION,))
        out.answers[question_key(zone.dns_version, wire.TXT)] = enc.finish()
        self._exists(out, zone.dns_version)
        if ns_addresses:
            self._exists(out, zone.ns)
            self._addresses(out, zone.ns, sorted_ips(ns_addresses))
        return out

    def _soa(self, enc: Encoder, section: int, serial: int) -> None:
        zone = self.zone
        enc.soa(section, zone.apex, self.ttl, zone.ns, (b"hostmaster", *zone.apex), serial,
                self.ttl)

    def negative(self, serial: int, rcode: int) -> wire.Answer:
        """NXDOMAIN / NODATA: the SOA in the authority section, for negative caching."""
        enc = Encoder(None)
        self._soa(enc, 1, serial)
        return enc.finish(rcode)
