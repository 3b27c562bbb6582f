"""Transfers as an attacker would use them, against a real server process: a flood of
UDP IXFRs from an allowed address, 16 concurrent AXFRs of a large zone, while other
clients keep asking; TSIG-signed queries that are not transfers; IXFR from a serial
newer than ours. Correctness only: the figures are measured by bench/xfr_load.py."""

from __future__ import annotations

import base64
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.tsigkeyring
import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.manifests import write_atomically
from clusterset_dns_testkit.secondary import serial_at

from .xfrlib import ZONE, answer_lines, dig, dig_records, headless, ixfr

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "tests" / "conformance" / "objects"
SECRET = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def big_zone(manifests: Path, services: int = 16, each: int = 500) -> None:
    """``services`` headless services of ``each`` endpoints (16 x 500: about 1.4 MB)."""
    manifests.mkdir()
    for i in range(services):
        addresses = [f"10.{20 + i}.{j // 250}.{j % 250 + 1}" for j in range(each)]
        write_atomically(manifests / f"big{i}.yaml", headless("bulk", f"big{i}", "east",
                                                              addresses))
    write_atomically(manifests / "small.yaml", headless("bulk", "small", "east",
                                                        ["10.19.0.1", "10.19.0.2"]))


class Asker:
    """Asks ``small``'s SRV and the version TXT over UDP in a thread, one at a time,
    each with a generous timeout, until stopped; counts what is answered right, what
    wrong and what is lost."""

    def __init__(self, srv: ServerProcess) -> None:
        self.srv = srv
        self.answered = self.lost = self.wrong = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        names = [("small.bulk.svc." + ZONE, "SRV"), ("dns-version." + ZONE, "TXT")]
        i = 0
        deadline = time.monotonic() + 120  # bounded whatever happens
        while not self.stop.is_set() and time.monotonic() < deadline:
            name, rdtype = names[i % 2]
            i += 1
            try:
                reply = dns.query.udp(dns.message.make_query(name, rdtype), self.srv.host,
                                      port=self.srv.port, timeout=3)
                if reply.rcode() == dns.rcode.NOERROR and reply.answer:
                    self.answered += 1
                else:
                    self.wrong += 1
            except dns.exception.Timeout:
                self.lost += 1
            time.sleep(0.002)

    def __enter__(self) -> Asker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def ixfr_datagram(serial: int, qid: int) -> bytes:
    query = dns.message.make_query(ZONE, "IXFR", use_edns=True, payload=1232)
    query.id = qid
    query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                               f". . {serial} 0 0 0 0"))
    return query.to_wire()


def test_udp_ixfr_flood_from_an_allowed_address_never_stops_other_answers(
        tmp_path: Path) -> None:
    """3,000 UDP IXFRs for a serial not in the journal (the whole 1.4 MB zone) sent as
    fast as a socket takes them, three times: every other query is still answered
    (the old code copied and encoded the zone for each before answering TC: seconds
    of nothing for anyone)."""
    manifests = tmp_path / "objects"
    big_zone(manifests)
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8") as srv:
        srv.wait_ready(60)
        serial = serial_at(srv.host, srv.port)
        assert serial is not None
        flood = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        flood.setblocking(False)
        datagrams = [ixfr_datagram(serial - 100000, i) for i in range(3000)]
        with Asker(srv) as asker:
            for _ in range(3):
                for datagram in datagrams:
                    try:
                        flood.sendto(datagram, (srv.host, srv.port))
                    except BlockingIOError:
                        time.sleep(0.001)
                before = asker.answered
                wait_for(lambda b=before: asker.answered >= b + 20, 30,
                         "20 more answers after a flood")
        flood.close()
        assert asker.lost == asker.wrong == 0, (asker.lost, asker.wrong, asker.answered)
        limited = srv.metric("clusterset_dns_transfers_total", type="ixfr",
                             result="udp-limited")
        truncated = srv.metric("clusterset_dns_transfers_total", type="ixfr",
                               result="udp-truncated")
        assert limited >= 8000 and truncated >= 1, (limited, truncated)
        # A real client still gets its IXFR (over TCP after the TC).
        lines = answer_lines(ixfr(srv.host, srv.port, serial - 100000, timeout=30))
        assert len(lines) > 8000
        srv.check_alive()


def test_sixteen_concurrent_axfrs_complete_while_others_are_answered(tmp_path: Path) -> None:
    """16 dig AXFRs at once (the most a process serves), twice: each is the whole
    zone, and other queries are answered meanwhile."""
    manifests = tmp_path / "objects"
    big_zone(manifests)
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8") as srv:
        srv.wait_ready(60)
        command = ["dig", f"@{srv.host}", "-p", str(srv.port), ZONE, "AXFR", "+noall",
                   "+answer", "+time=30"]
        want = sorted(dig_records(subprocess.run(command, capture_output=True, text=True,
                                                 timeout=120, check=True).stdout))
        assert len(want) > 8000
        with Asker(srv) as asker:
            for _ in range(2):
                # From 16 addresses: one address runs at most 4 transfers at once.
                digs = [subprocess.Popen([*command, "-b", f"127.0.0.{2 + i}"],
                                         stdout=subprocess.PIPE, text=True)
                        for i in range(16)]
                outputs = [d.communicate(timeout=180)[0] for d in digs]
                assert all(sorted(dig_records(out)) == want for out in outputs)
        assert asker.lost == asker.wrong == 0 and asker.answered > 0
        assert srv.metric("clusterset_dns_transfers_total", type="axfr", result="full") == 33


def test_ixfr_from_a_serial_newer_than_ours_is_one_soa(tmp_path: Path) -> None:
    with ServerProcess("--manifests", str(OBJECTS), "--allow-transfer", "127.0.0.0/8") as srv:
        srv.wait_ready()
        serial = serial_at(srv.host, srv.port)
        assert serial is not None
        for ahead in (1, 3600, 2**31 - 1):
            newer = (serial + ahead) % 2**32
            query = dns.message.make_query(ZONE, "IXFR")
            query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                                       f". . {newer} 0 0 0 0"))
            # (dnspython's transfer client stops at a serial that went backwards)
            lines = answer_lines([exchange(srv, query.to_wire(), tcp=True)])
            assert len(lines) == 1 and f" {serial} " in lines[0], lines[:3]
            records = dig_records(dig(f"@{srv.host}", "-p", str(srv.port), ZONE,
                                      f"IXFR={newer}", "+notcp"))
            assert [r.split()[3] for r in records] == ["SOA"]
        assert srv.metric("clusterset_dns_transfers_total", type="ixfr", result="full") == 0


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    key_file = tmp_path_factory.mktemp("key") / "xfr.key"
    key_file.write_text(f"hmac-sha256:xfr-key:{SECRET}\n")
    srv = ServerProcess("--manifests", str(OBJECTS), "--allow-transfer", "127.0.0.0/8",
                        "--transfer-tsig-key", str(key_file))
    srv.start()
    srv.wait_ready()
    yield srv  # type: ignore[misc]
    srv.stop()


@pytest.mark.parametrize("transport", ["+notcp", "+tcp"])
@pytest.mark.parametrize("qname,qtype", [(ZONE, "SOA"),
                                         ("db.demo.svc." + ZONE, "SRV"),
                                         ("nothing.demo.svc." + ZONE, "A")])
def test_a_signed_query_that_is_not_a_transfer_gets_a_signed_answer(
        signed_server: ServerProcess, transport: str, qname: str, qtype: str) -> None:
    """RFC 8945 5.3: what a secondary's SOA refresh check needs. dig verifies the MAC
    and says so when it fails."""
    srv = signed_server
    out = dig(f"@{srv.host}", "-p", str(srv.port), qname, qtype, transport,
              "-y", f"hmac-sha256:xfr-key:{SECRET}")
    assert "status: NOERROR" in out or "status: NXDOMAIN" in out, out
    assert "tsig verify failure" not in out, out
    assert re.search(r"\bTSIG\s+hmac-sha256\. .* NOERROR 0", out), out  # signed, no error
    keyring = dns.tsigkeyring.from_text({"xfr-key": ("hmac-sha256", SECRET)})
    query = dns.message.make_query(qname, qtype)
    query.use_tsig(keyring, keyname="xfr-key")
    send = dns.query.tcp if transport == "+tcp" else dns.query.udp
    reply = send(query, srv.host, port=srv.port, timeout=5)  # raises on a bad signature
    assert reply.had_tsig


def test_a_signed_udp_ixfr_too_big_gets_a_signed_tc_and_tcp_works(
        signed_server: ServerProcess) -> None:
    """RFC 8945 5.3/5.4: dnspython with the keyring accepts the TC and asks again over
    TCP (before: an unsigned TC, which it rejects with FormError, so never retries)."""
    srv = signed_server
    keyring = dns.tsigkeyring.from_text({"xfr-key": ("hmac-sha256", SECRET)})
    query = dns.message.make_query(ZONE, "IXFR")
    query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA", ". . 1 0 0 0 0"))
    query.use_tsig(keyring, keyname="xfr-key")
    reply = dns.query.udp(query, srv.host, port=srv.port, timeout=5)  # verifies the MAC
    assert reply.had_tsig and reply.flags & dns.flags.TC and not reply.answer
    messages = list(dns.query.xfr(srv.host, ZONE, rdtype=dns.rdatatype.IXFR, serial=1,
                                  port=srv.port, keyring=keyring, keyname="xfr-key",
                                  timeout=10, relativize=False))
    assert answer_lines(messages)[0].split()[3] == "SOA" and len(answer_lines(messages)) > 2


@pytest.mark.parametrize("algorithm", ["hmac-sha512", "hmac-sha1"])
@pytest.mark.parametrize("rdtype,tcp", [("SOA", False), ("SOA", True), ("AXFR", True)])
def test_our_key_name_with_another_algorithm_is_badkey(signed_server: ServerProcess,
                                                        algorithm: str, rdtype: str,
                                                        tcp: bool) -> None:
    """RFC 8945 5.2.1 (the old code answered FORMERR, no TSIG record, nothing logged)."""
    srv = signed_server
    query = dns.message.make_query(ZONE, rdtype)
    query.use_tsig(dns.tsigkeyring.from_text({"xfr-key": (algorithm, SECRET)}),
                   keyname="xfr-key")
    reply = exchange(srv, query.to_wire(), tcp)
    assert reply.rcode() == dns.rcode.NOTAUTH and reply.tsig is not None, reply
    assert reply.tsig[0].error == 17 and reply.tsig[0].mac == b""  # BADKEY
    assert "our key name with another algorithm" in srv.log_text()


def with_tsig(query: dns.message.Message, algorithm: str, mac: bytes) -> bytes:
    """``query`` signed by hand with key ``xfr-key`` and ``mac`` (dnspython will not
    write a MAC of the wrong size)."""
    data = query.to_wire()
    arcount = int.from_bytes(data[10:12], "big") + 1
    rdata = (dns.name.from_text(algorithm).to_wire() + int(time.time()).to_bytes(6, "big")
             + (300).to_bytes(2, "big") + len(mac).to_bytes(2, "big") + mac + data[:2]
             + b"\x00" * 4)
    record = (dns.name.from_text("xfr-key").to_wire() + (250).to_bytes(2, "big")
              + (255).to_bytes(2, "big") + b"\x00" * 4 + len(rdata).to_bytes(2, "big") + rdata)
    return data[:10] + arcount.to_bytes(2, "big") + data[12:] + record


def exchange(srv: ServerProcess, data: bytes, tcp: bool) -> dns.message.Message:
    """One raw query; the reply read without checking its TSIG."""
    if tcp:
        with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
            sock.sendall(len(data).to_bytes(2, "big") + data)
            size = int.from_bytes(sock.recv(2, socket.MSG_WAITALL), "big")
            return dns.message.from_wire(sock.recv(size, socket.MSG_WAITALL), keyring=False)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(data, (srv.host, srv.port))
        return dns.message.from_wire(sock.recv(65535), keyring=False)


@pytest.mark.parametrize("rdtype,tcp", [("SOA", False), ("SOA", True), ("AXFR", True),
                                        ("IXFR", False)])
def test_a_mac_truncated_below_the_minimum_is_formerr(signed_server: ServerProcess,
                                                      rdtype: str, tcp: bool) -> None:
    """RFC 8945 5.2.2.1: a MAC shorter than max(10, half the hash) is FORMERR (the old
    code answered BADSIG)."""
    srv = signed_server
    query = dns.message.make_query(ZONE, rdtype)
    if rdtype == "IXFR":
        query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                                   ". . 1 0 0 0 0"))
    reply = exchange(srv, with_tsig(query, "hmac-sha256", b"\x01" * 8), tcp)
    assert reply.rcode() == dns.rcode.FORMERR and reply.tsig is None, reply
