"""sources/properties on its own: the cluster id as slices' labels are read, which
ClusterProperties give it and which wins, and a Node's zone label."""

from __future__ import annotations

from typing import Any

import pytest

from clusterset_dns.sources import properties
from clusterset_dns.sources.convert import InvalidObject


def prop(name: Any, value: Any = "east", api: Any = "about.k8s.io/v1alpha1",
         kind: Any = "ClusterProperty") -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name},
            "spec": {"value": value}}


@pytest.mark.parametrize(("text", "read"), [
    ("east", "east"), (" East.EU ", "east.eu"), ("c" * 63, "c" * 63), ("west.eu.", "west.eu"),
])
def test_a_cluster_id_is_read_as_slice_labels_are(text: str, read: str) -> None:
    assert properties.cluster_id(text) == read


@pytest.mark.parametrize(("value", "said"), [
    (5, "cluster id 5 is not a string"), (None, "cluster id None is not a string"),
    (["east"], "cluster id ['east'] is not a string"),
])
def test_a_cluster_id_not_a_string_is_invalid(value: Any, said: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        properties.cluster_id(value)
    assert str(caught.value) == said


@pytest.mark.parametrize("text", ["", "a..b", "a b", "c" * 64])
def test_a_cluster_id_that_is_no_name_is_invalid(text: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        properties.cluster_id(text)
    assert str(caught.value).startswith(f"cluster id {text!r}: ")


@pytest.mark.parametrize(("obj", "answer"), [
    (prop("id.k8s.io"), True),
    (prop("id.k8s.io", api="about.k8s.io/v1beta1"), True),
    (prop("id.k8s.io", api="about.k8s.io"), True),
    (prop("id.k8s.io", api="about.k8s.io.evil/v1"), False),
    (prop("id.k8s.io", api="v1"), False),
    (prop("id.k8s.io", api=None), False),
    (prop("id.k8s.io", api=7), False),
    (prop("id.k8s.io", kind="ConfigMap"), False),
    ({"apiVersion": "about.k8s.io/v1alpha1"}, False),
])
def test_what_is_a_cluster_property(obj: dict[str, Any], answer: bool) -> None:
    assert properties.is_cluster_property(obj) is answer


@pytest.mark.parametrize("name", properties.CLUSTER_ID_PROPERTIES)
def test_the_id_properties_give_the_cluster_id(name: str) -> None:
    assert properties.cluster_property(prop(name, " East ")) == "east"
    with pytest.raises(InvalidObject):  # no value to read
        properties.cluster_property({**prop(name), "spec": "east"})
    with pytest.raises(InvalidObject):
        properties.cluster_property({**prop(name), "spec": {}})


def test_other_properties_give_nothing() -> None:
    assert properties.cluster_property(prop("clusterset.k8s.io", "set")) is None
    assert properties.cluster_property(prop("other", 5)) is None  # not even read
    assert properties.CLUSTER_ID_PROPERTIES == ("cluster.clusterset.k8s.io", "id.k8s.io")


@pytest.mark.parametrize(("values", "picked"), [
    ({"cluster.clusterset.k8s.io": "a", "id.k8s.io": "b"}, "a"),
    ({"id.k8s.io": "b", "cluster.clusterset.k8s.io": "a"}, "a"),  # by rank, not by order
    ({"cluster.clusterset.k8s.io": None, "id.k8s.io": "b"}, "b"),
    ({"id.k8s.io": "b"}, "b"),
    ({"other": "c"}, None),
    ({"cluster.clusterset.k8s.io": None}, None),
    ({}, None),
])
def test_the_first_id_property_with_a_value_wins(values: dict[str, str | None],
                                                 picked: str | None) -> None:
    assert properties.pick_cluster_id(values) == picked


@pytest.mark.parametrize(("obj", "zone"), [
    ({"metadata": {"labels": {"topology.kubernetes.io/zone": "z1"}}}, "z1"),
    ({"metadata": {"labels": {"topology.kubernetes.io/zone": ""}}}, None),
    ({"metadata": {"labels": {"topology.kubernetes.io/zone": 3}}}, None),
    ({"metadata": {"labels": {"failure-domain.beta.kubernetes.io/zone": "z1"}}}, None),
    ({"metadata": {"labels": ["topology.kubernetes.io/zone"]}}, None),
    ({"metadata": {"labels": None}}, None),
    ({"metadata": "x"}, None),
    ({}, None),
])
def test_a_nodes_zone_is_its_topology_label(obj: dict[str, Any], zone: str | None) -> None:
    assert properties.node_zone(obj) == zone
