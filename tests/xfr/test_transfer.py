"""AXFR/IXFR from a real server process, read by dig and by dnspython (the oracle)."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rrset
import dns.tsigkeyring
import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.manifests import write_atomically
from clusterset_dns_testkit.secondary import serial_at

from .xfrlib import ZONE, answer_lines, dig, dig_records, headless, ixfr

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "tests" / "conformance" / "objects"


def send_raw(srv: ServerProcess, query: bytes) -> dns.message.Message:
    """One query over TCP; the reply read without checking its TSIG."""
    with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
        sock.sendall(len(query).to_bytes(2, "big") + query)
        size = int.from_bytes(sock.recv(2, socket.MSG_WAITALL), "big")
        data = sock.recv(size, socket.MSG_WAITALL)
    return dns.message.from_wire(data, keyring=False)


def dump_lines(manifests: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "clusterset_dns", "dump", "--manifests",
                          str(manifests)], cwd=REPO, capture_output=True, text=True, check=True)
    return no_serial([" ".join(line.split()) for line in out.stdout.splitlines()
                      if not line.startswith(";")])


def no_serial(lines: list[str]) -> list[str]:
    """The lines with the SOA serial blanked: ``dump`` runs at another time than the
    server, and the serial is time-based."""
    out = []
    for line in lines:
        fields = line.split()
        if fields[3] == "SOA":
            fields[6] = "SERIAL"
        out.append(" ".join(fields))
    return out


@pytest.fixture(scope="module")
def conformance_server() -> Iterator[ServerProcess]:
    with ServerProcess("--manifests", str(OBJECTS), "--allow-transfer", "127.0.0.0/8") as srv:
        srv.wait_ready()
        yield srv


def test_axfr_by_dig_is_the_dumped_zone_soa_first_and_last(
        conformance_server: ServerProcess) -> None:
    srv = conformance_server
    records = dig_records(dig(f"@{srv.host}", "-p", str(srv.port), ZONE, "AXFR"))
    assert records[0].split()[3] == "SOA" and records[-1] == records[0]
    assert sorted(no_serial(records[:-1])) == sorted(dump_lines(OBJECTS))
    assert srv.metric("clusterset_dns_transfers_total", type="axfr", result="full") >= 1


def test_axfr_messages_compress_names(conformance_server: ServerProcess) -> None:
    srv = conformance_server
    messages = list(dns.query.xfr(srv.host, ZONE, port=srv.port, relativize=False))
    text = dig(f"@{srv.host}", "-p", str(srv.port), ZONE, "AXFR")
    sent = int(text.split("bytes ")[-1].split(")")[0])  # ";; XFR size: ... bytes N)"
    uncompressed = sum(len(rrset.name.to_wire()) + 10 + len(rdata.to_wire())
                       for m in messages for rrset in m.answer for rdata in rrset)
    assert sent < uncompressed * 0.75  # measured: 0.62 on these objects


def udp_ixfr(srv: ServerProcess, serial: int, payload: int | None = None) -> dns.message.Message:
    query = dns.message.make_query(ZONE, "IXFR", use_edns=payload is not None,
                                   payload=payload or 512)
    query.authority.append(dns.rrset.from_text(ZONE.rstrip(".") + ".", 0, "IN", "SOA",
                                               f". . {serial} 0 0 0 0"))
    return dns.query.udp(query, srv.host, port=srv.port, timeout=3, one_rr_per_rrset=True)


def test_ixfr_over_udp_without_the_whole_zone_fitting_gets_tc(
        conformance_server: ServerProcess) -> None:
    srv = conformance_server
    serial = serial_at(srv.host, srv.port)
    assert serial is not None
    reply = udp_ixfr(srv, serial - 100000, payload=1232)  # not in the journal: the zone
    assert reply.flags & dns.flags.TC and not reply.answer
    up_to_date = udp_ixfr(srv, serial)  # one SOA fits
    assert not up_to_date.flags & dns.flags.TC
    assert [r.to_text().split()[3] for r in up_to_date.answer] == ["SOA"]


@pytest.mark.parametrize("udp_io", ["batched", "plain"])
def test_ixfr_over_udp_is_the_difference_when_it_fits(tmp_path: Path, udp_io: str) -> None:
    manifests = tmp_path / "objects"
    manifests.mkdir()
    path = manifests / "web.yaml"
    write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1"]))
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.1/32",
                       "--poll-interval", "0.1", "--udp-io", udp_io) as srv:
        srv.wait_ready()
        first = serial_at(srv.host, srv.port)
        assert first is not None
        write_atomically(path, headless("ns1", "web", "east", ["10.9.0.2"]))
        second = wait_for(lambda: (s := serial_at(srv.host, srv.port)) != first and s,
                          10, "a new serial")
        assert udp_ixfr(srv, first).flags & dns.flags.TC  # more than 512 bytes: TC
        reply = udp_ixfr(srv, first, payload=1232)  # fits the client's EDNS size
        assert not reply.flags & dns.flags.TC
        lines = [line for rrset in reply.answer for line in rrset.to_text().splitlines()]
        assert [int(line.split()[6]) for line in lines if line.split()[3] == "SOA"] == [
            second, first, second, second]
        assert any("10.9.0.1" in line for line in lines)  # removed
        assert any("10.9.0.2" in line for line in lines)  # added
        # The same over TCP: the same records.
        tcp = answer_lines(ixfr(srv.host, srv.port, first))
        assert sorted(" ".join(t.split()) for t in tcp) == sorted(" ".join(t.split())
                                                                  for t in lines)
        assert srv.metric("clusterset_dns_transfers_total", type="ixfr",
                          result="incremental") == 2


def test_ixfr_over_udp_outside_the_allowed_networks_is_refused(tmp_path: Path) -> None:
    manifests = tmp_path / "objects"
    manifests.mkdir()
    write_atomically(manifests / "web.yaml", headless("ns1", "web", "east", ["10.9.0.1"]))
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.2/32") as srv:
        srv.wait_ready()
        serial = serial_at(srv.host, srv.port)
        assert serial is not None
        reply = udp_ixfr(srv, serial)
        assert reply.rcode() == dns.rcode.REFUSED and not reply.answer


def test_ixfr_from_a_serial_not_in_the_journal_is_the_whole_zone(
        conformance_server: ServerProcess) -> None:
    srv = conformance_server
    serial = serial_at(srv.host, srv.port)
    assert serial is not None
    lines = answer_lines(ixfr(srv.host, srv.port, serial - 100000))
    assert lines[0].split()[3] == "SOA" and lines[1].split()[3] != "SOA"
    assert sorted(no_serial([" ".join(line.split()) for line in lines[:-1]])) \
        == sorted(dump_lines(OBJECTS))
    assert srv.metric("clusterset_dns_transfers_total", type="ixfr", result="full") >= 1


def test_ixfr_up_to_date_is_one_soa(conformance_server: ServerProcess) -> None:
    srv = conformance_server
    serial = serial_at(srv.host, srv.port)
    assert serial is not None
    lines = answer_lines(ixfr(srv.host, srv.port, serial))
    assert len(lines) == 1 and f" {serial} " in lines[0]


def test_ixfr_is_the_real_difference_after_a_change(tmp_path: Path) -> None:
    manifests = tmp_path / "objects"
    manifests.mkdir()
    path = manifests / "web.yaml"
    write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1", "10.9.0.2"]))
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.1/32",
                       "--poll-interval", "0.1") as srv:
        srv.wait_ready()
        first = serial_at(srv.host, srv.port)
        assert first is not None
        write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1", "10.9.0.3"]))
        second = wait_for(lambda: (s := serial_at(srv.host, srv.port)) != first and s,
                          10, "a new serial")
        write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1", "10.9.0.3",
                                                               "10.9.0.4"]))
        third = wait_for(lambda: (s := serial_at(srv.host, srv.port)) != second and s,
                         10, "a third serial")
        lines = answer_lines(ixfr(srv.host, srv.port, first))
        types = [line.split()[3] for line in lines]
        serials = [int(line.split()[6]) for line in lines if line.split()[3] == "SOA"]
        # new SOA, (old SOA, removed, new SOA, added) per change, new SOA
        assert serials == [third, first, second, second, third, third]
        assert types[0] == types[1] == "SOA"
        removed = set(lines[2:types.index("SOA", 2)])
        assert "10-9-0-2.east.web.ns1.svc.clusterset.local. 5 IN A 10.9.0.2" in removed
        assert not any("10.9.0.1" in line and " A " in line for line in lines)
        assert any(line.endswith("IN A 10.9.0.4") for line in lines)
        # dig agrees it is incremental (its summary line names the IXFR form).
        text = dig(f"@{srv.host}", "-p", str(srv.port), ZONE, f"IXFR={second}", "+tcp")
        records = dig_records(text)
        assert [r.split()[3] for r in records].count("SOA") == 4, text
        assert srv.metric("clusterset_dns_transfers_total", type="ixfr",
                          result="incremental") == 2
        assert srv.metric("clusterset_dns_journal_records") >= 4


def test_transfer_outside_allow_transfer_is_refused() -> None:
    with ServerProcess("--manifests", str(OBJECTS), "--allow-transfer", "10.0.0.0/8") as srv:
        srv.wait_ready()
        for rdtype in ("AXFR", "IXFR"):
            reply = dns.query.tcp(dns.message.make_query(ZONE, rdtype), srv.host,
                                  port=srv.port, timeout=5)
            assert reply.rcode() == dns.rcode.REFUSED and not reply.answer
        assert "Transfer failed" in dig(f"@{srv.host}", "-p", str(srv.port), ZONE, "AXFR")
        assert srv.metric("clusterset_dns_transfers_total", result="refused") >= 2
        # The connection keeps serving ordinary queries.
        assert srv.ask("dns-version." + ZONE, "TXT", tcp=True).rcode() == dns.rcode.NOERROR


def test_tsig_good_key_accepted_bad_rejected_unsigned_refused(tmp_path: Path) -> None:
    secret = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    key_file = tmp_path / "xfr.key"
    key_file.write_text(f"hmac-sha256:xfr-key:{secret}\n")
    with ServerProcess("--manifests", str(OBJECTS), "--allow-transfer", "127.0.0.0/8",
                       "--transfer-tsig-key", str(key_file)) as srv:
        srv.wait_ready()
        at = [f"@{srv.host}", "-p", str(srv.port), ZONE, "AXFR"]
        good = dig(*at, "-y", f"hmac-sha256:xfr-key:{secret}")
        assert "XFR size" in good and "tsig verify failure" not in good, good
        # dnspython checks every message's MAC, the multi-message chain included.
        keyring = dns.tsigkeyring.from_text({"xfr-key": ("hmac-sha256", secret)})
        messages = list(dns.query.xfr(srv.host, ZONE, port=srv.port, keyring=keyring,
                                      keyname="xfr-key", relativize=False))
        assert messages and all(m.had_tsig for m in messages)
        wrong = base64.b64encode(b"not the key, not the key, not it").decode()
        bad = dig(*at, "-y", f"hmac-sha256:xfr-key:{wrong}")
        assert "XFR size" not in bad and "Transfer failed" in bad, bad
        # RFC 8945 5.2: NOTAUTH with the error in an unsigned TSIG record.
        signed = dns.message.make_query(ZONE, "AXFR")
        signed.use_tsig(dns.tsigkeyring.from_text({"xfr-key": ("hmac-sha256", wrong)}),
                        keyname="xfr-key")
        reply = send_raw(srv, signed.to_wire())
        assert reply.rcode() == dns.rcode.NOTAUTH and reply.tsig is not None
        assert reply.tsig[0].error == 16 and reply.tsig[0].mac == b""  # BADSIG
        unknown = dns.message.make_query(ZONE, "AXFR")
        unknown.use_tsig(dns.tsigkeyring.from_text({"other-key": ("hmac-sha256", secret)}),
                         keyname="other-key")
        reply = send_raw(srv, unknown.to_wire())
        assert reply.rcode() == dns.rcode.NOTAUTH and reply.tsig is not None
        assert reply.tsig[0].error == 17  # BADKEY
        unsigned = dig(*at)
        assert "XFR size" not in unsigned and "Transfer failed" in unsigned
        assert srv.metric("clusterset_dns_transfers_total", result="notauth") >= 1
        assert srv.metric("clusterset_dns_transfers_total", result="refused") >= 1


def test_slow_and_many_transfers_do_not_stall_answers(tmp_path: Path) -> None:
    manifests = tmp_path / "objects"
    manifests.mkdir()
    # 8,000 endpoints: an AXFR of some 1.4 MB, far more than socket buffers hold.
    for i in range(16):
        addresses = [f"10.{20 + i}.{j // 250}.{j % 250 + 1}" for j in range(500)]
        write_atomically(manifests / f"big{i}.yaml", headless("bulk", f"big{i}", "east",
                                                              addresses))
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.0/8",
                       "--tcp-idle-timeout", "3") as srv:
        srv.wait_ready(60)
        stalled: list[socket.socket] = []
        try:
            query = dns.message.make_query(ZONE, "AXFR").to_wire()
            for i in range(24):  # more than the 16 concurrent transfers allowed
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.bind((f"127.0.0.{2 + i}", 0))  # one address runs at most 4
                sock.connect((srv.host, srv.port))
                sock.sendall(len(query).to_bytes(2, "big") + query)
                stalled.append(sock)  # never read
            wait_for(lambda: srv.metric("clusterset_dns_transfers_total", result="busy") >= 1,
                     20, "transfers beyond the cap to be refused")
            for _ in range(20):
                udp = dns.query.udp(dns.message.make_query("big0.bulk.svc." + ZONE, "SRV"),
                                    srv.host, port=srv.port, timeout=2)
                assert udp.rcode() == dns.rcode.NOERROR
                tcp = srv.ask("dns-version." + ZONE, "TXT", tcp=True)
                assert tcp.rcode() == dns.rcode.NOERROR
            # Readers that never read are cut by the idle timeout (aborted: data unsent).
            wait_for(lambda: srv.metric("clusterset_dns_tcp_aborted_total") >= 16, 30,
                     "the stalled transfers to be aborted by --tcp-idle-timeout")
        finally:
            for sock in stalled:
                sock.close()
        wait_for(lambda: srv.metric("clusterset_dns_tcp_connections") <= 1, 20,
                 "stalled transfers to end")
        messages = list(dns.query.xfr(srv.host, ZONE, port=srv.port, relativize=False,
                                      timeout=30))
        assert len(messages) > 3  # split into several 64 KiB messages
        assert all(len(m.to_wire()) <= 65535 for m in messages)
        srv.check_alive()


def test_every_worker_process_has_the_same_serial_and_journal(tmp_path: Path) -> None:
    """With --workers, TCP connections land on any process (SO_REUSEPORT): each must
    answer the parent's serial and the same IXFR difference."""
    manifests = tmp_path / "objects"
    manifests.mkdir()
    path = manifests / "web.yaml"
    write_atomically(path, headless("ns1", "web", "east", ["10.9.0.1"]))
    with ServerProcess("--manifests", str(manifests), "--allow-transfer", "127.0.0.1/32",
                       "--poll-interval", "0.1", "--workers", "3") as srv:
        srv.wait_ready(60)
        first = serial_at(srv.host, srv.port)
        assert first is not None
        write_atomically(path, headless("ns1", "web", "east", ["10.9.0.2"]))
        second = wait_for(lambda: (s := serial_at(srv.host, srv.port)) != first and s,
                          10, "a new serial")
        # Every process has applied it once 30 answers in a row agree.
        wait_for(lambda: all(serial_at(srv.host, srv.port) == second for _ in range(30)), 10,
                 "every worker at the new serial")
        for _ in range(24):  # new connections: spread over the processes by the kernel
            lines = answer_lines(ixfr(srv.host, srv.port, first))
            serials = [int(line.split()[6]) for line in lines if line.split()[3] == "SOA"]
            assert serials == [second, first, second, second]
        # Workers report their counters to the parent now and then: wait for the sum.
        wait_for(lambda: srv.metric("clusterset_dns_transfers_total", type="ixfr",
                                    result="incremental") == 24, 15,
                 "every process's transfers in the parent's metrics")
