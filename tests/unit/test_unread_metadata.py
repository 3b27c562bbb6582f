"""kube.drop_unread: what a list item or a watch event's object keeps of its metadata
once decoded. Everything DNS never reads goes (annotations, managedFields: most of a big
object's bytes); the one annotation read, the last-change trigger time (the programming
delay, convert.TRIGGER_TIME), stays, and the converted slice still carries it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusterset_dns.sources import convert, kube
from clusterset_dns_testkit.objects import endpoint, endpoint_slice

WHEN = "2026-01-02T03:04:05Z"
APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# (what, the metadata's annotations and managedFields as decoded, what stays of them)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("the trigger time stays, alone",
     {"annotations": {kube.KEPT_ANNOTATION: WHEN, APPLIED: "x" * 1000},
      "managedFields": [{"manager": "kubectl"}]},
     {"annotations": {kube.KEPT_ANNOTATION: WHEN}}),
    ("without it, no annotations at all",
     {"annotations": {APPLIED: "{}"}, "managedFields": []}, {}),
    ("nothing to drop", {}, {}),
    ("annotations of another shape are dropped", {"annotations": ["not", "a", "map"]}, {}),
]


@pytest.mark.parametrize(("what", "meta", "kept"), CASES, ids=[c[0] for c in CASES])
def test_what_an_object_keeps_of_its_metadata(what: str, meta: dict[str, Any],
                                              kept: dict[str, Any]) -> None:
    obj = endpoint_slice("web-a", "web", cluster="east", endpoints=[endpoint("10.0.0.1")])
    obj["metadata"].update(copy.deepcopy(meta))
    plain = {k: v for k, v in obj["metadata"].items() if k not in meta}
    kube.drop_unread(obj)
    assert obj["metadata"] == {**plain, **kept}


def test_the_kept_annotation_is_the_one_convert_reads() -> None:
    assert kube.KEPT_ANNOTATION == convert.TRIGGER_TIME
    obj = endpoint_slice("web-a", "web", cluster="east", endpoints=[endpoint("10.0.0.1")])
    obj["metadata"]["annotations"] = {convert.TRIGGER_TIME: WHEN, APPLIED: "{}"}
    obj["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    kube.drop_unread(obj)
    piece = convert.endpoint_slice(obj)
    assert piece is not None and piece.trigger_time == 1767323045.0


def test_objects_that_are_not_objects_are_left_alone() -> None:
    for raw in (None, "x", [1], {"metadata": "x"}):
        kube.drop_unread(raw)  # no error: the shape checks come later
