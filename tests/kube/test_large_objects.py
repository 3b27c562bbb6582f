"""Large objects through the real kube-apiserver: EndpointSlices with 250 KiB of
annotations (the API allows 256 KiB; last-applied-configuration and managedFields get
close). The server's peak memory while listing and watching them must be what the zone
keeps plus a constant: measured against a server of the same slices without the
annotations (the same zone). The code before decoded pages of 500 whole with the next
one prefetched (1,000 such slices: 425 MiB peak, past the shipped 256Mi limit).

Memory bounds, not timed assertions: VmHWM and VmRSS from /proc. Figures at 1,000
slices: ``python bench/fat_objects.py``. And slices with labels by the ten thousand:
what the reflector gets of them, and the pages it asks for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.sources.convert import SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL
from clusterset_dns.sources.kube import KubeClient
from clusterset_dns.sources.reflector import FIRST_PAGE, PAGE_BYTES, Reflector
from clusterset_dns.sources.watch import slice_resource
from clusterset_dns.zone.cache import Op
from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for
from clusterset_dns_testkit.fat import last_address, memory_kib, write_objects
from clusterset_dns_testkit.peers import KubeAPI

SLICES = 300
ANNOTATION_KIB = 250
PEAK_SLACK_MIB = 24  # decoding pages of 4 MiB (one prefetched) and a watch event or two
RSS_SLACK_MIB = 16


def test_fat_objects_cost_no_more_memory_than_the_zone_they_make(
        api: KubeAPI, server_for: type[ServerProcess]) -> None:
    write_objects(api, "fat-thin", SLICES, 0)
    write_objects(api, "fat-fat", SLICES, ANNOTATION_KIB)
    thin = server_for("--namespace", "fat-thin", "--startup-timeout", "300")
    fat = server_for("--namespace", "fat-fat", "--startup-timeout", "300")
    servers = {"thin": thin, "fat": fat}
    for server in servers.values():
        server.start()
    for server in servers.values():
        server.wait_ready(300)
    service, address = last_address(SLICES, 0)
    for ns, server in servers.items():
        assert server.answers(f"{service}.fat-{ns}.svc.clusterset.local.", "A")[1] == {
            f"{service}.fat-{ns}.svc.clusterset.local. 5 IN A {a}"
            for a in [address, *(last_address(i + 1, 0)[1] for i in range(SLICES)
                                 if f"svc-{i % 20}" == service)]}
    listed = {ns: memory_kib(s.proc.pid) for ns, s in servers.items()}  # type: ignore[union-attr]
    # The watch: every slice replaced (new address, new annotation)
    write_objects(api, "fat-thin", SLICES, 0, generation=1)
    write_objects(api, "fat-fat", SLICES, ANNOTATION_KIB, generation=1)
    service, address = last_address(SLICES, 1)
    for ns, server in servers.items():
        name = f"{service}.fat-{ns}.svc.clusterset.local."
        wait_for(lambda s=server, n=name: f"A {address}" in str(s.answers(n, "A")[1]), 120,
                 f"{name} to answer {address}")
    watched = {ns: memory_kib(s.proc.pid) for ns, s in servers.items()}  # type: ignore[union-attr]
    figures = {ns: {"listed": listed[ns], "watched": watched[ns]} for ns in servers}
    print(figures)
    for when in (listed, watched):
        assert when["fat"]["VmHWM"] / 1024 <= when["thin"]["VmHWM"] / 1024 + PEAK_SLACK_MIB, \
            figures
        assert when["fat"]["VmRSS"] / 1024 <= when["thin"]["VmRSS"] / 1024 + RSS_SLACK_MIB, \
            figures


LABELS = 60_000  # about 0.9 MB an object (etcd keeps 1.5 MiB; the API server validates
# each label: many more take it past its request timeout on a loaded machine)


class Recording:
    """The real client, recording each list page's params and body size and what the
    reflector gets: the dicts it keeps (a page until converted, a watch event until
    applied)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.pages: list[tuple[dict[str, Any], int, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def get(self, path: str, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, sizes: list[int] | None = None,
                  each: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        mine: list[int] = []
        streamed: list[dict[str, Any]] = []

        def record(items: list[dict[str, Any]]) -> None:
            streamed.extend(items)
            assert each is not None
            each(items)

        answer = await self.client.get(path, params, timeout, sizes=mine,
                                       each=None if each is None else record)
        if sizes is not None:
            sizes.extend(mine)
            self.pages.append((dict(params or {}), mine[0],
                               answer if each is None else {**answer, "items": streamed}))
        return answer

    async def stream(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[Any]:
        async for event in self.client.stream(path, params):
            self.events.append(event)
            yield event


def test_labels_by_the_ten_thousand_are_never_kept_and_pages_fit_the_budget(
        api: KubeAPI, namespace: str) -> None:
    """Ten slices of 60,000 labels each, listed and watched by a reflector on the real
    client: each page asks for what the byte budget holds from the first one on (before:
    10 whatever their size), never 0 (no limit), and every object the reflector gets
    keeps only the MCS labels (before: every label, a page's worth at once: ten such
    slices raised the peak from 46 to 134 MiB)."""
    write_objects(api, namespace, 10, 0, labels=LABELS, threads=2)
    mcs = {SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL}

    async def main() -> None:
        client = await KubeClient.connect(api.kubeconfig, None)
        recording = Recording(client)
        applied: list[Op] = []
        relist = Reflector(recording, slice_resource(namespace), applied.extend,
                           lambda kind: None, Config(), lambda: None, metrics=Metrics())
        try:
            await relist.relist()
            assert len(relist.known) == 10 and len(applied) == 10
            write_objects(api, namespace, 1, 0, generation=1, labels=LABELS, threads=1)
            watching = asyncio.ensure_future(relist.watch())
            for _ in range(600):
                if recording.events:
                    break
                await asyncio.sleep(0.1)
            watching.cancel()
        finally:
            await client.close()
        limits = [params["limit"] for params, _, _ in recording.pages]
        sizes = [size for _, size, _ in recording.pages]
        assert limits[0] == FIRST_PAGE and all(limit >= 1 for limit in limits), limits
        assert all(size <= PAGE_BYTES for size in sizes), (limits, sizes)
        assert min(sizes) > 800_000  # the objects are that large
        items = [item for _, _, answer in recording.pages for item in answer["items"]]
        assert len(items) == 10
        for obj in [*items, *(event["object"] for event in recording.events)]:
            assert set(obj["metadata"]["labels"]) == mcs, len(obj["metadata"]["labels"])
        assert recording.events, "no watch event"

    asyncio.run(main())
