"""``clusterset-dns explain``: offline on --manifests, the answer is the one ``dump`` prints
for the same flags (each flag the server answers by: zone, TTL, NS addresses, cluster id,
topology zone, node name, --serve-terminating); with --server, the /explain request, its
URL and its errors; exactly one of the two; the JSON and text forms; what is logged.
Written for the survivors of scripts/mutate on process/offline.py (and the offline
account ignored --node-name and --serve-terminating: dump did not)."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import dump, explain, offline
from clusterset_dns_testkit.objects import (
    HTTP,
    cluster_property,
    endpoint,
    endpoint_slice,
    service_import,
)

from .helpers import build_cache

SVC = "near.prod.svc.{zone}."
OBJECTS = [
    cluster_property("west"),
    # local-first by node, then zone, then cluster
    service_import("near", type_="Headless", ports=[HTTP],
                   traffic_distribution="PreferSameNode"),
    endpoint_slice("near-east", "near", cluster="east", ports=[HTTP], endpoints=[
        endpoint("10.1.0.1", zone="zone-a", node="node-1", ready=True),
        endpoint("10.1.0.2", zone="zone-b", node="node-2", ready=True)]),
    endpoint_slice("near-west", "near", cluster="west", ports=[HTTP],
                   endpoints=[endpoint("10.2.0.1", zone="zone-a", node="node-9", ready=True)]),
    # only a terminating endpoint: answered with --serve-terminating alone
    service_import("gone", type_="Headless"),
    endpoint_slice("gone-east", "gone", cluster="east",
                   endpoints=[endpoint("10.3.0.1", ready=False, serving=True)]),
]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    (tmp_path / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": OBJECTS}))
    return tmp_path


def answer(config: Config, name: str, qtype: str) -> tuple[str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    assert offline.explain_command(config, name, qtype, None, True, out, err) == 0
    assert err.getvalue() == ""
    result = json.loads(out.getvalue())
    assert result["account"] == "full"
    return result["answer"]["rcode"], sorted(result["answer"]["answer"])


def dumped(config: Config, name: str, qtype: str) -> list[str]:
    out = io.StringIO()
    assert dump.dump(config, out) == 0
    return sorted(line for line in out.getvalue().splitlines()
                  if line.split()[0] == name and line.split()[3] == qtype)


def near(zone: str, *addresses: str, ttl: int = 5) -> list[str]:
    return [f"{SVC.format(zone=zone)} {ttl} IN A {a}" for a in addresses]


# (what, flags, name, type, rcode, the records answered)
CASES: list[tuple[str, dict[str, Any], str, str, str, list[str]]] = [
    ("the ClusterProperty's cluster, west", {}, SVC.format(zone="clusterset.local"), "A",
     "NOERROR", near("clusterset.local", "10.2.0.1")),
    ("--cluster-id wins over it", {"cluster_id": "east"}, SVC.format(zone="clusterset.local"),
     "A", "NOERROR", near("clusterset.local", "10.1.0.1", "10.1.0.2")),
    ("--topology-zone", {"cluster_id": "east", "topology_zone": "zone-b"},
     SVC.format(zone="clusterset.local"), "A", "NOERROR", near("clusterset.local", "10.1.0.2")),
    ("--node-name", {"cluster_id": "east", "node_name": "node-1"},
     SVC.format(zone="clusterset.local"), "A", "NOERROR", near("clusterset.local", "10.1.0.1")),
    ("--ttl", {"ttl": 30}, SVC.format(zone="clusterset.local"), "A", "NOERROR",
     near("clusterset.local", "10.2.0.1", ttl=30)),
    ("--zone", {"zone": "mcs.example"}, SVC.format(zone="mcs.example"), "A", "NOERROR",
     near("mcs.example", "10.2.0.1")),
    ("--ns-address", {"ns_addresses": (ip_address("192.0.2.53"),)},
     "ns.dns.clusterset.local.", "A", "NOERROR", ["ns.dns.clusterset.local. 5 IN A 192.0.2.53"]),
    ("a terminating endpoint, without --serve-terminating", {},
     "gone.prod.svc.clusterset.local.", "A", "NXDOMAIN", []),
    ("with it", {"serve_terminating": True}, "gone.prod.svc.clusterset.local.", "A", "NOERROR",
     ["gone.prod.svc.clusterset.local. 5 IN A 10.3.0.1"]),
]


@pytest.mark.parametrize(("what", "flags", "name", "qtype", "rcode", "records"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_offline_answer_is_the_one_dump_prints(
        manifests: Path, what: str, flags: dict[str, Any], name: str, qtype: str, rcode: str,
        records: list[str]) -> None:
    config = Config(manifests=manifests, **flags)
    assert answer(config, name, qtype) == (rcode, records)
    assert dumped(config, name, qtype) == records


def test_exactly_one_of_manifests_and_server(manifests: Path) -> None:
    for config, server in ((Config(), None), (Config(manifests=manifests), "127.0.0.1:1")):
        out, err = io.StringIO(), io.StringIO()
        assert offline.explain_command(config, "x.clusterset.local", "A", server, False,
                                       out, err) == 2
        assert (out.getvalue(), err.getvalue()) == (
            "", "explain needs --manifests or --server (one of them)\n")


def test_a_question_that_cannot_be_asked(manifests: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert offline.explain_command(Config(manifests=manifests), "x.clusterset.local", "MX",
                                   None, False, out, err) == 2
    assert out.getvalue() == ""
    assert err.getvalue() == "explain: type 'MX': choose from A, AAAA, SRV, TXT, SOA, NS, ANY\n"


def test_text_and_json(manifests: Path) -> None:
    config = Config(manifests=manifests, cluster_id="east")
    name = SVC.format(zone="clusterset.local")
    printed = {}
    for as_json in (False, True):
        out, err = io.StringIO(), io.StringIO()
        assert offline.explain_command(config, name, "a", None, as_json, out, err) == 0
        printed[as_json] = out.getvalue()
    result = json.loads(printed[True])
    assert printed[True] == json.dumps(result, indent=1) + "\n"
    assert result["question"] == {"name": name, "type": "A"}
    # each run has its own serial (the time of the first sync)
    serial = re.compile(rf"\b({result['zone']['serial']}|\d{{10}})\b")
    assert serial.sub("SERIAL", printed[False]) == serial.sub("SERIAL", explain.text(result))


# -- --server: the /explain request of a running server ----------------------------------------

class Served:
    """A loopback HTTP server answering each GET with the next (status, body) given;
    the paths asked are kept."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, bytes]] = []
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.paths.append(self.requestline.split()[1])  # as sent (path: '//' cut)
                status, body = owner.replies.pop(0)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served()
    yield server
    server.http.shutdown()
    server.http.server_close()


def remote(server: str, name: str = "web.prod.svc.clusterset.local", qtype: str = "AAAA",
           as_json: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = offline.explain_command(Config(), name, qtype, server, as_json, out, err)
    return code, out.getvalue(), err.getvalue()


def account() -> dict[str, Any]:
    cache = build_cache([service_import("web", ips=["10.9.0.1"])])
    return explain.explain(cache, "web.prod.svc.clusterset.local", "A", full=False)


@pytest.mark.parametrize(("form", "prefix"), [
    ("127.0.0.1:{port}", ""), ("http://127.0.0.1:{port}", ""), ("http://127.0.0.1:{port}/", ""),
    ("http://127.0.0.1:{port}/X//", "/X")])  # behind a proxy's path
def test_the_server_is_asked_on_explain(served: Served, form: str, prefix: str) -> None:
    result = account()
    served.replies = [(200, json.dumps(result).encode()), (200, json.dumps(result).encode())]
    server = form.format(port=served.port)
    assert remote(server, "a b.clusterset.local", "AAAA") == (
        0, json.dumps(result, indent=1) + "\n", "")
    assert remote(server, as_json=False) == (0, explain.text(result), "")
    assert served.paths == [f"{prefix}/explain?name=a+b.clusterset.local&type=AAAA",
                            f"{prefix}/explain?name=web.prod.svc.clusterset.local&type=AAAA"]


def test_an_http_error_is_said_with_its_body(served: Served) -> None:
    served.replies = [(429, b'  {"error": "too many requests"}\n')]
    url = f"http://127.0.0.1:{served.port}/explain?name=web.prod.svc.clusterset.local&type=AAAA"
    assert remote(f"127.0.0.1:{served.port}") == (
        2, "", f'explain: {url}: HTTP 429: {{"error": "too many requests"}}\n')


def test_an_error_body_that_is_not_utf8(served: Served) -> None:
    served.replies = [(503, b"busy \xff\xfe")]
    url = f"http://127.0.0.1:{served.port}/explain?name=web.prod.svc.clusterset.local&type=AAAA"
    assert remote(f"127.0.0.1:{served.port}") == (
        2, "", f"explain: {url}: HTTP 503: busy \ufffd\ufffd\n")


def test_a_server_that_never_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request gives up after TIMEOUT (made short here); the silent server would
    close the connection 5 s later (what a request without a timeout would get)."""
    monkeypatch.setattr(offline, "TIMEOUT", 0.05)
    done = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def silent() -> None:
            connection, _ = listener.accept()
            done.wait(5.0)
            connection.close()

        thread = threading.Thread(target=silent, daemon=True)
        thread.start()
        code, out, err = remote(f"127.0.0.1:{port}")
        done.set()
        thread.join()
    url = f"http://127.0.0.1:{port}/explain?name=web.prod.svc.clusterset.local&type=AAAA"
    assert (code, out, err) == (2, "", f"explain: {url}: timed out\n")


def test_a_body_that_is_not_json(served: Served) -> None:
    served.replies = [(200, b"<html>")]
    code, out, err = remote(f"127.0.0.1:{served.port}")
    url = f"http://127.0.0.1:{served.port}/explain?name=web.prod.svc.clusterset.local&type=AAAA"
    assert (code, out) == (2, "")
    assert err.startswith(f"explain: {url}: Expecting value") and err.endswith("\n")


def test_nobody_listening() -> None:
    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        code, out, err = remote(f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/explain?name=web.prod.svc.clusterset.local&type=AAAA"
    assert (code, out) == (2, "")
    assert err.startswith(f"explain: {url}: <urlopen error [Errno 111]") and err.endswith("\n")


# -- what is logged: dump warns of what it skips, explain only says errors -----------------------

def bare_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root logger without pytest's handlers (logging.basicConfig acts only then), at
    DEBUG: a command's own level shows. Called in the test's body: pytest adds its
    handlers again for each phase; the level is put back by ``root_level``."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    root.setLevel(logging.DEBUG)


@pytest.fixture
def root_level() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


@pytest.mark.usefixtures("root_level")
def test_dump_warns_of_a_skipped_document_and_explain_does_not(
        manifests: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (manifests / "junk.yaml").write_text("- not an object\n")
    warning = f"WARNING {manifests / 'junk.yaml'}: a document is not an object, skipped\n"
    bare_root(monkeypatch)
    assert dump.dump(Config(manifests=manifests), io.StringIO()) == 0
    assert capsys.readouterr().err == warning
    bare_root(monkeypatch)
    name = SVC.format(zone="clusterset.local")
    assert offline.explain_command(Config(manifests=manifests), name, "A", None, False,
                                   io.StringIO(), io.StringIO()) == 0
    logging.getLogger("t").warning("a warning")
    logging.getLogger("t").error("an error")
    assert capsys.readouterr().err == "ERROR an error\n"
