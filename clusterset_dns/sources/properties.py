"""What the server reads of its own cluster, for local-first answers: the cluster's id
from the about-api ClusterProperties, and a Node's topology zone. Kubernetes field names
as :mod:`convert` knows them (its InvalidObject too); apart from it because the sources
of ServiceImports and EndpointSlices never need this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterset_dns.base import names
from clusterset_dns.sources.convert import InvalidObject, Warn, key_of, kind_of

ABOUT_GROUP = "about.k8s.io"
# The ClusterProperties naming this cluster, the one that wins first: the about-api's
# (and the proposed rename's) name, then the one the MCS DNS specification still uses.
CLUSTER_ID_PROPERTIES = ("cluster.clusterset.k8s.io", "id.k8s.io")
ZONE_LABEL = "topology.kubernetes.io/zone"  # a Node's zone


def _ignore(_: str) -> None:
    pass


def cluster_id(text: Any) -> str:
    """A cluster id as slices' source-cluster labels are read (one or more DNS labels,
    lower-cased), so that the two compare equal; raises InvalidObject."""
    if not isinstance(text, str):
        raise InvalidObject(f"cluster id {text!r} is not a string")
    try:
        return b".".join(names.subdomain(text.strip())).decode("ascii")
    except names.InvalidName as exc:
        raise InvalidObject(f"cluster id {text!r}: {exc}") from None


def is_cluster_property(obj: Mapping[str, Any]) -> bool:
    api = obj.get("apiVersion")
    return (kind_of(obj) == "ClusterProperty" and isinstance(api, str)
            and api.split("/")[0] == ABOUT_GROUP)


def cluster_property(obj: Mapping[str, Any], warn: Warn = _ignore) -> str | None:
    """The cluster id a ClusterProperty gives (only those of CLUSTER_ID_PROPERTIES
    do; None for any other property)."""
    _, name = key_of(obj)
    if name not in CLUSTER_ID_PROPERTIES:
        return None
    spec = obj.get("spec")
    value = spec.get("value") if isinstance(spec, Mapping) else None
    return cluster_id(value)


def pick_cluster_id(values: Mapping[str, str | None]) -> str | None:
    """The cluster id given the values of the ClusterProperties by name: the first of
    CLUSTER_ID_PROPERTIES that has one wins."""
    return next((values[name] for name in CLUSTER_ID_PROPERTIES
                 if values.get(name) is not None), None)


def node_zone(obj: Mapping[str, Any]) -> str | None:
    """A Node's topology zone label, or None."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    zone = labels.get(ZONE_LABEL) if isinstance(labels, Mapping) else None
    return zone if isinstance(zone, str) and zone else None
