"""clusterset-dns as the ``forward`` target of a stock CoreDNS v1.14.7 (the way a
cluster's CoreDNS sends ``clusterset.local`` to it), on loopback:

* the dig-based conformance suite gets the same answers through CoreDNS (with
  and without ``cache``) as from our server directly, apart from the listed
  differences a forwarder legitimately introduces;
* a truncated UDP answer ends in a complete answer over TCP;
* CoreDNS's ``. IN NS`` health check counts our REFUSED as healthy;
* CoreDNS caches our NXDOMAIN for the SOA minimum (``--ttl``), not longer.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
from conformance.csdns_testlib import DigResult, parse_dig

from clusterset_dns_testkit.dnsserver import ServerProcess, metric_sum, wait_for
from clusterset_dns_testkit.peers import CoreDNS, free_port

pytestmark = pytest.mark.coredns

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "tests" / "conformance" / "objects"
ZONE = "clusterset.local"
HOST = "127.0.0.1"
BIG = f"big.bulk.svc.{ZONE}."
BIG_AAAA = {f"fd00:8::{i:x}" for i in range(1, 61)}
C = "tests/conformance/"

# --------------------------------------------------------------------------------------
# what a forwarder legitimately changes, per conformance test id


_EDNS_SIZE = ("CoreDNS sends its own OPT: it advertises the client's buffer (4096), "
              "not our 1232 cap, and relays answers up to that size")
_OWN_ANSWER = ("CoreDNS answers this malformed query itself (SERVFAIL, question-less); "
               "it never reaches our server")

#: tests whose outcome differs through ``forward`` (deterministic: they must differ)
THROUGH_FORWARD: dict[str, str] = {
    C + "test_protocol.py::test_edns_opt_echoed_with_capped_udp_size": _EDNS_SIZE,
    C + "test_transport.py::test_udp_edns_4096_a_fits_under_1232_cap": _EDNS_SIZE,
    C + "test_transport.py::test_malformed_query_formerr_over_udp[header-only-qdcount-1]":
        _OWN_ANSWER,
    C + "test_transport.py::test_malformed_query_formerr_over_tcp": _OWN_ANSWER,
    C + "test_transport.py::test_random_queries_always_get_a_reply":
        _OWN_ANSWER + " (e.g. junk after a header that claims one question)",
}

_CACHE_TTL_CAP = "cache 30 caps every TTL at 30 s: dns-version's 28800 arrives as 30"

#: with ``cache 30``, also always different
THROUGH_CACHE: dict[str, str] = {
    **THROUGH_FORWARD,
    C + "test_protocol.py::test_dns_version_ttl_28800": _CACHE_TTL_CAP,
    C + "test_names.py::test_dns_version_txt_is_mcs_schema_1_0_0": _CACHE_TTL_CAP,
}

_CACHE_HIT = ("served from CoreDNS's cache when an earlier test asked the same question "
              "1-5 s before: TTLs decremented, owner names in the case of the first "
              "asker, a cached full answer sent over UDP up to the client's 4096 bytes "
              "(no TC); whether it happens depends on timing")

#: with ``cache 30``, may differ (timing); each failure must still carry the same
#: answer as ours (checked by :func:`cache_effect`). Patterns: ``*`` = any params.
THROUGH_CACHE_TIMING: dict[str, str] = {p: _CACHE_HIT for p in (
    C + "test_answers.py::test_clusterset_ip_address_records[*]",
    C + "test_answers.py::test_clusterset_ip_srv_additional_carries_target_addresses[*]",
    C + "test_answers.py::test_negative_answers_carry_the_zone_soa",
    C + "test_extended.py::test_dotted_cluster_id_case_insensitive",
    C + "test_mcs_conformance.py::test_*",
    C + "test_names.py::test_case_*",
    C + "test_names.py::test_nonexistent_name_nxdomain[*]",
    C + "test_names.py::test_nxdomain_whatever_the_type[*]",
    C + "test_names.py::test_soa_serial_consistent_between_apex_and_negative_answers",
    C + "test_names.py::test_apex_*",
    C + "test_protocol.py::test_ad_cd_query_bits_do_not_break_answers[*]",
    C + "test_protocol.py::test_edns_cookie_option_does_not_break_answers[*]",
    C + "test_protocol.py::test_edns_do_bit_does_not_break_answers",
    C + "test_protocol.py::test_edns_opt_present_when_query_had_one[*]",
    C + "test_protocol.py::test_every_record_has_default_ttl_5[*]",
    C + "test_protocol.py::test_negative_answer_soa_ttl_and_minimum",
    C + "test_protocol.py::test_no_opt_without_edns[*]",
    C + "test_protocol.py::test_flags_aa_set_ra_clear_rd_echoed[*]",
    C + "test_transport.py::test_large_aaaa_full_over_tcp[*]",
    C + "test_transport.py::test_malformed_query_formerr_over_udp[*]",
    C + "test_transport.py::test_opcode_other_than_query_notimp[*]",
    C + "test_transport.py::test_shorter_than_header_dropped[*]",
    C + "test_transport.py::test_size_limits_do_not_leak_between_queries",
    C + "test_transport.py::test_tcp_short_frame_then_server_still_serves",
    C + "test_transport.py::test_tcp_without_edns_full_answer",
    C + "test_transport.py::test_truncated_srv_keeps_question",
)}

# Not among the differences, although a forwarder could have introduced them:
# RA (CoreDNS copies our clear RA, and its cache keeps it), AA (copied; the cache
# sets it), ANY (sent to us as asked, over UDP: no `any` plugin in the Corefile).


# --------------------------------------------------------------------------------------
# helpers


def forward_corefile(target_port: int, *, cache: bool, forward_opts: str = "",
                     extra: str = "") -> str:
    return (f"{ZONE} {{\n"
            f"    forward . {HOST}:{target_port} {{\n"
            f"        {forward_opts}\n"
            f"    }}\n"
            f"    {'cache 30' if cache else ''}\n"
            f"    {extra}\n"
            f"}}\n")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=2) as r:
        return str(r.read().decode())


def metric_names(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    """Processes started by a test (ours and CoreDNS), stopped at its end."""
    started: list[Any] = []
    yield started
    for s in reversed(started):
        if isinstance(s, ServerProcess) and s.proc is not None:
            # never leave it stopped by SIGSTOP: SIGTERM would wait forever
            with contextlib.suppress(ProcessLookupError):
                os.kill(s.proc.pid, signal.SIGCONT)
            s.stop()
        else:
            s.close()


def start_ours(servers: list[Any], *args: str) -> ServerProcess:
    srv = ServerProcess(*(args or ("--manifests", str(OBJECTS))))
    servers.append(srv)
    srv.start()
    srv.wait_ready()
    return srv


def start_coredns(servers: list[Any], corefile: str) -> CoreDNS:
    core = CoreDNS(corefile)
    servers.append(core)
    return core


def ask(port: int, name: str, rdtype: str = "A", *, tcp: bool = False,
        payload: int | None = None, timeout: float = 3.0) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype, use_edns=0 if payload else False,
                               payload=payload or 512)
    if tcp:
        return dns.query.tcp(q, HOST, port=port, timeout=timeout)
    return dns.query.udp(q, HOST, port=port, timeout=timeout)


def rdatas(msg: dns.message.Message, rdtype: str) -> set[str]:
    want = dns.rdatatype.from_text(rdtype)
    return {rd.to_text() for rrset in msg.answer if rrset.rdtype == want for rd in rrset}


# --------------------------------------------------------------------------------------
# 1. the conformance suite through CoreDNS


@pytest.fixture(scope="module")
def suite_runs(compare: ModuleType, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[dict[str, Any]]:
    """The conformance suite (``--objects all -m "not own_server"``) against our
    server directly, through ``forward`` and through ``forward`` + ``cache 30``;
    the three runs in parallel, all on one server of ours (on files)."""
    workdir = tmp_path_factory.mktemp("suites")
    ours = ServerProcess("--manifests", str(OBJECTS)).start()
    cores: list[CoreDNS] = []
    try:
        ours.wait_ready()
        for cache in (False, True):
            cores.append(CoreDNS(forward_corefile(ours.port, cache=cache)))
        targets = {"direct": ours.port, "forward": cores[0].port, "cache": cores[1].port}
        started = {}
        for label, port in targets.items():
            (workdir / label).mkdir()
            started[label] = compare.start_suite(f"{HOST}:{port}", "all", workdir / label)
        runs = {label: compare.finish_suite(*s) for label, s in started.items()}
        yield {"runs": runs, "ours": ours, "cores": cores}
    finally:
        for c in cores:
            c.close()
        ours.stop()


def differing(direct: Any, other: Any) -> dict[str, tuple[str, str]]:
    ids = set(direct.outcomes) | set(other.outcomes)
    return {t: (direct.outcomes.get(t, "missing"), other.outcomes.get(t, "missing"))
            for t in sorted(ids) if direct.outcomes.get(t) != other.outcomes.get(t)}


def failure_text(run: Any, test_id: str) -> str:
    return str(run.messages.get(test_id, ""))[-3000:]


def test_direct_run_passes(suite_runs: dict[str, Any]) -> None:
    direct = suite_runs["runs"]["direct"]
    assert direct.count("passed") > 250, direct.output[-3000:]
    failed = [t for t, o in direct.outcomes.items() if o in ("failed", "error")]
    assert not failed, "\n".join(f"{t}\n{failure_text(direct, t)}" for t in failed)


def test_suite_through_forward_matches_direct(suite_runs: dict[str, Any]) -> None:
    runs = suite_runs["runs"]
    diff = differing(runs["direct"], runs["forward"])
    unexpected = {t: o for t, o in diff.items()
                  if t not in THROUGH_FORWARD or o != ("passed", "failed")}
    assert not unexpected, "\n\n".join(
        f"{t}: direct {o[0]}, through CoreDNS {o[1]}\n{failure_text(runs['forward'], t)}"
        for t, o in unexpected.items())
    missing = sorted(set(THROUGH_FORWARD) - set(diff))
    assert not missing, f"listed as different through forward, but the same: {missing}"


def cache_effect(cached: DigResult, ours_port: int) -> str | None:
    """None when the answer dig saw through the cache equals ours (asked again now)
    up to what a cache changes: smaller TTLs, owner-name case, the full answer
    instead of a TC one. Else what differs."""
    cmd = list(cached.cmd)
    i = cmd.index("-p")
    cmd[i + 1] = str(ours_port)
    if "tc" in cached.flags:
        return "the cached answer has TC"
    for attempt in range(2):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
        mine = parse_dig(cmd, proc.stdout, proc.returncode)
        if "tc" not in mine.flags or attempt:
            break
        cmd = [c for c in cmd if c != "+ignore"] + ["+tcp"]
    if cached.rcode != mine.rcode:
        return f"rcode {cached.rcode} through the cache, {mine.rcode} from ours"
    for section in ("answer", "authority", "additional"):
        got, want = getattr(cached, section), getattr(mine, section)
        (gk, gt), (wk, wt) = _keys_and_ttls(got), _keys_and_ttls(want)
        if gk != wk:
            return f"{section}: {got} through the cache, {want} from ours"
        if any(gt[k] > wt[k] for k in gk):
            return f"{section}: TTLs {got} through the cache above ours {want}"
    return None


def _keys_and_ttls(lines: list[str]) -> tuple[list[str], dict[str, int]]:
    """Records without TTL, lower-cased (sorted), and each one's TTL."""
    keys, ttls = [], {}
    for line in lines:
        name, ttl, *rest = line.split()
        key = " ".join([name, *rest]).lower()
        keys.append(key)
        ttls[key] = int(ttl)
    return sorted(keys), ttls


def last_dig_in(text: str) -> DigResult | None:
    """The last dig command and its output quoted in a failure (pytest's ``E`` lines)."""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E")]
    starts = [i for i, ln in enumerate(lines) if "$ dig " in ln]
    if not starts:
        return None
    first = lines[starts[-1]]
    cmd = shlex.split(first[first.index("$ dig ") + 2:])
    return parse_dig(cmd, "\n".join(lines[starts[-1] + 1:]), 0)


def test_suite_through_forward_and_cache_gives_the_same_answers(
        compare: ModuleType, suite_runs: dict[str, Any]) -> None:
    runs = suite_runs["runs"]
    ours_port = suite_runs["ours"].port
    diff = differing(runs["direct"], runs["cache"])
    problems = []
    for t, outcome in diff.items():
        text = failure_text(runs["cache"], t)
        if outcome != ("passed", "failed"):
            problems.append(f"{t}: direct {outcome[0]}, through the cache {outcome[1]}\n{text}")
        elif t in THROUGH_CACHE:
            continue
        else:
            timing = compare.reason_for(t, THROUGH_CACHE_TIMING)
            dug = last_dig_in(runs["cache"].messages.get(t, ""))
            why = "no dig answer in the failure" if dug is None else cache_effect(dug, ours_port)
            if timing is None or why is not None:
                verdict = ("looks like a cache hit: add it to THROUGH_CACHE_TIMING"
                           if why is None else f"answers differ: {why}")
                problems.append(f"{t}: {verdict}\n{text}")
    assert not problems, "\n\n".join(problems)
    missing = sorted(set(THROUGH_CACHE) - set(diff))
    assert not missing, f"listed as different through the cache, but the same: {missing}"


# --------------------------------------------------------------------------------------
# 2. truncation: UDP TC, then the whole answer over TCP


def test_truncated_udp_answer_completed_over_tcp(servers: list[Any]) -> None:
    ours = start_ours(servers)
    prom, prom_prefer = free_port(), free_port()
    core = start_coredns(servers, forward_corefile(ours.port, cache=False,
                                                   extra=f"prometheus {HOST}:{prom}"))
    prefer = start_coredns(servers, forward_corefile(
        ours.port, cache=False, forward_opts="prefer_udp",
        extra=f"prometheus {HOST}:{prom_prefer}"))
    to = f"{HOST}:{ours.port}"

    def upstream_conns(port: int, proto: str) -> float:
        """Connections CoreDNS took (new or from its pool) to ask us over ``proto``."""
        text = scrape(port)
        return sum(metric_sum(text, f"coredns_proxy_conn_cache_{k}_total", proto=proto, to=to)
                   for k in ("hits", "misses"))

    def truncated() -> float:
        return ours.metric("clusterset_dns_truncated_total")

    # A client asking CoreDNS over TCP: CoreDNS asks us over TCP, all 60 records.
    tc0, tcp0 = truncated(), upstream_conns(prom, "tcp")
    r = ask(core.port, BIG, "AAAA", tcp=True)
    assert rdatas(r, "AAAA") == BIG_AAAA and not r.flags & dns.flags.TC
    assert truncated() == tc0 and upstream_conns(prom, "tcp") == tcp0 + 1

    # A client asking over UDP with a 4096-byte buffer: CoreDNS asks us over UDP with
    # that buffer, we cap at 1232 and set TC with the records that fit, CoreDNS relays
    # the TC answer (stock `forward` does not retry by itself); the client retries over
    # TCP, and CoreDNS then asks us over TCP.
    tc0, udp0, tcp0 = truncated(), upstream_conns(prom, "udp"), upstream_conns(prom, "tcp")
    q = dns.message.make_query(BIG, "AAAA", use_edns=0, payload=4096)
    udp = dns.query.udp(q, HOST, port=core.port, timeout=3)
    assert udp.flags & dns.flags.TC, f"no TC through CoreDNS:\n{udp}"
    assert rdatas(udp, "AAAA") and rdatas(udp, "AAAA") < BIG_AAAA, udp
    assert truncated() == tc0 + 1 and upstream_conns(prom, "udp") == udp0 + 1
    full, used_tcp = dns.query.udp_with_fallback(q, HOST, port=core.port, timeout=3)
    assert used_tcp and rdatas(full, "AAAA") == BIG_AAAA, full
    assert truncated() == tc0 + 2, "the UDP try of the fallback was not truncated by us"
    assert upstream_conns(prom, "tcp") == tcp0 + 1, "CoreDNS did not ask us over TCP"

    # `forward . ours { prefer_udp }`: CoreDNS itself asks over UDP first, gets our TC
    # and retries over TCP; the client gets the whole answer in one exchange.
    tc0 = truncated()
    udp0, tcp0 = upstream_conns(prom_prefer, "udp"), upstream_conns(prom_prefer, "tcp")
    r = ask(prefer.port, BIG, "AAAA", tcp=True)
    assert rdatas(r, "AAAA") == BIG_AAAA and not r.flags & dns.flags.TC, r
    assert truncated() == tc0 + 1
    assert upstream_conns(prom_prefer, "udp") == udp0 + 1
    assert upstream_conns(prom_prefer, "tcp") == tcp0 + 1


# --------------------------------------------------------------------------------------
# 3. CoreDNS's health check: `. IN NS`, our REFUSED counts as healthy


def test_health_check_our_refused_counts_as_healthy(servers: list[Any]) -> None:
    """CoreDNS v1.14.7 health-checks an upstream only after an exchange with it failed
    (then every ``health_check`` interval until a check succeeds): with a healthy
    upstream no ``. NS`` is ever sent. So one exchange is made to fail by stopping our
    server (SIGSTOP) for one query; the check CoreDNS then sends waits in our socket
    and is answered REFUSED once the server continues: no check failure, the upstream
    stays up. Then the same without continuing: the failure counter moves (so it is
    the right metric)."""
    ours = start_ours(servers)
    prom = free_port()
    core = start_coredns(servers, forward_corefile(
        ours.port, cache=False,
        forward_opts="health_check 0.5s\n        max_connect_attempts 1\n"
                     "        read_timeout 300ms",
        extra=f"prometheus {HOST}:{prom}"))
    assert ours.proc is not None
    to = f"{HOST}:{ours.port}"
    hc_failures = "coredns_proxy_healthcheck_failures_total"

    def refused() -> float:
        return ours.metric("clusterset_dns_responses_total", rcode="REFUSED")

    def healthy_answer() -> bool:
        try:
            return ask(core.port, f"hello.conf.svc.{ZONE}.", timeout=1).rcode() == 0
        except dns.exception.Timeout:
            return False

    assert healthy_answer()
    text = scrape(prom)
    # (a labelled counter such as coredns_proxy_healthcheck_failures_total is only
    # exported once it has a sample: absent = no failure; the control below shows it)
    assert {"coredns_proxy_request_duration_seconds",
            "coredns_forward_healthcheck_broken_total"} <= metric_names(text), sorted(
        metric_names(text))

    # While every exchange succeeds: no `. NS` reaches us (observed for 3 intervals).
    r0 = refused()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert healthy_answer() and refused() == r0, "a health check while healthy"
        time.sleep(0.1)

    # One failed exchange -> one health check, answered REFUSED: healthy.
    os.kill(ours.proc.pid, signal.SIGSTOP)
    try:
        r = ask(core.port, f"db.conf.svc.{ZONE}.", timeout=5)
        assert r.rcode() == dns.rcode.SERVFAIL, r
    finally:
        os.kill(ours.proc.pid, signal.SIGCONT)
    wait_for(lambda: refused() >= r0 + 1, 5, "the `. NS` health check to reach our server")
    wait_for(healthy_answer, 5, "answers through CoreDNS again")
    text = scrape(prom)
    assert metric_sum(text, hc_failures, to=to) == 0, [
        ln for ln in text.splitlines() if "healthcheck" in ln]
    assert metric_sum(text, "coredns_forward_healthcheck_broken_total") == 0
    assert refused() - r0 <= 3, "health checks keep coming after a successful one"

    # Control: a check that gets no answer is counted by that metric.
    os.kill(ours.proc.pid, signal.SIGSTOP)
    try:
        assert ask(core.port, f"hello.conf.svc.{ZONE}.", "AAAA", timeout=5).rcode() == (
            dns.rcode.SERVFAIL)
        wait_for(lambda: metric_sum(scrape(prom), hc_failures, to=to) >= 1, 5,
                 f"{hc_failures} to count the unanswered check")
    finally:
        os.kill(ours.proc.pid, signal.SIGCONT)
    wait_for(healthy_answer, 5, "answers through CoreDNS after the server continued")


# --------------------------------------------------------------------------------------
# 4. negative caching: the SOA minimum (our --ttl), not the cache's 30 s


LATE_IMPORT = """\
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata:
  name: late
  namespace: conf
spec:
  type: ClusterSetIP
  ips: ["10.42.0.99"]
  ports:
    - name: http
      protocol: TCP
      port: 80
"""


def test_nxdomain_cached_for_the_soa_minimum_only(servers: list[Any], tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    shutil.copytree(OBJECTS, objects)
    ours = start_ours(servers, "--manifests", str(objects))
    core = start_coredns(servers, forward_corefile(ours.port, cache=True))
    name = f"late.conf.svc.{ZONE}."

    t0 = time.monotonic()
    first = ask(core.port, name)
    assert first.rcode() == dns.rcode.NXDOMAIN, first
    soa = first.authority[0][0]
    assert first.authority[0].ttl == 5 and soa.minimum == 5, first  # --ttl 5 (default)

    (objects / "core" / "late.yaml").write_text(LATE_IMPORT)
    wait_for(lambda: rdatas(ask(ours.port, name), "A") == {"10.42.0.99"}, 5,
             "our server to serve the new import")
    switched = time.monotonic() - t0
    cached = ask(core.port, name)
    assert switched < 3.5, f"our server took {switched:.1f}s: too late to see the cache"
    assert cached.rcode() == dns.rcode.NXDOMAIN, (
        f"{switched:.1f}s after the first answer CoreDNS no longer serves the cached "
        f"NXDOMAIN:\n{cached}")
    assert cached.authority[0].ttl < 5 or switched < 1, cached

    def positive() -> bool:
        r = ask(core.port, name)
        return r.rcode() == dns.rcode.NOERROR and rdatas(r, "A") == {"10.42.0.99"}
    wait_for(positive, 5 + 3 - (time.monotonic() - t0), "the positive answer through "
             "CoreDNS within the SOA minimum (5 s) + 3 s")
    elapsed = time.monotonic() - t0
    assert elapsed <= 8.0, f"positive answer after {elapsed:.1f}s"


# --------------------------------------------------------------------------------------
# 5. Extended DNS Errors (RFC 8914) reach the client through `forward`


@pytest.mark.parametrize("cache", [False, True], ids=["forward", "forward+cache"])
def test_extended_dns_errors_pass_through_forward(servers: list[Any], cache: bool) -> None:
    """CoreDNS's forward relays our OPT record, the EDE option in it included: dig
    through CoreDNS reads the same INFO-CODE and EXTRA-TEXT as from our server. Its
    ``cache`` plugin (v1.14.7) writes an OPT of its own, without the option, on a
    miss as on a hit: there the rcode and records come through and the EDE does not
    (what docs/dns-behaviour.md §3.8 tells users)."""
    ours = start_ours(servers)
    core = start_coredns(servers, forward_corefile(ours.port, cache=cache))
    cases = [(f"notready.conf.svc.{ZONE}.", "A", "NXDOMAIN",
              (0, "no ready endpoint: 2 not ready (east 2)")),
             (f"v4only.conf.svc.{ZONE}.", "AAAA", "NOERROR",
              (0, "no IPv6 address: this name has IPv4 addresses only")),
             (f"noslices.conf.svc.{ZONE}.", "A", "NXDOMAIN",
              (0, "no EndpointSlice for ServiceImport conf/noslices has arrived"))]
    for name, rdtype, rcode, want in cases:
        for port in (ours.port, core.port):
            for transport in ("+notcp", "+tcp"):
                res = dig(port, name, rdtype, transport)
                expected = None if cache and port == core.port else want
                assert res.rcode == rcode and res.ede == expected, res.describe()
    # A name that never existed: no EDE from either.
    for port in (ours.port, core.port):
        res = dig(port, f"nothere.conf.svc.{ZONE}.", "A")
        assert res.rcode == "NXDOMAIN" and res.ede is None, res.describe()


def dig(port: int, name: str, rdtype: str, *opts: str) -> DigResult:
    cmd = ["dig", f"@{HOST}", "-p", str(port), "+norecurse", "+time=3", "+tries=1", *opts,
           "-t", rdtype, "-q", name]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    return parse_dig(cmd, proc.stdout, proc.returncode)
