"""sources/discovery.served on its own, against a scripted client: the group's served
versions, the preferred one first, each asked in turn for the resource; a group not
served at all (404) is None, any other error is raised, and an answer of the wrong shape
is a MalformedResponse."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from clusterset_dns.sources import discovery
from clusterset_dns.sources.kube import ApiError, MalformedResponse

GROUP = "multicluster.x-k8s.io"
ALPHA, BETA, GAMMA = (f"{GROUP}/{v}" for v in ("v1alpha1", "v1beta1", "v1gamma1"))


class Client:
    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, sizes: list[int] | None = None) -> Any:
        self.asked.append(path)
        answer = self.answers[path]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def stream(self, path: str, params: Mapping[str, Any]) -> Any:
        raise AssertionError("discovery never watches")


def group(*versions: str, preferred: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"kind": "APIGroup", "name": GROUP,
                              "versions": [{"groupVersion": v} for v in versions]}
    if preferred is not None:
        answer["preferredVersion"] = {"groupVersion": preferred}
    return answer


def resources(*names: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [{"name": n} for n in names]}


def served(answers: Mapping[str, Any]) -> tuple[discovery.Served | None, list[str]]:
    client = Client(answers)
    found = asyncio.run(discovery.served(client, GROUP, "serviceimports"))
    return found, client.asked


@pytest.mark.parametrize(("preferred", "order"), [
    (GAMMA, [GAMMA, ALPHA, BETA]),  # moved first
    (ALPHA, [ALPHA, BETA, GAMMA]),  # first already
    (None, [ALPHA, BETA, GAMMA]),  # none said: the group's order
    (f"{GROUP}/v9", [ALPHA, BETA, GAMMA]),  # not one of the served: ignored
])
def test_the_preferred_version_is_asked_first(preferred: str | None, order: list[str]) -> None:
    answers = {f"/apis/{GROUP}": group(ALPHA, BETA, GAMMA, preferred=preferred),
               **{f"/apis/{v}": resources("serviceexports") for v in (ALPHA, BETA, GAMMA)}}
    found, asked = served(answers)
    assert found == discovery.Served(order, None)
    assert asked == [f"/apis/{GROUP}", *(f"/apis/{v}" for v in order)]


def test_the_first_version_with_the_resource_wins_and_no_other_is_asked() -> None:
    answers = {f"/apis/{GROUP}": group(ALPHA, BETA, GAMMA, preferred=BETA),
               f"/apis/{BETA}": resources("serviceexports", "serviceimports/status"),
               f"/apis/{ALPHA}": resources("serviceexports", "serviceimports"),
               f"/apis/{GAMMA}": resources("serviceimports")}
    found, asked = served(answers)
    assert found == discovery.Served([BETA, ALPHA, GAMMA], ALPHA)
    assert asked == [f"/apis/{GROUP}", f"/apis/{BETA}", f"/apis/{ALPHA}"]


def test_a_group_not_served_is_none_and_other_errors_are_raised() -> None:
    assert served({f"/apis/{GROUP}": ApiError(404, "not found")}) == (None, [f"/apis/{GROUP}"])
    for status in (403, 500, 410):
        with pytest.raises(ApiError) as raised:
            served({f"/apis/{GROUP}": ApiError(status, "no")})
        assert raised.value.status == status
    with pytest.raises(ApiError):  # a 404 of a version is not the group's
        served({f"/apis/{GROUP}": group(ALPHA), f"/apis/{ALPHA}": ApiError(404, "gone")})


def test_a_group_without_versions_serves_nothing() -> None:
    for answer in ({"kind": "APIGroup"}, {"versions": None}, {"versions": []}):
        assert served({f"/apis/{GROUP}": answer})[0] == discovery.Served([], None)
    only = served({f"/apis/{GROUP}": group(ALPHA), f"/apis/{ALPHA}": {"kind": "x"}})
    assert only[0] == discovery.Served([ALPHA], None)


@pytest.mark.parametrize(("answers", "text"), [
    ({f"/apis/{GROUP}": ["a list"]}, "expected an object, got list"),
    ({f"/apis/{GROUP}": {"versions": {"not": "a list"}}}, "expected a list, got dict"),
    ({f"/apis/{GROUP}": {"versions": ["v1"]}}, "expected an object, got str"),
    ({f"/apis/{GROUP}": {"versions": [], "preferredVersion": 7}}, "expected an object, got int"),
    ({f"/apis/{GROUP}": group(ALPHA), f"/apis/{ALPHA}": None}, "expected an object, got NoneType"),
    ({f"/apis/{GROUP}": group(ALPHA), f"/apis/{ALPHA}": {"resources": "x"}},
     "expected a list, got str"),
    ({f"/apis/{GROUP}": group(ALPHA), f"/apis/{ALPHA}": {"resources": [3]}},
     "expected an object, got int"),
])
def test_an_answer_of_the_wrong_shape_is_malformed(answers: Mapping[str, Any], text: str) -> None:
    with pytest.raises(MalformedResponse) as raised:
        served(answers)
    assert str(raised.value) == f"discovery: {text}"


def test_an_empty_preferred_version_is_none() -> None:
    """preferredVersion may be absent, null or empty: the group's order is kept."""
    for preferred in (None, {}, ""):
        answer = {"versions": [{"groupVersion": ALPHA}, {"groupVersion": BETA}],
                  "preferredVersion": preferred}
        found, _ = served({f"/apis/{GROUP}": answer, f"/apis/{ALPHA}": resources(),
                           f"/apis/{BETA}": resources("serviceimports")})
        assert found == discovery.Served([ALPHA, BETA], BETA)
