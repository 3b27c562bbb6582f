"""Import layers: each module may import only what its layer allows, and each
subpackage only the subpackages below it.

Keeps the hot path free of the API client and of prometheus-client, and keeps
Kubernetes field names and the client library each in one module.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clusterset_dns"

# module -> the package modules it may import. A module is named by its path under
# clusterset_dns/ ("zone.cache"); a subpackage's __init__ by the subpackage ("zone");
# "__version__" is the one name of the top-level __init__ that modules import.
ALLOWED: dict[str, set[str]] = {
    "__init__": set(),
    "__main__": {"process.cli"},
    # zone: the zone and its answers
    "zone": set(),
    "zone.model": {"base.names"},
    "zone.wire": {"base.names"},
    "zone.reasons": {"base.names", "zone.model", "zone.wire"},
    "zone.records": {"base.names", "zone.model", "zone.order", "zone.reasons", "zone.table",
                     "zone.truncate", "zone.wire"},
    "zone.truncate": {"base.clock", "zone.wire"},
    "zone.responses": set(),
    "zone.serials": set(),
    "zone.ops": {"zone.model", "zone.wire"},
    "zone.table": {"zone.firstuse", "zone.responses", "zone.truncate", "zone.wire"},
    "zone.firstuse": {"zone.wire"},
    "zone.admission": {"base.names", "zone.model", "zone.ops"},
    "zone.cache": {"base.clock", "base.names", "zone.admission", "zone.delta", "zone.model",
                   "zone.ops", "zone.pending", "zone.records", "zone.serials", "zone.table",
                   "zone.wire"},
    "zone.pending": {"base.names", "zone.model", "zone.ops", "zone.table"},
    "zone.delta": {"base.names", "zone.model", "zone.order", "zone.reasons", "zone.records",
                   "zone.truncate", "zone.wire"},
    "zone.rrs": {"base.names", "zone.wire"},
    "zone.order": {"zone.model"},
    # base: below everything (name rules, clock, config, metric declarations)
    "base": set(),
    "base.clock": set(),
    "base.config": {"base.names"},
    "base.metrics": {"__version__", "base.clock"},
    "base.names": set(),
    # sources: where objects come from
    "sources": set(),
    "sources.fields": {"base.names", "zone.model"},
    "sources.convert": {"base.names", "sources.fields", "zone.model"},
    "sources.properties": {"base.names", "sources.convert"},
    "sources.dirwalk": set(),
    "sources.yamlsafe": set(),
    "sources.manifests": {"base.clock", "sources.convert", "sources.dirwalk",
                          "sources.properties", "sources.yamlsafe", "zone.model", "zone.ops"},
    "sources.events": {"base.clock", "sources.kube", "zone.cache", "zone.model"},
    "sources.kube": {"sources.liststream"},
    "sources.liststream": set(),
    "sources.reflector": {"base.clock", "base.config", "base.metrics", "sources.convert",
                          "sources.kube", "sources.resource", "zone.model", "zone.ops"},
    "sources.discovery": {"sources.kube", "sources.resource"},
    "sources.watch": {"base.clock", "base.config", "base.metrics", "sources.convert",
                      "sources.discovery", "sources.kube", "sources.reflector", "sources.resource",
                      "zone.model", "zone.ops"},
    "sources.locality": {"base.clock", "base.config", "base.metrics", "sources.discovery",
                         "sources.kube", "sources.properties", "sources.reflector",
                         "sources.resource", "zone.model", "zone.ops"},
    "sources.resource": {"zone.model", "zone.ops"},
    # serving: the per-packet path and its transports
    "serving": set(),
    "serving.stats": set(),
    "serving.handler": {"serving.query", "serving.stats", "zone.table", "zone.truncate",
                        "zone.wire"},
    "serving.observe": set(),
    "serving.outq": set(),
    "serving.server": {"base.clock", "serving.observe", "serving.outq", "serving.stats",
                       "serving.udpbatch", "serving.udpplain"},
    "serving.udpplain": {"base.clock", "serving.observe", "serving.stats", "serving.udpbatch"},
    "serving.udpbatch": {"base.clock", "serving.observe", "serving.stats"},
    "serving.query": {"zone.wire"},
    # transfers: AXFR/IXFR and NOTIFY
    "transfers": set(),
    "transfers.zonedata": {"zone.rrs", "zone.table", "zone.wire"},
    "transfers.journal": {"zone.ops", "zone.rrs", "zone.wire"},
    "transfers.xfr": {"base.clock", "base.config", "transfers.journal", "transfers.limits",
                      "transfers.packing", "transfers.tsig", "transfers.zonedata", "zone.rrs",
                      "zone.table", "zone.wire"},
    "transfers.notify": {"base.clock", "base.config"},
    "transfers.keyfile": {"base.config"},
    "transfers.packing": {"zone.rrs", "zone.wire"},
    "transfers.tsig": {"zone.wire"},
    "transfers.limits": {"base.clock"},
    # process: lifespan, flags, workers, operations
    "process": set(),
    "process.logs": set(),
    "process.querylog": {"base.clock", "base.metrics", "serving.observe", "serving.stats",
                         "zone.wire"},
    "process.health": {"base.config"},
    "process.collector": {"base.clock", "base.metrics", "serving.stats", "zone.cache", "zone.rrs"},
    "process.explain": {"base.names", "serving.handler", "zone.cache", "zone.model", "zone.rrs",
                        "zone.wire"},
    "process.explain_http": {"base.clock", "process.explain", "process.health", "zone.cache"},
    "process.offline": {"base.config", "base.names", "process.explain", "sources.manifests",
                        "zone.cache"},
    "process.dump": {"base.config", "base.names", "sources.manifests", "zone.cache", "zone.rrs"},
    "process.dnstapwire": set(),
    "process.dnstap": {"__version__", "base.clock", "base.config", "process.dnstapwire",
                       "serving.stats"},
    "process.workers": {"base.clock", "base.config", "serving.stats", "zone.cache"},
    "process.app": {"base.clock", "base.config", "base.metrics", "base.names", "process.collector",
                    "process.dnstap", "process.explain_http", "process.health", "process.logs",
                    "process.querylog", "process.sink", "process.workers", "serving.handler",
                    "serving.observe", "serving.server", "serving.stats", "sources.convert",
                    "sources.events", "sources.locality", "sources.manifests", "sources.watch",
                    "transfers.journal", "transfers.keyfile", "transfers.notify", "transfers.xfr",
                    "transfers.zonedata", "zone.cache"},
    "process.cli": {"__version__", "process.app", "base.config", "process.dump",
                    "process.offline"},
    "process.sink": {"base.clock", "base.metrics", "process.workers", "zone.cache",
                     "zone.serials"},
}

# The subpackages' layers: group -> the groups it may import (besides itself). Packages
# only: what every subsystem uses (name rules, clock, config, metrics) is a package of
# its own, base, below them all, importing nothing; process is the top. Acyclic
# (test_group_layers_are_acyclic).
GROUPS: dict[str, set[str]] = {
    "base": set(),
    "zone": {"base"},
    "serving": {"zone", "base"},
    "sources": {"zone", "base"},
    "transfers": {"zone", "base"},
    "process": {"zone", "base", "serving", "sources", "transfers"},
}
TOP = {"__init__", "__main__", "__version__"}  # the package root: outside the groups

# third-party package -> the only modules that may import it
OWNERS = {
    "kubernetes_asyncio": {"sources.kube"},
    "aiohttp": {"sources.kube"},
    "prometheus_client": {"base.metrics", "process.collector"},
    "dnslib": set(),  # the bench's tool; the server reads its own answers (zone.rrs)
    "yaml": {"sources.yamlsafe"},
    "uvloop": {"process.app"},
    # dnspython: TSIG and transfer messages
    "dns": {"transfers.xfr", "transfers.tsig", "transfers.notify", "transfers.keyfile"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = sorted(module_name(p) for p in PACKAGE.rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports; a package's own modules as clusterset_dns.<name>."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "clusterset_dns" or node.module.startswith("clusterset_dns."):
                within = node.module.removeprefix("clusterset_dns").lstrip(".")
                for alias in node.names:  # a module of the package, else a name of a module
                    name = f"{within}.{alias.name}".lstrip(".")
                    found.add(f"clusterset_dns.{name}" if name in MODULES or name in TOP
                              else node.module)
            else:
                found.add(node.module)
    return found


def path_of(module: str) -> Path:
    path = PACKAGE / (module.replace(".", "/") + ".py")
    return path if path.exists() else PACKAGE / module / "__init__.py"


def package_imports(module: str) -> set[str]:
    return {"__init__" if name == "clusterset_dns" else name.removeprefix("clusterset_dns.")
            for name in imports_of(path_of(module))
            if name == "clusterset_dns" or name.startswith("clusterset_dns.")}


def group_of(module: str) -> str:
    return module.split(".")[0]


def test_every_module_has_a_layer() -> None:
    assert set(MODULES) == set(ALLOWED)
    assert all(ALLOWED[m] <= set(ALLOWED) | {"__version__"} for m in ALLOWED)
    # and every module outside the package root is in a group
    assert all(group_of(m) in GROUPS for m in MODULES if m not in TOP)


@pytest.mark.parametrize("module", MODULES)
def test_package_imports_follow_layers(module: str) -> None:
    imported = package_imports(module)
    assert imported <= ALLOWED[module], f"{module} imports {sorted(imported - ALLOWED[module])}"


@pytest.mark.parametrize("module", [m for m in MODULES if m not in TOP])
def test_package_imports_follow_group_layers(module: str) -> None:
    group = group_of(module)
    others = {group_of(m) for m in package_imports(module) if m not in TOP} - {group}
    assert others <= GROUPS[group], \
        f"{module} ({group}) imports from {sorted(others - GROUPS[group])}"


def test_group_layers_are_acyclic() -> None:
    assert all(GROUPS[g] <= set(GROUPS) for g in GROUPS)
    graphlib.TopologicalSorter(GROUPS).static_order()  # raises CycleError on a cycle


def test_module_layers_allow_what_group_layers_allow() -> None:
    """The two tables agree: no module is allowed what its group is not."""
    wrong = {m: sorted(g for g in {group_of(d) for d in deps if d not in TOP} - {group_of(m)}
                       if g not in GROUPS[group_of(m)])
             for m, deps in ALLOWED.items() if m not in TOP}
    assert not {m: w for m, w in wrong.items() if w}


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_third_party_owned_by_one_layer(library: str) -> None:
    users = {m for m in MODULES
             if any(n == library or n.startswith(library + ".")
                    for n in imports_of(path_of(m)))}
    assert users <= OWNERS[library], f"{library} imported by {sorted(users - OWNERS[library])}"
