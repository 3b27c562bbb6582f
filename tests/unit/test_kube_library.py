"""kube.py replaces a private part of kubernetes_asyncio (the RESTClientObject's aiohttp
session and its proxy fields): the installed release must be one it was checked against
(kube.TESTED_KUBERNETES_ASYNCIO, inside pyproject.toml's range), and that part must still
be what kube.py replaces: what ApiClient.call_api sends through."""

from __future__ import annotations

import asyncio
import importlib.metadata
import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from packaging.requirements import Requirement

from clusterset_dns.sources import kube

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_release_is_a_tested_one() -> None:
    installed = importlib.metadata.version("kubernetes_asyncio")
    assert installed in kube.TESTED_KUBERNETES_ASYNCIO, (
        f"kubernetes_asyncio {installed} is not in kube.TESTED_KUBERNETES_ASYNCIO "
        f"{kube.TESTED_KUBERNETES_ASYNCIO}: read its client/rest.py against "
        "kube._environment_read_once, then add it there")


def test_the_tested_releases_are_inside_the_declared_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [spec] = [Requirement(r).specifier for r in project["dependencies"]
              if Requirement(r).name == "kubernetes_asyncio"]
    assert [v for v in kube.TESTED_KUBERNETES_ASYNCIO if v not in spec] == []


class Recorder:
    """Stands for the aiohttp session: keeps what the library asks it to send."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def request(self, **args: Any) -> Any:
        self.sent.append(args)
        return type("Response", (), {"status": 200})()


def test_the_replaced_session_is_what_requests_go_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def main() -> None:
        configuration = kube.Configuration(host="https://api.test:6443")
        api = kube.ApiClient(configuration)
        rest = api.rest_client
        library = rest.pool_manager
        assert isinstance(library, aiohttp.ClientSession)
        connector = library.connector
        assert isinstance(connector, aiohttp.TCPConnector)
        assert (rest.proxy, rest.proxy_headers) == (None, None)
        kube._environment_read_once(api, configuration)
        ours = rest.pool_manager
        assert isinstance(ours, aiohttp.ClientSession) and ours is not library
        assert ours.connector is connector and not ours.trust_env
        assert rest.proxy == "http://proxy.test:3128"
        # What the library sends goes through the session and proxy fields kube.py set.
        recorder = Recorder()
        rest.pool_manager = recorder
        try:
            await api.call_api("/api", "GET", query_params=[("limit", "1")],
                               header_params={"Accept": "application/json"},
                               _preload_content=False)
        finally:
            rest.pool_manager = ours
        [sent] = recorder.sent
        assert sent["url"] == "https://api.test:6443/api?limit=1"
        assert sent["proxy"] == "http://proxy.test:3128"
        await api.close()

    asyncio.run(main())
