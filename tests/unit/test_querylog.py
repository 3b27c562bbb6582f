"""The query log (process.querylog): which answers each class logs, the fields of a
line in the text and JSON formats, and the rate limit's boundary on the injected
clock. Responses come from the real handler."""

from __future__ import annotations

import json
import logging

import dns.message
import pytest

from clusterset_dns.base.config import ConfigError, parse_query_log
from clusterset_dns.process import logs
from clusterset_dns.process.querylog import QueryLog, rcode_and_ede
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.stats import Stats
from clusterset_dns_testkit.objects import service_import

from .fakeclock import FakeClock
from .helpers import DEFAULT_UDP_CAP, build_cache, query

WEB = "web.prod.svc.clusterset.local."
PEER = ("127.0.0.1", 5353)


def handler(synced: bool = True) -> Handler:
    return Handler(build_cache([service_import("web", "prod", ips=["10.1.0.1"])],
                               synced=synced).zone, DEFAULT_UDP_CAP)


def badvers() -> bytes:
    msg = dns.message.make_query(WEB, "A", use_edns=1)
    return msg.to_wire()


def notimp() -> bytes:
    msg = dns.message.make_query(WEB, "A")
    msg.set_opcode(2)  # STATUS
    return msg.to_wire()


# name -> (query, synced, rcode text, EDE code, class)
CASES = {
    "success": (query(WEB, "A"), True, "NOERROR", None, "success"),
    "nxdomain": (query("nosuch.prod.svc.clusterset.local.", "A"), True, "NXDOMAIN", None,
                 "denial"),
    "nodata": (query(WEB, "AAAA", edns=0), True, "NOERROR", 0, "denial"),
    "refused": (query("example.com.", "A"), True, "REFUSED", None, "error"),
    "formerr": (query(WEB, "A")[:12], True, "FORMERR", None, "error"),
    "notimp": (notimp(), True, "NOTIMP", None, "error"),
    "badvers": (badvers(), True, "BADVERS", None, "error"),
    "servfail": (query("nosuch.prod.svc.clusterset.local.", "A", edns=0), False, "SERVFAIL",
                 14, "error"),
}


def logged(log: QueryLog, caplog: pytest.LogCaptureFixture, data: bytes, synced: bool = True,
           tcp: bool = False) -> list[logging.LogRecord]:
    response = handler(synced).handle(data, tcp)
    caplog.clear()
    log(data, response, tcp, PEER, log.clock.perf_counter_ns())
    return [r for r in caplog.records if r.name == "clusterset_dns.query"]


@pytest.mark.parametrize("classes", ["all", "denial", "error", "denial,error"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_class_logs_its_answers_only(classes: str, case: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    data, synced, rcode, ede, kind = CASES[case]
    log = QueryLog(classes, 1000, Stats(), FakeClock())
    records = logged(log, caplog, data, synced)
    expected = classes == "all" or kind in classes.split(",")
    assert len(records) == (1 if expected else 0)
    if expected:
        fields = records[0].query  # type: ignore[attr-defined]
        assert (fields["rcode"], fields["ede"]) == (rcode, ede)


def test_the_response_decoder_reads_rcode_and_ede() -> None:
    for data, synced, rcode, ede, _ in CASES.values():
        response = handler(synced).handle(data, False)
        assert response is not None
        got = rcode_and_ede(response)
        assert got[1] == ede
        assert {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP",
                5: "REFUSED", 16: "BADVERS"}[got[0]] == rcode


def test_nothing_sent_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    log = QueryLog("all", 1000, Stats(), FakeClock())
    log(b"\x00\x01", None, False, PEER, 0)
    assert not [r for r in caplog.records if r.name == "clusterset_dns.query"]


def test_text_and_json_lines(caplog: pytest.LogCaptureFixture) -> None:
    log = QueryLog("all", 1000, Stats(), FakeClock())
    data = query("Web.prod.svc.clusterset.local.", "AAAA", edns=0)
    response = handler().handle(data, True)
    assert response is not None
    caplog.clear()
    log(data, response, True, ("::1", 40000, 0, 0), log.clock.perf_counter_ns())
    [record] = [r for r in caplog.records if r.name == "clusterset_dns.query"]
    text = logging.Formatter("%(message)s").format(record)
    head, duration = text.rsplit(" duration=", 1)
    assert head == (f"[::1]:40000 tcp Web.prod.svc.clusterset.local. AAAA NOERROR ede=0 "
                    f"size={len(response)}")
    assert duration.endswith("s") and float(duration[:-1]) >= 0
    entry = json.loads(logs.JSONFormatter().format(record))
    assert entry["logger"] == "clusterset_dns.query" and entry["level"] == "info"
    assert entry["message"] == text
    assert {k: entry[k] for k in ("client", "port", "transport", "name", "type", "rcode", "ede",
                                  "size")} == {
        "client": "::1", "port": 40000, "transport": "tcp",
        "name": "Web.prod.svc.clusterset.local.", "type": "AAAA", "rcode": "NOERROR",
        "ede": 0, "size": len(response)}
    assert isinstance(entry["duration"], float) and entry["duration"] >= 0


def test_a_name_with_odd_bytes_is_escaped(caplog: pytest.LogCaptureFixture) -> None:
    log = QueryLog("all", 1000, Stats(), FakeClock())
    data = bytes(2) + b"\x01\x00\x00\x01" + bytes(6) + b"\x03a.\x01\x00\x00\x01\x00\x01"
    response = handler().handle(data, False)
    records = logged(log, caplog, data)
    assert response is not None and len(records) == 1
    assert records[0].query["name"] == "a\\.\\001." and records[0].query["type"] == "A"  # type: ignore[attr-defined]


def test_a_name_longer_than_dns_allows_is_not_written(caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    """A name of 255 octets (the most RFC 1035 allows), each byte escaped to four
    characters, is logged whole; one of 256 is logged as "-". Before, a 64 KB TCP query
    of 63-byte labels wrote a line of 253 KB (at the default 1,000 lines a second, 250
    MB/s of log from one client)."""
    log = QueryLog("all", 1000, Stats(), FakeClock())

    def question(last: int) -> bytes:  # three labels of 63 bytes and one of ``last``
        labels = [b"\xff" * 63] * 3 + [b"\xff" * last]
        name = b"".join(bytes([len(label)]) + label for label in labels) + b"\0"
        return bytes(2) + b"\x01\x00\x00\x01" + bytes(6) + name + b"\x00\x01\x00\x01"

    [record] = logged(log, caplog, question(61))  # 3 * 64 + 62 + 1 = 255 octets
    assert record.query["name"] == ("\\255" * 63 + ".") * 3 + "\\255" * 61 + "."  # type: ignore[attr-defined]
    assert record.query["type"] == "A"  # type: ignore[attr-defined]
    [record] = logged(log, caplog, question(62))  # 256 octets
    assert record.query["name"] == "-" and record.query["type"] == "-"  # type: ignore[attr-defined]


def test_the_rate_limit_boundary(caplog: pytest.LogCaptureFixture) -> None:
    """4 lines a second, a burst of 4: the 4th line fits, the 5th is dropped and
    counted; an eighth of a second later still none fits, a quarter second later
    exactly one."""
    clock = FakeClock()
    stats = Stats()
    log = QueryLog("all", 4, stats, clock)
    data = query(WEB, "A")
    response = handler().handle(data, False)

    def one() -> int:
        caplog.clear()
        log(data, response, False, PEER, 0)
        return len([r for r in caplog.records if r.name == "clusterset_dns.query"])

    assert [one() for _ in range(4)] == [1, 1, 1, 1]
    assert stats.query_log_dropped == 0
    assert one() == 0 and stats.query_log_dropped == 1
    clock.advance(0.125)  # half a line's worth
    assert one() == 0 and stats.query_log_dropped == 2
    clock.advance(0.125)  # a quarter second since the burst ran out: one line's worth
    assert one() == 1 and stats.query_log_dropped == 2
    assert one() == 0 and stats.query_log_dropped == 3
    clock.advance(10)  # refills to the burst, no further
    assert [one() for _ in range(5)] == [1, 1, 1, 1, 0]


def test_the_log_is_written_whatever_the_log_level(caplog: pytest.LogCaptureFixture) -> None:
    logging.getLogger().setLevel(logging.WARNING)
    log = QueryLog("all", 1000, Stats(), FakeClock())
    assert len(logged(log, caplog, query(WEB, "A"))) == 1


@pytest.mark.parametrize(("value", "normal"), [("off", "off"), ("", "off"), ("ALL", "all"),
                                               ("error, denial", "denial,error")])
def test_flag_values(value: str, normal: str) -> None:
    assert parse_query_log(value) == normal


def test_bad_flag_values() -> None:
    with pytest.raises(ValueError, match="unknown class 'success'"):
        parse_query_log("success")
    from clusterset_dns.base.config import Config
    with pytest.raises(ConfigError, match="--query-log-rate"):
        Config(query_log_rate=0)
