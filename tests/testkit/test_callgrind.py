"""bench/instructions.py's arithmetic and parsing (clusterset_dns_testkit/bench/callgrind.py):
the query-file prefix to the byte, the totals as the tools print them, per answer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clusterset_dns_testkit.bench import callgrind


def framed(*messages: bytes) -> bytes:
    return b"".join(len(m).to_bytes(2, "big") + m for m in messages)


def test_first_queries_takes_whole_messages_only(tmp_path: Path) -> None:
    source, out = tmp_path / "q.bin", tmp_path / "out.bin"
    source.write_bytes(framed(b"a" * 3, b"b" * 300, b"c"))
    callgrind.first_queries(source, 2, out)
    assert out.read_bytes() == framed(b"a" * 3, b"b" * 300)
    callgrind.first_queries(source, 3, out)
    assert out.read_bytes() == source.read_bytes()
    with pytest.raises(ValueError, match="fewer than 4"):
        callgrind.first_queries(source, 4, out)


def test_first_queries_refuses_a_file_cut_inside_a_message(tmp_path: Path) -> None:
    source = tmp_path / "q.bin"
    source.write_bytes(framed(b"abc", b"defg")[:-1])
    callgrind.first_queries(source, 1, tmp_path / "out.bin")  # the whole first one is there
    with pytest.raises(ValueError, match="inside query 2"):
        callgrind.first_queries(source, 2, tmp_path / "out.bin")


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
