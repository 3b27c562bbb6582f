"""The peers: the API server, CoreDNS and clusterset-dns on it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from clusterset_dns_testkit.compare.answers import ask
from clusterset_dns_testkit.compare.cases import LOCAL_CLUSTER, Case, fqdn
from clusterset_dns_testkit.compare.common import MCS_CRDS, JSONObj, log
from clusterset_dns_testkit.compare.objects import Loaded, apply_objects, load_objects, served
from clusterset_dns_testkit.dnsserver import ServerProcess
from clusterset_dns_testkit.peers import CoreDNS, KubeAPI, kubernetes_corefile


def wait_answering(port: int, timeout: float, what: str) -> None:
    """Poll until every sentinel is answered; fail with what is still missing."""
    deadline = time.monotonic() + timeout
    while True:
        missing = missing_sentinels(port)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}; still "
                               "missing:\n  " + "\n  ".join(missing))
        time.sleep(0.2)


#: questions both servers must answer before the comparison starts (the last objects
#: of each kind in apply order, and the big answers)
SENTINELS = [
    (Case(fqdn("hello", "conf", "svc"), "A"), 1),
    (Case(fqdn("db", "conf", "svc"), "A"), 5),
    (Case(fqdn("big", "bulk", "svc"), "AAAA"), 60),
    (Case(fqdn("v6only", "conf", "svc"), "AAAA"), 3),
    (Case(fqdn("dotted", "ext", "svc"), "A"), 3),
    (Case(fqdn("beta-hl", "ext", "svc"), "A"), 1),
]


def missing_sentinels(port: int) -> list[str]:
    """The sentinel questions not (yet) answered with the expected record count."""
    out = []
    for case, n in SENTINELS:
        a = ask(port, case, timeout=1.0)
        if a.rcode != "NOERROR" or len(a.records) < n:
            out.append(f"{case.id} -> {a.brief()} (want {n} records)")
    return out


class Peers(contextlib.ExitStack):
    """kube-apiserver (given, or started here) with the objects, CoreDNS and our
    server on it, both answering; plus an unsynced pair (reader token, no rights)."""

    def __init__(self, api: KubeAPI | None = None, unsynced: bool = True) -> None:
        super().__init__()
        self._given_api = api
        self.want_unsynced = unsynced
        self.api: KubeAPI
        self.ours: ServerProcess
        self.coredns: CoreDNS
        self.ours_unsynced: ServerProcess | None = None
        self.ours_local: ServerProcess  # knows its cluster: local-first answers (opt-in)
        self.coredns_unsynced: CoreDNS | None = None
        self.loaded = Loaded()
        self.objects: list[JSONObj] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="clusterset-dns-compare-"))
        if os.environ.get("CLUSTERSET_DNS_KEEP_TMP", "") in ("", "0"):
            self.callback(shutil.rmtree, self.workdir, True)
        else:
            self.callback(log, f"kept {self.workdir}")

    def __enter__(self) -> Peers:
        super().__enter__()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        t0 = time.monotonic()
        if self._given_api is None:
            self.api = self.enter_context(KubeAPI())
            log(f"kube-apiserver ready in {time.monotonic() - t0:.1f}s")
        else:
            self.api = self._given_api
        self.api.install_crds([MCS_CRDS])
        all_objects = load_objects()
        self.loaded = apply_objects(self.api, all_objects)
        self.objects = [o for o in all_objects if served(self.api, o)]
        log(f"applied {len(self.loaded.applied)} objects, skipped {len(self.loaded.skipped)}")
        self.ours = ServerProcess("--kubeconfig", str(self.api.kubeconfig))
        self.callback(self.ours.stop)
        self.ours.start()
        self.ours_local = ServerProcess("--kubeconfig", str(self.api.kubeconfig),
                                        "--cluster-id", LOCAL_CLUSTER)
        self.callback(self.ours_local.stop)
        self.ours_local.start()
        if self.want_unsynced:
            self.ours_unsynced = ServerProcess(
                "--kubeconfig", str(self.api.reader_kubeconfig), "--startup-timeout", "1")
            self.callback(self.ours_unsynced.stop)
            self.ours_unsynced.start()
        self.coredns = self.enter_context(CoreDNS(kubernetes_corefile(self.api.kubeconfig)))
        if self.want_unsynced:
            self.coredns_unsynced = self.enter_context(
                CoreDNS(kubernetes_corefile(self.api.reader_kubeconfig)))
            assert self.ours_unsynced is not None
            self.ours_unsynced.wait_listening(30)
        self.ours.wait_ready(30)
        self.ours_local.wait_ready(30)
        for label, port in (("clusterset-dns", self.ours.port), ("CoreDNS", self.coredns.port)):
            wait_answering(port, 60, f"{label} to answer for every object")
        log(f"both servers answer ({time.monotonic() - t0:.1f}s since start)")


