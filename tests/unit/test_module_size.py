"""Every module of the server stays under 500 lines: one that grows past it is split
along its concerns (as zone/cache.py into ops, admission and table were)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "clusterset_dns"
MAX_LINES = 500


def test_modules_stay_under_500_lines() -> None:
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
             for path in sorted(PACKAGE.rglob("*.py"))}
    assert len(sizes) > 10  # the package was found
    over = {name: lines for name, lines in sizes.items() if lines >= MAX_LINES}
    assert not over, f"modules of {MAX_LINES} lines or more (split them): {over}"
