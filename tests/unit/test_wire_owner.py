"""zone/wire.py owns the wire: the structs of a message's fixed parts (the header, a
record's head, a 16-bit length or pointer, an SRV's fixed rdata) and the walkers over
names are declared there once; other modules use them rather than their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clusterset_dns"
WIRE = PACKAGE / "zone" / "wire.py"
# Formats wire.py declares for what every message has: U16 (a length, a pointer),
# RR_HEAD (a record's type, class, TTL and rdlength), SRV_FIXED.
WIRE_FORMATS = {"!H", "!HHIH", "!HHH"}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != WIRE)


def struct_formats(tree: ast.AST) -> set[str]:
    """Formats given to struct.Struct(...) in ``tree``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Struct" and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def test_wire_declares_the_formats() -> None:
    assert struct_formats(ast.parse(WIRE.read_text())) >= WIRE_FORMATS


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_declares_wire_structs_again(path: Path) -> None:
    again = struct_formats(ast.parse(path.read_text())) & WIRE_FORMATS
    assert not again, f"{path.name} declares {sorted(again)}: use zone/wire.py's"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_walks_names_of_its_own(path: Path) -> None:
    """A function stepping over a name's labels (``data[at] + 1`` in a loop) is
    wire.skip_name / read_name / walk_name; rrs reads names with its own errors."""
    tree = ast.parse(path.read_text())
    assert isinstance(tree, ast.Module)
    walkers = [node.name for node in tree.body  # module functions (a writer's
               # compression table is not a walker)
               if isinstance(node, ast.FunctionDef) and node.name.endswith("_name")
               and any(isinstance(loop, ast.While) for loop in ast.walk(node))]
    allowed = {"rrs.py": {"_name"}}.get(path.name, set())
    assert set(walkers) <= allowed, f"{path.name}: {walkers}: use zone/wire.py's walkers"
