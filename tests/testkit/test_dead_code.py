"""Every module-level name of the server (constant, function, class) is used somewhere:
by its own module, another one, the tests or the benchmarks. A name defined and never
read is dead code that readers take for a live setting."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def repository_sources() -> list[Path]:
    """Every Python file of the repository (the server, the testkit, the tests, the
    benchmarks, scripts), not those of tools' hidden directories or builds."""
    return [p for p in ROOT.rglob("*.py")
            if not any(part.startswith(".") or part in ("build", "dist")
                       for part in p.relative_to(ROOT).parts)]


def defined(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
    return [n for n in names if not n.startswith("__")]


def unused(sources: dict[str, str], users: str) -> list[str]:
    words = Counter(re.findall(r"\w+", users))
    return [f"{path}: {name}" for path, text in sorted(sources.items())
            for name in defined(ast.parse(text)) if words[name] <= 1]  # its definition only


def test_every_module_level_name_is_used() -> None:
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
               for p in (ROOT / "clusterset_dns").rglob("*.py")}
    users = "\n".join(p.read_text(encoding="utf-8") for p in repository_sources())
    assert unused(sources, users) == []


def test_the_check_catches_an_unused_constant() -> None:
    text = "USED = 1\nDEAD = 2\n\ndef f() -> int:\n    return USED\n"
    assert unused({"m.py": text}, text + "\nf()\n") == ["m.py: DEAD"]
