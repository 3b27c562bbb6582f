"""The code the docs name exists: every `module.name` and `Class.attribute` written in
backticks in the README, CONTRIBUTING.md and docs/ is defined in clusterset_dns (a
method, a class attribute, an attribute set on self, a module-level name)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from clusterset_dns_testkit import mutation

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "txt", "toml", "tpl"}
_REFERENCE = re.compile(r"`([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?:\(\))?`")


def _class_names(node: ast.ClassDef) -> set[str]:
    names = {n.name for n in node.body
             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    for n in node.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        elif isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    names |= {a.attr for a in ast.walk(node) if isinstance(a, ast.Attribute)
              and isinstance(a.ctx, ast.Store) and isinstance(a.value, ast.Name)
              and a.value.id == "self"}
    return names


def code_names() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(class -> its names, module -> its module-level names), over the server's code."""
    classes: dict[str, set[str]] = {}
    modules: dict[str, set[str]] = {}
    for path in (ROOT / "clusterset_dns").rglob("*.py"):
        top = modules.setdefault(path.stem, set())
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, set()).update(_class_names(node))
                top.add(node.name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                top.add(node.name)
            elif isinstance(node, ast.Assign):
                top |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                top.add(node.target.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                top |= {a.asname or a.name for a in node.names}
    return classes, modules


def missing(text: str, classes: dict[str, set[str]], modules: dict[str, set[str]]) -> list[str]:
    out = []
    for m in _REFERENCE.finditer(text):
        owner, name = m.groups()
        if name in FILE_SUFFIXES or re.match(r"[a-z]+[A-Z]", name):  # a file, a Helm value
            continue
        known = classes.get(owner, modules.get(owner))
        if known is not None and name not in known:
            out.append(f"{owner}.{name}")
    return out


def of_now(text: str) -> str:
    """``text`` less the generated mutation table, which names the code as it was at the
    commit each file was run (a function moved since stays named where it was)."""
    begin, end = text.find(mutation.BEGIN), text.find(mutation.END)
    return text[:begin] + text[end:] if 0 <= begin < end else text


def test_the_code_the_docs_name_exists() -> None:
    classes, modules = code_names()
    assert "Handler" in classes and "handler" in modules  # the walk itself works
    problems = [f"{doc.relative_to(ROOT)}: {ref}" for doc in DOCS
                for ref in missing(of_now(doc.read_text(encoding="utf-8")), classes, modules)]
    assert problems == []


def test_only_the_mutation_table_is_left_out() -> None:
    text = f"`Handler.gone1` {mutation.BEGIN} `Handler.gone2` {mutation.END} `Handler.gone3`"
    classes, modules = code_names()
    assert missing(of_now(text), classes, modules) == ["Handler.gone1", "Handler.gone3"]


def test_the_check_catches_a_method_that_does_not_exist() -> None:
    classes, modules = code_names()
    assert missing("a miss goes to `Handler.answer`", classes, modules) == ["Handler.answer"]
    assert missing("`Handler.fast`, `cache.py`, `wire.Encoder`, `locality.clusterId`",
                   classes, modules) == []
