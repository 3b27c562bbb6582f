"""How bench/kube_scale.py and bench/startup.py time CoreDNS (apiload.start_coredns):
the real CoreDNS against a real API server, watched from its start for the last
import's answer, and a CoreDNS that exits reported at once with its log, not after
the three minutes the answer is waited for."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import dns.message
import dns.query
import pytest

from clusterset_dns_testkit.bench import apiload
from clusterset_dns_testkit.peers import KubeAPI, PeerError

IMPORTS = 4


@pytest.fixture(scope="module")
def loaded() -> Iterator[KubeAPI]:
    with KubeAPI(watch_cache=True) as kube:
        kube.install_crds(["mcs-api-v0.5.0"])
        apiload.load(kube, IMPORTS, 1, 3)
        yield kube


def test_coredns_is_timed_to_the_last_imports_answer(loaded: KubeAPI) -> None:
    coredns, figures = apiload.start_coredns(loaded, argparse.Namespace(imports=IMPORTS))
    try:
        last = f"svc-{IMPORTS - 1}.ns-{(IMPORTS - 1) % apiload.NAMESPACES}.svc.clusterset.local"
        answer = dns.query.udp(dns.message.make_query(last, "A"), "127.0.0.1",
                               port=coredns.port, timeout=2)
        assert [rr.to_text() for rrset in answer.answer for rr in rrset] == [
            apiload.ip4(IMPORTS - 1)]
        assert figures["first_answer_s"] > 0 and figures["rss_mib"] > 0
        # the wait takes only the wanted address as the answer
        assert apiload.wait_answer(coredns.port, last, apiload.ip4(IMPORTS - 1), 30) >= 0
        with pytest.raises(RuntimeError, match=r"never answered 10\.9\.9\.9"):
            apiload.wait_answer(coredns.port, last, "10.9.9.9", 0.5)
    finally:
        coredns.close()


def test_a_coredns_that_exits_is_reported_with_its_log(loaded: KubeAPI,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiload, "kubernetes_corefile",
                        lambda kubeconfig: "clusterset.local {\n    no_such_plugin\n}\n")
    # without the exit check this waits the whole 180 s and says "never answered"
    with pytest.raises(PeerError, match=r"exited before answering[\s\S]*no_such_plugin"):
        apiload.start_coredns(loaded, argparse.Namespace(imports=IMPORTS))
