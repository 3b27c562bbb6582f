"""Parsing untrusted YAML and JSON text within limits: the only importer of PyYAML.

Limits that keep a small hostile file from costing much CPU or memory: nesting
depth, recursive aliases, and the number of nodes aliases expand to. A real
manifest is a few levels deep (a List of EndpointSlices is about 8) and uses
aliases rarely if ever. YAML's limits are checked once, on the parser's event
stream, before anything is composed: composing a bomb is cheap (an alias is a
reference to the anchored node), the cost comes later from whatever walks the
expanded tree; and libyaml's composer recurses in C, so depth must be known first.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

MAX_DEPTH = 100
# Nodes a YAML text may expand to through aliases, beyond one per character of the
# text (an alias-free text has fewer nodes than characters, so it is never limited).
MAX_ALIAS_EXPANSION = 100_000

# libyaml's safe loader when PyYAML was built with it (about five times faster), else
# the pure-Python one; both parse the event stream the limits are checked on.
LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DocumentError(Exception):
    """Text that cannot be used; ``reason``: "parse" (not YAML/JSON) or "limits"."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_events(text: str, loader: type[yaml.SafeLoader] | None = None) -> None:
    """The YAML limits, checked on the event stream of ``loader`` (default
    :data:`LOADER`). Raises :class:`DocumentError`."""
    budget = len(text) + MAX_ALIAS_EXPANSION
    parser = (loader or LOADER)(text)
    expanded = 0
    sizes: dict[str, int] = {}  # anchor -> size once its node is complete
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, count when it started)
    try:
        while parser.check_event():
            event = parser.get_event()  # type: ignore[no-untyped-call]
            if isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "")
                if size is None:
                    if any(anchor == event.anchor for anchor, _ in open_nodes):
                        raise DocumentError("limits", f"recursive alias *{event.anchor}")
                    raise DocumentError("parse", f"alias *{event.anchor} is not defined")
                expanded += size
            elif isinstance(event, yaml.ScalarEvent):
                expanded += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.CollectionStartEvent):
                expanded += 1
                open_nodes.append((event.anchor, expanded))
                if len(open_nodes) > MAX_DEPTH:
                    raise DocumentError("limits", f"nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, start = open_nodes.pop()
                if anchor is not None:
                    sizes[anchor] = expanded - start + 1
            elif isinstance(event, yaml.DocumentStartEvent):
                sizes.clear()  # anchors do not cross documents
            if expanded > budget:
                raise DocumentError("limits", f"aliases expand to more than {budget} nodes")
    finally:
        parser.dispose()


def _yaml_documents(text: str) -> list[Any]:
    check_events(text)
    loader = LOADER(text)
    try:
        docs = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            doc = loader.get_data()
            if doc is not None:
                docs.append(doc)
        return docs
    finally:
        loader.dispose()


def _json_depth_ok(doc: Any) -> bool:
    """Depth check without recursion (the document may be deeper than the stack)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return True


def documents(text: str, is_json: bool) -> list[Any]:
    """The documents of a YAML text (or the one of a JSON text), None documents left
    out. Raises :class:`DocumentError` and nothing else."""
    try:
        if is_json:
            doc = json.loads(text)
            if not _json_depth_ok(doc):
                raise DocumentError("limits", f"nested deeper than {MAX_DEPTH} levels")
            return [doc]
        return _yaml_documents(text)
    except DocumentError:
        raise
    except RecursionError as exc:  # json's decoder on very deep input
        raise DocumentError("limits", "nested too deeply") from exc
    except (ValueError, yaml.YAMLError) as exc:  # JSONDecodeError is a ValueError
        raise DocumentError("parse", str(exc).replace("\n", " ")) from exc
