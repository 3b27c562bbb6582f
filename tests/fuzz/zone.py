"""What both fuzz targets answer from: the zone built from examples/, and seed
inputs (real queries for its names) so the fuzzer starts from valid DNS."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: import this tree's package
    sys.path.insert(0, str(REPO))

UDP_CAP = 1232  # the handler's --edns-udp-size


def instrumented() -> Any:
    """Imports the package's modules with atheris's coverage instrumentation (the
    modules are imported here, inside the block, so the instrumentation sees them)."""
    import atheris

    class Block:
        def __enter__(self) -> None:
            self.inner = atheris.instrument_imports(include=["clusterset_dns"])
            self.inner.__enter__()
            import clusterset_dns.base.names
            import clusterset_dns.serving.handler
            import clusterset_dns.serving.server
            import clusterset_dns.sources.manifests
            import clusterset_dns.zone.cache
            import clusterset_dns.zone.records
            import clusterset_dns.zone.wire  # noqa: F401

        def __exit__(self, *exc: object) -> None:
            self.inner.__exit__(*exc)

    return Block()


def build_handler() -> object:
    from clusterset_dns.base.names import ZoneNames
    from clusterset_dns.serving.handler import Handler
    from clusterset_dns.sources.manifests import ManifestSource
    from clusterset_dns.zone.cache import Cache

    cache = Cache(ZoneNames("clusterset.local"), 5)
    ManifestSource(REPO / "examples", cache.apply, 0).scan()
    assert cache.zone.synced and cache.imports, "examples/ gave no zone"
    return Handler(cache.zone, UDP_CAP)


def seed_queries() -> list[bytes]:
    import dns.flags
    import dns.message

    names = ["web.demo.svc.clusterset.local.", "db.demo.svc.clusterset.local.",
             "_http._tcp.web.demo.svc.clusterset.local.", "clusterset.local.",
             "dns-version.clusterset.local.", "nosuch.demo.svc.clusterset.local.",
             "east.db.demo.svc.clusterset.local.", "example.com."]
    out = []
    for i, name in enumerate(names):
        for rdtype in ("A", "AAAA", "SRV", "TXT", "SOA", "NS", "ANY", "AXFR"):
            for edns in (-1, 0):
                q = dns.message.make_query(name, rdtype, use_edns=edns,
                                           payload=4096 if i % 2 else 512)
                q.id = i
                if i % 3 == 0:
                    q.flags &= ~dns.flags.RD
                out.append(q.to_wire())
    return out


def handler_seeds() -> list[bytes]:
    """Inputs of fuzz_handler: each seed query over UDP and over TCP."""
    return [bytes([tcp]) + q for q in seed_queries() for tcp in (0, 1)]


def tcp_seeds() -> list[bytes]:
    """Inputs of fuzz_tcp: eight framed queries repeated 200 times, sent in chunks of
    various sizes, the peer reading sometimes (the layout is fuzz_tcp.parse's)."""
    import struct

    queries = seed_queries()
    seeds = []
    for i in range(0, len(queries), 8):
        stream = b"".join(struct.pack("!H", len(q)) + q for q in queries[i : i + 8])
        steps = b"".join(bytes([kind, 0, size]) for kind, size in
                         ((1, 7), (1, 200), (0, 30), (1, 255), (1, 255), (0, 3), (1, 1)))
        seeds.append(bytes([7, 199]) + steps + stream)
    return seeds


def seed_corpus(argv: list[str], seeds: list[bytes]) -> None:
    """Fills the first corpus directory of a libFuzzer command line with ``seeds``
    when it is empty (or missing), so a plain command starts from real queries."""
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        return
    corpus = Path(dirs[0])
    if corpus.exists() and not corpus.is_dir():
        return  # a single input to replay
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        for i, seed in enumerate(seeds):
            (corpus / f"seed-{i:03d}").write_bytes(seed)
