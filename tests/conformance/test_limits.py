"""Limits, over real sockets with dig: answer sizing (RFC 2181 9), names too long for
DNS, and the OPT record on error answers (RFC 6891 7).

One server of its own reads objects written here: a headless service whose A
answer (5,000 addresses, 80 KB) does not fit a TCP message, one whose SRV answer
fits a UDP message only without its glue, and an import with a 63-character port
name (legal in Kubernetes; ``_<port>`` would be a 64-byte label).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, port, service_import

from .csdns_testlib import (
    Dig,
    DigResult,
    ServerProcess,
    a_records,
    check,
    rr,
    svc,
)

pytestmark = pytest.mark.own_server

NS = "lim"
HUGE, GLUE, LONGPORT = svc("huge", NS), svc("glue", NS), svc("longport", NS)
HUGE_COUNT = 5000
GLUE_COUNT = 16  # 16 SRV records fit 1,232 bytes; with 16 A records of glue they do not
PORT63 = "p" * 63


def _addresses(prefix: str, count: int) -> list[str]:
    return [f"{prefix}.{i // 250}.{i % 250 + 1}" for i in range(count)]


def objects() -> list[dict[str, Any]]:
    return [
        service_import("huge", NS, "Headless"),
        endpoint_slice("huge-east", "huge", NS, "east", ports=[], endpoints=[
            endpoint(ip) for ip in _addresses("10.60", HUGE_COUNT)]),
        service_import("glue", NS, "Headless", ports=[HTTP]),
        endpoint_slice("glue-east", "glue", NS, "east", ports=[HTTP], endpoints=[
            endpoint(ip) for ip in _addresses("10.61", GLUE_COUNT)]),
        service_import("longport", NS, ips=["10.62.0.1"],
                       ports=[port(8080, "TCP", PORT63), HTTP]),
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, dig_path: str) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("limits")
    (root / "objects.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": objects()}))
    srv = ServerProcess(root)
    srv.start()
    try:
        srv.wait_ready(timeout=60)
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ldig(server: ServerProcess) -> Dig:
    return Dig(server.host, server.port)


def _no_warning(res: DigResult) -> None:
    assert "Truncated" not in res.raw, res.describe()


# -- TCP: an answer over 64 KiB is cut to what fits --------------------------------------------

@pytest.mark.parametrize("edns", [True, False], ids=["edns", "noedns"])
def test_tcp_answer_over_64k_cut_to_what_fits(ldig: Dig, edns: bool) -> None:
    res = ldig(HUGE, "A", "+tcp", *(() if edns else ("+noedns",)))
    assert res.responded and res.rcode == "NOERROR", res.describe()
    assert "tc" in res.flags, res.describe()
    assert res.transport == "TCP"
    assert res.msg_size is not None and res.msg_size <= 65535
    # header 12, question 35, an OPT (11) kept room for either way, 16 bytes a record
    assert len(res.answer) == (65535 - 12 - 35 - 11) // 16 == 4092, res.describe()
    assert set(res.answer) <= set(a_records(HUGE, _addresses("10.60", HUGE_COUNT)))


def test_udp_answer_over_64k_is_tc_with_the_records_that_fit(ldig: Dig) -> None:
    res = ldig(HUGE, "A", "+ignore")  # +ignore: show the UDP answer, do not retry over TCP
    assert res.responded and "tc" in res.flags, res.describe()
    assert res.transport == "UDP" and res.msg_size is not None and res.msg_size <= 1232
    # header 12, question 35, OPT 11, 16 bytes a record
    assert len(res.answer) == (1232 - 12 - 35 - 11) // 16, res.describe()
    assert set(res.answer) <= set(a_records(HUGE, _addresses("10.60", HUGE_COUNT)))


# -- UDP: glue is dropped before TC is set -----------------------------------------------------

def _srv_lines() -> list[str]:
    targets = [f"{ip.replace('.', '-')}.east.{GLUE}" for ip in _addresses("10.61", GLUE_COUNT)]
    return [rr(GLUE, "SRV", f"0 6 80 {t}") for t in targets]


def test_udp_srv_that_fits_without_glue_is_not_truncated(ldig: Dig) -> None:
    res = ldig(GLUE, "SRV", "+ignore")
    _no_warning(res)
    check(res, answer=_srv_lines(), additional=[])
    assert "tc" not in res.flags and res.transport == "UDP"
    assert res.msg_size is not None and res.msg_size <= 1232
    full = ldig(GLUE, "SRV", "+tcp")  # over TCP the glue comes along
    check(full, answer=_srv_lines())
    assert len(full.additional) == GLUE_COUNT and full.msg_size is not None
    assert full.msg_size > 1232


def test_udp_srv_whose_records_do_not_fit_is_tc_with_those_that_do(ldig: Dig) -> None:
    res = ldig(GLUE, "SRV", "+ignore", "+bufsize=512")
    assert "tc" in res.flags and res.answer, res.describe()
    assert set(res.answer) < set(_srv_lines()), res.describe()
    assert res.msg_size is not None and res.msg_size <= 512


# -- an over-long port name: only its SRV name is missing --------------------------------------

def test_overlong_port_name_skipped_rest_of_service_served(ldig: Dig,
                                                           server: ServerProcess) -> None:
    check(ldig(LONGPORT, "A"), answer=[rr(LONGPORT, "A", "10.62.0.1")])
    check(ldig(f"_http._tcp.{LONGPORT}", "SRV"),
          answer=[rr(f"_http._tcp.{LONGPORT}", "SRV", f"0 100 80 {LONGPORT}")])
    # the bare-name SRV keeps the port, as it does an unnamed one
    check(ldig(LONGPORT, "SRV"), answer=[rr(LONGPORT, "SRV", f"0 50 80 {LONGPORT}"),
                                        rr(LONGPORT, "SRV", f"0 50 8080 {LONGPORT}")])
    # the same name with one character less does not exist either (NXDOMAIN)
    res = ldig(f"_{PORT63[:62]}._tcp.{LONGPORT}", "SRV")
    assert res.rcode == "NXDOMAIN", res.describe()
    assert server.metric("clusterset_dns_invalid_objects_total", kind="ServiceImport") == 1
    # and every other service of the same file is served
    assert len(ldig(GLUE, "SRV", "+tcp").answer) == GLUE_COUNT


# -- RFC 6891 7: error answers to EDNS queries carry an OPT ------------------------------------

@pytest.mark.parametrize(("opts", "rcode"), [
    (("+opcode=status",), "NOTIMP"),
    (("+opcode=notify",), "NOTIMP"),
    (("+header-only",), "FORMERR"),
], ids=["notimp-status", "notimp-notify", "formerr-no-question"])
@pytest.mark.parametrize("transport", [(), ("+tcp",)], ids=["udp", "tcp"])
def test_error_answers_to_edns_queries_carry_opt(ldig: Dig, opts: tuple[str, ...], rcode: str,
                                                 transport: tuple[str, ...]) -> None:
    res = ldig(f"hello.conf.svc.{'clusterset.local'}.", "A", *opts, *transport)
    assert res.responded and res.rcode == rcode, res.describe()
    assert res.opt is not None, "no OPT in the answer to an EDNS query\n" + res.describe()
    assert res.udp_size == 1232
    plain = ldig("hello.conf.svc.clusterset.local.", "A", *opts, *transport, "+noedns")
    assert plain.rcode == rcode and plain.opt is None, plain.describe()
