"""The zone every peer of this suite is checked against, and the comparison: the
bundled examples (ClusterSetIP, Headless with per-endpoint names, local-first) plus
one Headless service of 120 ready endpoints, whose A and SRV RRsets are larger than
BIND's default ``max-records-per-type`` (100) and whose answers do not fit 1232 bytes."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.query
import dns.rdatatype
import dns.tsigkeyring
import dns.zone

from clusterset_dns_testkit.daemon import ZONE, Daemon, ask, rrsets
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.manifests import headless, write_atomically

REPO = Path(__file__).resolve().parents[2]
BIG = 120  # endpoints of the large Headless service
BIG_NAME = f"many.demo.svc.{ZONE}."
KEY_NAME = "xfr-key"


def make_objects(into: Path) -> Path:
    """The examples and the 120-endpoint service, in ``into``/objects."""
    objects = into / "objects"
    shutil.copytree(REPO / "examples", objects, ignore=shutil.ignore_patterns("*.md"))
    big = [f"10.50.{i // 200}.{i % 200 + 1}" for i in range(BIG)]
    write_atomically(objects / "many.yaml", headless("many", big))
    write_atomically(objects / "change.yaml", headless("change", ["10.60.0.1"]))
    return objects


def new_key(into: Path) -> tuple[Path, tuple[str, str]]:
    """A new HMAC-SHA256 key: our server's key file, and (name, secret) for the peer."""
    secret = base64.b64encode(os.urandom(32)).decode()
    path = into / "xfr.key"
    path.write_text(f"hmac-sha256:{KEY_NAME}:{secret}\n")
    return path, (KEY_NAME, secret)


@contextmanager
def server(objects: Path, *extra: str) -> Iterator[ServerProcess]:
    with ServerProcess("--manifests", str(objects), "--poll-interval", "0.1", *extra) as srv:
        srv.wait_ready()
        yield srv


def zone_of(srv: ServerProcess, key: tuple[str, str] | None = None) -> dns.zone.Zone:
    """Our zone by AXFR (signed with ``key`` when given)."""
    keyring = None if key is None else dns.tsigkeyring.from_text(
        {key[0]: ("hmac-sha256", key[1])})
    messages = dns.query.xfr(srv.host, ZONE, port=srv.port, timeout=10, lifetime=30,
                             keyring=keyring, keyname=None if key is None else key[0],
                             relativize=False)
    return dns.zone.from_xfr(messages, relativize=False)


def questions(zone: dns.zone.Zone) -> list[tuple[str, str]]:
    """Every (owner, type) of the zone."""
    return sorted((name.to_text(), dns.rdatatype.to_text(rdataset.rdtype))
                  for name, node in zone.nodes.items() for rdataset in node.rdatasets)


def largest_rrset(zone: dns.zone.Zone) -> int:
    return max(len(rdataset) for node in zone.nodes.values() for rdataset in node.rdatasets)


def most_types(zone: dns.zone.Zone) -> int:
    return max(len(node.rdatasets) for node in zone.nodes.values())


def differences(srv: ServerProcess, peer: Daemon, names: list[tuple[str, str]],
                recurse: bool = False) -> list[str]:
    """Every question whose answer (rcode and answer RRsets, over TCP) differs between
    us and ``peer``; ``recurse``: ask the peer as a stub resolver would (RD)."""
    found = []
    for name, rdtype in names:
        ours = rrsets(ask(srv.port, name, rdtype))
        theirs = rrsets(peer.ask(name, rdtype, recurse=recurse))
        if ours != theirs:
            found.append(f"{name} {rdtype}: ours {ours}, {peer.program_name} {theirs}")
    return found

