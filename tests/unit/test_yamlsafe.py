"""sources/yamlsafe on its own: the alias budget and the JSON depth to the node, and the
text of each DocumentError (what the log line about a refused file says)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from clusterset_dns.sources import yamlsafe

# [&a [1, 2, 3], *a, *a]: the root list (1), the anchored list (1) and its three items,
# then each alias the four nodes of the anchored list: 13 nodes in all
ALIASED = "[&a [1, 2, 3], *a, *a]"


@pytest.mark.parametrize(("spare", "refused"), [(0, False), (-1, True)])
def test_the_alias_budget_counts_to_the_node(spare: int, refused: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is the text's length plus MAX_ALIAS_EXPANSION nodes: here set so that
    the 13 nodes fit exactly (spare 0) or miss by one."""
    monkeypatch.setattr(yamlsafe, "MAX_ALIAS_EXPANSION", 13 - len(ALIASED) + spare)
    if refused:
        with pytest.raises(yamlsafe.DocumentError) as caught:
            yamlsafe.check_events(ALIASED)
        assert caught.value.reason == "limits"
        assert str(caught.value) == "aliases expand to more than 12 nodes"
    else:
        yamlsafe.check_events(ALIASED)
        assert yamlsafe.documents(ALIASED, False) == [[[1, 2, 3]] * 3]


def nested_lists(depth: int) -> Any:
    doc: Any = []
    for _ in range(depth - 1):
        doc = [doc]
    return doc


def nested_maps(depth: int) -> Any:
    doc: Any = {}
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


@pytest.mark.parametrize("nested", [nested_lists, nested_maps])
def test_the_json_depth_limit_is_exact(nested: Any) -> None:
    """The document itself is level 1: MAX_DEPTH levels are read, one more refused."""
    deepest = nested(yamlsafe.MAX_DEPTH)
    assert yamlsafe.documents(json.dumps(deepest), True) == [deepest]
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.documents(json.dumps(nested(yamlsafe.MAX_DEPTH + 1)), True)
    assert caught.value.reason == "limits"
    assert str(caught.value) == f"nested deeper than {yamlsafe.MAX_DEPTH} levels"


def test_the_json_depth_counts_a_value_inside_the_last_level() -> None:
    doc = nested_lists(yamlsafe.MAX_DEPTH - 1)
    inner = doc
    while inner:
        inner = inner[0]
    inner.append(1)  # the scalar is on the last level allowed
    assert yamlsafe.documents(json.dumps(doc), True) == [doc]
    inner.append([[]])  # a list in a list there goes one deeper
    with pytest.raises(yamlsafe.DocumentError):
        yamlsafe.documents(json.dumps(doc), True)


def test_json_too_deep_for_the_decoder_is_a_limit() -> None:
    text = "[" * 200_000 + "]" * 200_000
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.documents(text, True)
    assert caught.value.reason == "limits" and str(caught.value) == "nested too deeply"


@pytest.mark.parametrize(("text", "is_json"), [("a: [1,\n  b: c\n- d", False),
                                               ("{\n\"a\": ", True)])
def test_a_parse_error_is_said_on_one_line(text: str, is_json: bool) -> None:
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.documents(text, is_json)
    assert caught.value.reason == "parse"
    with pytest.raises((ValueError, yaml.YAMLError)) as original:
        json.loads(text) if is_json else list(yaml.load_all(text, Loader=yamlsafe.LOADER))
    assert "\n" in str(original.value) or is_json
    assert str(caught.value) == str(original.value).replace("\n", " ")


def test_an_alias_never_anchored_is_a_parse_error() -> None:
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.documents("a: *nowhere", False)
    assert caught.value.reason == "parse" and str(caught.value) == "alias *nowhere is not defined"


def nested_yaml(depth: int) -> str:
    """A mapping holding ``depth`` - 1 nested block lists (``depth`` collections)."""
    return "a:\n" + "".join("  " * i + "-\n" for i in range(1, depth - 1)) + "  " * (
        depth - 1) + "- x\n"


def test_the_yaml_depth_limit_is_exact() -> None:
    yamlsafe.check_events(nested_yaml(yamlsafe.MAX_DEPTH))
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.check_events(nested_yaml(yamlsafe.MAX_DEPTH + 1))
    assert caught.value.reason == "limits"
    assert str(caught.value) == f"nested deeper than {yamlsafe.MAX_DEPTH} levels"


@pytest.mark.parametrize(("text", "reason", "said"), [
    ("a: &x [1, *x]", "limits", "recursive alias *x"),
    ("a: &x {b: [*x]}", "limits", "recursive alias *x"),
    ("--- &x [1]\n--- [*x]\n", "parse", "alias *x is not defined"),  # not across documents
    ("a: [&x [1], *y]", "parse", "alias *y is not defined"),
])
def test_aliases_refused(text: str, reason: str, said: str) -> None:
    with pytest.raises(yamlsafe.DocumentError) as caught:
        yamlsafe.check_events(text)
    assert (caught.value.reason, str(caught.value)) == (reason, said)


@pytest.mark.parametrize(("text", "nodes"), [
    ("[&s 1, *s, *s]", 4),  # a scalar anchored is one node
    ("[&m {a: 1}, *m]", 1 + 3 + 3),  # a mapping: itself, a key and a value
    ("[[1, 2], &l [3], *l]", 1 + 3 + 2 + 2),  # a list not anchored counts once
    ("--- &d [1, 2]\n--- [&d [1], *d, *d]\n", 3 + 1 + 2 + 2 + 2),  # this document's &d
])
@pytest.mark.parametrize("spare", [0, -1])
def test_every_node_counts_once_and_each_alias_its_anchor(
        text: str, nodes: int, spare: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsafe, "MAX_ALIAS_EXPANSION", nodes - len(text) + spare)
    if spare < 0:
        with pytest.raises(yamlsafe.DocumentError):
            yamlsafe.check_events(text)
    else:
        yamlsafe.check_events(text)
        yamlsafe.check_events(text, yaml.SafeLoader)  # the pure-Python parser counts alike


def test_documents_leave_out_empty_ones() -> None:
    assert yamlsafe.documents("---\n--- [1]\n---\n", False) == [[1]]
    assert yamlsafe.documents("", False) == []
