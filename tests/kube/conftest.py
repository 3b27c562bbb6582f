"""A real etcd + kube-apiserver for the whole session, with the mcs-api v0.5.0
CRDs and the status-layout CRD of tests/crds installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.peers import KubeAPI


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/kube/" in str(item.fspath):
            item.add_marker(pytest.mark.kube)


@pytest.fixture(scope="session")
def api() -> Iterator[KubeAPI]:
    # The gate makes Kubernetes 1.33 keep EndpointSlice hints.forNodes (issue 35,
    # tests/kube/test_hints.py); it is on by default from 1.34.
    with KubeAPI(extra_args=["--feature-gates=PreferSameTrafficDistribution=true"]) as kube:
        kube.install_crds(["mcs-api-v0.5.0", "status-layout"])
        yield kube


@pytest.fixture
def namespace(api: KubeAPI, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test (names are DNS labels)."""
    name = "t-" + request.node.name.replace("_", "-").lower()[:40].strip("-")
    name = "".join(c for c in name if c.isalnum() or c == "-").strip("-")
    api.ensure_namespace(name)
    return name


@pytest.fixture
def server_for(api: KubeAPI, request: pytest.FixtureRequest) -> Iterator[type[ServerProcess]]:
    """Starts servers against the API; stops them and shows their logs on failure."""
    started: list[ServerProcess] = []

    class Started(ServerProcess):
        def __init__(self, *args: str, kubeconfig: Path | None = None) -> None:
            super().__init__("--kubeconfig", str(kubeconfig or api.kubeconfig), *args)
            started.append(self)

    yield Started
    for server in started:
        server.stop()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        for server in started:
            print(f"--- {server.cmd} ---\n{server.log_text()[-6000:]}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
