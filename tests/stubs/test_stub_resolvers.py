"""Real stub resolvers against the server, directly and through a real CoreDNS ``forward``;
and, for comparison, against CoreDNS serving the same objects itself (its ``kubernetes``
plugin's ``multicluster`` zone, from a real kube-apiserver).

Each client runs in its own mount namespace (``unshare -m``) with a resolv.conf that
names the server, bind-mounted over /etc/resolv.conf: glibc (``getent ahosts``, and
``res_query`` for SRV), musl 1.2.3 (a static program, tests/stubs/resolve.c), Go's own
resolver (tests/stubs/goresolve) and busybox ``nslookup``. Stub resolvers ask port 53,
so our server and CoreDNS listen on 53 of their own 127.53.x.y addresses (root).

A client that retries a truncated answer over TCP (glibc, Go) must get the whole set;
one that cannot (musl, busybox) a non-empty subset: from us, as many records as fit its
512 bytes, and for a dual-stack service the same endpoints in both families.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.exception
import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.objects import HTTP, V1ALPHA1, endpoint, endpoint_slice, service_import
from clusterset_dns_testkit.peers import (
    CoreDNS,
    KubeAPI,
    PeerError,
    cache_dir,
    kubernetes_corefile,
)

pytestmark = [
    pytest.mark.coredns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mount namespaces (unshare -m) "
                       "and port 53, which stub resolvers always ask"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ZONE = "svc.clusterset.local"
SMALL, BIG, DUAL = (f"{name}.stub.{ZONE}" for name in ("small", "big", "dual"))
BIG_SRV, SMALL_SRV = f"_http._tcp.{BIG}", f"_http._tcp.{SMALL}"
SMALL_IPS = {"10.77.0.1", "fd00:77::1"}
BIG_IPS = {f"10.78.{i // 250}.{i % 250 + 1}" for i in range(200)}
DUAL_COUNT = 100
DUAL_V4 = {f"10.79.0.{i + 1}": f"pod-{i}" for i in range(DUAL_COUNT)}
DUAL_V6 = {f"fd00:79::{(i * 37) % DUAL_COUNT + 1:x}": f"pod-{i}" for i in range(DUAL_COUNT)}
BIG_TARGETS = {f"{ip.replace('.', '-')}.east.{BIG}." for ip in BIG_IPS}
# What fits 512 bytes (no EDNS: none of these clients sends it): header 12, question
# (name + type + class), 16 bytes an A record, 28 an AAAA record.
QUESTION_BIG = len(BIG) + 2 + 4
FIT_A_BIG = (512 - 12 - QUESTION_BIG) // 16
FIT_A_DUAL = (512 - 12 - QUESTION_BIG - 1) // 16
FIT_AAAA_DUAL = (512 - 12 - QUESTION_BIG - 1) // 28

# What each client got, for the summary printed at the end (docs/clients.md's table).
SEEN: dict[tuple[str, str, str], int] = {}


def _objects() -> list[dict[str, Any]]:
    def imp(name: str, type_: str, ips: list[str] | None = None) -> dict[str, Any]:
        # v1alpha1: what the mcs-api v0.5.0 CRD serves, for CoreDNS's own zone
        return service_import(name, "stub", type_, ips=ips, ports=[HTTP], api_version=V1ALPHA1)

    def piece(name: str, service: str, family: str, endpoints: list[Any]) -> dict[str, Any]:
        return endpoint_slice(name, service, "stub", "east", family, endpoints, [HTTP])

    return [
        imp("small", "ClusterSetIP", sorted(SMALL_IPS)),
        imp("big", "Headless"),
        piece("big-a", "big", "IPv4", [endpoint(ip) for ip in sorted(BIG_IPS)]),
        imp("dual", "Headless"),
        # a dual-stack endpoint: one per family's slice, sharing its hostname
        piece("dual-4", "dual", "IPv4", [endpoint(ip, hostname=host)
                                         for ip, host in DUAL_V4.items()]),
        piece("dual-6", "dual", "IPv6", [endpoint(ip, hostname=host)
                                         for ip, host in DUAL_V6.items()]),
    ]


# -- the clients ------------------------------------------------------------------------------

def _content_hash(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]


@pytest.fixture(scope="module")
def clients() -> dict[str, dict[str, list[str]]]:
    """client -> {"host": argv before the name, "srv": argv before the name}."""
    built = subprocess.run([str(REPO / "scripts" / "build-stubs")], capture_output=True,
                           text=True, timeout=600, check=False)
    assert built.returncode == 0, f"scripts/build-stubs failed:\n{built.stderr}"
    stubs = cache_dir() / "stubs"
    musl = stubs / f"resolve-{_content_hash(HERE / 'resolve.c')}"
    go = stubs / ("goresolve-" + _content_hash(HERE / "goresolve" / "go.mod",
                                               HERE / "goresolve" / "main.go"))
    busybox = shutil.which("busybox")
    assert busybox is not None, "busybox is missing (Debian busybox-static; scripts/setup)"
    getent = shutil.which("getent")
    assert getent is not None
    for binary in (musl, go):
        assert os.access(binary, os.X_OK), f"{binary} was not built"
    return {
        "glibc": {"host": [getent, "ahosts"], "srv": [sys.executable, str(HERE / "glibc_srv.py")]},
        "musl": {"host": [str(musl), "host"], "srv": [str(musl), "srv"]},
        "go": {"host": [str(go), "host"], "srv": [str(go), "srv"]},
        "busybox": {"host": [busybox, "nslookup"], "srv": [busybox, "nslookup", "-type=srv"]},
    }


RETRIES_OVER_TCP = {"glibc": True, "musl": False, "go": True, "busybox": False}
CLIENTS = list(RETRIES_OVER_TCP)


def _parse(client: str, kind: str, out: str) -> list[str]:
    lines = out.splitlines()
    if client == "busybox":  # after the server's own "Address:" lines
        if kind == "srv":
            return [line.split("service = ", 1)[1] + "." for line in lines if "service = " in line]
        names = [i for i, line in enumerate(lines) if line.startswith("Name:")]
        return [line.split()[-1] for line in lines[names[0]:] if line.startswith("Address:")] \
            if names else []
    if client == "glibc" and kind == "host":  # getent: "ADDRESS STREAM|DGRAM|RAW [NAME]"
        return list(dict.fromkeys(line.split()[0] for line in lines if line.strip()))
    return [line.strip() for line in lines if line.strip()]


def _free_address(port: int = 53) -> str:
    """A 127.53.x.y address whose port 53 nobody holds (other tests run beside these)."""
    for _ in range(50):
        address = f"127.53.{random.randint(1, 254)}.{random.randint(1, 253)}"
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as probe:
                    probe.bind((address, port))
        except OSError:
            continue
        return address
    raise AssertionError("no free 127.53.x.y:53")


@pytest.fixture(scope="module")
def resolv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """target -> a resolv.conf naming it, each server running: "ours", "coredns" (a
    CoreDNS ``forward`` to ours) and "coredns-mc" (CoreDNS serving the objects itself)."""
    root = tmp_path_factory.mktemp("stubs")
    (root / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": _objects()}))
    ours_at, two_at = _free_address(), _free_address()
    ours = ServerProcess("--manifests", str(root), host=ours_at, port=53)
    ours.start()
    # --workers 2: SO_REUSEPORT spreads clients over two processes, each with its turns
    two = ServerProcess("--manifests", str(root), "--workers", "2", host=two_at, port=53)
    two.start()
    core: CoreDNS | None = None
    own: CoreDNS | None = None
    api = KubeAPI()
    try:
        ours.wait_ready(timeout=60)
        two.wait_ready(timeout=60)
        core_at = _free_address()
        corefile = (f"clusterset.local:53 {{\n    bind {core_at}\n"
                    f"    forward . {ours_at}:53\n}}\n")
        try:
            core = CoreDNS(corefile, port=53, host=core_at)
        except PeerError as exc:
            pytest.fail(f"CoreDNS did not start: {exc}")
        api.__enter__()
        api.install_crds(["mcs-api-v0.5.0"])
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stub"}})
        for obj in _objects():
            api.apply(obj)
        own_at = _free_address()
        try:
            own = CoreDNS(kubernetes_corefile(api.kubeconfig, extra=f"bind {own_at}"), port=53,
                          host=own_at)
        except PeerError as exc:
            pytest.fail(f"CoreDNS (kubernetes) did not start: {exc}")
        _wait_synced(own)
        files = {}
        for target, address in (("ours", ours_at), ("ours-2w", two_at), ("coredns", core_at),
                                ("coredns-mc", own_at)):
            path = root / f"resolv-{target}.conf"
            path.write_text(f"nameserver {address}\noptions timeout:5 attempts:2\n")
            files[target] = path
        yield files
    finally:
        for peer in (own, core):
            if peer is not None:
                peer.close()
        api.__exit__(None, None, None)
        ours.stop()
        two.stop()
        if SEEN:
            print("\nwhat each client library got (records):")
            for (client, target, case), count in sorted(SEEN.items()):
                print(f"  {client:8} {target:8} {case:12} {count}")


def _wait_synced(core: CoreDNS, timeout: float = 60.0) -> None:
    """Until CoreDNS's own zone holds every object (its informers catch up)."""
    deadline = time.monotonic() + timeout
    want = [(BIG, "A", len(BIG_IPS)), (DUAL, "AAAA", len(DUAL_V6)), (SMALL, "A", 1)]
    while True:
        try:
            if all(sum(len(rrset) for rrset in core.query(name, rdtype, tcp=True).answer) == n
                   for name, rdtype, n in want):
                return
        except (OSError, dns.exception.DNSException):
            pass
        assert time.monotonic() < deadline, "CoreDNS never served the objects"
        time.sleep(0.3)


def lookup(clients: dict[str, dict[str, list[str]]], resolv: dict[str, Path], client: str,
           target: str, kind: str, name: str) -> list[str]:
    """What ``client`` resolves ``name`` to, in a mount namespace of its own whose
    /etc/resolv.conf names ``target``."""
    argv = [*clients[client][kind], name]
    script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, str(resolv[target]), *argv],
                          capture_output=True, text=True, timeout=60, check=False)
    got = _parse(client, kind, done.stdout)
    assert done.returncode == 0 or (client == "busybox" and got), (
        f"{client} via {target}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return got


TARGETS = ["ours", "ours-2w", "coredns", "coredns-mc"]
OURS = ("ours", "ours-2w")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("client", CLIENTS)
def test_small_service(clients: dict[str, dict[str, list[str]]], resolv: dict[str, Path],
                       client: str, target: str) -> None:
    assert set(lookup(clients, resolv, client, target, "host", SMALL)) == SMALL_IPS
    srv = lookup(clients, resolv, client, target, "srv", SMALL_SRV)
    assert [line.split()[2:] for line in srv] == [["80", f"{SMALL}."]]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("client", CLIENTS)
def test_200_ipv4_endpoints(clients: dict[str, dict[str, list[str]]], resolv: dict[str, Path],
                            client: str, target: str) -> None:
    got = lookup(clients, resolv, client, target, "host", BIG)
    SEEN[(client, target, "200 A")] = len(got)
    assert len(got) == len(set(got)) and set(got) <= BIG_IPS and got
    if RETRIES_OVER_TCP[client]:
        assert set(got) == BIG_IPS
    elif target in OURS:
        assert len(got) == FIT_A_BIG  # every record that fits 512 bytes


def _hosts(addresses: list[str]) -> tuple[set[str], set[str]]:
    """The endpoints (hostnames) of the IPv4 and of the IPv6 addresses."""
    v4 = {DUAL_V4[a] for a in addresses if ":" not in a}
    v6 = {DUAL_V6[a] for a in addresses if ":" in a}
    return v4, v6


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("client", CLIENTS)
def test_100_dual_stack_endpoints(clients: dict[str, dict[str, list[str]]],
                                  resolv: dict[str, Path], client: str, target: str) -> None:
    got = lookup(clients, resolv, client, target, "host", DUAL)
    SEEN[(client, target, "100 dual")] = len(got)
    assert got and set(got) <= set(DUAL_V4) | set(DUAL_V6)
    if RETRIES_OVER_TCP[client]:
        assert set(got) == set(DUAL_V4) | set(DUAL_V6)
        return
    v4, v6 = _hosts(got)
    if target in OURS:
        # both families, as many as fit, and the same endpoints in both
        assert (len(v4), len(v6)) == (FIT_A_DUAL, FIT_AAAA_DUAL), got
        assert v6 < v4, f"IPv6 endpoints {sorted(v6 - v4)} are not among the IPv4 ones"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("client", CLIENTS)
def test_srv_of_200_endpoints(clients: dict[str, dict[str, list[str]]],
                              resolv: dict[str, Path], client: str, target: str) -> None:
    got = lookup(clients, resolv, client, target, "srv", BIG_SRV)
    SEEN[(client, target, "200 SRV")] = len(got)
    targets = [line.split()[3] for line in got]
    assert targets and set(targets) <= BIG_TARGETS and len(targets) == len(set(targets))
    assert {line.split()[2] for line in got} == {"80"}  # CoreDNS's weight is 100 // 200 = 0
    if RETRIES_OVER_TCP[client]:
        assert set(targets) == BIG_TARGETS


def test_musl_clients_are_spread_over_the_endpoints(
        clients: dict[str, dict[str, list[str]]], resolv: dict[str, Path]) -> None:
    """Truncated answers move to another order every second (by the clock, the same in
    every process): lookups over a few seconds get different subsets."""
    subsets = set()
    for _ in range(4):  # 4 lookups over at least 2.4 s: two seconds turn over at least
        subsets.add(frozenset(lookup(clients, resolv, "musl", "ours", "host", BIG)))
        time.sleep(0.8)
    assert len(subsets) > 1
    assert all(re.fullmatch(r"10\.78\.\d+\.\d+", ip) for subset in subsets for ip in subset)
