"""docs/metrics.md's Metrics section names every metric family a running server exposes on
/metrics, the standard process_* and python_* families included, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from clusterset_dns_testkit.dnsserver import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = ROOT / "tests" / "conformance" / "objects"
_NAME = r"(?:clusterset_dns|process|python)_[a-z0-9_]+"


def readme_metrics() -> set[str]:
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Metrics\n"):]
    section = section[:section.index("\n## ", 1)]
    return set(re.findall(rf"`({_NAME})", section))


def exposed_families(exposition: str) -> set[str]:
    """The families of an exposition by the names the README uses (a counter with its
    _total); prometheus_client's *_created series belong to their counter or histogram."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))
    created = {name for name, kind in types.items() if kind == "gauge"
               and name.endswith("_created")
               and (name[:-len("_created")] + "_total" in types
                    or types.get(name[:-len("_created")]) == "histogram")}
    return set(types) - created


def test_the_readme_names_every_family_on_metrics_and_no_other() -> None:
    with ServerProcess("--manifests", str(OBJECTS)) as server:
        server.wait_ready()
        status, exposition = server._get(server.metrics_port, "/metrics")
    assert status == 200
    exposed = exposed_families(exposition)
    assert {"process_resident_memory_bytes", "python_info"} <= exposed
    documented = readme_metrics()
    assert sorted(exposed - documented) == []  # exposed, not in the README
    assert sorted(documented - exposed) == []  # in the README, not exposed


def test_created_series_are_not_families_of_their_own() -> None:
    text = ("# TYPE a_total counter\n# TYPE a_created gauge\n# TYPE h histogram\n"
            "# TYPE h_created gauge\n# TYPE g_created gauge\n")
    assert exposed_families(text) == {"a_total", "h", "g_created"}
