"""What bench/instructions.py reads and computes: a prefix of a dnsperf query file,
callgrind's and dnsperf's totals, and instructions per answer from two runs."""

from __future__ import annotations

import re
import struct
from pathlib import Path

TOTALS = re.compile(r"^\s*([\d,]+) .*PROGRAM TOTALS", re.M)
COMPLETED = re.compile(r"Queries completed:\s+(\d+)")


def first_queries(binfile: Path, count: int, out: Path) -> None:
    """The first ``count`` messages of a dnsperf ``-B`` file (2-byte length framing)."""
    data, at = binfile.read_bytes(), 0
    for _ in range(count):
        if at + 2 > len(data):
            raise ValueError(f"{binfile} holds fewer than {count} queries")
        (size,) = struct.unpack_from("!H", data, at)
        at += 2 + size
        if at > len(data):
            raise ValueError(f"{binfile} ends inside query {_ + 1}")
    out.write_bytes(data[:at])


def totals(annotated: str) -> int | None:
    """The instructions of callgrind_annotate's PROGRAM TOTALS line."""
    found = TOTALS.search(annotated)
    return None if found is None else int(found.group(1).replace(",", ""))


def completed(dnsperf_output: str) -> int | None:
    """The queries dnsperf saw answered."""
    found = COMPLETED.search(dnsperf_output)
    return None if found is None else int(found.group(1))


def per_answer(small: tuple[int, int], large: tuple[int, int]) -> float:
    """Instructions per answer from (instructions, answered) of a shorter and a longer
    run: the difference cancels start-up and shutdown. NaN when the longer run
    answered no more than the shorter."""
    (few, few_n), (many, many_n) = small, large
    return (many - few) / (many_n - few_n) if many_n > few_n else float("nan")
