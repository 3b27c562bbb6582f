"""The conformance objects, loaded into the API server."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from clusterset_dns_testkit.compare.common import API_OBJECT_PATHS, MCS_CRDS, JSONObj
from clusterset_dns_testkit.peers import KubeAPI, PeerError


def manifest_files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml", ".json"))
        else:
            out.append(p)
    return out


def load_objects(paths: Iterable[Path] = API_OBJECT_PATHS) -> list[JSONObj]:
    """Every object of the given files/directories (YAML or JSON, multi-document,
    ``kind: List`` expanded), namespaces first."""
    objs: list[JSONObj] = []
    for f in manifest_files(paths):
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc:
                continue
            objs += doc.get("items") or [] if doc.get("kind") == "List" else [doc]
    return sorted(objs, key=lambda o: o.get("kind") != "Namespace")


@dataclass
class Loaded:
    applied: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (object, reason)


def describe(obj: JSONObj) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{obj.get('apiVersion')} {obj.get('kind')} {where}{meta.get('name')}"


def apply_objects(api: KubeAPI, objs: Iterable[JSONObj]) -> Loaded:
    """Apply what the API server accepts; an object whose apiVersion it does not
    serve (the v1alpha2 layouts under the v0.5.0 CRD) is skipped with the reason."""
    loaded = Loaded()
    for obj in objs:
        try:
            api.resource_for(obj["apiVersion"], obj["kind"])
        except PeerError:
            loaded.skipped.append((describe(obj), f"{obj['apiVersion']} is not served "
                                   f"by the {MCS_CRDS} CRD"))
            continue
        api.apply(obj)
        loaded.applied.append(describe(obj))
    return loaded


def served(api: KubeAPI, obj: JSONObj) -> bool:
    try:
        api.resource_for(obj["apiVersion"], obj["kind"])
    except PeerError:
        return False
    return True


