"""The user docs stay true to the code: the README's flag table is `serve --help`'s, and
every relative link in the docs leads somewhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterset_dns_testkit import markdown

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# "  --flag METAVAR   help ... [env CLUSTERSET_DNS_FLAG] (default: X)" on one wide line.
_OPTION = re.compile(r"^\s{2}(--[a-z0-9-]+)\b.*\[env CLUSTERSET_DNS_\w+\](?: \(default: (.*)\))?$")


def help_flags() -> dict[str, str | None]:
    """flag -> the default `serve --help` shows (None: it shows none)."""
    out = subprocess.run(
        [sys.executable, "-m", "clusterset_dns", "serve", "--help"], cwd=ROOT, check=True,
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "10000"}).stdout
    # An option is its line "  --flag ..." and the more indented lines after it.
    blocks: list[str] = []
    for line in out.splitlines():
        if line.startswith("  -"):
            blocks.append(line)
        elif blocks and line.startswith("   "):
            blocks[-1] += " " + line.strip()
    flags: dict[str, str | None] = {}
    for block in blocks:
        m = _OPTION.match(block)
        if m:
            flags[m.group(1)] = m.group(2)
    assert len(flags) > 20, out  # the parse itself must have worked
    return flags


def readme_flags(text: str) -> dict[str, str]:
    """flag -> the README table's default cell."""
    rows = markdown.table_after(text, "Flags")
    flags = {}
    for row in rows:
        m = re.match(r"^`(--[a-z0-9-]+)[^`]*`$", row[0])
        assert m, f"first cell is not a flag: {row[0]!r}"
        assert m.group(1) not in flags, f"{m.group(1)} twice in the table"
        flags[m.group(1)] = row[1]
    return flags


def same_default(cell: str, shown: str | None) -> bool:
    """A default the help shows is the cell's leading `value` (numbers compared as numbers);
    one it does not show is described in parentheses, with no value of its own."""
    m = re.match(r"^`([^`]*)`", cell)
    if shown is None:
        return m is None and cell.startswith("(")
    if m is None:
        return False
    if m.group(1) == shown:
        return True
    try:
        return float(m.group(1)) == float(shown)
    except ValueError:
        return False


def flag_table_problems(text: str) -> list[str]:
    shown = help_flags()
    table = readme_flags(text)
    problems = [f"{f}: in serve --help, not in the README's table"
                for f in shown if f not in table]
    problems += [f"{f}: in the README's table, not in serve --help"
                 for f in table if f not in shown]
    problems += [f"{f}: README says {table[f]!r}, serve --help shows default {shown[f]!r}"
                 for f in table if f in shown and not same_default(table[f], shown[f])]
    return problems


def test_readme_flag_table_is_serve_help() -> None:
    assert flag_table_problems(README.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(("edit", "expected"), [
    # a row removed, a default changed, a flag renamed: each is caught
    (lambda t: re.sub(r"\n\| `--udp-io` [^\n]*", "", t), "--udp-io: in serve --help"),
    (lambda t: t.replace("| `--ttl` | `5` |", "| `--ttl` | `30` |"), "--ttl: README says"),
    (lambda t: t.replace("| `--zone` |", "| `--zones` |"), "--zones: in the README's table"),
    (lambda t: t.replace("| `--cluster-id ID` | (none", "| `--cluster-id ID` | `east` (none"),
     "--cluster-id: README says"),
])
def test_flag_table_check_catches(edit: object, expected: str) -> None:
    text = README.read_text(encoding="utf-8")
    edited = edit(text)  # type: ignore[operator]
    assert edited != text
    assert any(p.startswith(expected) for p in flag_table_problems(edited))


def doc_files() -> list[Path]:
    """Every Markdown file of the repository (not of tools' hidden caches or builds)."""
    return sorted(p for p in ROOT.rglob("*.md")
                  if not any(part.startswith(".") or part in ("build", "dist")
                             or part.endswith(".egg-info")
                             for part in p.relative_to(ROOT).parts))


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert markdown.broken_links(path, ROOT) == []


def test_link_check_catches_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title\n\n## Zone transfers (`--notify`)\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#zone-transfers---notify) [ok](docs/a.md) [web](https://x.invalid/)\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#nope) [self](#a-title)\n"
        "```\n[in code](nowhere.md)\n```\n")
    problems = markdown.broken_links(tmp_path / "README.md", tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "docs/b.md: no such file", "docs/a.md#nope: no heading makes #nope",
        "#a-title: no heading makes #a-title"]


@pytest.mark.parametrize(("heading", "expected"), [
    ("Local-first answers (`trafficDistribution: PreferClose`)",
     "local-first-answers-trafficdistribution-preferclose"),
    ("Zone transfers and node-local secondaries", "zone-transfers-and-node-local-secondaries"),
    ("`clusterset-dns dump --manifests PATH`", "clusterset-dns-dump---manifests-path"),
    ("7. Zone transfers (`--allow-transfer`, `--notify`)",
     "7-zone-transfers---allow-transfer---notify"),
])
def test_anchor_is_githubs(heading: str, expected: str) -> None:
    assert markdown.anchor(heading) == expected
