"""Import layers: each module may import only what its layer allows.

Keeps the hot path free of the API client and of prometheus-client, and keeps
Kubernetes field names and the client library each in one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clusterset_dns"

# module -> the package modules it may import
ALLOWED: dict[str, set[str]] = {
    "__init__": set(),
    "__main__": {"cli"},
    "model": set(),
    "names": set(),
    "config": {"model", "names"},
    "wire": {"names"},
    "convert": {"model", "names"},
    "reasons": {"model", "names", "wire"},
    "records": {"model", "names", "reasons", "truncate", "wire"},
    "truncate": {"wire"},
    "responses": set(),
    "serials": set(),
    "cache": {"delta", "model", "names", "records", "responses", "serials", "truncate", "wire"},
    "delta": {"model", "names", "reasons", "records", "truncate", "wire"},
    "stats": set(),
    "handler": {"cache", "records", "stats", "truncate", "wire"},
    "server": {"udpbatch"},
    "udpbatch": set(),
    "logs": set(),
    "health": {"config"},
    "metrics": {"__version__", "cache", "stats"},
    "dirwalk": set(),
    "yamlsafe": set(),
    "manifests": {"cache", "convert", "dirwalk", "model", "yamlsafe"},
    "rrs": {"names", "wire"},
    "explain": {"cache", "handler", "model", "names", "rrs", "wire"},
    "events": {"cache", "kube", "model"},
    "offline": {"cache", "config", "explain", "manifests", "names"},
    "dump": {"cache", "config", "manifests", "names", "rrs"},
    "kube": set(),
    "clock": set(),
    "reflector": {"cache", "clock", "config", "convert", "kube", "metrics", "model"},
    "discovery": {"kube", "reflector"},
    "watch": {"cache", "clock", "config", "convert", "discovery", "kube", "metrics", "model",
              "reflector"},
    "locality": {"cache", "clock", "config", "convert", "discovery", "kube", "metrics", "model",
                 "reflector"},
    "workers": {"cache", "clock", "config", "stats"},
    "zonedata": {"cache", "rrs", "wire"},
    "journal": {"cache", "rrs", "wire"},
    "xfr": {"cache", "config", "journal", "rrs", "wire", "zonedata"},
    "notify": {"clock", "config"},
    "app": {"cache", "config", "convert", "events", "explain", "handler", "health", "journal",
            "locality", "logs", "manifests", "metrics", "names", "notify", "serials", "server",
            "stats", "watch", "workers", "xfr"},
    "cli": {"__version__", "app", "config", "dump", "offline"},
}

# third-party package -> the only modules that may import it
OWNERS = {
    "kubernetes_asyncio": {"kube"},
    "aiohttp": {"kube"},
    "prometheus_client": {"metrics"},
    "dnslib": set(),  # the bench's tool; the server reads its own answers (rrs)
    "yaml": {"yamlsafe"},
    "uvloop": {"app"},
    "dns": {"xfr", "notify"},  # dnspython: TSIG and transfer messages
}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "clusterset_dns":
                found.update(f"clusterset_dns.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
    return found


MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def test_every_module_has_a_layer() -> None:
    assert set(MODULES) == set(ALLOWED)
    assert all(ALLOWED[m] <= set(ALLOWED) | {"__version__"} for m in ALLOWED)


@pytest.mark.parametrize("module", MODULES)
def test_package_imports_follow_layers(module: str) -> None:
    imported = {name.split(".")[1] for name in imports_of(PACKAGE / f"{module}.py")
                if name.startswith("clusterset_dns.")}
    assert imported <= ALLOWED[module], f"{module} imports {sorted(imported - ALLOWED[module])}"


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_third_party_owned_by_one_layer(library: str) -> None:
    users = {m for m in MODULES
             if any(n == library or n.startswith(library + ".")
                    for n in imports_of(PACKAGE / f"{m}.py"))}
    assert users <= OWNERS[library], f"{library} imported by {sorted(users - OWNERS[library])}"
