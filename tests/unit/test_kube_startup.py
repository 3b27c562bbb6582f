"""What kube.py does as it is imported, called here in the test's own process (where a
mutation tool's changed version runs; tests/unit/test_kube_import.py checks the same in
a fresh interpreter): aiohttp imported with a default context that loads the system's
CA certificates when first used (DeferredTrust), and kubernetes_asyncio's four package
__init__ files replaced by empty packages (_light_packages)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import socket
import ssl
import sys
import types
from pathlib import Path
from typing import Any

import certifi
import pytest

from clusterset_dns.sources import kube

# What verification uses of a context, the same in a DeferredTrust and in the default one.
SAME = ("check_hostname", "verify_mode", "verify_flags", "options", "minimum_version",
        "maximum_version", "protocol")


class FakeAiohttp:
    """A meta path finder and loader standing for aiohttp: its import makes default
    contexts the way aiohttp's does (and others, as a caller with arguments would)."""

    def __init__(self, fail: bool = False, cafile: str = "") -> None:
        self.fail = fail
        self.cafile = cafile or certifi.where()
        self.asked = 0

    def find_spec(self, name: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != "aiohttp":
            return None
        self.asked += 1
        if self.fail:
            raise ImportError("no aiohttp here")
        return importlib.util.spec_from_loader(name, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        make = ssl.create_default_context
        module.made = make  # type: ignore[attr-defined]
        module.verified = make()  # type: ignore[attr-defined]
        module.named = make(ssl.Purpose.SERVER_AUTH, cafile=None)  # type: ignore[attr-defined]
        module.server_side = make(ssl.Purpose.CLIENT_AUTH)  # type: ignore[attr-defined]
        module.own_ca = make(cafile=self.cafile)  # type: ignore[attr-defined]
        module.one_of_two = make(cafile=self.cafile, capath=None)  # type: ignore[attr-defined]


def without_aiohttp(monkeypatch: pytest.MonkeyPatch, finder: FakeAiohttp) -> None:
    """aiohttp not imported yet, and the next import of it finds ``finder``'s (the real
    module is put back after the test)."""
    monkeypatch.delitem(sys.modules, "aiohttp")
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])


def one_ca(tmp_path: Path) -> str:
    """A CA file of one certificate (the first of certifi's bundle)."""
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    path = tmp_path / "ca.pem"
    path.write_text(bundle[bundle.index("-----BEGIN CERTIFICATE-----"):bundle.index(end)]
                    + end + "\n")
    return str(path)


def test_aiohttp_is_imported_with_a_deferred_default_context(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    original = ssl.create_default_context
    finder = FakeAiohttp(cafile=one_ca(tmp_path))
    without_aiohttp(monkeypatch, finder)
    kube._import_aiohttp()
    module: Any = sys.modules["aiohttp"]
    assert finder.asked == 1 and module.made is not original
    assert ssl.create_default_context is original  # put back once imported
    plain = ssl.create_default_context()
    for context in (module.verified, module.named):
        assert type(context) is kube.DeferredTrust
        assert context.cert_store_stats()["x509_ca"] == 0  # nothing loaded yet
        assert [getattr(context, a) for a in SAME] == [getattr(plain, a) for a in SAME]
        assert context.keylog_filename is None
    # any other call is the real one: a server's context, a caller's own CA file
    for context in (module.server_side, module.own_ca, module.one_of_two):
        assert type(context) is ssl.SSLContext
    assert module.server_side.check_hostname is False
    # the caller's arguments reach the real one: its CA file's one certificate, only
    assert module.own_ca.cert_store_stats()["x509_ca"] == 1
    assert module.one_of_two.cert_store_stats()["x509_ca"] == 1


def test_the_deferred_context_keeps_the_key_log_file_of_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keylog = tmp_path / "keys"
    monkeypatch.setenv("SSLKEYLOGFILE", str(keylog))
    without_aiohttp(monkeypatch, FakeAiohttp())
    kube._import_aiohttp()
    module: Any = sys.modules["aiohttp"]
    assert type(module.verified) is kube.DeferredTrust
    assert module.verified.keylog_filename == str(keylog)


def test_python_told_to_ignore_the_environment_writes_no_key_log(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """python -E: SSLKEYLOGFILE is not read, as the real default context does not."""
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "keys"))
    flags = types.SimpleNamespace(ignore_environment=1)
    monkeypatch.setattr(kube, "sys", types.SimpleNamespace(modules=sys.modules, flags=flags))
    without_aiohttp(monkeypatch, FakeAiohttp())
    kube._import_aiohttp()
    module: Any = sys.modules["aiohttp"]
    assert type(module.verified) is kube.DeferredTrust
    assert module.verified.keylog_filename is None


def test_an_aiohttp_already_imported_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    finder = FakeAiohttp()
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    imported = sys.modules["aiohttp"]
    original = ssl.create_default_context
    kube._import_aiohttp()
    assert finder.asked == 0 and sys.modules["aiohttp"] is imported
    assert ssl.create_default_context is original


def test_a_failing_aiohttp_import_fails_as_it_did(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ssl.create_default_context
    without_aiohttp(monkeypatch, FakeAiohttp(fail=True))
    with pytest.raises(ImportError, match=r"^no aiohttp here$"):
        kube._import_aiohttp()
    assert ssl.create_default_context is original


def test_the_certificates_are_loaded_once_at_the_first_wrap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plain = ssl.create_default_context()
    for wrap in ("bio", "socket"):
        context = kube.DeferredTrust(ssl.PROTOCOL_TLS_CLIENT)
        loads: list[Any] = []
        real = context.load_default_certs

        def load(purpose: Any, real: Any = real, loads: list[Any] = loads) -> None:
            loads.append(purpose)
            real(purpose)

        monkeypatch.setattr(context, "load_default_certs", load)
        assert context.cert_store_stats()["x509_ca"] == 0
        for _ in range(2):
            if wrap == "bio":
                made = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(),
                                        server_hostname="a.test")
                assert made.server_hostname == "a.test"  # the arguments reach the real one
            else:
                with socket.socket() as sock:
                    wrapped = context.wrap_socket(sock, server_hostname="a.test")
                    assert wrapped.server_hostname == "a.test"
                    wrapped.close()
        assert loads == [ssl.Purpose.SERVER_AUTH], wrap
        assert context.cert_store_stats() == plain.cert_store_stats(), wrap


def package_root() -> str:
    """The library's directory (its package, light or whole, is imported by now)."""
    return str(next(iter(sys.modules["kubernetes_asyncio"].__path__)))


def light_modules(monkeypatch: pytest.MonkeyPatch, present: tuple[str, ...] = ()
                  ) -> dict[str, Any]:
    """sys.modules as _light_packages sees it: the library's four packages absent but
    ``present`` (a copy: the real one is left alone)."""
    modules = {name: module for name, module in sys.modules.items()
               if name not in kube._LIGHT or name in present}
    monkeypatch.setattr(sys, "modules", modules)
    return modules


def test_the_four_packages_are_registered_empty_from_their_directories(
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = package_root()
    modules = light_modules(monkeypatch)
    kube._light_packages()
    registered = {name: modules.get(name) for name in kube._LIGHT}
    monkeypatch.undo()
    assert {name: (type(m), m.__name__, m.__path__) for name, m in registered.items()} == {
        "kubernetes_asyncio": (types.ModuleType, "kubernetes_asyncio", [root]),
        "kubernetes_asyncio.client": (types.ModuleType, "kubernetes_asyncio.client",
                                      [os.path.join(root, "client")]),
        "kubernetes_asyncio.client.models": (types.ModuleType,
                                             "kubernetes_asyncio.client.models",
                                             [os.path.join(root, "client", "models")]),
        "kubernetes_asyncio.config": (types.ModuleType, "kubernetes_asyncio.config",
                                      [os.path.join(root, "config")])}
    assert all(os.path.isdir(m.__path__[0]) for m in registered.values())


@pytest.mark.parametrize("present", kube._LIGHT)
def test_any_of_them_imported_already_is_used_as_it_is(
        monkeypatch: pytest.MonkeyPatch, present: str) -> None:
    modules = light_modules(monkeypatch, (present,))
    before = dict(modules)
    kube._light_packages()
    after = dict(modules)
    monkeypatch.undo()
    assert after == before


@pytest.mark.parametrize("spec", [None, importlib.machinery.ModuleSpec("kubernetes_asyncio", None),
                                  importlib.machinery.ModuleSpec("kubernetes_asyncio", None,
                                                                 is_package=True)],
                         ids=["not-installed", "a-module", "no-locations"])
def test_a_library_that_is_not_a_package_is_left_to_the_plain_import(
        monkeypatch: pytest.MonkeyPatch, spec: Any) -> None:
    if spec is not None and spec.submodule_search_locations is not None:
        spec.submodule_search_locations.clear()
    modules = light_modules(monkeypatch)
    before = dict(modules)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    kube._light_packages()
    after = dict(modules)
    monkeypatch.undo()
    assert after == before
