"""Helpers of the cluster tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.cluster import CLUSTER_DNS_IP, CLUSTER_DNS_IP6, Cluster, Pod, bin_path
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CONFORMANCE_OBJECTS = REPO / "tests" / "conformance" / "objects"
CLIENT_TOOL = (HERE / "client_tool.py").read_text()
NS = "kube-system"
APP = "app.kubernetes.io/name=clusterset-dns"
TTL = 5

__all__ = ["APP", "CLUSTER_DNS_IP", "CLUSTER_DNS_IP6", "NS", "TTL"]

ZONE = "clusterset.local"


def svc(name: str, ns: str = "conf") -> str:
    return f"{name}.{ns}.svc.{ZONE}."


# What the conformance suite expects for these names (tests/conformance, objects/core
# hello.yaml and db.yaml), as zone-file text; each (name, type) is one query.
EXPECTED_ZONE = """
hello.conf.svc.clusterset.local. 5 IN A 10.42.0.10
hello.conf.svc.clusterset.local. 5 IN AAAA fd00:42::10
hello.conf.svc.clusterset.local. 5 IN SRV 0 100 42 hello.conf.svc.clusterset.local.
_tcp._tcp.hello.conf.svc.clusterset.local. 5 IN SRV 0 100 42 hello.conf.svc.clusterset.local.
db.conf.svc.clusterset.local. 5 IN A 10.1.0.1
db.conf.svc.clusterset.local. 5 IN A 10.1.0.2
db.conf.svc.clusterset.local. 5 IN A 10.2.0.1
db.conf.svc.clusterset.local. 5 IN A 10.2.0.2
db.conf.svc.clusterset.local. 5 IN A 10.2.0.4
db.conf.svc.clusterset.local. 5 IN SRV 0 20 5432 db-0.east.db.conf.svc.clusterset.local.
db.conf.svc.clusterset.local. 5 IN SRV 0 20 5432 db-1.east.db.conf.svc.clusterset.local.
db.conf.svc.clusterset.local. 5 IN SRV 0 20 5432 10-2-0-1.west.db.conf.svc.clusterset.local.
db.conf.svc.clusterset.local. 5 IN SRV 0 20 5432 10-2-0-2.west.db.conf.svc.clusterset.local.
db.conf.svc.clusterset.local. 5 IN SRV 0 20 5432 10-2-0-4.west.db.conf.svc.clusterset.local.
db-0.east.db.conf.svc.clusterset.local. 5 IN A 10.1.0.1
10-2-0-4.west.db.conf.svc.clusterset.local. 5 IN A 10.2.0.4
dns-version.clusterset.local. 28800 IN TXT "1.0.0"
"""


def _queries(zone: str) -> list[tuple[str, str, list[str]]]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for line in zone.strip().splitlines():
        name, _, _, rdtype, _ = line.split(" ", 4)
        grouped.setdefault((name, rdtype), []).append(line)
    return [(name, rdtype, lines) for (name, rdtype), lines in grouped.items()]


EXPECTED = _queries(EXPECTED_ZONE)

# Imports of a dual-stack cluster, loaded with the conformance objects: a ClusterSetIP
# import with a VIP of each family, a Headless one whose pods have an address of each
# (one EndpointSlice a family, as the EndpointSlice controller writes them), and an
# IPv6-only ClusterSetIP import (A is NODATA).
DUAL_STACK_OBJECTS = [
    service_import("dual", "conf", ips=["10.42.9.1", "fd00:42::9:1"], ports=[HTTP]),
    service_import("dualhl", "conf", "Headless", ports=[HTTP]),
    *[endpoint_slice(f"dualhl-east-{family.lower()}", "dualhl", "conf", "east", family,
                     ports=[HTTP], endpoints=[endpoint(address, hostname=f"web-{i}", ready=True)
                                              for i, address in enumerate(addresses)])
      for family, addresses in (("IPv4", ["10.43.0.1", "10.43.0.2"]),
                                ("IPv6", ["fd00:43::1", "fd00:43::2"]))],
    service_import("v6only", "conf", ips=["fd00:42::6:1"], ports=[HTTP]),
]
EXPECTED_DUAL_STACK_ZONE = """
dual.conf.svc.clusterset.local. 5 IN A 10.42.9.1
dual.conf.svc.clusterset.local. 5 IN AAAA fd00:42::9:1
dualhl.conf.svc.clusterset.local. 5 IN A 10.43.0.1
dualhl.conf.svc.clusterset.local. 5 IN A 10.43.0.2
dualhl.conf.svc.clusterset.local. 5 IN AAAA fd00:43::1
dualhl.conf.svc.clusterset.local. 5 IN AAAA fd00:43::2
dualhl.conf.svc.clusterset.local. 5 IN SRV 0 50 80 web-0.east.dualhl.conf.svc.clusterset.local.
dualhl.conf.svc.clusterset.local. 5 IN SRV 0 50 80 web-1.east.dualhl.conf.svc.clusterset.local.
web-1.east.dualhl.conf.svc.clusterset.local. 5 IN A 10.43.0.2
web-1.east.dualhl.conf.svc.clusterset.local. 5 IN AAAA fd00:43::2
v6only.conf.svc.clusterset.local. 5 IN AAAA fd00:42::6:1
"""
# (name, type, wanted lines): the zone above plus the NODATA of the IPv6-only import
EXPECTED_DUAL_STACK = [*_queries(EXPECTED_DUAL_STACK_ZONE),
                       (svc("v6only"), "A", [])]


def same_records(got: list[str], want: list[str]) -> bool:
    """Equal as sets of (name, class, type, rdata), with a TTL no larger than wanted:
    CoreDNS's cache counts TTLs down."""
    def key(line: str) -> tuple[str, str]:
        name, _ttl, rest = line.split(" ", 2)
        return name.lower(), rest

    def ttl(line: str) -> int:
        return int(line.split(" ", 2)[1])

    wanted = {key(w): ttl(w) for w in want}
    return sorted(key(g) for g in got) == sorted(wanted) and all(
        ttl(g) <= wanted[key(g)] for g in got)


_END = "@@end-of-dig@@"


def _dig_argv(server: str, name: str, rdtype: str, tcp: bool) -> list[str]:
    return ["dig", f"@{server}", name, rdtype, "+time=3", "+tries=1", "+noall", "+answer",
            "+comments", *(["+tcp"] if tcp else [])]


def _dig_answer(out: str) -> tuple[str, list[str]]:
    status = "NO ANSWER"
    lines = []
    for line in out.splitlines():
        if "status:" in line:
            status = line.split("status:")[1].split(",")[0].strip()
        elif line and not line.startswith(";"):
            lines.append(" ".join(line.split()))
    return status, sorted(lines)


@dataclass(frozen=True, slots=True)
class Client:
    """The client pod; runs dig and tests/cluster/client_tool.py inside it."""

    cluster: Cluster
    name: str
    namespace: str = "default"

    def dig(self, server: str, name: str, rdtype: str, tcp: bool = False) -> tuple[str, list[str]]:
        """(status, answer lines as "name ttl IN TYPE rdata") from `dig @server`."""
        out = self.cluster.exec(self.namespace, self.name, *_dig_argv(server, name, rdtype, tcp),
                                check=False).stdout
        return _dig_answer(out)

    def digs(self, queries: list[tuple[str, str, str, bool]]) -> list[tuple[str, list[str]]]:
        """:meth:`dig` for each (server, name, type, tcp), all in one `kubectl exec` (one
        exec a query would cost more than the queries)."""
        script = "".join(f"{shlex.join(_dig_argv(*q))}; echo {_END}\n" for q in queries)
        out = self.cluster.exec(self.namespace, self.name, "sh", "-c", script,
                                timeout=60 + 10 * len(queries), check=False).stdout
        answers = [_dig_answer(part) for part in out.split(_END + "\n")[:-1]]
        assert len(answers) == len(queries), out[-2000:]
        return answers

    def tool(self, *args: str, timeout: float = 120) -> Any:
        out = self.cluster.kubectl("-n", self.namespace, "exec", "-i", self.name, "--",
                                   "python3", "-", *args, input=CLIENT_TOOL, timeout=timeout)
        return json.loads(out.stdout) if args[0] != "scrape" else out.stdout

    def start_tool(self, *args: str) -> subprocess.Popen[str]:
        """The tool running in the background; ``finish_tool`` collects its JSON."""
        proc = subprocess.Popen(self.tool_argv(*args), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None
        proc.stdin.write(CLIENT_TOOL)
        proc.stdin.close()
        proc.stdin = None  # communicate() must not flush it again
        return proc

    @staticmethod
    def finish_tool(proc: subprocess.Popen[str], timeout: float) -> Any:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, f"client tool failed: {err[-2000:]}"
        return json.loads(out)

    def tool_argv(self, *args: str) -> list[str]:
        """kubectl argv running the tool (for a Popen that runs in the background)."""
        return [str(bin_path("kubectl")), f"--kubeconfig={self.cluster.kubeconfig}",
                "-n", self.namespace, "exec", "-i", self.name, "--", "python3", "-", *args]


def answers_failing(client: Client, servers: list[str],
                    expected: list[tuple[str, str, list[str]]]) -> list[str]:
    """Each query of ``expected`` asked of each of ``servers`` over UDP and TCP (an
    empty want is NODATA: NOERROR without records); what did not get its answer."""
    queries = [(server, name, rdtype, tcp) for server in servers
               for name, rdtype, _ in expected for tcp in (False, True)]
    wants = [want for _ in servers for _, _, want in expected for _ in (False, True)]
    return [f"@{server} {name} {rdtype} tcp={tcp}: {status} {got}"
            for (server, name, rdtype, tcp), want, (status, got)
            in zip(queries, wants, client.digs(queries), strict=True)
            if status != "NOERROR" or not same_records(got, want)]


class Overlay:
    """A kustomization of our own in a temporary directory that takes one of
    deploy/overlays and sets the image to the one scripts/build-images made (never
    pulled). ``apply()`` is `kubectl apply -k`, ``delete()`` `kubectl delete -k`."""

    def __init__(self, cluster: Cluster, overlay: str, extra: dict[str, Any] | None = None
                 ) -> None:
        self.cluster = cluster
        self.dir = Path(tempfile.mkdtemp(prefix=f"csdns-overlay-{overlay}-"))
        name, tag = cluster.images["clusterset-dns"]["ref"].rsplit(":", 1)
        k: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [os.path.relpath(REPO / "deploy" / "overlays" / overlay, self.dir)],
            "images": [{"name": "clusterset-dns", "newName": name, "newTag": tag}],
            "patches": [{"target": {"group": "apps", "kind": "Deployment|DaemonSet"},
                         "patch": json.dumps([{
                             "op": "replace",
                             "path": "/spec/template/spec/containers/0/imagePullPolicy",
                             "value": "Never"}])}],
        }
        for key, value in (extra or {}).items():
            k[key] = k.get(key, []) + value if isinstance(value, list) else value
        (self.dir / "kustomization.yaml").write_text(json.dumps(k, indent=1))

    def render(self) -> list[dict[str, Any]]:
        import yaml
        out = self.cluster.kubectl("kustomize", str(self.dir)).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    def apply(self) -> None:
        self.cluster.kubectl("apply", "-k", str(self.dir))

    def delete(self) -> None:
        self.cluster.kubectl("delete", "-k", str(self.dir), "--wait=true", "--timeout=120s",
                             check=False, timeout=180)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_pods(cluster: Cluster, selector: str, count: int, timeout: float = 180,
              namespace: str = NS) -> list[Pod]:
    """Exactly ``count`` pods, all Running and Ready (terminating ones excluded)."""
    deadline = time.monotonic() + timeout
    pods: list[Pod] = []
    while time.monotonic() < deadline:
        pods = cluster.pods(namespace, selector)
        if len(pods) == count and all(p.phase == "Running" and p.ready for p in pods):
            return pods
        time.sleep(1)
    raise AssertionError(f"pods {selector}: wanted {count} Running+Ready, got {pods}\n"
                         + cluster.describe(namespace))


def service_ip(cluster: Cluster, name: str, namespace: str = NS) -> str:
    ip: str = cluster.kubectl_json("-n", namespace, "get", "service", name)["spec"]["clusterIP"]
    return ip


def service_ips(cluster: Cluster, name: str, namespace: str = NS) -> list[str]:
    """The Service's ClusterIPs, one a family, the primary (IPv4) first."""
    ips: list[str] = cluster.kubectl_json("-n", namespace, "get", "service", name)["spec"][
        "clusterIPs"]
    return ips


def patch_coredns(cluster: Cluster, our_ip: str) -> None:
    """The README's CoreDNS edit: the shipped ConfigMap patch with our Service IP, then
    a restart of CoreDNS (instead of waiting for `reload`)."""
    patch = (REPO / "deploy" / "overlays" / "forward-target" / "coredns-configmap-patch.yaml"
             ).read_text().replace("CLUSTERSET_DNS_SERVICE_IP", our_ip)
    cluster.kubectl("-n", NS, "patch", "configmap", "coredns", "--type", "merge",
                    "--patch-file", "/dev/stdin", input=patch)
    restart_dns(cluster, "deployment/coredns", "k8s-app=kube-dns", CLUSTER_DNS_IP)


def restart_dns(cluster: Cluster, what: str, selector: str, server: str,
                probe: tuple[str, str] = (f"dns-version.{ZONE}.", "TXT")) -> None:
    """Restart a CoreDNS workload (to load its new Corefile) and wait until its old pods
    are gone (they keep answering through the Service with the old Corefile during
    their own lame duck) and ``server``, asked from this host through kube-proxy,
    answers the ``probe`` (name, type)."""
    old = {p.name for p in cluster.pods(NS, selector)}
    cluster.kubectl("-n", NS, "rollout", "restart", what)
    cluster.wait_rollout(NS, what)
    deadline = time.monotonic() + 120
    while old & {p.name for p in cluster.pods(NS, selector)}:
        assert time.monotonic() < deadline, f"the old pods of {what} did not go"
        time.sleep(0.5)
    while not _answers(server, *probe):
        assert time.monotonic() < deadline, f"{server} does not answer {probe}"
        time.sleep(0.5)


def _answers(server: str, name: str, rdtype: str) -> bool:
    """Does ``server`` answer ``name`` with records (NOERROR)?"""
    import dns.exception
    import dns.message
    import dns.query
    import dns.rcode
    try:
        r = dns.query.udp(dns.message.make_query(name, rdtype), server, timeout=2)
    except (dns.exception.Timeout, OSError):
        return False
    return r.rcode() == dns.rcode.NOERROR and bool(r.answer)
