"""kube.KubeClient.connect's choice of configuration (--kubeconfig, else the in-cluster
service account, else $KUBECONFIG's first file, else ~/.kube/config), its one-line
errors, and the session it leaves the library (the proxy read once from the
environment, ~/.netrc never)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import certifi
import pytest
import yaml

from clusterset_dns.sources import kube
from clusterset_dns.sources.kube import KubeClient, KubeConfigError


def kubeconfig(server: str = "http://127.0.0.1:1", token: str = "t") -> str:
    return f"""\
apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {{server: "{server}"}}
- name: two
  cluster: {{server: "http://127.0.0.2:2"}}
users:
- name: me
  user: {{token: "{token}"}}
contexts:
- name: one
  context: {{cluster: one, user: me}}
- name: two
  context: {{cluster: two, user: me}}
current-context: one
"""


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No service account, no $KUBECONFIG, no proxy, a home of the test's own."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG",
                 "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                 "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def connected(kubeconfig: Path | None, context: str | None = None) -> tuple[str, str]:
    """The host and the token of the client connect makes."""
    async def main() -> tuple[str, str]:
        client = await KubeClient.connect(kubeconfig, context)
        try:
            configuration = client._api.configuration
            return configuration.host, configuration.api_key["BearerToken"]
        finally:
            await client.close()

    return asyncio.run(main())


def refused(kubeconfig: Path | None, context: str | None = None) -> str:
    with pytest.raises(KubeConfigError) as raised:
        connected(kubeconfig, context)
    return str(raised.value)


def test_the_named_kubeconfig_and_its_contexts(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig(token="abc"))
    env.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.9")  # a named file wins over the account
    assert connected(path) == ("http://127.0.0.1:1", "Bearer abc")
    assert connected(path, "two") == ("http://127.0.0.2:2", "Bearer abc")
    assert refused(path, "three").startswith(f"kubeconfig {path}: ")


def test_a_kubeconfig_is_read_as_it_is_and_left_unchanged(env: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig())
    calls: list[dict[str, Any]] = []
    from kubernetes_asyncio.config import kube_config
    real = kube_config.load_kube_config

    async def load(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return await real(**kwargs)

    env.setattr(kube_config, "load_kube_config", load)
    connected(path, "two")
    [call] = calls
    assert (call["config_file"], call["context"], call["persist_config"]) == (
        str(path), "two", False)


def test_the_service_account_in_a_cluster(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token")  # as the kubelet writes it: no newline
    env.setattr(kube.incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    env.setattr(kube.incluster_config, "SERVICE_CERT_FILENAME", certifi.where())
    env.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    env.setenv("KUBERNETES_SERVICE_PORT", "6443")
    env.setenv("KUBECONFIG", str(tmp_path / "none"))  # not read in a cluster
    assert connected(None) == ("https://127.0.0.1:6443", "Bearer a-token")
    token.unlink()
    message = refused(None)
    assert message.startswith("in-cluster service account: "), message
    assert message != "in-cluster service account: "


def test_an_empty_service_host_is_no_cluster(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("KUBERNETES_SERVICE_HOST", "")
    config = tmp_path / "home" / ".kube" / "config"
    assert refused(None) == f"kubeconfig {config}: no such file"


def test_kubeconfig_from_the_environment_then_the_home(env: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    second.write_text(kubeconfig(server="http://127.0.0.3:3"))
    env.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    assert refused(None) == f"kubeconfig {first}: no such file"  # only the first is read
    first.write_text(kubeconfig(server="http://127.0.0.4:4"))
    assert connected(None)[0] == "http://127.0.0.4:4"
    env.setenv("KUBECONFIG", "")
    home = tmp_path / "home" / ".kube" / "config"
    assert refused(None) == f"kubeconfig {home}: no such file"
    home.parent.mkdir(parents=True)
    home.write_text(kubeconfig(server="http://127.0.0.5:5"))
    assert connected(None)[0] == "http://127.0.0.5:5"
    assert refused(tmp_path) == f"kubeconfig {tmp_path}: no such file"  # a directory


def test_a_kubeconfig_that_does_not_parse_is_one_line(env: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters:\n  - name: [unclosed\n    x: y\n")
    message = refused(path)
    with pytest.raises(yaml.YAMLError) as parsed, path.open() as file:
        yaml.safe_load(file)  # what the loader meets, over lines
    assert "\n" in str(parsed.value)
    assert message == f"kubeconfig {path}: {' '.join(str(parsed.value).split())}"


def test_the_proxy_is_read_once_with_its_credentials(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://user:pw@proxy.test:3128")

    async def main() -> None:
        configuration = kube.Configuration(host="https://api.test:6443")
        api = kube.ApiClient(configuration)
        rest = api.rest_client
        rest.proxy_headers = {"X-Kept": "1"}
        library = rest.pool_manager
        connector = library.connector
        kube._environment_read_once(api, configuration)
        assert rest.proxy == "http://proxy.test:3128"
        assert rest.proxy_headers == {"X-Kept": "1",
                                      "Proxy-Authorization": "Basic dXNlcjpwdw=="}
        ours = rest.pool_manager
        assert ours is not library and library.connector is None  # detached: not closed
        assert ours.connector is connector and not connector.closed
        assert ours.trust_env is False and ours._read_bufsize == 2**21
        await api.close()
        assert connector.closed

    asyncio.run(main())


def test_without_a_proxy_none_is_set(env: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        configuration = kube.Configuration(host="https://api.test:6443")
        api = kube.ApiClient(configuration)
        kube._environment_read_once(api, configuration)
        assert (api.rest_client.proxy, api.rest_client.proxy_headers) == (None, None)
        await api.close()

    asyncio.run(main())


def test_a_configured_proxy_is_kept(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://user:pw@proxy.test:3128")

    async def main() -> None:
        configuration = kube.Configuration(host="https://api.test:6443")
        configuration.proxy = "http://mine.test:8080"
        api = kube.ApiClient(configuration)
        kube._environment_read_once(api, configuration)
        assert (api.rest_client.proxy, api.rest_client.proxy_headers) == (
            "http://mine.test:8080", None)
        await api.close()

    asyncio.run(main())


def test_requests_go_through_the_replaced_session(env: pytest.MonkeyPatch) -> None:
    """What a request sends (one made by the library's call_api) leaves through the
    session _environment_read_once put in place."""
    async def main() -> None:
        configuration = kube.Configuration(host="http://127.0.0.1:1")
        api = kube.ApiClient(configuration)
        kube._environment_read_once(api, configuration)
        sent: list[dict[str, Any]] = []

        async def request(**args: Any) -> Any:
            sent.append(args)
            raise aiohttp.ClientConnectionError("not sent")

        api.rest_client.pool_manager.request = request
        with pytest.raises(kube.KubeError, match=r"^ClientConnectionError: not sent$"):
            await KubeClient(api).get("/api", {"limit": 1})
        assert [s["url"] for s in sent] == ["http://127.0.0.1:1/api?limit=1"]
        await api.close()

    asyncio.run(main())
