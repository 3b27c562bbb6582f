"""Reading the repository's Markdown: headings (as GitHub anchors), links and tables.

Used by the documentation tests; small on purpose (no Markdown library), it reads only
what the project's docs use: ATX headings, inline links and pipe tables, with fenced
code blocks skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) not preceded by "!" is a link; an image ![..](..) is a link to a file too.
_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_ANCHOR_DROP = re.compile(r"[^\w\- ]", re.UNICODE)


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "")
    return _ANCHOR_DROP.sub("", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor the file's headings make (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in prose_lines(text):
        m = _HEADING.match(line)
        if not m:
            continue
        base = anchor(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every inline link outside code."""
    for number, line in prose_lines(text):
        for m in _LINK.finditer(_INLINE_CODE.sub("", line)):
            yield number, m.group(1)


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("//")


def broken_links(path: Path, root: Path) -> list[str]:
    """Relative links of ``path`` whose file (under ``root``) or #anchor does not exist."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for number, target in links(text):
        if not is_relative(target):
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the repository")
        elif not dest.exists():
            problems.append(f"{where}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(
                dest.read_text(encoding="utf-8")):
            problems.append(f"{where}: no heading makes #{fragment}")
    return problems


def table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (cells stripped, header and rule left out) of the first pipe table in the
    section under ``heading`` (its text, without the #s)."""
    rows: list[list[str]] = []
    inside = False
    in_table = False
    for _, line in prose_lines(text):
        m = _HEADING.match(line)
        if m:
            if inside:
                break
            inside = m.group(2) == heading
            continue
        if not inside:
            continue
        if line.startswith("|"):
            in_table = True
            rows.append(split_row(line))
        elif in_table:
            break
    if len(rows) < 2:
        raise ValueError(f"no table under {heading!r}")
    return rows[2:]


def split_row(line: str) -> list[str]:
    """The cells of one pipe-table row (pipes inside inline code do not split)."""
    cells, current, in_code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append(current.strip())
            current = ""
        else:
            current += ch
    cells.append(current.strip())
    return cells
