"""``clusterset-dns explain NAME [TYPE]``: offline on --manifests (the full account) and
from a running server's ``/explain`` (JSON on the health port: what DNS reveals), over
the objects of test_ede. The answer is the same in both; each case checks both
accounts; the text form of each says the same as its JSON."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns_testkit.peers import free_port

from .csdns_testlib import REPO_ROOT, ServerProcess
from .test_ede import NS, OBJECTS, name, write_objects

pytestmark = [pytest.mark.own_server, pytest.mark.deviation]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clusterset_dns", "explain", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False)


def offline(objects: Path, qname: str, qtype: str, *flags: str) -> dict[str, Any]:
    done = cli("--manifests", str(objects), *flags, "--json", qname, qtype)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def over_http(health: int, qname: str, qtype: str) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{health}/explain?" + urllib.parse.urlencode(
        {"name": qname, "type": qtype})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def timeless(result: dict[str, Any]) -> dict[str, Any]:
    """Without what differs between two loads of the same files: the serial (time
    based) and when the service changed."""
    out = json.loads(json.dumps(result))
    out["zone"].pop("serial")
    out["answer"]["authority"] = [" ".join(line.split()[:6]) for line in
                                  out["answer"]["authority"]]
    if out["service"] is not None and out["account"] == "full":
        assert out["service"].pop("lastChange") is not None
    return out


def endpoints(result: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {" ".join(e["addresses"]): (e["served"], e["reason"])
            for piece in result["service"]["slices"] for e in piece["endpoints"]}


Check = Callable[[dict[str, Any]], None]
# (name, type, what the full account must hold, what the DNS account must hold)
CASES: list[tuple[str, str, Check, Check]] = []


def case(qname: str, qtype: str, dns: Check | None = None) -> Callable[[Check], None]:
    """``dns``: the DNS account's check; by default the full account's, which then
    lists only endpoints that DNS serves."""
    def register(check: Check) -> None:
        CASES.append((qname, qtype, check, dns or check))
    return register


def _down_dns(r: dict[str, Any]) -> None:
    assert r["answer"]["ede"]["text"] == "no ready endpoint: 3 not ready (east 2, west 1)"
    assert r["service"]["slices"] == []  # no address of a not-ready endpoint


def _family_dns(r: dict[str, Any]) -> None:
    assert endpoints(r) == {"10.60.3.1": (False, "other family (IPv4; asked AAAA)")}


def _absent_dns(r: dict[str, Any]) -> None:
    assert "endpointSliceObjects" not in r["service"]["import"]
    assert r["answer"]["ede"]["text"].startswith("no EndpointSlices: ")


def _rejected_dns(r: dict[str, Any]) -> None:
    assert "rejected" not in r["service"] and r["service"]["import"] is None
    assert "type 'Bogus' is neither" in r["answer"]["ede"]["text"]  # what DNS says


def _rejected_slice_dns(r: dict[str, Any]) -> None:
    assert "rejected" not in r["service"]


def _cluster_set_ip_dns(r: dict[str, Any]) -> None:
    assert r["service"]["import"]["ips"] == ["10.60.2.1"]
    assert r["service"]["slices"] == []


@case(name("down"), "A", _down_dns)
def _down(r: dict[str, Any]) -> None:
    assert r["answer"]["rcode"] == "NXDOMAIN"
    assert r["answer"]["ede"] == {"code": 0, "name": "Other Error",
                                  "text": "no ready endpoint: 3 not ready (east 2, west 1)"}
    assert endpoints(r) == {"10.60.0.1": (False, "not ready"), "10.60.0.2": (False, "not ready"),
                            "10.60.1.1": (False, "not ready")}
    assert [s["name"] for s in r["service"]["slices"]] == ["down-east", "down-west"]
    assert r["service"]["import"]["type"] == "Headless"


@case(name("hl"), "AAAA", _family_dns)
def _family(r: dict[str, Any]) -> None:
    assert r["answer"]["rcode"] == "NOERROR" and r["answer"]["answer"] == []
    assert endpoints(r) == {"10.60.3.1": (False, "other family (IPv4; asked AAAA)"),
                            "10.60.3.2": (False, "not ready")}


@case(name("hl"), "A")
def _served(r: dict[str, Any]) -> None:
    assert [line.split()[-1] for line in r["answer"]["answer"]] == ["10.60.3.1"]
    assert r["answer"]["ede"] is None
    assert endpoints(r)["10.60.3.1"] == (True, "")


@case(name("near"), "A")
def _local_first(r: dict[str, Any]) -> None:
    assert endpoints(r) == {
        "10.60.5.1": (True, ""),
        "10.60.6.1": (False, "local-first tier 1: the service's addresses are tier 0's")}
    assert [e["tier"] for s in r["service"]["slices"] for e in s["endpoints"]] == [0, 1]
    assert r["service"]["import"]["trafficDistribution"] == "zone first"


@case(name("w-0", "west", "near"), "A")
def _local_first_names(r: dict[str, Any]) -> None:
    # Every endpoint name resolves whatever the tiers (dns-behaviour §6).
    assert [line.split()[-1] for line in r["answer"]["answer"]] == ["10.60.6.1"]
    assert endpoints(r)["10.60.6.1"] == (True, "")


@case(name("absent"), "A", _absent_dns)
def _absent(r: dict[str, Any]) -> None:
    assert r["service"]["import"]["endpointSliceObjects"] == "Absent"
    assert r["service"]["slices"] == []


@case(name("bogus"), "A", _rejected_dns)
def _rejected(r: dict[str, Any]) -> None:
    assert r["answer"]["ede"]["code"] == 24
    assert r["service"]["import"] is None
    assert r["service"]["rejected"] == [{
        "kind": "ServiceImport", "namespace": NS, "name": "bogus", "served": False,
        "reason": "type 'Bogus' is neither ClusterSetIP nor Headless"}]


@case(name("badslice"), "A", _rejected_slice_dns)
def _rejected_slice(r: dict[str, Any]) -> None:
    assert [x["name"] for x in r["service"]["rejected"]] == ["badslice-east"]


@case(name("v4"), "AAAA", _cluster_set_ip_dns)
def _cluster_set_ip(r: dict[str, Any]) -> None:
    assert r["service"]["import"]["ips"] == ["10.60.2.1"]
    assert r["answer"]["ede"]["text"] == "no IPv6 address: this name has IPv4 addresses only"


@case("dns-version.clusterset.local", "TXT")
def _no_service(r: dict[str, Any]) -> None:
    assert r["answer"]["answer"] == ['dns-version.clusterset.local. 28800 IN TXT "1.0.0"']
    assert r["service"] is None


@pytest.fixture
def objects(tmp_path: Path) -> Path:
    return write_objects(tmp_path / "objects", OBJECTS)


def test_offline_and_http_accounts(
        start_server: Callable[..., ServerProcess], objects: Path) -> None:
    health = free_port()
    srv = start_server(objects, "--cluster-id", "east", "--health-listen", f"127.0.0.1:{health}")
    for qname, qtype, check, check_dns in CASES:
        local = offline(objects, qname, qtype, "--cluster-id", "east")
        status, remote = over_http(health, qname, qtype)
        assert status == 200
        assert (local["account"], remote["account"]) == ("full", "dns")
        check(local)
        check_dns(remote)
        assert timeless(local)["answer"] == timeless(remote)["answer"], qname
        assert remote["zone"]["synced"] is True
        if local["service"] is not None:
            # The DNS account's endpoints: the full account's that DNS serves, as said there.
            served = {ip: why for ip, why in endpoints(local).items()
                      if not why[1].startswith(("not ready", "not used"))}
            assert endpoints(remote) == served, qname
    # The client of the running server prints its JSON's text, which says what it leaves out.
    for qname, qtype, _, _ in CASES:
        there = cli("--server", f"127.0.0.1:{health}", qname, qtype)
        json_there = cli("--server", f"127.0.0.1:{health}", "--json", qname, qtype)
        here = cli("--manifests", str(objects), "--cluster-id", "east", qname, qtype)
        assert there.returncode == here.returncode == json_there.returncode == 0, \
            there.stderr + here.stderr
        assert there.stdout.splitlines()[0] == here.stdout.splitlines()[0]
        remote = json.loads(json_there.stdout)
        assert remote["account"] == "dns"
        assert ("the full account" in there.stdout) == (remote["service"] is not None)
        assert "the full account" not in here.stdout
    assert srv.alive()


def test_text_names_the_reasons(objects: Path) -> None:
    done = cli("--manifests", str(objects), name("down"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{name('down')} A: NXDOMAIN, no records"
    assert lines[1] == "  EDE 0 (Other Error): no ready endpoint: 3 not ready (east 2, west 1)"
    assert "  10.60.0.1 d-0: left out: not ready" in lines
    assert f"EndpointSlice {NS}/down-west (resourceVersion ?, cluster west, IPv4): 1 endpoints" \
        in lines


def test_bad_questions_are_clear_errors(start_server: Callable[..., ServerProcess],
                                        objects: Path) -> None:
    health = free_port()
    start_server(objects, "--health-listen", f"127.0.0.1:{health}")
    status, body = over_http(health, name("down"), "MX")
    assert status == 400 and "type 'MX'" in body["error"]
    status, body = over_http(health, "a..b", "A")
    assert status == 400 and "not a DNS name" in body["error"]
    for empty in ("", ".", ".."):  # the root is no question explain answers
        status, body = over_http(health, empty, "A")
        assert status == 400 and body["error"], empty
    status, body = over_http(health, "x" * 60_000, "A")  # the request line's limit is 64 KiB
    assert status == 400 and len(json.dumps(body)) < 300 and "60000 characters" in body["error"]
    done = cli("--manifests", str(objects), name("down"), "MX")
    assert done.returncode == 2 and "type 'MX'" in done.stderr
    done = cli("--manifests", str(objects), "--json", "*.prod.svc.clusterset.local")
    assert done.returncode == 0 and json.loads(done.stdout)["service"] is None, done.stderr
    done = cli(name("down"))
    assert done.returncode == 2 and "--manifests or --server" in done.stderr
    done = cli("--server", f"127.0.0.1:{free_port()}", name("down"))
    assert done.returncode == 2 and "explain:" in done.stderr


def _raw_get(health: int, target: bytes) -> bytes:
    """The whole reply to ``GET target`` sent as bytes (b"" when the server closes
    without one)."""
    with socket.create_connection(("127.0.0.1", health), timeout=10) as sock:
        try:
            sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            return b""
    return data


def test_odd_bytes_and_oversized_requests(start_server: Callable[..., ServerProcess],
                                          objects: Path) -> None:
    """Names and types carrying CR LF and a header, NUL, bytes that are not UTF-8,
    quotes, backslashes and U+2028, raw or percent-encoded, a wildcard or a space for the
    service or the namespace: each reply is the fixed
    head and one JSON document in ASCII (the bytes escaped, no header added); a request
    over the 64 KiB the request line may take is closed unanswered; then /explain and DNS
    still answer."""
    health = free_port()
    srv = start_server(objects, "--health-listen", f"127.0.0.1:{health}", "--workers", "2")
    good = f"/explain?name={name('down')}".encode()
    targets = [b"/explain?name=a%0d%0aX-Injected:%201%0d%0a.clusterset.local.",
               b"/explain?name=%ff%fe%00.clusterset.local.",
               b"/explain?name=\xff\xfe.clusterset.local.",
               b"/explain?name=%22%5c%27.clusterset.local.&type=A%0d%0aX-Injected:%201",
               b"/explain?name=" + b"%e2%80%a8x" * 20 + b".clusterset.local.",
               # a wildcard, a space where a service or a namespace stands
               b"/explain?name=*.prod.svc.clusterset.local.",
               b"/explain?name=web.a%20b.svc.clusterset.local."]
    for target in targets:
        reply = _raw_get(health, target)
        head, _, body = reply.partition(b"\r\n\r\n")
        status, *headers = head.decode("ascii").split("\r\n")
        assert status.split()[1] in ("200", "400"), reply[:300]
        assert sorted(h.split(":")[0] for h in headers) == [
            "Connection", "Content-Length", "Content-Type"], head
        assert body.isascii()
        json.loads(body)
    assert _raw_get(health, b"/explain?name=" + b"a." * 40_000) == b""
    assert _raw_get(health, good).startswith(b"HTTP/1.1 200 ")
    assert srv.answers(name("down"))[0] in ("NOERROR", "NXDOMAIN")
