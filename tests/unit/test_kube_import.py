"""kube.py's light import of kubernetes_asyncio: only the client core and the config
loaders load; a library imported whole beforehand is used as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_only_the_client_core_and_the_loaders_load() -> None:
    """The in-cluster loader at import; the kubeconfig loader (and PyYAML) only when a
    kubeconfig is read, and then it uses the same ApiClient."""
    out = run("import sys, clusterset_dns.sources.kube as k\n"
              "mods = [m for m in sys.modules if m.startswith('kubernetes_asyncio')]\n"
              "assert 'kubernetes_asyncio.config.incluster_config' in mods\n"
              "assert 'kubernetes_asyncio.config.kube_config' not in mods\n"
              "assert 'yaml' not in sys.modules\n"
              "assert not any(m.startswith('kubernetes_asyncio.client.api.') for m in mods)\n"
              "assert not any(m.startswith('kubernetes_asyncio.client.models.') for m in mods)\n"
              "from kubernetes_asyncio.config import kube_config\n"
              "assert kube_config.ApiClient is k.ApiClient\n"
              "print(len(mods))")
    assert int(out) > 0  # how many modules the core is made of is the library's business


# aiohttp's default verified context (for requests without a context of their own).
DEFAULT_CONTEXT = ("import ssl, aiohttp.connector as c\n"
                   "ctx = c._SSL_CONTEXT_VERIFIED\n"
                   "plain = ssl.create_default_context()\n")


def test_aiohttp_loads_the_system_certificates_on_first_use() -> None:
    """Importing kube leaves aiohttp's default context without the system's CA
    certificates (their loading was most of the import); its first connection loads
    them, and it is then the default context in every respect that verification uses."""
    out = run("import clusterset_dns.sources.kube as k\n" + DEFAULT_CONTEXT +
              "assert type(ctx) is k.DeferredTrust\n"
              "assert ctx.cert_store_stats()['x509_ca'] == 0\n"
              "same = ('check_hostname', 'verify_mode', 'verify_flags', 'options',\n"
              "        'minimum_version', 'maximum_version', 'protocol')\n"
              "assert [getattr(ctx, a) for a in same] == [getattr(plain, a) for a in same]\n"
              "ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname='example.org')\n"
              "stats = ctx.cert_store_stats()\n"
              "assert stats == plain.cert_store_stats() and stats['x509_ca'] > 0, stats\n"
              "print('ok')")
    assert out == "ok"


def test_an_earlier_aiohttp_import_keeps_its_contexts() -> None:
    out = run("import aiohttp, clusterset_dns.sources.kube as k\n" + DEFAULT_CONTEXT +
              "assert type(ctx) is ssl.SSLContext\n"
              "assert ctx.cert_store_stats() == plain.cert_store_stats()\n"
              "print('ok')")
    assert out == "ok"


def test_a_failing_aiohttp_import_is_reported_as_it_was() -> None:
    """The deferral is undone whatever the import does: an aiohttp that cannot be
    imported fails kube's import with its own error, and ssl is left as it was."""
    out = run("import ssl, sys\n"
              "original = ssl.create_default_context\n"
              "class Missing:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'aiohttp':\n"
              "            raise ImportError('no aiohttp here')\n"
              "sys.meta_path.insert(0, Missing())\n"
              "try:\n"
              "    import clusterset_dns.sources.kube\n"
              "except ImportError as exc:\n"
              "    print(exc)\n"
              "assert ssl.create_default_context is original\n")
    assert out == "no aiohttp here"


def test_a_whole_import_beforehand_is_used() -> None:
    out = run("import kubernetes_asyncio, clusterset_dns.sources.kube as k\n"
              "assert k.ApiClient is kubernetes_asyncio.client.ApiClient\n"
              "assert hasattr(kubernetes_asyncio.client, 'CoreV1Api')\n"
              "print('ok')")
    assert out == "ok"


def test_a_server_watching_the_api_in_a_cluster_imports_no_yaml() -> None:
    """What `serve` imports to watch the API with the service account: neither the
    manifest source nor the kubeconfig loader, so not PyYAML; `serve --manifests` gets
    the manifest source when its source is made."""
    out = run("import sys\n"
              "from clusterset_dns.base.config import Config\n"
              "from clusterset_dns.base.metrics import Metrics\n"
              "from clusterset_dns.process import app\n"
              "from clusterset_dns.sources import locality, watch\n"
              "unwanted = ('yaml', 'clusterset_dns.sources.manifests',\n"
              "            'kubernetes_asyncio.config.kube_config')\n"
              "assert not [m for m in unwanted if m in sys.modules]\n"
              "from pathlib import Path\n"
              "app.make_source(Config(manifests=Path('examples')), lambda ops: None, Metrics())\n"
              "assert 'clusterset_dns.sources.manifests' in sys.modules\n"
              "print('ok')")
    assert out == "ok"


def test_the_service_account_is_read_without_the_kubeconfig_loader(tmp_path: Path) -> None:
    """In a cluster (KUBERNETES_SERVICE_HOST set, no --kubeconfig) the client is made
    from the service account's files by the in-cluster loader alone, from the light
    config package: neither the kubeconfig loader nor PyYAML is imported."""
    token = tmp_path / "token"
    token.write_text("a-token\n")
    out = run("import asyncio, os, sys, certifi\n"
              "os.environ['KUBERNETES_SERVICE_HOST'] = '127.0.0.1'\n"
              "os.environ['KUBERNETES_SERVICE_PORT'] = '6443'\n"
              "import clusterset_dns.sources.kube as k\n"
              f"k.incluster_config.SERVICE_TOKEN_FILENAME = {str(token)!r}\n"
              "k.incluster_config.SERVICE_CERT_FILENAME = certifi.where()\n"
              "async def main():\n"
              "    client = await k.KubeClient.connect(None, None)\n"
              "    config = client._api.configuration\n"
              "    print(config.host, config.api_key['BearerToken'])\n"
              "    await client.close()\n"
              "asyncio.run(main())\n"
              "assert 'kubernetes_asyncio.config.kube_config' not in sys.modules\n"
              "assert 'yaml' not in sys.modules\n")
    assert out == "https://127.0.0.1:6443 Bearer a-token"
