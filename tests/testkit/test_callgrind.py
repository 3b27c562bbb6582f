"""bench/instructions.py's arithmetic and parsing (clusterset_dns_testkit/bench/callgrind.py):
the query file's messages to the byte, the totals as the tools print them, per answer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clusterset_dns_testkit.bench import callgrind


def framed(*messages: bytes) -> bytes:
    return b"".join(len(m).to_bytes(2, "big") + m for m in messages)


def test_queries_in_counts_whole_messages(tmp_path: Path) -> None:
    source = tmp_path / "q.bin"
    source.write_bytes(framed(b"a" * 3, b"b" * 300, b""))
    assert callgrind.queries_in(source) == 3
    source.write_bytes(b"")
    assert callgrind.queries_in(source) == 0


def test_queries_in_refuses_a_file_cut_short(tmp_path: Path) -> None:
    source = tmp_path / "q.bin"
    whole = framed(b"abc", b"defg")
    source.write_bytes(whole[:-1])
    with pytest.raises(ValueError, match="inside message 2"):
        callgrind.queries_in(source)
    source.write_bytes(whole + b"\x00")
    with pytest.raises(ValueError, match="inside a length"):
        callgrind.queries_in(source)


def test_totals_and_completed_read_the_tools_output() -> None:
    annotated = ("Profile data file 'cg.out' (creator: callgrind-3.19.0)\n"
                 "--------\n2,645,573,181 (100.0%)  PROGRAM TOTALS\n\n"
                 "1,000 (0.1%)  ???:foo\n")
    assert callgrind.totals(annotated) == 2_645_573_181
    assert callgrind.totals("no totals here") is None
    dnsperf = "  Queries sent:         13000\n  Queries completed:    12999 (99.99%)\n"
    assert callgrind.completed(dnsperf) == 12999
    assert callgrind.completed("Queries sent: 5") is None


def test_per_answer_cancels_what_both_runs_share() -> None:
    assert callgrind.per_answer((1_000_000, 3000), (1_200_000, 13000)) == 20.0
    assert math.isnan(callgrind.per_answer((1_000, 3000), (2_000, 3000)))
    assert math.isnan(callgrind.per_answer((1_000, 3000), (2_000, 2999)))
