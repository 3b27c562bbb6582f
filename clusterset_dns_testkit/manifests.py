"""Manifest files that tests write for the server's ``--manifests`` source, and their
rewriting: a file is replaced whole, never seen half-written by the directory watch."""

from __future__ import annotations

from pathlib import Path

import yaml

from clusterset_dns_testkit.objects import (
    HTTP,
    V1ALPHA1,
    endpoint_slice,
    ready_endpoints,
    service_import,
)


def headless(name: str, addresses: list[str], namespace: str = "demo",
             cluster: str = "east") -> str:
    """One Headless ServiceImport and its EndpointSlice of ready ``addresses``, as YAML."""
    return yaml.safe_dump_all([
        service_import(name, namespace, "Headless", ports=[HTTP], api_version=V1ALPHA1),
        endpoint_slice(f"{name}-{cluster}", name, namespace, cluster, ports=[HTTP],
                       endpoints=ready_endpoints(addresses))])


def write_atomically(path: Path, text: str) -> None:
    """Writes beside ``path`` then renames over it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
