"""Fixtures of the CoreDNS suite (marker ``coredns``): a real etcd + kube-apiserver
with the mcs-api v0.5.0 CRDs for the whole session, and the repository root on
``sys.path`` so that ``bench/compare_coredns.py`` can be imported."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from peers import KubeAPI

REPO = Path(__file__).resolve().parents[2]


def load_compare_module() -> ModuleType:
    """``bench/compare_coredns.py`` as a module (bench/ is not a package)."""
    name = "compare_coredns"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "compare_coredns.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def compare() -> ModuleType:
    return load_compare_module()


@pytest.fixture(scope="session")
def kube_api() -> Iterator[KubeAPI]:
    """etcd + kube-apiserver (v1.33) with the mcs-api v0.5.0 CRDs installed."""
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        yield api
