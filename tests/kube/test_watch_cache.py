"""The first list against a kube-apiserver with its watch cache, as clusters run it: one
response for resourceVersion 0 whatever the limit, read as it arrives (liststream),
its items applied a page at a time; a later list is consistent and paged."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources import liststream
from clusterset_dns.sources.convert import SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL
from clusterset_dns.sources.kube import KubeClient
from clusterset_dns.sources.reflector import FIRST_PAGE, Reflector
from clusterset_dns.sources.watch import slice_resource
from clusterset_dns.zone.cache import Op, PutSlice
from clusterset_dns_testkit.fat import write_objects
from clusterset_dns_testkit.peers import KubeAPI

from .test_large_objects import LABELS, Recording

SLICES = 2 * liststream.STREAM_BATCH + 1


@pytest.fixture(scope="module")
def cached_api() -> Iterator[KubeAPI]:
    with KubeAPI(watch_cache=True) as kube:
        kube.install_crds(["mcs-api-v0.5.0"])
        write_objects(kube, "many", SLICES, 0)
        yield kube


def _slices(ops: list[list[Op]]) -> list[int]:
    return [sum(isinstance(op, PutSlice) for op in batch) for batch in ops]


def test_the_first_list_is_one_response_read_a_page_at_a_time(cached_api: KubeAPI) -> None:
    async def main() -> None:
        client = await KubeClient.connect(cached_api.kubeconfig, None)
        recording = Recording(client)
        applied: list[list[Op]] = []
        reflector = Reflector(recording, slice_resource("many"), applied.append,
                              lambda kind: None, Config(), lambda: None, metrics=Metrics())
        try:
            await reflector.relist()
            # the watch cache's answer: everything, in one response, no continue token
            ((params, size, answer),) = recording.pages
            assert params == {"limit": FIRST_PAGE, "resourceVersion": "0",
                              "labelSelector": SERVICE_NAME_LABEL}
            assert not answer.get("metadata", {}).get("continue")
            assert len(answer["items"]) == SLICES and size > 100 * SLICES
            # applied a page at a time (STREAM_BATCH items, or fewer once STREAM_BYTES
            # were read: these slices are about 10 KB each)
            batches = _slices(applied)
            assert sum(batches) == SLICES and len(batches) >= 3, batches
            assert max(batches) <= liststream.STREAM_BATCH, batches
            assert len(reflector.known) == SLICES
            version = reflector.resource_version
            assert version is not None and int(version) >= 1
            # what a watch from its version sees: the next change
            write_objects(cached_api, "many", 1, 0, generation=1, threads=1)
            watching = asyncio.ensure_future(reflector.watch())
            for _ in range(300):
                if recording.events:
                    break
                await asyncio.sleep(0.1)
            watching.cancel()
            assert recording.events, "no watch event after the streamed list"
            # a list after it (410 Gone, a periodic relist) is consistent and paged
            recording.pages.clear()
            await reflector.relist("gone")
            assert all("resourceVersion" not in params for params, _, _ in recording.pages)
            assert len(recording.pages) > 1  # the limit holds without resourceVersion 0
            assert len(reflector.known) == SLICES
        finally:
            await client.close()

    asyncio.run(main())


def test_labels_by_the_ten_thousand_are_cut_as_each_item_is_read(cached_api: KubeAPI) -> None:
    """The largest objects the API keeps, through one streamed response: every item the
    reflector gets keeps only the MCS labels."""
    write_objects(cached_api, "labels", 3, 0, labels=LABELS, threads=1)

    async def main() -> list[dict[str, Any]]:
        client = await KubeClient.connect(cached_api.kubeconfig, None)
        recording = Recording(client)
        reflector = Reflector(recording, slice_resource("labels"), lambda ops: None,
                              lambda kind: None, Config(), lambda: None, metrics=Metrics())
        try:
            await reflector.relist()
        finally:
            await client.close()
        ((params, size, answer),) = recording.pages
        assert params["resourceVersion"] == "0" and size > 3 * 800_000
        return list(answer["items"])

    items = asyncio.run(main())
    assert len(items) == 3
    for obj in items:
        assert set(obj["metadata"]["labels"]) == {SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL}


def test_the_benchmarks_list_floor_reads_both_first_lists_whole(cached_api: KubeAPI) -> None:
    """bench/kube_scale.py's floor (apiload.list_floor): every byte of both lists, as
    the API server sends them to any client asking for resourceVersion 0."""
    from clusterset_dns_testkit.bench import apiload

    floor = apiload.list_floor(cached_api)
    expected = 0
    for path in apiload.FIRST_LISTS:
        conn = cached_api._conn(60)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {cached_api.token}",
                                               "Accept": "application/json"})
            body = conn.getresponse().read()
        finally:
            conn.close()
        expected += len(body)
        if "endpointslices" in path:
            assert body.count(b'"addressType"') >= SLICES  # the objects, not an error
    assert floor["bytes"] == expected
    assert floor["seconds"] > 0 and floor["api_cpu_s"] >= 0
    with pytest.raises(RuntimeError, match=r"^GET /apis/none: HTTP 404$"):
        apiload.list_floor(cached_api, ("/apis/none",))
