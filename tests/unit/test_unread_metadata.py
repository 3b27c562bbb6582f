"""kube.cut: what a list item or a watch event's object keeps of its metadata once
decoded. Everything DNS never reads goes (other labels and annotations,
managedFields, owner references); the one annotation read, the last-change trigger
time (the programming delay, convert.TRIGGER_TIME), stays, and the converted slice
still carries it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusterset_dns.sources import convert, kube
from clusterset_dns_testkit.objects import endpoint, endpoint_slice

WHEN = "2026-01-02T03:04:05Z"
APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MCS = {"multicluster.kubernetes.io/service-name": "web",
       "multicluster.kubernetes.io/source-cluster": "east"}

# (what, added to the metadata as the API sends it, what the metadata is then)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("the trigger time stays, alone",
     {"annotations": {kube.KEPT_ANNOTATION: WHEN, APPLIED: "x" * 1000},
      "managedFields": [{"manager": "kubectl"}]},
     {"labels": MCS, "annotations": {kube.KEPT_ANNOTATION: WHEN}}),
    ("without it, no annotations at all",
     {"annotations": {APPLIED: "{}"}, "managedFields": []}, {"labels": MCS}),
    ("other labels go, the MCS ones stay",
     {"labels": {**MCS, "app": "web", "team": "x" * 100}, "ownerReferences": [{"uid": "o"}]},
     {"labels": MCS}),
    ("annotations of another shape go",
     {"annotations": ["not", "a", "map"], "finalizers": ["f"]}, {"labels": MCS}),
]


def web_slice() -> dict[str, Any]:
    obj = endpoint_slice("web-a", "web", cluster="east", endpoints=[endpoint("10.0.0.1")])
    obj["metadata"].update({"uid": "u-1", "resourceVersion": "7"})
    return obj


@pytest.mark.parametrize(("what", "meta", "kept"), CASES, ids=[c[0] for c in CASES])
def test_what_an_object_keeps_of_its_metadata(what: str, meta: dict[str, Any],
                                              kept: dict[str, Any]) -> None:
    obj = web_slice()
    obj["metadata"].update(copy.deepcopy(meta))
    kube.cut(obj)
    assert obj["metadata"] == {"name": "web-a", "namespace": "prod", "uid": "u-1",
                               "resourceVersion": "7", **kept}


def test_the_kept_annotation_is_the_one_convert_reads() -> None:
    assert kube.KEPT_ANNOTATION == convert.TRIGGER_TIME
    obj = web_slice()
    obj["metadata"]["annotations"] = {convert.TRIGGER_TIME: WHEN, APPLIED: "{}"}
    obj["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    kube.cut(obj)
    piece = convert.endpoint_slice(obj)
    assert piece is not None and piece.trigger_time == 1767323045.0
