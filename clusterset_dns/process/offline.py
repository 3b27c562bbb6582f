"""``clusterset-dns explain``: offline on --manifests (the cache ``dump`` builds), or
from a running server's ``/explain`` endpoint; printed as text or JSON."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TextIO

from clusterset_dns.base import names
from clusterset_dns.base.config import Config
from clusterset_dns.process import explain
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone.cache import Cache, Op

TIMEOUT = 10.0  # seconds for the /explain request


def _offline(config: Config, name: str, type_text: str) -> dict[str, Any]:
    assert config.manifests is not None
    # Every flag the server answers by, as dump's cache (--node-name and
    # --serve-terminating were left out: the account then differed from the answers)
    cache = Cache(names.ZoneNames(config.zone), config.ttl, config.ns_addresses,
                  cluster_id=config.cluster_id, topology_zone=config.topology_zone,
                  node_name=config.node_name, serve_terminating=config.serve_terminating)

    def apply(ops: list[Op]) -> None:
        cache.apply(ops)

    source = ManifestSource(config.manifests, apply, 0,
                            cluster_property=config.cluster_id is None)
    source.scan()
    return explain.explain(cache, name, type_text)


def _remote(server: str, name: str, type_text: str) -> dict[str, Any]:
    base = server if "://" in server else f"http://{server}"
    url = f"{base.rstrip('/')}/explain?" + urllib.parse.urlencode({"name": name,
                                                                    "type": type_text})
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            found: dict[str, Any] = json.loads(response.read())
            return found
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace").strip()
        raise explain.ExplainError(f"{url}: HTTP {exc.code}: {body}") from None
    except (OSError, ValueError) as exc:
        raise explain.ExplainError(f"{url}: {exc}") from None


def explain_command(config: Config, name: str, type_text: str, server: str | None,
                    as_json: bool, out: TextIO, err: TextIO) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(message)s")
    if (server is None) == (config.manifests is None):
        err.write("explain needs --manifests or --server (one of them)\n")
        return 2
    try:
        result = (_remote(server, name, type_text) if server is not None
                  else _offline(config, name, type_text))
    except explain.ExplainError as exc:
        err.write(f"explain: {exc}\n")
        return 2
    out.write(json.dumps(result, indent=1) + "\n" if as_json else explain.text(result))
    return 0
