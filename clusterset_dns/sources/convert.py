"""Raw API dicts to the model. The only module that knows Kubernetes field names.

ServiceImport fields are read from ``status``, else the object root, else
``spec``: v1alpha1/v1beta1 keep them in ``spec``, the proposed v1alpha2 at the
root, and the GKE / Azure Fleet forks in ``status``.

Conversion never raises anything but :class:`InvalidObject`; problems that
only cost part of an object (one bad IP, one bad endpoint) are reported to the
``warn`` callback and the rest is kept.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime
from socket import AF_INET, inet_pton
from typing import Any, TypeGuard

from clusterset_dns.base import names
from clusterset_dns.sources import fields
from clusterset_dns.sources.fields import InvalidObject as InvalidObject
from clusterset_dns.sources.fields import Warn as Warn
from clusterset_dns.zone.model import (
    NOWHERE,
    Columns,
    Condition,
    EndpointSlice,
    Hints,
    ObjectKey,
    Place,
    Prefer,
    ServiceImport,
    ServiceType,
    pack,
)

GROUP = "multicluster.x-k8s.io"
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
SLICE_API_VERSION = "discovery.k8s.io/v1"
# ServiceImport trafficDistribution: PreferClose (mcs-api v0.5.0) and the values of
# Kubernetes 1.33's Service field (PreferSameZone is PreferClose's newer name).
TRAFFIC_DISTRIBUTION = {"PreferClose": Prefer.ZONE, "PreferSameZone": Prefer.ZONE,
                        "PreferSameNode": Prefer.NODE}
SLICE_OBJECTS = "endpointSliceObjects"  # ServiceImport status (mcs-api v0.5.1): Present, Absent
SLICES_ABSENT = "Absent"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"  # EndpointSlice annotation
MAX_CONDITIONS = 16  # conditions kept per import (explain shows them; bounded)
MAX_CONDITION_TEXT = 256  # characters kept of a condition's reason and message
# An endpoint's hints.forZones and hints.forNodes: the API allows 8 entries each; names
# are label values (zones) and DNS subdomains (nodes), at most 253 characters.
MAX_HINTS = 8
MAX_HINT_NAME = 253

READY, SERVING, DOWN = 0, 1, 2  # an endpoint's state (_endpoint)
# the checks of single fields (fields.py), by the names this module always used
_dns_label, _ignore, _lower = fields.dns_label, fields.ignore, fields.lower
_ip, _ports = fields.parse_ip, fields.ports

def kind_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) else ""


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidObject("no metadata")
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        raise InvalidObject("metadata.name / metadata.namespace missing or not a string")
    return sys.intern(namespace), name


def describe(obj: Mapping[str, Any]) -> str:
    """``ServiceImport prod/web`` for log lines, even for broken objects."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{kind_of(obj) or '?'} {meta.get('namespace', 'default')}/{meta.get('name', '?')}"


def is_service_import(obj: Mapping[str, Any], groups: frozenset[str] = frozenset({GROUP})) -> bool:
    api = obj.get("apiVersion")
    return kind_of(obj) == "ServiceImport" and isinstance(api, str) and api.split("/")[0] in groups


def is_endpoint_slice(obj: Mapping[str, Any]) -> bool:
    return kind_of(obj) == "EndpointSlice" and obj.get("apiVersion") == SLICE_API_VERSION


def _sections(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Where a ServiceImport's fields are looked for, in order (see the module's
    docstring): found once per object, not once per field."""
    return [section for section in (obj.get("status"), obj, obj.get("spec"))
            if _is_mapping(section)]


def _field(sections: list[Mapping[str, Any]], name: str) -> Any:
    """The first value of ``name`` in ``sections`` that is not null, "" or []."""
    for section in sections:
        value = section.get(name)
        if value is not None and value != "" and value != []:
            return value
    return None


# ServiceImport types by their text: a dict look-up, where ServiceType(text) costs an
# Enum call per object.
_SERVICE_TYPES = {member.value: member for member in ServiceType}


# Namespaces repeat across imports: each is checked once, then found by its text as
# written. Bounded, since objects choose them; starting over only costs the checks.
_NAMESPACES_CAP = 16384
_namespaces: dict[str, str] = {}


def _namespace(raw: str) -> str:
    """A ServiceImport's namespace as a label, lower-case and interned; raises
    InvalidObject for one that is not a label (not kept)."""
    found = _namespaces.get(raw)
    if found is None:
        _dns_label(raw, "namespace")
        found = sys.intern(_lower(raw))
        if len(_namespaces) >= _NAMESPACES_CAP:
            _namespaces.clear()
        _namespaces[raw] = found
    return found


def service_import(obj: Mapping[str, Any], warn: Warn = _ignore) -> ServiceImport:
    namespace, name = key_of(obj)
    namespace = _namespace(namespace)
    _dns_label(name, "name")
    sections = _sections(obj)
    raw_type = _field(sections, "type")
    svc_type = _SERVICE_TYPES.get(raw_type) if isinstance(raw_type, str) else None
    if svc_type is None:
        raise InvalidObject(f"type {raw_type!r} is neither ClusterSetIP nor Headless")
    raw_ips = _field(sections, "ips") or []
    if not isinstance(raw_ips, list):
        raise InvalidObject("ips is not a list")
    packed: list[bytes] = []  # without an address object each
    for raw in raw_ips:
        try:
            address = inet_pton(AF_INET, raw)  # the common case: _ip()'s first try
        except (OSError, TypeError, ValueError, UnicodeError):
            ip = _ip(raw)
            if ip is None:
                warn(f"IP {raw!r} does not parse, dropped")
                continue
            address = ip.packed
        if address not in packed:  # 4 and 16 bytes never equal: families stay apart
            packed.append(address)
    traffic = _field(sections, "trafficDistribution")
    prefer = TRAFFIC_DISTRIBUTION.get(traffic, Prefer.NOTHING) if isinstance(traffic, str) \
        else Prefer.NOTHING
    unknown = None
    if traffic is not None and (not isinstance(traffic, str) or traffic not in
                                TRAFFIC_DISTRIBUTION):
        unknown = traffic[:100] if isinstance(traffic, str) else repr(traffic)[:100]
    slice_objects = _field(sections, SLICE_OBJECTS)
    slice_objects = slice_objects if isinstance(slice_objects, str) else ""
    return ServiceImport(
        namespace=namespace,
        name=sys.intern(_lower(name)),
        type=svc_type,
        packed_ips=pack(packed) if svc_type is ServiceType.CLUSTER_SET_IP else b"",
        ports=_ports(_field(sections, "ports"), "ports", warn),
        prefer=prefer,
        unknown_traffic=unknown,
        slices_absent=slice_objects == SLICES_ABSENT,
        conditions=_conditions(_field(sections, "conditions")),
        slice_objects=slice_objects[:MAX_CONDITION_TEXT],
        resource_version=resource_version(obj),
    )


def reference(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(apiVersion, metadata.uid) of an object, "" where absent: what an Event about it
    names (kubectl describe finds Events by the object's uid)."""
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    api = obj.get("apiVersion")
    return (api if isinstance(api, str) else "", uid if isinstance(uid, str) else "")


def resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return version if isinstance(version, str) else ""


def _text(value: Any) -> str:
    return value[:MAX_CONDITION_TEXT] if isinstance(value, str) else ""


def _conditions(raw: Any) -> tuple[Condition, ...]:
    """The import's conditions (metav1.Condition); entries without a type are skipped.
    Only explain reads them, so a malformed list costs nothing but its own display."""
    if not isinstance(raw, list):
        return ()
    found = [Condition(_text(item.get("type")), _text(item.get("status")),
                       _text(item.get("reason")), _text(item.get("message")))
             for item in raw if _is_mapping(item) and _text(item.get("type"))]
    return tuple(found[:MAX_CONDITIONS])


def service_key(obj: Mapping[str, Any]) -> ObjectKey | None:
    """The (namespace, service) an object that failed to convert belongs to, when it
    can be read: a rejected object explains the empty answers of that name."""
    try:
        namespace, name = key_of(obj)
    except InvalidObject:
        return None
    if kind_of(obj) == "EndpointSlice":
        labels = obj["metadata"].get("labels")
        service = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
        if not isinstance(service, str) or not service:
            return None
        name = service
    return namespace.lower(), name.lower()


def _trigger_time(meta: Mapping[str, Any]) -> float | None:
    annotations = meta.get("annotations")
    raw = annotations.get(TRIGGER_TIME) if isinstance(annotations, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:  # RFC 3339, as the EndpointSlice controller writes it (2024-01-02T03:04:05Z)
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# StatefulSet hostnames repeat across services (web-0, web-1, ...): each is checked once
# and shared. Bounded, since objects choose them; starting over only costs the sharing.
_HOSTNAMES_CAP = 16384
_hostnames: dict[str, str] = {}


def _hostname(raw: Any) -> str:
    found = _hostnames.get(raw) if type(raw) is str else None
    if found is None:
        found = sys.intern(_dns_label(raw, "hostname"))  # raises for a bad one: not kept
        if len(_hostnames) >= _HOSTNAMES_CAP:
            _hostnames.clear()
        if type(raw) is str:
            _hostnames[raw] = found
    return found


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # JSON gives dicts: the ABC check (a tenth of a slice's conversion) only for others.
    return type(value) is dict or isinstance(value, Mapping)


# Hints repeat across endpoints (every endpoint of a zone has the same): one object each,
# found by the names as written (a tuple hashes in C; building the sets once per
# distinct hint, not per endpoint, is most of the conversion's cost of hints).
# Bounded, since objects choose them; starting over only costs the sharing.
_HINTS_CAP = 4096
_shared_hints: dict[tuple[tuple[str, ...], tuple[str, ...]], Hints | None] = {}
_UNSEEN = Hints()  # never stored: empty hints are stored as None


def _hint_names(raw: Any, what: str) -> tuple[str, ...]:
    """The names of ``hints.forZones`` or ``hints.forNodes``; raises InvalidObject for a
    list the API would refuse (not a list, over MAX_HINTS entries, an entry without a
    name), checked before reading it: a huge list costs nothing."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidObject(f"{what} is not a list")
    if len(raw) > MAX_HINTS:
        raise InvalidObject(f"{what} has {len(raw)} entries, more than {MAX_HINTS}")
    found = []
    for item in raw:
        name = item.get("name") if _is_mapping(item) else None
        if type(name) is not str or not 0 < len(name) <= MAX_HINT_NAME:
            raise InvalidObject(f"{what} has an entry without a name of 1..{MAX_HINT_NAME} "
                                "characters")
        found.append(name)
    return tuple(found)


def _hints(raw: Any) -> Hints | None:
    """An endpoint's hints (None: none, or only empty lists); raises InvalidObject."""
    if raw is None:
        return None
    if not _is_mapping(raw):
        raise InvalidObject("hints is not an object")
    key = (_hint_names(raw.get("forZones"), "hints.forZones"),
           _hint_names(raw.get("forNodes"), "hints.forNodes"))
    hints = _shared_hints.get(key, _UNSEEN)
    if hints is not _UNSEEN:
        return hints
    hints = None
    if key[0] or key[1]:
        hints = Hints(frozenset(map(sys.intern, key[0])), frozenset(map(sys.intern, key[1])))
    if len(_shared_hints) >= _HINTS_CAP:
        _shared_hints.clear()
    _shared_hints[key] = hints
    return hints


# Places repeat across endpoints (every endpoint of a node, of a zone): one object each.
# Bounded, since objects choose them; starting over only costs the sharing.
_PLACES_CAP = 4096
_shared_places: dict[tuple[str | None, str | None, Hints | None], Place] = {}


def _place(zone: str | None, node: str | None, hints: Hints | None) -> Place:
    if zone is None and node is None and hints is None:
        return NOWHERE
    key = (zone, node, hints)
    found = _shared_places.get(key)
    if found is None:
        if len(_shared_places) >= _PLACES_CAP:
            _shared_places.clear()
        _shared_places[key] = found = Place(zone, node, hints)
    return found


def _endpoint(raw: Any, family: int, index: int, warn: Warn, by_state: tuple[Columns, ...]
              ) -> None:
    """One endpoint added to its state's columns (``by_state``: READY, SERVING: not
    ready but serving, DOWN: neither; absent ``ready`` = ready, absent ``serving`` = as
    ``ready``); skipped when it has no usable address."""
    # The common endpoint is taken without a call more than it needs (start-up converts
    # a hundred thousand): JSON gives dicts, strings and lists, tested by their type
    # first; anything else gets the full checks.
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidObject("not an object")
    conditions = raw.get("conditions")
    ready = READY
    if _is_mapping(conditions) and conditions.get("ready") is False:
        ready = SERVING if conditions.get("serving") is True else DOWN
    raw_addresses = raw.get("addresses") or []
    if not isinstance(raw_addresses, list):
        raise InvalidObject("addresses is not a list")
    addresses: list[bytes] = []  # packed: the model keeps no address object
    for text in raw_addresses:
        try:
            # An IPv4 address as the API writes it; anything else (IPv6, spaces around
            # it, not a string) takes _ip().
            packed = inet_pton(AF_INET, text)
            version = 4
        except (OSError, TypeError, ValueError, UnicodeError):
            parsed = _ip(text)
            if parsed is None:
                warn(f"endpoints[{index}]: address {text!r} does not parse, dropped")
                continue
            packed, version = parsed.packed, parsed.version
        if version != family:
            warn(f"endpoints[{index}]: address {text!r} is not IPv{family} like its slice, "
                 "dropped")
            continue
        addresses.append(packed)
    hostname = raw.get("hostname") or None
    if hostname is not None:
        hostname = _hostnames.get(hostname) if type(hostname) is str else None
        if hostname is None:
            hostname = _hostname(raw.get("hostname"))
    zone = raw.get("zone")
    # Zones are compared, never put into names: any non-empty string will do.
    zone = sys.intern(zone) if isinstance(zone, str) and zone else None
    node = raw.get("nodeName")
    node = sys.intern(node) if isinstance(node, str) and node else None
    if not addresses:
        return
    hints = None
    raw_hints = raw.get("hints")
    if raw_hints is not None:
        try:
            hints = _hints(raw_hints)
        except InvalidObject as exc:
            # The endpoint keeps its addresses; without hints, its import ranks by the
            # fields (order.Tiers.following), as when one endpoint has none.
            warn(f"endpoints[{index}]: hints ignored: {exc}")
    by_state[ready].add(addresses, hostname, _place(zone, node, hints))


def endpoint_slice(obj: Mapping[str, Any], warn: Warn = _ignore) -> EndpointSlice | None:
    """The slice, or None for slices DNS does not use (FQDN address type)."""
    namespace, name = key_of(obj)
    meta = obj["metadata"]
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    service = labels.get(SERVICE_NAME_LABEL)
    if not service:
        raise InvalidObject(f"label {SERVICE_NAME_LABEL} missing or empty")
    service = sys.intern(_dns_label(service, f"label {SERVICE_NAME_LABEL}"))
    cluster = labels.get(SOURCE_CLUSTER_LABEL)
    if cluster is not None:
        # Present but not a name ("", ".", "a b"): endpoint names would land directly
        # under the service or be unencodable, so the slice is refused, not served
        # as if it had no cluster id.
        if not isinstance(cluster, str):
            raise InvalidObject(f"cluster id {cluster!r} is not a string")
        try:
            cluster = sys.intern(b".".join(names.subdomain(cluster)).decode("ascii"))
        except names.InvalidName as exc:
            raise InvalidObject(f"cluster id: {exc}") from None
    address_type = obj.get("addressType")
    if address_type == "FQDN":
        return None
    if address_type not in ("IPv4", "IPv6"):
        raise InvalidObject(f"addressType {address_type!r} is not IPv4, IPv6 or FQDN")
    family = 4 if address_type == "IPv4" else 6
    raw_endpoints = obj.get("endpoints") or []
    if not isinstance(raw_endpoints, list):
        raise InvalidObject("endpoints is not a list")
    by_state = (Columns(), Columns(), Columns())  # indexed by READY, SERVING, DOWN
    for i, raw in enumerate(raw_endpoints):
        try:
            _endpoint(raw, family, i, warn, by_state)
        except InvalidObject as exc:
            warn(f"endpoints[{i}] skipped: {exc}")
    return EndpointSlice(
        namespace=sys.intern(_lower(namespace)),
        name=name,
        service=service,
        cluster=cluster,
        endpoints=by_state[READY].finish(),
        ports=_ports(obj.get("ports"), "ports", warn),
        serving=by_state[SERVING].finish(),
        not_ready=by_state[DOWN].finish(),
        resource_version=resource_version(obj),
        trigger_time=_trigger_time(meta),
    )
