"""API discovery: which version of an API group serves a resource.

The group's preferred version alone is not enough: a CRD of another release can
keep a version of the group served that lacks the resource (mcs-api v0.5.0's
ServiceExport beside v0.4.1's ServiceImport), so each served version is asked,
the preferred one first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusterset_dns.sources.kube import ApiError, MalformedResponse
from clusterset_dns.sources.resource import Client


@dataclass(frozen=True, slots=True)
class Served:
    """The group's served versions (preferred first) and the first that has the resource
    (None: none has it)."""

    versions: list[str]
    version: str | None


async def served(client: Client, group: str, resource: str) -> Served | None:
    """None when the API server does not serve ``group`` at all (404). Raises
    :class:`kube.KubeError` for any other failure, :class:`kube.MalformedResponse`
    when an answer does not have the documented shape."""
    try:
        answer = _mapping(await client.get(f"/apis/{group}"))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    versions = [str(_mapping(v).get("groupVersion")) for v in _sequence(answer.get("versions"))]
    preferred = _mapping(answer.get("preferredVersion") or {}).get("groupVersion")
    if preferred in versions:
        versions.remove(preferred)
        versions.insert(0, preferred)
    for group_version in versions:
        resources = _mapping(await client.get(f"/apis/{group_version}"))
        if any(_mapping(r).get("name") == resource
               for r in _sequence(resources.get("resources"))):
            return Served(versions, group_version)
    return Served(versions, None)


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedResponse(f"discovery: expected an object, got {type(value).__name__}")
    return value


def _sequence(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedResponse(f"discovery: expected a list, got {type(value).__name__}")
    return value
