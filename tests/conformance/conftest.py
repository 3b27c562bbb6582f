"""pytest wiring for the dig-based conformance suite.

Default: start our own server (``python -m clusterset_dns serve``) on a free
127.0.0.1 port with ``--manifests tests/conformance/objects``, wait for
``/ready``, run the suite against it, stop it at the end.

``--dns-server HOST:PORT``: query that server instead; the objects of
``tests/conformance/objects`` are assumed to be loaded there already (for
instance applied to the kube-apiserver that CoreDNS watches). Tests that must
start a server process of their own (marker ``own_server``) are skipped then.

``--objects core|api|all``: which object sets the target serves:
``core`` = objects/core (v1alpha1 spec layout, what CoreDNS reads), ``api`` =
core + extended (everything a real API server accepts), ``all`` (default) =
core + extended + files-only. Tests needing a missing set are skipped.

Markers: ``extended`` (needs objects/extended), ``files_only`` (needs
objects/files-only), ``deviation`` (checks one of our deliberate deviations
from CoreDNS: list them with ``-m deviation``), ``own_server`` (starts its own
server process).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from .csdns_testlib import (
    OBJECTS_DIR,
    Dig,
    ServerProcess,
    Target,
    ensure_dig,
)

MARKERS = {
    "extended": "needs the objects of tests/conformance/objects/extended",
    "files_only": "needs the objects of tests/conformance/objects/files-only",
    "deviation": "checks a deliberate deviation from CoreDNS's behaviour",
    "own_server": "starts a clusterset_dns server process of its own",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("clusterset-dns conformance")
    group.addoption(
        "--dns-server",
        default=None,
        metavar="HOST:PORT",
        help="query this DNS server (objects already loaded) instead of starting our own",
    )
    group.addoption(
        "--objects",
        default="all",
        choices=("core", "api", "all"),
        help="object sets served by the target: core, api (core+extended), all (default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    external = config.getoption("--dns-server")
    objects = config.getoption("--objects")
    skip_own = pytest.mark.skip(reason="starts its own server process; not with --dns-server")
    skip_ext = pytest.mark.skip(reason=f"needs objects/extended; --objects={objects}")
    skip_files = pytest.mark.skip(reason=f"needs objects/files-only; --objects={objects}")
    for item in items:
        if not _in_suite(item):
            continue
        if external and item.get_closest_marker("own_server"):
            item.add_marker(skip_own)
        if objects == "core" and item.get_closest_marker("extended"):
            item.add_marker(skip_ext)
        if objects in ("core", "api") and item.get_closest_marker("files_only"):
            item.add_marker(skip_files)


HERE = Path(__file__).resolve().parent


def _in_suite(item: pytest.Item) -> bool:
    return Path(item.path).resolve().is_relative_to(HERE)


def parse_hostport(value: str) -> tuple[str, int]:
    if value.startswith("["):
        host, _, port = value[1:].partition("]:")
    else:
        host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise pytest.UsageError(f"--dns-server wants HOST:PORT or [V6]:PORT, got {value!r}")
    if not (host.startswith("127.") or host in ("::1", "localhost")):
        raise pytest.UsageError("--dns-server must be on 127.0.0.0/8 or ::1")
    return host, int(port)


_SESSION_SERVER: list[ServerProcess] = []
_FAILED: list[str] = []


def selected_objects(objects: str, dest: Path) -> Path:
    """The manifests path for our own server for an ``--objects`` choice."""
    if objects == "all":
        return OBJECTS_DIR
    dest.mkdir(parents=True, exist_ok=True)
    subdirs = ["core"] if objects == "core" else ["core", "extended"]
    for sub in subdirs:
        shutil.copytree(OBJECTS_DIR / sub, dest / sub)
    return dest


@pytest.fixture(scope="session")
def dig_path() -> str:
    try:
        return ensure_dig()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest, dig_path: str) -> Iterator[Target]:
    external = request.config.getoption("--dns-server")
    if external:
        host, port = parse_hostport(external)
        yield Target(host, port, None)
        return
    tmp = Path(tempfile.mkdtemp(prefix="csdns-conf-objects-"))
    manifests = selected_objects(request.config.getoption("--objects"), tmp / "objects")
    server = ServerProcess(manifests)
    _SESSION_SERVER.append(server)
    server.start()
    try:
        server.wait_ready(timeout=30)
    except RuntimeError as exc:
        server.stop()
        pytest.fail(str(exc), pytrace=False)
    yield Target(server.host, server.port, server)
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def dig(target: Target) -> Dig:
    """``dig(name, type="A", *opts, rdclass=None) -> DigResult`` against the target."""
    return Dig(target.host, target.port)


@pytest.fixture
def start_server(
    request: pytest.FixtureRequest, dig_path: str
) -> Iterator[Callable[..., ServerProcess]]:
    """Factory for extra server instances of our own (stopped at teardown).

    ``start_server(manifests, *extra_args, wait="ready"|"listening"|None)``.
    Their logs are attached to the report of a failing test.
    """
    started: list[ServerProcess] = []
    request.node._csdns_servers = started  # read by pytest_runtest_makereport

    def _start(manifests: Path | str, *extra: str, wait: str | None = "ready") -> ServerProcess:
        srv = ServerProcess(manifests, extra)
        started.append(srv)
        srv.start()
        if wait == "ready":
            srv.wait_ready(timeout=30)
        elif wait == "listening":
            srv.wait_listening(timeout=30)
        return srv

    yield _start
    for srv in started:
        srv.stop()


def pytest_report_header(config: pytest.Config) -> Sequence[str]:
    ext = config.getoption("--dns-server")
    where = f"external server {ext}" if ext else "own server (python -m clusterset_dns serve)"
    return [f"clusterset-dns conformance: {where}, objects={config.getoption('--objects')}"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    rep = yield
    if rep.failed and _in_suite(item):  # type: ignore[attr-defined]
        _FAILED.append(item.nodeid)
        for i, srv in enumerate(getattr(item, "_csdns_servers", [])):
            rep.sections.append(  # type: ignore[attr-defined]
                (f"server log (instance {i}, {rep.when})", srv.log_text()[-20000:])  # type: ignore[attr-defined]
            )
    return rep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FAILED and _SESSION_SERVER:
        srv = _SESSION_SERVER[0]
        text = srv.log_text()
        lines = text.splitlines()
        terminalreporter.section("clusterset_dns session server log (last 300 lines)")
        terminalreporter.write_line("$ " + " ".join(srv.cmd))
        for line in lines[-300:]:
            terminalreporter.write_line(line)
