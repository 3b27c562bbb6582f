"""Manifests that tests rewrite (clusterset_dns_testkit.manifests), and transfer
clients (dnspython and dig)."""

from __future__ import annotations

import subprocess

import dns.message
import dns.query
import dns.rdatatype

from clusterset_dns_testkit import manifests

ZONE = "clusterset.local"


def headless(namespace: str, name: str, cluster: str, addresses: list[str]) -> str:
    """The testkit's Headless manifest, in the argument order of this suite's calls."""
    return manifests.headless(name, addresses, namespace, cluster)


def ixfr(host: str, port: int, serial: int, timeout: float = 10.0) -> list[dns.message.Message]:
    """An IXFR from ``serial`` over TCP, every message of the reply (no TSIG)."""
    return list(dns.query.xfr(host, ZONE, rdtype=dns.rdatatype.IXFR, serial=serial,
                              port=port, timeout=timeout, relativize=False))


def answer_lines(messages: list[dns.message.Message]) -> list[str]:
    """The transfer's records in order, one ``name ttl IN TYPE rdata`` line each."""
    return [f"{rrset.name} {rrset.ttl} IN {dns.rdatatype.to_text(rrset.rdtype)} {rdata}"
            for message in messages for rrset in message.answer for rdata in rrset]


def dig(*args: str) -> str:
    return subprocess.run(["dig", *args], capture_output=True, text=True, timeout=60,
                          check=False).stdout


def dig_records(text: str) -> list[str]:
    """dig's record lines (comments dropped), whitespace collapsed."""
    return [" ".join(line.split()) for line in text.splitlines()
            if line.strip() and not line.startswith(";")]
