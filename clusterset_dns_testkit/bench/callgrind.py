"""What bench/instructions.py reads and computes: the messages of a dnsperf query file,
callgrind's and dnsperf's totals, and instructions per answer from two runs."""

from __future__ import annotations

import re
import struct
from pathlib import Path

TOTALS = re.compile(r"^\s*([\d,]+) .*PROGRAM TOTALS", re.M)
COMPLETED = re.compile(r"Queries completed:\s+(\d+)")


def queries_in(binfile: Path) -> int:
    """How many messages a dnsperf ``-B`` file holds (2-byte length framing)."""
    data, at, count = binfile.read_bytes(), 0, 0
    while at < len(data):
        if at + 2 > len(data):
            raise ValueError(f"{binfile} ends inside a length")
        at += 2 + struct.unpack_from("!H", data, at)[0]
        if at > len(data):
            raise ValueError(f"{binfile} ends inside message {count + 1}")
        count += 1
    return count


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
    run: the difference cancels what both runs do (start-up, shutdown, first uses).
    NaN when the longer run answered no more than the shorter."""
    (few, few_n), (many, many_n) = small, large
    return (many - few) / (many_n - few_n) if many_n > few_n else float("nan")
