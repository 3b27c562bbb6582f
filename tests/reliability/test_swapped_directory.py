"""A ConfigMap volume updated under the real server: the kubelet swaps ``..data`` to a
new directory (and removes the old one) while the server polls. ``keep`` is in every
version, in a.yaml or b.yaml by turns; before, a read that met a swap took a.yaml from
one version and b.yaml from the next, and ``keep`` answered NXDOMAIN, and that half
state was journaled (and NOTIFYed). Every version holds the same zone, so while
hundreds of swaps happen every answer must have ``keep`` and the zone must never
change: its serial stays, the IXFR journal does not grow. (The mix itself is shown
reliably by tests/unit/test_manifests.py::test_a_swapped_directory_is_read_one_version_whole;
this is the end-to-end check through the real process.)"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

import dns.rcode

from clusterset_dns_testkit.dnsserver import ServerProcess

FILLER = 1500
KEEP = "keep.cm.svc.clusterset.local."


def imports(names: list[tuple[str, str]]) -> str:
    return "".join(f"---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\n"
                   f"metadata: {{name: {name}, namespace: cm}}\n"
                   f"spec: {{type: ClusterSetIP, ips: [{ip}]}}\n" for name, ip in names)


def swap(directory: Path, n: int) -> None:
    gen = directory / f"..gen_{n}"
    gen.mkdir()
    for name, keep in (("a.yaml", n % 2 == 0), ("b.yaml", n % 2 == 1)):
        docs = [(f"fill-{name[0]}-{i}", "10.2.0.1") for i in range(FILLER)]
        if keep:
            docs.append(("keep", "10.1.0.1"))
        (gen / name).write_text(imports(docs))
        if not os.path.lexists(directory / name):
            os.symlink(f"..data/{name}", directory / name)
    old = os.readlink(directory / "..data") if os.path.lexists(directory / "..data") else None
    os.symlink(gen.name, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", directory / "..data")
    if old is not None:
        shutil.rmtree(directory / old)


def test_a_name_in_every_version_never_vanishes_while_the_configmap_is_swapped(
        tmp_path: Path) -> None:
    directory = tmp_path / "cm"
    directory.mkdir()
    swap(directory, 0)
    server = ServerProcess("--manifests", str(directory), "--poll-interval", "0.01",
                           "--allow-transfer", "127.0.0.1/32")
    with server:
        server.wait_ready()
        serial = server.metric("clusterset_dns_zone_serial")
        journal = server.metric("clusterset_dns_journal_records")
        stop = threading.Event()
        swaps = [0]
        rng = random.Random(4)

        def swapper() -> None:
            deadline = time.monotonic() + 6
            while not stop.is_set() and swaps[0] < 400 and time.monotonic() < deadline:
                swaps[0] += 1
                swap(directory, swaps[0])
                # random gaps: a read that spans an even number of swaps would not show
                time.sleep(rng.uniform(0, 0.03))

        thread = threading.Thread(target=swapper)
        thread.start()
        rcodes: dict[str, int] = {}
        try:
            while thread.is_alive():
                rcode = dns.rcode.to_text(server.ask(KEEP, "A").rcode())
                rcodes[rcode] = rcodes.get(rcode, 0) + 1
        finally:
            stop.set()
            thread.join()
        print(f"{swaps[0]} swaps; answers: {rcodes}")
        assert set(rcodes) == {"NOERROR"} and rcodes["NOERROR"] > 100, rcodes
        # no update ever changed the zone: nothing half read was applied or journaled
        assert server.metric("clusterset_dns_zone_serial") == serial
        assert server.metric("clusterset_dns_journal_records") == journal
        assert "cannot be used" not in server.log_text()
