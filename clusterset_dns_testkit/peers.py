"""Real peers for end-to-end tests: etcd + kube-apiserver, and CoreDNS, on loopback.

The binaries come from ``KUBEBUILDER_ASSETS`` (envtest convention: a directory
holding ``kube-apiserver`` and ``etcd``) or else from the cache that
``scripts/build-peers`` fills (``${CLUSTERSET_DNS_CACHE:-~/.cache/clusterset-dns}/bin``).

Typical use::

    from clusterset_dns_testkit.peers import CoreDNS, KubeAPI

    with KubeAPI() as api:                           # etcd + kube-apiserver, ready
        api.install_crds([api.crd_path("mcs-api-v0.5.0")])
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}})
        api.apply({...ServiceImport...})
        # hand api.kubeconfig to the server under test

Choices made for tests (see ``KubeAPI.__init__``):

* **Watch cache off by default** (``--watch-cache=false``). Every watch is then
  served by etcd itself, so (a) a watch resumed from any resourceVersion that
  etcd still holds replays exactly the missed events, also across an
  apiserver restart, and (b) after :meth:`KubeAPI.compact` a watch from an
  older resourceVersion always ends in 410 Gone (the apiserver answers HTTP
  200 and then a single ``ERROR`` event whose Status has ``code: 410``).
  With the watch cache on (``watch_cache=True``, what real clusters run),
  measured on v1.33: after a compaction, old resourceVersions still in the
  cache's in-memory window are served (no 410); after an apiserver restart a
  watch first gets HTTP 429 for a few seconds after /readyz is already OK (the
  CRD's cache is initializing), then 410 for any pre-restart resourceVersion,
  compacted or not. Use it to test that behaviour, not to make 410 deterministic.
* ``--etcd-compaction-interval=0``: the apiserver never compacts etcd by itself;
  only :meth:`KubeAPI.compact` does, so tests decide when history is lost.
* Admission: every default-enabled plugin except ``NamespaceLifecycle`` is
  disabled (objects in a missing namespace are still refused, as in a cluster).
* Authentication: static tokens (``--token-auth-file``): ``admin`` in group
  ``system:masters`` (:attr:`KubeAPI.token`, :attr:`KubeAPI.kubeconfig`), and
  ``reader`` with no group and so no rights until a test grants them by RBAC
  (:attr:`KubeAPI.reader_token`, :attr:`KubeAPI.reader_kubeconfig`).
* Serving certificate: self-signed by the apiserver into ``--cert-dir`` (SAN
  127.0.0.1); the kubeconfigs carry its CA (:attr:`KubeAPI.ca_file`), and every
  apiserver instance of one ``KubeAPI`` shares that certificate.

Everything listens on 127.0.0.1 only; every process is killed on ``close()``,
at interpreter exit, and (Linux PR_SET_PDEATHSIG) when the test process dies;
logs go to files under the temporary directory, and their tails are included
in the exceptions raised when a peer fails to start.
Set ``CLUSTERSET_DNS_KEEP_TMP=1`` to keep the temporary directories.
"""

from __future__ import annotations

import atexit
import base64
import builtins
import contextlib
import ctypes
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[1]
OWN_CRD_DIR = REPO_ROOT / "tests" / "crds"
SERVICEIMPORT_CRD = "serviceimports.multicluster.x-k8s.io"
CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")

JSONObj = dict[str, Any]


class PeerError(RuntimeError):
    """A peer could not be found, started or used."""


class ApiError(PeerError):
    """The apiserver answered a request with an HTTP error status."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        msg = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {msg}")


# ----------------------------------------------------------------------------
# locations
# ----------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("CLUSTERSET_DNS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "clusterset-dns"


# The released CRD sets scripts/fetch-crds puts under <cache>/crds/<name>.
RELEASED_CRDS = ("mcs-api-v0.5.0", "mcs-api-v0.4.1", "about-api")
# The unreleased layouts: this project's own files.
OWN_CRDS = {
    "mcs-api-v1alpha2-proposal": OWN_CRD_DIR / "mcs-api-v1alpha2-proposal-serviceimports.yaml",
    "status-layout": OWN_CRD_DIR / "status-layout-serviceimports.yaml",
}


# Released sets the Go module proxy may refuse (sigs.k8s.io/about-api: 403): our own
# model of the same resource stands in when scripts/fetch-crds could not fetch it.
FALLBACK_CRDS = {"about-api": OWN_CRD_DIR / "about-api-clusterproperties.yaml"}


def released_crd_dir() -> Path:
    """Where the released CRD sets are: ``$CLUSTERSET_DNS_SHARED/crds`` when that
    override is set (a directory laid out like the cache), else the cache that
    ``scripts/fetch-crds`` fills."""
    env = os.environ.get("CLUSTERSET_DNS_SHARED")
    return Path(env) / "crds" if env else cache_dir() / "crds"


def crd_path(variant: str) -> Path:
    """The CRD file or directory of ``variant``: a released set (``mcs-api-v0.5.0``,
    ``mcs-api-v0.4.1``, ``about-api``), one of our own layouts
    (``mcs-api-v1alpha2-proposal``, ``status-layout``), or any existing path."""
    if variant in OWN_CRDS:
        return OWN_CRDS[variant]
    if variant in RELEASED_CRDS:
        p = released_crd_dir() / variant
        if not p.is_dir() and variant in FALLBACK_CRDS:
            return FALLBACK_CRDS[variant]
        if not p.is_dir():
            raise PeerError(f"CRD set {variant!r} not found in {p.parent}: run "
                            "`scripts/fetch-crds` (or set CLUSTERSET_DNS_SHARED)")
        return p
    p = Path(variant)
    if p.exists():
        return p
    raise PeerError(f"no CRD variant {variant!r}: not one of "
                    f"{', '.join([*RELEASED_CRDS, *OWN_CRDS])} and not an existing path")


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    coredns: Path
    source: str  # where kube-apiserver and etcd came from


def find_binaries() -> Binaries:
    """Paths of kube-apiserver, etcd and coredns.

    kube-apiserver and etcd come from ``KUBEBUILDER_ASSETS`` when it holds both,
    else from the build-peers cache; coredns from ``KUBEBUILDER_ASSETS`` if it is
    there, else from the cache."""
    cache_bin = cache_dir() / "bin"
    assets = os.environ.get("KUBEBUILDER_ASSETS")

    def ok(p: Path) -> bool:
        return p.is_file() and os.access(p, os.X_OK)

    base, source = cache_bin, f"build-peers cache {cache_bin}"
    if assets and ok(Path(assets) / "kube-apiserver") and ok(Path(assets) / "etcd"):
        base, source = Path(assets), f"KUBEBUILDER_ASSETS={assets}"
    coredns = Path(assets) / "coredns" if assets and ok(Path(assets) / "coredns") else (
        cache_bin / "coredns")
    found = Binaries(base / "kube-apiserver", base / "etcd", coredns, source)
    missing = [str(p) for p in (found.kube_apiserver, found.etcd, found.coredns) if not ok(p)]
    if missing:
        raise PeerError(
            f"missing peer binaries: {', '.join(missing)}. Run `scripts/build-peers` "
            f"(builds them into {cache_bin}), or set KUBEBUILDER_ASSETS to a directory "
            "holding kube-apiserver and etcd.")
    return found


# ----------------------------------------------------------------------------
# ports and processes
# ----------------------------------------------------------------------------

_handed_out: set[int] = set()
_random = random.SystemRandom()  # concurrent test processes must not draw alike
_ports_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral (client) ports: first and last, both included."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


# Servers under test listen outside the ephemeral range. CoreDNS and our server bind
# with SO_REUSEPORT, and so do dig's client sockets: a client given, by chance, the
# server's port as its own source port shares it, and being connected it wins the
# kernel's socket lookup, so dig receives its own query (QR clear, its cookie) as
# the answer. A listening port outside the range is never a client's source port.
_LOWEST_PORT = 10000  # below it, ports other services on the machine may expect
_ENOUGH_PORTS = 1000  # fewer than this outside the range above _LOWEST_PORT: go lower


def _server_ports(ephemeral: tuple[int, int]) -> list[range]:
    """The ports free_port draws from: every port outside ``ephemeral``, from
    _LOWEST_PORT up (from 1024 when that leaves fewer than _ENOUGH_PORTS)."""
    low, high = ephemeral
    for lowest in (_LOWEST_PORT, 1024):
        found = [r for r in (range(lowest, min(low, 65536)), range(max(high + 1, lowest), 65536))
                 if len(r)]
        if sum(len(r) for r in found) >= _ENOUGH_PORTS:
            break
    return found


def free_port(host: str = HOST) -> int:
    """A port free for both TCP and UDP on ``host``, outside the ephemeral range (see
    above), never returned twice by this process."""
    ephemeral = _ephemeral_range()
    ranges = _server_ports(ephemeral)
    total = sum(len(r) for r in ranges)
    if not total:
        raise PeerError(f"the ephemeral port range {ephemeral[0]}-{ephemeral[1]} "
                        "(net.ipv4.ip_local_port_range) leaves no port for a test server: "
                        "narrow it")
    with _ports_lock:
        for _ in range(500):
            pick = _random.randrange(total)
            for r in ranges:
                if pick < len(r):
                    port = r[pick]
                    break
                pick -= len(r)
            if port in _handed_out:
                continue
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t, \
                        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    t.bind((host, port))
                    u.bind((host, port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    raise PeerError("no free TCP+UDP port found")


_live: set[Proc] = set()


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    return env


def _die_with_parent() -> None:
    """In the child: SIGKILL when the thread that started it dies (Linux prctl
    PR_SET_PDEATHSIG), so no peer outlives a killed test run. Start peers from a
    long-lived thread (the main one, or an event loop's)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Proc:
    """A peer subprocess in its own session, output appended to ``log_path``; killed
    by :meth:`stop`, at interpreter exit, and when the starting process dies."""

    def __init__(self, name: str, argv: Sequence[str | os.PathLike[str]], log_path: Path,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        with open(log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=cwd, env=_child_env(), start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        _live.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, graceful: bool = True, timeout: float = 15.0) -> None:
        """SIGTERM and wait (SIGKILL after ``timeout``); ``graceful=False``: SIGKILL at once."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        _live.discard(self)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def fail(self, what: str) -> PeerError:
        state = "running" if self.alive() else f"exited with {self.popen.returncode}"
        return PeerError(f"{self.name}: {what} ({state}); log {self.log_path}, last lines:\n"
                         f"{self.tail()}")


@atexit.register
def _kill_all() -> None:
    for p in list(_live):
        with contextlib.suppress(Exception):
            p.stop(graceful=False)


def _wait(pred: Any, timeout: float, what: str, proc: Proc | None = None,
          interval: float = 0.1) -> Any:
    """Poll ``pred()`` until it returns something truthy; raise with the log tail."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        if proc is not None and not proc.alive():
            raise proc.fail(f"died while waiting for {what}")
        try:
            v = pred()
            if v:
                return v
        except (OSError, PeerError, ValueError, http.client.HTTPException) as e:
            last = e
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last is not None:
                msg += f" (last error: {last})"
            if proc is not None:
                raise proc.fail(msg)
            raise PeerError(msg)
        time.sleep(interval)


def _keep_tmp() -> bool:
    return os.environ.get("CLUSTERSET_DNS_KEEP_TMP", "") not in ("", "0")


def load_yaml_docs(path: Path) -> list[JSONObj]:
    """All YAML documents of a file, or of every *.yaml/*.yml file of a directory (sorted)."""
    files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


# ----------------------------------------------------------------------------
# a small REST client for the apiserver
# ----------------------------------------------------------------------------


@dataclass
class WatchResult:
    http_status: int
    events: list[JSONObj] = field(default_factory=list)
    body: Any = None  # the error body when http_status is not 200

    @property
    def gone(self) -> bool:
        """410 Gone, as an HTTP status or as an ERROR event with code 410."""
        return self.http_status == 410 or any(
            e.get("type") == "ERROR" and e.get("object", {}).get("code") == 410
            for e in self.events)


class ApiClient:
    """Plain HTTPS client for one apiserver instance: JSON in, JSON out.

    Resources are found through discovery (``/api/v1``, ``/apis/<group>/<version>``),
    so any kind works, CRDs included (the discovery cache is refreshed on a miss)."""

    def __init__(self, url: str, token: str, ca_file: Path | None) -> None:
        self.url = url
        self.token = token
        self.ca_file = ca_file
        self._discovery: dict[str, JSONObj] = {}

    # -- transport --

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        u = urllib.parse.urlsplit(self.url)
        if self.ca_file is not None and self.ca_file.exists():
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
        else:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(u.hostname or HOST, u.port, timeout=timeout,
                                           context=ctx)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", timeout: float = 30.0,
                ok_statuses: Iterable[int] = ()) -> Any:
        """One request; returns the decoded JSON (or text). Raises :class:`ApiError`
        for an HTTP status >= 400 not in ``ok_statuses``."""
        data = None if body is None else (body if isinstance(body, bytes | str)
                                          else json.dumps(body))
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        conn = self._conn(timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            out: Any = json.loads(raw) if raw else None
        except ValueError:
            out = raw.decode(errors="replace")
        if resp.status >= 400 and resp.status not in set(ok_statuses):
            raise ApiError(method, path, resp.status, out)
        return out

    def readyz(self, timeout: float = 5.0) -> bool:
        try:
            self.request("GET", "/readyz", timeout=timeout)
            return True
        except (OSError, PeerError, http.client.HTTPException):
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        _wait(self.readyz, timeout, f"{self.url}/readyz")

    # -- discovery --

    @staticmethod
    def _gv_path(api_version: str) -> str:
        return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"

    def _discover(self, api_version: str) -> list[JSONObj]:
        """The ``resources`` of the APIResourceList of ``api_version`` ([] if not served)."""
        d = self.request("GET", self._gv_path(api_version), ok_statuses=(404, 503))
        return list(d.get("resources") or []) if isinstance(d, dict) else []

    def resource_for(self, api_version: str, kind: str) -> JSONObj:
        """The discovery entry of ``kind`` in ``api_version`` (name, namespaced, ...) plus
        ``has_status``. Raises PeerError if the apiserver does not serve it."""
        for refresh in (False, True):
            if refresh or api_version not in self._discovery:
                self._discovery[api_version] = {"resources": self._discover(api_version)}
            res = self._discovery[api_version]["resources"]
            names = {r["name"] for r in res}
            for r in res:
                if r.get("kind") == kind and "/" not in r["name"]:
                    return {**r, "has_status": f"{r['name']}/status" in names}
        raise PeerError(f"{kind} in {api_version} is not served by {self.url}")

    def served(self, api_version: str, plural: str) -> bool:
        """Whether discovery of ``api_version`` lists resource ``plural`` right now."""
        return any(r.get("name") == plural for r in self._discover(api_version))

    def path(self, api_version: str, kind: str, namespace: str | None = None,
             name: str | None = None, subresource: str | None = None) -> str:
        r = self.resource_for(api_version, kind)
        p = self._gv_path(api_version)
        if r["namespaced"] and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{r['name']}"
        if name:
            p += f"/{name}"
        if subresource:
            p += f"/{subresource}"
        return p

    # -- verbs --

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> JSONObj | None:
        """The object, or None if it does not exist."""
        try:
            out: JSONObj = self.request("GET", self.path(api_version, kind, namespace, name))
            return out
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, resource_version: str | None = None) -> JSONObj:
        """The List object (``items``, ``metadata.resourceVersion``)."""
        q = {k: v for k, v in (("labelSelector", label_selector),
                               ("resourceVersion", resource_version)) if v is not None}
        p = self.path(api_version, kind, namespace)
        out: JSONObj = self.request("GET", p + ("?" + urllib.parse.urlencode(q) if q else ""))
        return out

    def apply(self, obj: JSONObj) -> JSONObj:
        """Create, or replace (PUT) if it exists. If ``obj`` has a ``status`` and the
        resource a status subresource, the status is then written too (PUT /status).
        Returns the object as stored."""
        av, kind = obj["apiVersion"], obj["kind"]
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace"), meta["name"]
        r = self.resource_for(av, kind)
        if r["namespaced"] and not ns:
            ns = "default"
        try:
            stored: JSONObj = self.request("POST", self.path(av, kind, ns), obj)
        except ApiError as e:
            if e.status != 409:
                raise
            current = self.request("GET", self.path(av, kind, ns, name))
            new = json.loads(json.dumps(obj))
            new.setdefault("metadata", {})["resourceVersion"] = (
                current["metadata"]["resourceVersion"])
            stored = self.request("PUT", self.path(av, kind, ns, name), new)
        if "status" in obj and r["has_status"]:
            stored["status"] = obj["status"]
            stored = self.request("PUT", self.path(av, kind, ns, name, "status"), stored)
        return stored

    def create(self, obj: JSONObj) -> JSONObj:
        """POST only (fails with ApiError 409 if it exists)."""
        ns = obj.get("metadata", {}).get("namespace")
        out: JSONObj = self.request("POST", self.path(obj["apiVersion"], obj["kind"], ns), obj)
        return out

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              patch: JSONObj, subresource: str | None = None) -> JSONObj:
        """JSON merge patch (RFC 7386)."""
        out: JSONObj = self.request(
            "PATCH", self.path(api_version, kind, namespace, name, subresource), patch,
            content_type="application/merge-patch+json")
        return out

    def patch_status(self, api_version: str, kind: str, namespace: str | None, name: str,
                     status: JSONObj) -> JSONObj:
        """Merge-patch ``{"status": status}`` through the status subresource."""
        return self.patch(api_version, kind, namespace, name, {"status": status}, "status")

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               wait: bool = True, timeout: float = 60.0) -> bool:
        """Delete; False if it did not exist. ``wait``: until a GET gives 404."""
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name))
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        if wait:
            _wait(lambda: self.get(api_version, kind, namespace, name) is None, timeout,
                  f"{kind} {namespace}/{name} to be gone")
        return True

    def ensure_namespace(self, name: str) -> JSONObj:
        existing = self.get("v1", "Namespace", None, name)
        return existing or self.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def watch(self, api_version: str, kind: str, namespace: str | None = None,
              resource_version: str | None = None, timeout: float = 5.0,
              max_events: int | None = None) -> WatchResult:
        """``GET ...?watch=1&resourceVersion=RV``: read events for at most ``timeout``
        seconds or ``max_events`` events; stops at an ERROR event."""
        q: dict[str, str] = {"watch": "1", "timeoutSeconds": str(max(1, int(timeout) + 1))}
        if resource_version is not None:
            q["resourceVersion"] = resource_version
        p = self.path(api_version, kind, namespace) + "?" + urllib.parse.urlencode(q)
        conn = self._conn(timeout=timeout)
        deadline = time.monotonic() + timeout
        try:
            conn.request("GET", p, headers={"Authorization": f"Bearer {self.token}",
                                            "Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raw = resp.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                return WatchResult(resp.status, [], body)
            result = WatchResult(200)
            while time.monotonic() < deadline:
                if conn.sock is not None:
                    conn.sock.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    line = resp.readline()
                except TimeoutError:
                    break
                if not line:
                    break
                if not line.strip():
                    continue
                ev = json.loads(line)
                result.events.append(ev)
                if ev.get("type") == "ERROR" or (
                        max_events is not None and len(result.events) >= max_events):
                    break
            return result
        finally:
            conn.close()

    # -- CRDs --

    def install_crds(self, paths: Iterable[str | os.PathLike[str]],
                     timeout: float = 60.0) -> builtins.list[str]:
        """Apply every CRD in the given files/directories (or :func:`crd_path` variant
        names); wait until each is Established and served in discovery. Returns names."""
        names = []
        for p in paths:
            for doc in load_yaml_docs(crd_path(str(p))):
                if doc.get("kind") != "CustomResourceDefinition":
                    continue
                self.apply(_approve_protected_group(doc))
                names.append(doc["metadata"]["name"])
        for n in names:
            self.wait_crd(n, timeout)
        return names

    def wait_crd(self, name: str, timeout: float = 60.0) -> JSONObj:
        """Wait until CRD ``name`` is Established and every served version lists it in
        discovery, and versions it does not serve do not."""
        def ready() -> JSONObj | None:
            crd = self.get(*CRD_API, None, name)
            if crd is None:
                return None
            conds = {c["type"]: c["status"]
                     for c in (crd.get("status") or {}).get("conditions") or []}
            if conds.get("Established") != "True":
                return None
            group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
            for v in crd["spec"]["versions"]:
                if self.served(f"{group}/{v['name']}", plural) != bool(v["served"]):
                    return None
            self._discovery.clear()
            return crd
        out: JSONObj = _wait(ready, timeout, f"CRD {name} Established and served", interval=0.2)
        return out

    def delete_crd(self, name: str, timeout: float = 60.0) -> bool:
        """Delete a CRD (the apiserver deletes all its objects first), wait until it is
        gone and no longer in discovery. False if it did not exist."""
        crd = self.get(*CRD_API, None, name)
        if crd is None:
            return False
        self.delete(*CRD_API, None, name, wait=True, timeout=timeout)
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        versions = [f"{group}/{v['name']}" for v in crd["spec"]["versions"]]
        _wait(lambda: not any(self.served(gv, plural) for gv in versions), timeout,
              f"{plural}.{group} to leave discovery", interval=0.2)
        self._discovery.clear()
        return True

    def replace_serviceimport_crd(self, variant: str, timeout: float = 60.0) -> JSONObj:
        """Swap the CRD ``serviceimports.multicluster.x-k8s.io`` for the one of ``variant``
        (``mcs-api-v0.5.0``, ``mcs-api-v0.4.1``, ``mcs-api-v1alpha2-proposal``, or a path):
        delete the current one (ALL ServiceImports of that group go with it), wait until
        gone, create the new one, wait until Established and served. Returns the CRD."""
        docs = [d for d in load_yaml_docs(crd_path(variant))
                if d.get("kind") == "CustomResourceDefinition"
                and d["metadata"]["name"] == SERVICEIMPORT_CRD]
        if not docs:
            raise PeerError(f"{variant}: no CRD named {SERVICEIMPORT_CRD}")
        self.delete_crd(SERVICEIMPORT_CRD, timeout)
        self.request("POST", self.path(*CRD_API), _approve_protected_group(docs[0]))
        return self.wait_crd(SERVICEIMPORT_CRD, timeout)


APPROVAL_ANNOTATION = "api-approved.kubernetes.io"


def _approve_protected_group(crd: JSONObj) -> JSONObj:
    """The apiserver refuses a CRD of a ``*.k8s.io``/``*.kubernetes.io`` group without the
    ``api-approved.kubernetes.io`` annotation (the released about.k8s.io CRD has none): add
    ``unapproved, ...`` (accepted; condition KubernetesAPIApprovalPolicyConformant=False)."""
    group = crd["spec"]["group"]
    protected = group in ("k8s.io", "kubernetes.io") or group.endswith(
        (".k8s.io", ".kubernetes.io"))
    if not protected or group.endswith(".x-k8s.io"):
        return crd
    annotations = crd.get("metadata", {}).get("annotations") or {}
    if APPROVAL_ANNOTATION in annotations:
        return crd
    out: JSONObj = json.loads(json.dumps(crd))
    out["metadata"]["annotations"] = {
        **annotations, APPROVAL_ANNOTATION: "unapproved, test copy without the annotation"}
    return out


def write_kubeconfig(path: Path, url: str, token: str, ca_file: Path | None,
                     user: str = "admin") -> Path:
    cluster: JSONObj = {"server": url}
    if ca_file is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_file.read_bytes()).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


# ----------------------------------------------------------------------------
# etcd + kube-apiserver
# ----------------------------------------------------------------------------

_help_cache: dict[str, str] = {}


def _help_text(binary: Path) -> str:
    key = str(binary)
    if key not in _help_cache:
        out = subprocess.run([key, "--help"], capture_output=True, text=True, timeout=60)
        _help_cache[key] = out.stdout + out.stderr
    return _help_cache[key]


def _default_admission_plugins(kube_apiserver: Path) -> list[str]:
    m = re.search(r"--disable-admission-plugins strings\s+.*?default enabled plugins list "
                  r"\(([^)]*)\)", _help_text(kube_apiserver), re.S)
    return [p.strip() for p in m.group(1).split(",")] if m else []


class SecondAPIServer(ApiClient):
    """Another kube-apiserver process on the same etcd (see :meth:`KubeAPI.start_second`)."""

    def __init__(self, url: str, token: str, ca_file: Path | None, proc: Proc,
                 kubeconfig: Path) -> None:
        super().__init__(url, token, ca_file)
        self.proc = proc
        self.kubeconfig = kubeconfig
        self.port = int(urllib.parse.urlsplit(url).port or 0)

    def stop(self, graceful: bool = True) -> None:
        self.proc.stop(graceful)


class KubeAPI(ApiClient):
    """etcd + kube-apiserver on 127.0.0.1 for one test module or session.

    The apiserver port is fixed at creation, so :meth:`stop`/:meth:`start` keep the
    URL and kubeconfig valid. etcd keeps running (and keeps the data) while the
    apiserver is stopped."""

    def __init__(self, *, port: int | None = None, watch_cache: bool = False,
                 extra_args: Sequence[str] = (), binaries: Binaries | None = None,
                 start: bool = False, keep_tmp: bool | None = None,
                 bind_address: str = HOST, service_cidr: str = "10.96.0.0/24",
                 enable_admission: Sequence[str] | None = None,
                 authorization_mode: str = "RBAC", endpoint_reconciler: str = "none",
                 users: Sequence[tuple[str, Sequence[str]]] = (),
                 directory: Path | None = None) -> None:
        """Defaults: a bare apiserver on 127.0.0.1 for API tests. For a real cluster
        (clusterset_dns_testkit/cluster.py): ``bind_address`` a host address pods can reach,
        ``enable_admission`` keeps every default admission plugin and adds these,
        ``authorization_mode`` e.g. ``Node,RBAC``, ``endpoint_reconciler`` ``lease``
        (the ``kubernetes`` Service gets its endpoint), ``users`` extra token users
        ``(name, groups)`` whose tokens are in :attr:`tokens`."""
        self.bins = binaries or find_binaries()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory or Path(tempfile.mkdtemp(prefix="clusterset-dns-kube-"))
        self.keep_tmp = _keep_tmp() if keep_tmp is None else keep_tmp
        self.bind_address = bind_address
        self.service_cidr = service_cidr
        self.enable_admission = None if enable_admission is None else list(enable_admission)
        self.authorization_mode = authorization_mode
        self.endpoint_reconciler = endpoint_reconciler
        self.port = port or free_port(bind_address)
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.etcd_url = f"http://{HOST}:{self.etcd_port}"
        self.watch_cache = watch_cache
        self.extra_args = list(extra_args)
        self.cert_dir = self.dir / "certs"
        self.cert_dir.mkdir()
        token = base64.b32encode(os.urandom(20)).decode().lower()
        self.reader_token = base64.b32encode(os.urandom(20)).decode().lower()
        super().__init__(f"https://{bind_address}:{self.port}", token, None)
        self.kubeconfig = self.dir / "kubeconfig"
        self.reader_kubeconfig = self.dir / "reader.kubeconfig"
        self.tokens: dict[str, str] = {}
        lines = [f'{token},admin,admin-uid,"system:masters"',
                 f"{self.reader_token},reader,reader-uid"]
        for i, (user, groups) in enumerate(users):
            self.tokens[user] = base64.b32encode(os.urandom(20)).decode().lower()
            group_field = f',"{",".join(groups)}"' if groups else ""
            lines.append(f"{self.tokens[user]},{user},user-{i}{group_field}")
        (self.dir / "tokens.csv").write_text("\n".join(lines) + "\n")
        self._make_sa_keys()
        self.etcd: Proc | None = None
        self.apiserver: Proc | None = None
        self.seconds: list[SecondAPIServer] = []
        self.last_start_seconds: float | None = None
        if start:
            self.start()

    def __enter__(self) -> KubeAPI:
        if self.apiserver is None or not self.apiserver.alive():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make_sa_keys(self) -> None:
        key, pub = self.dir / "sa.key", self.dir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                       check=True, capture_output=True)

    # -- etcd --

    def _start_etcd(self, timeout: float) -> None:
        if self.etcd is not None and self.etcd.alive():
            return
        peer = f"http://{HOST}:{self.etcd_peer_port}"
        argv: list[str | os.PathLike[str]] = [
            self.bins.etcd, "--name", "default", "--data-dir", self.dir / "etcd",
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"default={peer}", "--initial-cluster-state", "new",
            "--log-level", "warn"]
        if "--unsafe-no-fsync" in _help_text(self.bins.etcd):
            argv.append("--unsafe-no-fsync")  # test data only: no fsync, faster writes
        self.etcd = Proc("etcd", argv, self.dir / "etcd.log")

        def healthy() -> bool:
            return bool(self._etcd_call("GET", "/health").get("health") == "true")
        _wait(healthy, timeout, f"etcd {self.etcd_url}/health", self.etcd)

    def _etcd_call(self, method: str, path: str, body: JSONObj | None = None) -> JSONObj:
        conn = http.client.HTTPConnection(HOST, self.etcd_port, timeout=10)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        out: JSONObj = json.loads(raw) if raw else {}
        if resp.status >= 400:
            raise PeerError(f"etcd {method} {path}: HTTP {resp.status}: {out}")
        return out

    def etcd_revision(self) -> int:
        """etcd's current revision (= the newest resourceVersion)."""
        out = self._etcd_call("POST", "/v3/kv/range",
                              {"key": base64.b64encode(b"/registry").decode(), "limit": 1})
        return int(out["header"]["revision"])

    def compact(self) -> int:
        """Compact etcd so that a watch from any resourceVersion seen before this call
        gets 410 Gone. Two throwaway writes (outside /registry) go first, so even the
        newest resourceVersion handed out so far (RV) is too old: the apiserver watches
        etcd from RV+1, and etcd refuses start revisions below the compaction revision.
        Returns the compaction revision (physical: waits until applied)."""
        key = base64.b64encode(b"/clusterset-dns-test/compact-bump").decode()
        for i in range(2):
            self._etcd_call("POST", "/v3/kv/put",
                            {"key": key, "value": base64.b64encode(str(i).encode()).decode()})
        rev = self.etcd_revision()
        self._etcd_call("POST", "/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    # -- kube-apiserver --

    def _apiserver_argv(self, port: int) -> list[str | os.PathLike[str]]:
        disable = [] if self.enable_admission is not None else [
            p for p in _default_admission_plugins(self.bins.kube_apiserver)
            if p != "NamespaceLifecycle"]
        argv: list[str | os.PathLike[str]] = [
            self.bins.kube_apiserver,
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.bind_address}", f"--advertise-address={self.bind_address}",
            f"--secure-port={port}",
            f"--cert-dir={self.cert_dir}",
            f"--token-auth-file={self.dir / 'tokens.csv'}",
            f"--authorization-mode={self.authorization_mode}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.dir / 'sa.pub'}",
            f"--service-account-signing-key-file={self.dir / 'sa.key'}",
            f"--service-cluster-ip-range={self.service_cidr}",
            # none by default: no `kubernetes` Endpoints for 127.0.0.1
            f"--endpoint-reconciler-type={self.endpoint_reconciler}",
            "--etcd-compaction-interval=0",     # only compact() compacts
            f"--watch-cache={'true' if self.watch_cache else 'false'}",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
        ]
        if disable:
            argv.append("--disable-admission-plugins=" + ",".join(disable))
        if self.enable_admission:
            argv.append("--enable-admission-plugins=" + ",".join(self.enable_admission))
        return argv + self.extra_args

    def _start_apiserver(self, name: str, port: int, log: Path, timeout: float) -> Proc:
        proc = Proc(name, self._apiserver_argv(port), log)
        url = f"https://{self.bind_address}:{port}"
        client = ApiClient(url, self.token, None)  # CA may not exist yet
        _wait(client.readyz, timeout, f"{name} {url}/readyz", proc, 0.2)
        self._write_ca()
        return proc

    def _write_ca(self) -> None:
        """The apiserver's self-signed serving cert file holds the cert and its CA."""
        if self.ca_file is None:
            ca = self.dir / "ca.crt"
            ca.write_bytes((self.cert_dir / "apiserver.crt").read_bytes())
            self.ca_file = ca
            write_kubeconfig(self.kubeconfig, self.url, self.token, ca)
            write_kubeconfig(self.reader_kubeconfig, self.url, self.reader_token, ca, "reader")

    def start(self, timeout: float = 120.0) -> None:
        """Start etcd (if not running) and the apiserver on :attr:`port`; wait for /readyz."""
        t0 = time.monotonic()
        self._start_etcd(timeout)
        if self.apiserver is not None and self.apiserver.alive():
            return
        self.apiserver = self._start_apiserver("kube-apiserver", self.port,
                                               self.dir / "kube-apiserver.log", timeout)
        self._discovery.clear()
        self.last_start_seconds = time.monotonic() - t0

    def stop(self, graceful: bool = True) -> None:
        """Stop the apiserver only (SIGTERM; ``graceful=False``: SIGKILL); etcd keeps running."""
        if self.apiserver is not None:
            self.apiserver.stop(graceful)

    def restart(self, timeout: float = 120.0) -> None:
        self.stop()
        self.start(timeout)

    def start_second(self, port: int | None = None, timeout: float = 120.0) -> SecondAPIServer:
        """Another apiserver on ``port`` (default: a free one) against the same etcd,
        same tokens and serving certificate; e.g. to change objects while the first is
        stopped. Stop it with ``.stop()`` (``close()`` stops it too)."""
        self._start_etcd(timeout)
        port = port or free_port(self.bind_address)
        proc = self._start_apiserver(f"kube-apiserver:{port}", port,
                                     self.dir / f"kube-apiserver-{port}.log", timeout)
        url = f"https://{self.bind_address}:{port}"
        kc = write_kubeconfig(self.dir / f"kubeconfig-{port}", url, self.token, self.ca_file)
        second = SecondAPIServer(url, self.token, self.ca_file, proc, kc)
        self.seconds.append(second)
        return second

    def close(self) -> None:
        """Stop every apiserver and etcd; remove the temporary directory."""
        for s in self.seconds:
            s.stop(graceful=False)
        self.stop(graceful=False)
        if self.etcd is not None:
            self.etcd.stop()
        if self.keep_tmp:
            print(f"peers: kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> list[Path]:
        return sorted(self.dir.glob("*.log"))

    crd_path = staticmethod(crd_path)


# ----------------------------------------------------------------------------
# CoreDNS
# ----------------------------------------------------------------------------


def _bind_loopback(corefile: str) -> str:
    """Add ``bind 127.0.0.1`` to every top-level server block that has no ``bind``."""
    out, depth, start = [], 0, 0
    i = 0
    while i < len(corefile):
        c = corefile[i]
        if c == "#":  # comment to end of line
            j = corefile.find("\n", i)
            i = len(corefile) if j < 0 else j
            continue
        if c == "{":
            if depth == 0:
                start = i + 1
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                block = corefile[start:i]
                if not re.search(r"(?m)^\s*bind\b", block):
                    out.append((start, f"\n    bind {HOST}"))
        i += 1
    text = corefile
    for pos, ins in reversed(out):
        text = text[:pos] + ins + text[pos:]
    return text


def kubernetes_corefile(kubeconfig: Path | str, zones: str = "cluster.local clusterset.local",
                        multicluster: str | None = "clusterset.local", extra: str = "") -> str:
    """A Corefile serving ``zones`` from the apiserver of ``kubeconfig`` with the
    kubernetes plugin (``multicluster`` zone for ServiceImports), plus ``extra`` lines."""
    mc = f"\n        multicluster {multicluster}" if multicluster else ""
    return (f"{zones} {{\n"
            f"    errors\n"
            f"    kubernetes {zones} {{\n"
            f"        kubeconfig {kubeconfig}{mc}\n"
            f"    }}\n"
            f"    {extra}\n"
            f"}}\n")


class CoreDNS:
    """The coredns binary with a given Corefile, on 127.0.0.1:``port`` (UDP+TCP).

    Server blocks without a port use ``port`` (``-dns.port``); ``bind 127.0.0.1``
    is added to blocks that have no ``bind``."""

    def __init__(self, corefile: str, *, port: int | None = None,
                 binary: Path | None = None, start: bool = True, timeout: float = 30.0,
                 keep_tmp: bool | None = None, host: str = HOST) -> None:
        """``host``: where the start-up probe asks (the Corefile's own ``bind``)."""
        self.binary = binary or find_binaries().coredns
        self.host = host
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="clusterset-dns-coredns-"))
        self.keep_tmp = _keep_tmp() if keep_tmp is None else keep_tmp
        self.corefile_path = self.dir / "Corefile"
        self.corefile_path.write_text(_bind_loopback(corefile))
        self.log_path = self.dir / "coredns.log"
        self.proc: Proc | None = None
        if start:
            self.start(timeout)

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def __enter__(self) -> CoreDNS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 30.0, wait: bool = True) -> None:
        """``wait``: until it answers (each probe waits up to 0.5 s: a timing starts
        the process with False and watches for the answer it wants itself)."""
        self.proc = Proc("coredns", [self.binary, "-conf", self.corefile_path,
                                     "-dns.port", str(self.port)], self.log_path, cwd=self.dir)
        if wait:
            _wait(self._answers, timeout, f"coredns answering on {self.host}:{self.port}",
                  self.proc, 0.2)

    def _answers(self) -> bool:
        import dns.exception
        import dns.message
        import dns.query
        try:
            dns.query.udp(dns.message.make_query(".", "NS"), self.host, port=self.port,
                          timeout=0.5)
            return True
        except dns.exception.Timeout:
            return False

    def query(self, name: str, rdtype: str = "A", tcp: bool = False,
              timeout: float = 2.0) -> Any:
        """A dnspython ``dns.message.Message`` answer from this CoreDNS."""
        import dns.message
        import dns.query
        q = dns.message.make_query(name, rdtype)
        if tcp:
            return dns.query.tcp(q, self.host, port=self.port, timeout=timeout)
        return dns.query.udp(q, self.host, port=self.port, timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def close(self) -> None:
        self.stop()
        if self.keep_tmp:
            print(f"peers: kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def iter_logs(*peers: KubeAPI | CoreDNS) -> Iterator[Path]:
    """Log files of the given peers (for printing on failure)."""
    for p in peers:
        if isinstance(p, KubeAPI):
            yield from p.logs()
        elif p.log_path.exists():
            yield p.log_path
