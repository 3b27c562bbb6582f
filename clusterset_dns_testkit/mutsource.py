"""Where a mutmut mutant is in its source file and what it changed, read from the source
and mutmut's diff (no mutmut needed): the function a mutant name points at, the line and
"old -> new" text of a mutation, and the lines of log calls and metric HELP texts whose
survivors scripts/mutate counts apart; and which files mutmut makes no mutant of (asked
of mutmut in a child process).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# mutmut's names: module.x_function__mutmut_N, module.xǁClassǁmethod__mutmut_N
_NAME = re.compile(r"\.x(?:ǁ(?P<cls>[^ǁ]+)ǁ|_)(?P<func>.+?)__mutmut_\d+$")


def function_span(source: str, mutant: str) -> tuple[int, int] | None:
    """The lines (first, last) of the function a mutmut mutant name points at."""
    match = _NAME.search(mutant)
    if not match:
        return None
    cls, func = match["cls"], match["func"]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and cls is not None and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == func:
                    return item.lineno, item.end_lineno or item.lineno
        if cls is None and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.name == func and node.col_offset == 0:
            return node.lineno, node.end_lineno or node.lineno
    return None


def describe(source: str, mutant: str, diff: str) -> tuple[int, str]:
    """(line, "old -> new") of a mutant, from mutmut's diff of its function."""
    removed = [ln[1:].strip() for ln in diff.splitlines()
               if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:].strip() for ln in diff.splitlines()
             if ln.startswith("+") and not ln.startswith("+++")]
    text = " / ".join(removed) + " -> " + (" / ".join(added) or "(removed)")
    span = function_span(source, mutant)
    lines = source.splitlines()
    first, last = span or (1, len(lines))
    # the line of the function showing the removed text, nearest where the diff puts it
    # (a line such as "timed = 0.0" may stand twice in a function)
    found = [n for n in range(first, last + 1) if removed and lines[n - 1].strip() == removed[0]]
    if found:
        guess = first + removed_offset(diff)
        return min(found, key=lambda n: abs(n - guess)), text
    return first, text


def removed_offset(diff: str) -> int:
    """How many lines after the function's first line mutmut's diff puts the first
    removed line (its hunk counts from the function's first line, 1)."""
    offset = 0
    for line in diff.splitlines():
        hunk = re.match(r"@@ -(\d+)", line)
        if hunk:
            offset = int(hunk[1]) - 1
        elif line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            return offset
        elif not line.startswith("+"):
            offset += 1
    return 0


_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}


def log_call_lines(source: str) -> set[int]:
    """The lines of the calls that write log lines (``log.info(...)`` and the like)."""
    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _LOG_METHODS and isinstance(node.func.value, ast.Name) and \
                node.func.value.id in ("log", "logger", "logging"):
            found.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return found


# prometheus_client's constructors whose second argument is the family's HELP text
_METRIC_KINDS = {"Counter", "Gauge", "Histogram", "Summary", "CounterMetricFamily",
                 "GaugeMetricFamily", "HistogramMetricFamily"}


def help_text_pieces(source: str) -> dict[int, str]:
    """line -> the piece of a metric family's HELP text written on it (the second
    argument of ``Counter(...)`` and the like, a string literal, maybe spread over lines
    by implicit concatenation)."""
    lines = source.splitlines()
    found: dict[int, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        text = node.args[1]
        if name not in _METRIC_KINDS or not isinstance(text, ast.Constant) or \
                not isinstance(text.value, str) or text.end_lineno is None or \
                text.end_col_offset is None:
            continue
        for number in range(text.lineno, text.end_lineno + 1):
            line = lines[number - 1]
            start = text.col_offset if number == text.lineno else len(line) - len(line.lstrip())
            end = text.end_col_offset if number == text.end_lineno else len(line.rstrip())
            found[number] = line[start:end]
    return found


def only_help_text(line: int, mutation: str, pieces: dict[int, str]) -> bool:
    """Whether a one-line mutation ("old -> new") changes nothing but the HELP text
    written on that line: what stands before and after the piece is the same."""
    piece = pieces.get(line)
    old, sep, new = mutation.partition(" -> ")
    if piece is None or not sep or " / " in mutation or piece not in old:
        return False
    before, _, after = old.partition(piece)
    return new != old and new.startswith(before) and new.endswith(after) and \
        len(new) >= len(before) + len(after)


def no_mutants(paths: Sequence[str], work: Path) -> list[str]:
    """The files of ``paths`` mutmut makes no mutant of (it mutates only the bodies of
    functions: zone/ops.py, all declarations, has none), asked of its own generator with
    the configuration of the scratch tree ``work``, without running a test."""
    if not paths:
        return []
    script = ("import json, sys\n"
              "from mutmut.mutation.file_mutation import mutate_file_contents\n"
              "paths = json.load(sys.stdin)\n"
              "print(json.dumps([p for p in paths if not mutate_file_contents(\n"
              "    p, open(p, encoding='utf-8').read()).mutant_names]))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=work, input=json.dumps(list(paths)),
                         capture_output=True, text=True, check=True).stdout
    found: list[str] = json.loads(out.strip().splitlines()[-1])
    return found
