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
    out = run("import sys, clusterset_dns.sources.kube as k\n"
              "mods = [m for m in sys.modules if m.startswith('kubernetes_asyncio')]\n"
              "assert 'kubernetes_asyncio.config.kube_config' in mods\n"
              "assert not any(m.startswith('kubernetes_asyncio.client.api.') for m in mods)\n"
              "assert not any(m.startswith('kubernetes_asyncio.client.models.') for m in mods)\n"
              "assert k.kube_config.ApiClient is k.ApiClient\n"
              "print(len(mods))")
    assert int(out) > 0  # how many modules the core is made of is the library's business


def test_a_whole_import_beforehand_is_used() -> None:
    out = run("import kubernetes_asyncio, clusterset_dns.sources.kube as k\n"
              "assert k.ApiClient is kubernetes_asyncio.client.ApiClient\n"
              "assert hasattr(kubernetes_asyncio.client, 'CoreV1Api')\n"
              "print('ok')")
    assert out == "ok"
