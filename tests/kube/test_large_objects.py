"""Large objects through the real kube-apiserver: EndpointSlices with 250 KiB of
annotations (the API allows 256 KiB; last-applied-configuration and managedFields get
close). The server's peak memory while listing and watching them must be what the zone
keeps plus a constant: measured against a server of the same slices without the
annotations (the same zone). The code before decoded pages of 500 whole with the next
one prefetched (1,000 such slices: 425 MiB peak, past the shipped 256Mi limit).

Memory bounds, not timed assertions: VmHWM and VmRSS from /proc. Figures at 1,000
slices: ``python bench/fat_objects.py``."""

from __future__ import annotations

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
