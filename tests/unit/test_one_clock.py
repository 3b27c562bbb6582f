"""One clock: time, sleeps and random draws come from base/clock.py's Clock, passed
down, so that tests drive them with tests/unit/fakeclock.py. Any other use of
``time.*``, ``random.*`` or a non-zero ``asyncio.sleep`` in the package fails here
(``asyncio.sleep(0)`` is a yield to the loop, not time; logging's timestamps are
logging's)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clusterset_dns"
CLOCK = PACKAGE / "base" / "clock.py"
# time's functions that format a given timestamp (they read no clock).
FORMATTING = {"strftime", "gmtime"}
MODULES = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p != CLOCK)


def time_uses(tree: ast.AST) -> list[str]:
    """``time.x``/``random.x`` attributes, names imported from those modules, and
    ``asyncio.sleep`` with anything but a literal 0."""
    found: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in ("time", "random") and node.attr not in FORMATTING):
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "random"):
            found.append(f"from {node.module} import ... (line {node.lineno})")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "sleep" and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "asyncio"
              and not (len(node.args) == 1 and isinstance(node.args[0], ast.Constant)
                       and node.args[0].value == 0)):
            found.append(f"asyncio.sleep(non-zero) (line {node.lineno})")
    return found


@pytest.mark.parametrize("module", MODULES)
def test_time_comes_from_the_clock(module: str) -> None:
    uses = time_uses(ast.parse((PACKAGE / module).read_text()))
    assert not uses, f"{module}: {uses}: take a base.clock.Clock instead"
