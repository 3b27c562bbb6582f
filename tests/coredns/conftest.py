"""Fixtures of the CoreDNS suite (marker ``coredns``): a real etcd + kube-apiserver
with the mcs-api v0.5.0 CRDs for the whole session, and the comparison with
CoreDNS (``clusterset_dns_testkit.compare``)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from clusterset_dns_testkit import compare as compare_package
from clusterset_dns_testkit.peers import KubeAPI


@pytest.fixture(scope="session")
def compare() -> ModuleType:
    return compare_package


@pytest.fixture(scope="session")
def kube_api() -> Iterator[KubeAPI]:
    """etcd + kube-apiserver (v1.33) with the mcs-api v0.5.0 CRDs installed."""
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        yield api
