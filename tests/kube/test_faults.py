"""API-side faults against the real etcd + kube-apiserver: etcd killed and restarted,
the API server paused (the watch stalls without a word), a burst of 10,000 updates,
the storage restored to an earlier state (resourceVersion going back), and a worker
process killed. The server must keep answering and end up with the API's state."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPSConnection
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import HTTP, V1BETA1, service_import
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn


class KeepAlive:
    """One persistent HTTPS connection to the API server (the harness opens one per
    request; a burst of 10,000 writes needs fewer handshakes)."""

    def __init__(self, api: KubeAPI) -> None:
        url = urllib.parse.urlsplit(api.url)
        assert api.ca_file is not None
        self.conn = HTTPSConnection(url.hostname or "127.0.0.1", url.port, timeout=30,
                                    context=ssl.create_default_context(cafile=str(api.ca_file)))
        self.headers = {"Authorization": f"Bearer {api.token}", "Accept": "application/json",
                        "Content-Type": "application/merge-patch+json"}

    def set_ips(self, namespace: str, name: str, ips: list[str]) -> None:
        path = f"/apis/{V1BETA1}/namespaces/{namespace}/serviceimports/{name}"
        self.conn.request("PATCH", path, body=json.dumps({"spec": {"ips": ips}}),
                          headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        assert response.status == 200, f"PATCH {path}: {response.status} {body[:300]!r}"

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def pause_guard(api: KubeAPI) -> Iterator[None]:
    """Whatever happens in the test, the shared API server is not left stopped."""
    yield
    if api.apiserver is not None and api.apiserver.alive():
        os.kill(api.apiserver.pid, signal.SIGCONT)


def test_etcd_killed_and_restarted_under_the_api_server(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api.apply(service_import("steady", namespace, ports=[HTTP], ips=["10.90.0.1"]))
    api.apply(service_import("moves", namespace, ports=[HTTP], ips=["10.90.0.2"]))
    server = server_for().start()
    server.wait_ready()
    steady, moves = fqdn("steady", namespace), fqdn("moves", namespace)
    expect(server, moves, "A", "NOERROR", a(moves, "10.90.0.2"))
    assert api.etcd is not None
    api.etcd.stop(graceful=False)  # SIGKILL: etcd is gone, the API server is not
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # the last known data keeps being served
            assert server.answers(steady, "A") == ("NOERROR", set(a(steady, "10.90.0.1")))
            time.sleep(0.2)
    finally:
        api.start()  # etcd again, same data; the API server reconnects by itself
    wait_for(lambda: _writes(api, namespace), 60, "the API server to accept writes again")
    expect(server, moves, "A", "NOERROR", a(moves, "10.90.0.22"), timeout=60)
    expect(server, steady, "A", "NOERROR", a(steady, "10.90.0.1"))
    assert server.ready_status() == 200


def _writes(api: KubeAPI, namespace: str) -> bool:
    try:
        api.apply(service_import("moves", namespace, ports=[HTTP], ips=["10.90.0.22"]))
        return True
    except Exception:  # any failure here means "not yet"
        return False


def test_paused_api_server_stalls_the_watch_and_the_inactivity_timeout_recovers_it(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess],
        pause_guard: None) -> None:
    """SIGSTOP: the connection stays open and nothing arrives, no error, no end. The
    inactivity timeout drops the stream; once the API server runs again (SIGCONT) the
    changes made meanwhile (through a second API server on the same etcd) arrive."""
    api.apply(service_import("paused", namespace, ports=[HTTP], ips=["10.91.0.1"]))
    server = server_for("--inactivity-timeout", "2").start()
    server.wait_ready()
    paused = fqdn("paused", namespace)
    assert api.apiserver is not None
    os.kill(api.apiserver.pid, signal.SIGSTOP)
    try:
        second = api.start_second()
        second.apply(service_import("paused", namespace, ports=[HTTP], ips=["10.91.0.2"]))
        second.apply(service_import("born", namespace, ports=[HTTP], ips=["10.91.0.3"]))
        second.stop()
        wait_for(lambda: server.metric("clusterset_dns_watch_restarts_total",
                                       reason="inactive") >= 1, 30,
                 "the silent watch to be dropped")
        assert server.answers(paused, "A") == ("NOERROR", set(a(paused, "10.91.0.1")))
    finally:
        os.kill(api.apiserver.pid, signal.SIGCONT)
    born = fqdn("born", namespace)
    expect(server, paused, "A", "NOERROR", a(paused, "10.91.0.2"), timeout=90)
    expect(server, born, "A", "NOERROR", a(born, "10.91.0.3"), timeout=30)
    assert "silent for 2s" in server.log_text()


BURST_NAMES = 20
BURST_VERSIONS = 500  # 20 x 500 = 10,000 updates


def _version_ip(index: int, version: int) -> str:
    return f"10.{100 + index}.{version // 256}.{version % 256}"


def _version_of(line: str) -> int:
    third, fourth = line.split()[-1].split(".")[2:]
    return int(third) * 256 + int(fourth)


def test_a_burst_of_10000_updates_keeps_answers_consistent_per_name(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """20 imports updated 500 times each, from 4 writers, while a reader asks for them
    and for an unrelated name: every answer is one whole version (one address), a name
    never goes back to an older version, the unrelated name always answers, and the
    end state is the last version of each."""
    for i in range(BURST_NAMES):
        api.apply(service_import(f"b{i}", namespace, ports=[HTTP], ips=[_version_ip(i, 0)]))
    api.apply(service_import("quiet", namespace, ports=[HTTP], ips=["10.99.0.1"]))
    server = server_for().start()
    server.wait_ready()
    names = [fqdn(f"b{i}", namespace) for i in range(BURST_NAMES)]
    quiet = fqdn("quiet", namespace)
    expect(server, names[-1], "A", "NOERROR", a(names[-1], _version_ip(BURST_NAMES - 1, 0)))
    done = threading.Event()
    problems: list[str] = []
    seen = [0] * BURST_NAMES
    asked = [0]

    def reader() -> None:
        while not done.is_set():
            for i, name in enumerate(names):
                rcode, lines = server.answers(name, "A")
                asked[0] += 1
                if rcode != "NOERROR" or len(lines) != 1:
                    problems.append(f"{name}: {rcode} {sorted(lines)}")
                    continue
                version = _version_of(next(iter(lines)))
                if version < seen[i]:
                    problems.append(f"{name}: version {version} after {seen[i]}")
                seen[i] = max(seen[i], version)
            if server.answers(quiet, "A") != ("NOERROR", set(a(quiet, "10.99.0.1"))):
                problems.append(f"{quiet}: {server.answers(quiet, 'A')}")

    def writer(indexes: list[int]) -> None:
        client = KeepAlive(api)
        try:
            for version in range(1, BURST_VERSIONS + 1):
                for i in indexes:
                    client.set_ips(namespace, f"b{i}", [_version_ip(i, version)])
        finally:
            client.close()

    reading = threading.Thread(target=reader, daemon=True)
    reading.start()
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(4) as pool:
            for future in [pool.submit(writer, list(range(w, BURST_NAMES, 4)))
                           for w in range(4)]:
                future.result()
        writing = time.monotonic() - started
        for i, name in enumerate(names):
            expect(server, name, "A", "NOERROR", a(name, _version_ip(i, BURST_VERSIONS)),
                   timeout=60)
    finally:
        done.set()
        reading.join(30)
    assert problems == [], problems[:20]
    assert asked[0] > 100, f"only {asked[0]} questions asked during the burst"
    print(f"10,000 updates written in {writing:.1f}s; {asked[0]} answers checked")


def test_resource_version_going_back_is_detected_and_relisted(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """etcd restored from a backup taken earlier: its revision (the resourceVersion)
    is now lower than the one the server resumes from. Without detection the watch
    waits for that revision in silence and serves what the backup no longer has."""
    api.apply(service_import("old", namespace, ports=[HTTP], ips=["10.92.0.1"]))
    api.apply(service_import("dropped-later", namespace, ports=[HTTP], ips=["10.92.0.2"]))
    assert api.etcd is not None
    backup = Path(api.dir) / "etcd-backup"
    api.etcd.stop()  # a consistent copy of the data directory needs etcd stopped
    shutil.copytree(Path(api.dir) / "etcd", backup)
    api.start()
    wait_for(lambda: _readable(api), 60, "the API server to read again after etcd restart")
    server = server_for("--watch-timeout", "2").start()
    server.wait_ready()
    # Written after the backup: many revisions, so the restored one is far behind ours.
    for i in range(30):
        api.apply(service_import("later", namespace, ports=[HTTP], ips=[f"10.92.1.{i + 1}"]))
    api.delete(V1BETA1, "ServiceImport", namespace, "dropped-later")
    later, dropped, old = (fqdn(n, namespace) for n in ("later", "dropped-later", "old"))
    expect(server, later, "A", "NOERROR", a(later, "10.92.1.30"), timeout=30)
    expect(server, dropped, "A", "NXDOMAIN", [], timeout=30)
    api.etcd.stop()
    shutil.rmtree(Path(api.dir) / "etcd")
    shutil.copytree(backup, Path(api.dir) / "etcd")
    api.start()
    wait_for(lambda: _readable(api), 60, "the API server to read the restored etcd")
    # The backup's state is served again: "later" never existed, "dropped-later" exists.
    expect(server, later, "A", "NXDOMAIN", [], timeout=60)
    expect(server, dropped, "A", "NOERROR", a(dropped, "10.92.0.2"), timeout=30)
    expect(server, old, "A", "NOERROR", a(old, "10.92.0.1"))
    assert server.metric("clusterset_dns_relists_total", reason="rv-backwards") >= 1
    assert "went back in time" in server.log_text()


def test_periodic_relist_repairs_what_the_watch_cannot_see(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """etcd restored from a backup, then written to (through a second API server) until
    its revision is past ours: the resourceVersion check passes, and the resumed watch
    delivers only the writes after our version, never the restore's differences. Only
    the periodic relist finds them."""
    api.apply(service_import("kept", namespace, ports=[HTTP], ips=["10.94.0.1"]))
    assert api.etcd is not None
    backup = Path(api.dir) / "etcd-backup-drift"
    api.etcd.stop()
    shutil.copytree(Path(api.dir) / "etcd", backup)
    api.start()
    wait_for(lambda: _readable(api), 60, "the API server to read again after etcd restart")
    server = server_for("--relist-interval", "6").start()
    server.wait_ready()
    ghost, kept = fqdn("ghost", namespace), fqdn("kept", namespace)
    for i in range(10):  # after the backup: the restore takes these away
        api.apply(service_import("ghost", namespace, ports=[HTTP], ips=[f"10.94.1.{i + 1}"]))
    expect(server, ghost, "A", "NOERROR", a(ghost, "10.94.1.10"), timeout=30)
    # Read before the API server goes away: once it is back, the overdue periodic relist
    # may run (and count the drift) before this test could read the metric.
    drift = server.metric("clusterset_dns_relist_drift_total", change="removed")
    api.stop()
    api.etcd.stop()
    shutil.rmtree(Path(api.dir) / "etcd")
    shutil.copytree(backup, Path(api.dir) / "etcd")
    second = api.start_second()  # starts etcd too; the first API server stays down
    try:
        for i in range(40):  # past the revision the server resumes from
            second.apply(service_import("filler", namespace, ports=[HTTP],
                                        ips=[f"10.94.2.{i + 1}"]))
    finally:
        second.stop()
    api.start()
    filler = fqdn("filler", namespace)
    expect(server, filler, "A", "NOERROR", a(filler, "10.94.2.40"), timeout=60)
    expect(server, ghost, "A", "NXDOMAIN", [], timeout=60)
    expect(server, kept, "A", "NOERROR", a(kept, "10.94.0.1"))
    assert server.metric("clusterset_dns_relist_drift_total", change="removed") >= drift + 1
    assert server.metric("clusterset_dns_relists_total", reason="periodic") >= 1
    assert server.metric("clusterset_dns_relists_total", reason="rv-backwards") == 0


def _readable(api: KubeAPI) -> bool:
    try:
        api.list(V1BETA1, "ServiceImport")
        return True
    except Exception:  # any failure here means "not yet"
        return False


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def test_a_killed_worker_is_restarted_and_answers_current_data(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api.apply(service_import("w", namespace, ports=[HTTP], ips=["10.93.0.1"]))
    server = server_for("--workers", "2").start()
    server.wait_ready()
    assert server.proc is not None
    (worker,) = wait_for(lambda: _children(server.proc.pid), 30, "the worker process")
    w = fqdn("w", namespace)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: server.ready_status() == 503, 10, "/ready to report the missing worker")
    api.apply(service_import("w", namespace, ports=[HTTP], ips=["10.93.0.2"]))  # while it is away
    wait_for(lambda: server.ready_status() == 200, 60, "/ready once the worker is back")
    (new_worker,) = _children(server.proc.pid)
    assert new_worker != worker
    # Both processes answer on the port (SO_REUSEPORT spreads the queries): every
    # answer must be the current one.
    expect(server, w, "A", "NOERROR", a(w, "10.93.0.2"), timeout=30)
    answers = [server.answers(w, "A") for _ in range(60)]
    assert all(got == ("NOERROR", set(a(w, "10.93.0.2"))) for got in answers), answers
    assert server.metric("clusterset_dns_worker_restarts_total", reason="exited") == 1
    assert "was killed by signal 9" in server.log_text()
