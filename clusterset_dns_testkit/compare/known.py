"""The known differences from CoreDNS, each with its one-line reason."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clusterset_dns_testkit.compare.answers import Answer, Row
from clusterset_dns_testkit.compare.common import ZONE
from clusterset_dns_testkit.compare.suite import SuiteRun


def glob_match(key: str, pattern: str) -> bool:
    """``*`` matches anything (brackets and ``?`` are literal); case-sensitive."""
    rx = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(rx, key, re.S) is not None


def _drop_cname(a: Answer) -> Answer:
    return Answer(a.rcode, tuple(r for r in a.records if " CNAME " not in r), a.qname)


def _zero_srv_weight(a: Answer) -> Answer:
    def fix(r: str) -> str:
        owner, rdtype, *rdata = r.split()
        if rdtype == "SRV":
            rdata[1] = "W"
        return " ".join([owner, rdtype, *rdata])
    return Answer(a.rcode, tuple(sorted(fix(r) for r in a.records)), a.qname)


@dataclass(frozen=True)
class Known:
    """A documented difference: the case ids it covers (``*`` patterns, case
    sensitive), the rcodes each server gives, and optionally a normalisation after
    which both answers must be equal (so that nothing else differs)."""

    reason: str
    patterns: tuple[str, ...]
    ours: str | None = None  # our rcode
    coredns: str | None = None  # CoreDNS's rcode
    ours_empty: bool | None = None  # our answer section is empty
    coredns_empty: bool | None = None
    equal_after: Any = None  # Callable[[Answer], Answer]

    def matches(self, row: Row) -> bool:
        if not any(glob_match(row.case.id, p) for p in self.patterns):
            return False
        checks = [
            self.ours is None or row.ours.rcode == self.ours,
            self.coredns is None or row.coredns.rcode == self.coredns,
            self.ours_empty is None or (not row.ours.records) == self.ours_empty,
            self.coredns_empty is None or (not row.coredns.records) == self.coredns_empty,
            self.equal_after is None
            or self.equal_after(row.ours) == self.equal_after(row.coredns),
        ]
        return all(checks)


Z = ZONE
#: every row where the two servers differ must match one of these (one-line reason
#: each); every entry must match at least one row. "§N" is a section of
#: docs/dns-behaviour.md.
KNOWN_DIFFERENCES: list[Known] = [
    # -- deliberate deviations (docs/coredns.md)
    Known('deviation: MCS DNS schema "1.0.0" (§3.3); CoreDNS answers the cluster '
          'DNS schema "1.1.0"', (f"dns-version.{Z}. TXT",), "NOERROR", "NOERROR"),
    Known("deviation: `<clusterid>.<svc>` is an empty non-terminal, NODATA (§2.5, "
          "RFC 8020); CoreDNS answers NXDOMAIN, hiding the endpoint names below",
          tuple(f"{c}.{s}.svc.{Z}. *" for c, s in (
              ("east", "db.conf"), ("west", "db.conf"), ("east", "twohost.conf"),
              ("east", "v6only.conf"), ("east", "nolabel.conf"), ("east", "ignored.conf"),
              ("east", "big.bulk"), ("east", "dotted.ext"), ("east", "beta-hl.ext"),
              ("east", "near.ext"), ("west", "near.ext"), ("west", "near-down.ext"))),
          "NOERROR", "NXDOMAIN", ours_empty=True),
    Known("deviation: dotted cluster ids (KEP-2149) resolve, and each of their levels is "
          "an empty non-terminal; CoreDNS cannot parse them (NXDOMAIN)",
          (f"*east.example.com.dotted.ext.svc.{Z}. A", f"example.com.dotted.ext.svc.{Z}. A",
           f"com.dotted.ext.svc.{Z}. A", f"*.East.Example.COM.dotted.ext.svc.{Z}. A"),
          "NOERROR", "NXDOMAIN"),
    Known("deviation: ANY gets one RFC 8482 `HINFO \"RFC8482\" \"\"`; CoreDNS answers "
          "NOERROR with an empty answer", (f"*.svc.{Z}. ANY",), "NOERROR", "NOERROR",
          ours_empty=False, coredns_empty=True),
    Known("deviation: SRV weight is `max(1, 100 // n)` over the n records returned; CoreDNS "
          "divides 100 by its (address, port) entries before de-duplication (e.g. 25 on "
          "hello's single record)", ("* SRV",), "NOERROR", "NOERROR",
          equal_after=_zero_srv_weight),
    Known("opt-in deviation (§6): a PreferClose Headless import answers A with the local "
          "cluster's ready endpoints when it has some, and SRV with every cluster's, the "
          "local ones at priority 0 (every endpoint name resolves as without the field); "
          "CoreDNS ignores trafficDistribution",
          (f"near.ext.svc.{Z}. *", f"_http._tcp.near.ext.svc.{Z}. SRV")),
    # -- CoreDNS reads fields differently from docs/dns-behaviour.md
    Known("§1.1: an empty port protocol means TCP; CoreDNS finds no `_http._tcp` for a "
          "port without `protocol` (NXDOMAIN)", (f"_http._tcp.named.conf.svc.{Z}. SRV",),
          "NOERROR", "NXDOMAIN"),
    Known("§1.2: FQDN EndpointSlices are ignored; CoreDNS adds a CNAME to the FQDN "
          "endpoint (beside the A records: CNAME and other data)",
          (f"ignored.conf.svc.{Z}. A", f"ignored.conf.svc.{Z}. AAAA"), "NOERROR", "NOERROR",
          equal_after=_drop_cname),
    Known("§1.3: an IP entry that does not parse is dropped; CoreDNS answers a CNAME "
          "to the invalid string", (f"badip.ext.svc.{Z}. A*", f"allbad.ext.svc.{Z}. A*"),
          "NOERROR", "NOERROR", equal_after=_drop_cname),
    Known("§1.2, §5.4: a slice without source-cluster counts for the service only; CoreDNS "
          "sends no answer at all to the SRV query of such a service (timeout)",
          (f"nolabel.conf.svc.{Z}. SRV", f"_http._tcp.nolabel.conf.svc.{Z}. SRV"),
          "NOERROR", "TIMEOUT"),
    Known("§3.2, §5.6: endpoint names exist for Headless imports only; CoreDNS also answers "
          "them for ClusterSetIP imports from their slices",
          (f"*.east.hello.conf.svc.{Z}. A", f"*.west.hello.conf.svc.{Z}. A"),
          "NXDOMAIN", "NOERROR"),
    Known("§3.4: an existing name asked for another type is NODATA; CoreDNS answers "
          "NXDOMAIN for non-TXT types at dns-version and for TXT at the apex",
          (f"dns-version.{Z}. A", f"{Z}. TXT"), "NOERROR", "NXDOMAIN", ours_empty=True),
    Known("§3.4: `<ns>.svc` exists only while an import exists in the namespace; "
          "CoreDNS answers NODATA for any namespace object", (f"orphan.svc.{Z}. A",),
          "NXDOMAIN", "NOERROR", coredns_empty=True),
    # -- environment
    Known("apex NS: ours is always `ns.dns.<zone>`; CoreDNS builds NS from its own "
          "kube-dns Service, which this test API server does not have (NODATA)",
          (f"{Z}. NS",), "NOERROR", "NOERROR", ours_empty=False, coredns_empty=True),
    Known("`ns.dns.<zone>` has addresses only with --ns-address (NXDOMAIN without); "
          "CoreDNS answers NODATA (no kube-dns Service here)", (f"ns.dns.{Z}. A",),
          "NXDOMAIN", "NOERROR", coredns_empty=True),
]


def known_for(row: Row) -> Known | None:
    return next((k for k in KNOWN_DIFFERENCES if k.matches(row)), None)


_EDNS = ("deviation: our UDP answers are capped at --edns-udp-size 1232; CoreDNS (no "
         "`bufsize` plugin) advertises and fills the client's 4096")
_MALFORMED = ("CoreDNS answers SERVFAIL (not FORMERR) to a header announcing a question "
              "it does not carry, and NOERROR (not NOTIMP) to NOTIFY")

#: conformance test-id pattern -> reason, for tests whose outcome differs between
#: the two servers (``--objects api``)
KNOWN_SUITE_DIFFERENCES: dict[str, str] = {
    "*::test_dns_version_txt_is_mcs_schema_1_0_0": "dns-version 1.0.0 vs 1.1.0 (deviation)",
    "*::test_cluster_level_name_is_empty_non_terminal_nodata[*]":
        "`<clusterid>.<svc>` NODATA vs NXDOMAIN (deviation)",
    "*::test_dotted_cluster_id_*": "dotted cluster ids (deviation)",
    "*::test_any_on_existing_name_is_minimal_hinfo[*]": "ANY: RFC 8482 HINFO vs empty "
                                                        "NOERROR (deviation)",
    "*::test_clusterset_ip_bare_name_srv_one_record_per_distinct_port[*]": "SRV weights",
    "*::test_clusterset_ip_named_port_srv[*]": "SRV weights; `_http._tcp.named` also: "
                                               "empty protocol = TCP",
    "*::test_headless_srv_targets_and_additional[*]": "SRV weights",
    "*::test_two_endpoints_sharing_hostname_srv_dedup": "SRV weights",
    "*::test_case_insensitive_srv_owner_keeps_question_case": "SRV weights",
    "*::test_layout_clusterset_ip_named_port_srv[v1beta1-spec]": "SRV weights",
    "*::test_clusterset_ip_srv_additional_carries_target_addresses[_http._tcp.named.conf]":
        "empty protocol = TCP: CoreDNS has no `_http._tcp.named`",
    "*::test_existing_name_other_type_is_nodata[srvname-A]":
        "empty protocol = TCP: CoreDNS has no `_http._tcp.named` (NXDOMAIN)",
    "*::test_non_mcs_and_fqdn_slices_ignored": "CoreDNS answers a CNAME for an FQDN slice",
    "*::test_nonexistent_endpoint_name_nxdomain[i-2.east.ignored.conf]":
        "CoreDNS answers a name for the FQDN slice's endpoint",
    "*::test_import_with_only_invalid_ips_exists_without_addresses[*]":
        "CoreDNS answers a CNAME to the invalid IP string",
    "*::test_invalid_import_ip_dropped_valid_one_served": "CoreDNS answers a CNAME to the "
                                                          "invalid IP string",
    "*::test_apex_soa": "CoreDNS's clusterset.local SOA serial is 0: only updates of imports "
                        "and slices bump it (adds and deletes bump the cluster.local one)",
    "*::test_apex_ns": "CoreDNS has no NS without its own kube-dns Service",
    "*::test_nonexistent_name_nxdomain[ns.dns]": "CoreDNS: NODATA for ns.dns.<zone>",
    "*::test_apex_other_types_nodata[TXT]": "CoreDNS: NXDOMAIN for TXT at the apex",
    "*::test_dns_version_other_type_nodata": "CoreDNS: NXDOMAIN for dns-version A",
    "*::test_slices_without_import_create_no_names[orphan-ns]":
        "CoreDNS: NODATA for a namespace without imports",
    "*::test_nonexistent_name_nxdomain[orphan.svc]": "CoreDNS: NODATA for a namespace "
                                                     "without imports",
    "*::test_outside_zone_refused[*-cluster.local.-SOA]":
        "the CoreDNS server block also serves cluster.local (configuration)",
    "*::test_outside_zone_refused[*-hello.conf.svc.cluster.local.-A]":
        "the CoreDNS server block also serves cluster.local (configuration)",
    "*::test_edns_opt_echoed_with_capped_udp_size": _EDNS,
    "*::test_udp_edns_4096_a_fits_under_1232_cap": _EDNS,
    "*::test_udp_edns_4096_capped_at_1232": _EDNS,
    "*::test_size_limits_do_not_leak_between_queries": _EDNS,
    "*::test_large_aaaa_full_over_tcp[udp-then-tcp-retry]": _EDNS + " (no TC, no TCP retry)",
    "*::test_malformed_query_formerr_over_tcp": _MALFORMED,
    "*::test_malformed_query_formerr_over_udp[header-only-qdcount-1]": _MALFORMED,
    "*::test_random_queries_always_get_a_reply": _MALFORMED,
    "*::test_opcode_other_than_query_notimp[NOTIFY]": _MALFORMED,
}

#: conformance tests that fail on BOTH servers with ``--objects api``, and why
KNOWN_SUITE_FAILURES_BOTH: dict[str, str] = {
    "*::test_layout_*[v1alpha2-*]": "the v1alpha2 ServiceImports cannot be stored by the "
                                    "v0.5.0 CRD (only our file source reads them)",
}


def reason_for(key: str, known: dict[str, str]) -> str | None:
    for pattern, reason in known.items():
        if glob_match(key, pattern):
            return reason
    return None


def unexplained_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if not r.same and known_for(r) is None]


def unused_known(rows: Sequence[Row]) -> list[Known]:
    """Entries of :data:`KNOWN_DIFFERENCES` no differing row matches (stale)."""
    diff = [r for r in rows if not r.same]
    return [k for k in KNOWN_DIFFERENCES if not any(k.matches(r) for r in diff)]


def stale_patterns(keys: Iterable[str], known: dict[str, str]) -> list[str]:
    keys = list(keys)
    return [p for p in known if not any(glob_match(k, p) for k in keys)]


def unexplained_suite_differences(ours: SuiteRun, coredns: SuiteRun) -> dict[str, str]:
    """Test id -> what is wrong: tests whose outcomes differ without a known reason
    (or where ours fails and CoreDNS passes), and tests failing on both servers
    without a known reason."""
    out = {}
    for t, (o, c) in suite_differences(ours, coredns).items():
        if o != "passed" or c not in ("failed", "error"):
            out[t] = f"clusterset-dns {o}, CoreDNS {c}"
        elif reason_for(t, KNOWN_SUITE_DIFFERENCES) is None:
            out[t] = f"clusterset-dns {o}, CoreDNS {c}: not in KNOWN_SUITE_DIFFERENCES"
    for t in failing_on_both(ours, coredns):
        if reason_for(t, KNOWN_SUITE_FAILURES_BOTH) is None:
            out[t] = "fails on both servers: not in KNOWN_SUITE_FAILURES_BOTH"
    return out


def failing_on_both(ours: SuiteRun, coredns: SuiteRun) -> list[str]:
    bad = ("failed", "error")
    return sorted(t for t, o in ours.outcomes.items()
                  if o in bad and coredns.outcomes.get(t) in bad)


def suite_differences(ours: SuiteRun, coredns: SuiteRun) -> dict[str, tuple[str, str]]:
    """Test id -> (our outcome, CoreDNS's) where they differ."""
    ids = sorted(set(ours.outcomes) | set(coredns.outcomes))
    return {t: (ours.outcomes.get(t, "missing"), coredns.outcomes.get(t, "missing"))
            for t in ids if ours.outcomes.get(t) != coredns.outcomes.get(t)}


