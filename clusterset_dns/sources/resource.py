"""What a reflector lists and watches (:class:`Resource`), through what client
(:class:`Client`, the seam unit tests fake), and the errors that end a watch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from clusterset_dns.zone.model import ObjectKey
from clusterset_dns.zone.ops import Op


class Client(Protocol):
    """What the reflectors need of the API client (the seam unit tests fake)."""

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, sizes: list[int] | None = None,
                  each: Callable[[list[dict[str, Any]]], None] | None = None) -> Any: ...

    def stream(self, path: str, params: Mapping[str, Any]) -> Any: ...


class Gone(Exception):
    """The resourceVersion is too old: list again."""


class NotServed(Exception):
    """The discovered ServiceImport version is no longer served (CRD upgraded)."""


@dataclass(frozen=True, slots=True)
class Resource:
    description: str  # for logs: "serviceimports multicluster.x-k8s.io/v1beta1 in prod"
    path: str  # collection path, e.g. /apis/discovery.k8s.io/v1/endpointslices
    op_kind: str  # "import" or "slice": metric label and invalid-object kind
    selector: str | None  # label selector, applied by the API server
    to_model: Callable[[Mapping[str, Any], Callable[[str], None]], Any]
    put: Callable[[ObjectKey, Any], Op]  # the cache op storing (or, None, deleting) one
    field_selector: str | None = None  # e.g. metadata.name=<one object>
    # Named by Events (list items name neither); cluster-scoped: keys are ("", name).
    kind: str = ""
    api_version: str = ""
    cluster_scoped: bool = False
