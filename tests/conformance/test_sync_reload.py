"""Our own server only: SERVFAIL until synced, and hot reload of manifest
files (edits, new and removed files, broken YAML)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .csdns_testlib import (
    OBJECTS_DIR,
    SOA,
    ZONE,
    DigResult,
    ServerProcess,
    a_records,
    check,
    check_nxdomain,
    poll,
    run_dig,
    svc,
)

pytestmark = pytest.mark.own_server

HELLO = svc("hello")
#: the spec promises changes "within ~1 s"; allow generous slack on a busy box
RELOAD_BOUND = 5.0


def q(srv: ServerProcess, name: str, rtype: str = "A", *opts: str) -> DigResult:
    return run_dig(srv.host, srv.port, name, rtype, *opts)


def answers(srv: ServerProcess, name: str, rtype: str, expected: list[str]) -> Callable[[], bool]:
    def _ok() -> bool:
        res = q(srv, name, rtype)
        return res.rcode == "NOERROR" and sorted(res.answer) == sorted(expected)

    return _ok


def wait_for(
    cond: Callable[[], bool], what: str, srv: ServerProcess, bound: float = RELOAD_BOUND
) -> float:
    ok, _, elapsed = poll(cond, bool, timeout=bound, interval=0.1)
    assert ok, f"{what}: not seen within {bound}s\n--- server log ---\n{srv.log_text()[-5000:]}"
    return elapsed


def serial(srv: ServerProcess) -> int:
    res = q(srv, f"{ZONE}.", "SOA")
    check(res, answer=[SOA])
    return res.serials[0]


def copy_objects(dest: Path) -> Path:
    shutil.copytree(OBJECTS_DIR, dest)
    return dest


def steady(srv: ServerProcess, seconds: float, checks: list[tuple[str, str, list[str]]]) -> None:
    """Every check must hold on every sample for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, rtype, expected in checks:
            check(q(srv, name, rtype), answer=expected)
        time.sleep(0.25)


# ---------------------------------------------------------------- sync


def test_servfail_until_manifests_appear(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    later = tmp_path / "later"  # does not exist yet
    srv = start_server(later, wait="listening")
    assert srv.ready_status() == 503, "/ready must be 503 before the first load"
    for name in (svc("nosuch"), HELLO, f"foo.{ZONE}."):
        res = q(srv, name, "A")
        assert res.responded and res.rcode == "SERVFAIL", (
            f"would-be NXDOMAIN name must be SERVFAIL before sync\n{res.describe()}"
        )
    # still unsynced a moment later
    time.sleep(1.5)
    res = q(srv, svc("nosuch"), "A")
    assert res.rcode == "SERVFAIL", res.describe()

    staging = tmp_path / "staging"
    shutil.copytree(OBJECTS_DIR, staging)
    os.rename(staging, later)

    wait_for(answers(srv, HELLO, "A", a_records(HELLO, ["10.42.0.10"])), "first load", srv)
    check_nxdomain(q(srv, svc("nosuch"), "A"))
    ok, last, _ = poll(srv.ready_status, lambda s: s == 200, timeout=RELOAD_BOUND)
    assert ok, f"/ready {last} after the manifests were loaded"


def test_ready_200_after_initial_load(start_server: Callable[..., ServerProcess]) -> None:
    srv = start_server(OBJECTS_DIR, wait="ready")
    assert srv.ready_status() == 200
    check(q(srv, HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"]))


# ---------------------------------------------------------------- hot reload


def test_reload_edit_changes_answer_and_serial(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    objs = copy_objects(tmp_path / "objects")
    srv = start_server(objs)
    check(q(srv, HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"]))
    before = serial(srv)

    f = objs / "core" / "hello.yaml"
    f.write_text(f.read_text().replace('"10.42.0.10"', '"10.42.0.11"'))
    wait_for(answers(srv, HELLO, "A", a_records(HELLO, ["10.42.0.11"])), "edited IP", srv)
    after = serial(srv)
    assert after != before, f"SOA serial unchanged ({before}) after a visible change"
    # unrelated data still served
    check(
        q(srv, svc("db"), "A"),
        answer=a_records(svc("db"), ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"]),
    )


def test_reload_endpoint_readiness_change(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    objs = copy_objects(tmp_path / "objects")
    srv = start_server(objs)
    nr0 = f"nr-0.east.notready.conf.svc.{ZONE}."
    check_nxdomain(q(srv, nr0, "A"))
    f = objs / "core" / "notready.yaml"
    text = f.read_text()
    first = text.index("ready: false")
    f.write_text(text[:first] + "ready: true" + text[first + len("ready: false") :])
    wait_for(answers(srv, nr0, "A", a_records(nr0, ["10.4.0.1"])), "endpoint became ready", srv)
    check(q(srv, svc("notready"), "A"), answer=a_records(svc("notready"), ["10.4.0.1"]))


ADDED = """\
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceImport
metadata:
  name: added
  namespace: conf
spec:
  type: ClusterSetIP
  ips: ["10.42.0.99"]
  ports:
    - name: http
      protocol: TCP
      port: 80
"""


def test_reload_new_file_in_new_subdirectory_then_removed(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    objs = copy_objects(tmp_path / "objects")
    srv = start_server(objs)
    name = svc("added")
    check_nxdomain(q(srv, name, "A"))
    sub = objs / "new" / "deeper"
    sub.mkdir(parents=True)
    (sub / "added.yml").write_text(ADDED)
    wait_for(answers(srv, name, "A", a_records(name, ["10.42.0.99"])), "new file", srv)
    (sub / "added.yml").unlink()

    def gone() -> bool:
        return q(srv, name, "A").rcode == "NXDOMAIN"

    wait_for(gone, "removed file", srv)
    check_nxdomain(q(srv, name, "A"))


BROKEN = (
    "apiVersion: multicluster.x-k8s.io/v1alpha1\n"
    "kind: ServiceImport\n"
    "metadata: [unclosed\n  - : :\n\t{\n"
)


def test_broken_new_file_keeps_serving(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    objs = copy_objects(tmp_path / "objects")
    srv = start_server(objs)
    (objs / "core" / "zz-broken.yaml").write_text(BROKEN)
    steady(
        srv,
        3.0,
        [
            (HELLO, "A", a_records(HELLO, ["10.42.0.10"])),
            (
                svc("db"),
                "A",
                a_records(svc("db"), ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"]),
            ),
        ],
    )
    assert srv.alive(), "server exited after a broken file appeared"
    # the server is not wedged: a valid change elsewhere is still picked up
    f = objs / "core" / "v4only.json"
    f.write_text(f.read_text().replace("10.42.0.30", "10.42.0.31"))
    v4 = svc("v4only")
    wait_for(
        answers(srv, v4, "A", a_records(v4, ["10.42.0.31"])), "change next to a broken file", srv
    )


def test_broken_existing_file_keeps_last_good_content(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    objs = copy_objects(tmp_path / "objects")
    srv = start_server(objs)
    f = objs / "core" / "hello.yaml"
    good = f.read_text()
    f.write_text(BROKEN)
    steady(srv, 3.0, [(HELLO, "A", a_records(HELLO, ["10.42.0.10"]))])
    f.write_text(good.replace('"10.42.0.10"', '"10.42.0.12"'))
    wait_for(answers(srv, HELLO, "A", a_records(HELLO, ["10.42.0.12"])), "repaired file", srv)
