"""A real single-node Kubernetes cluster on this machine, for tests/cluster/.

etcd + kube-apiserver (from :mod:`peers`, with the ServiceAccount and
NodeRestriction admission plugins and Node,RBAC authorization), kube-controller-manager,
kube-scheduler, containerd (Debian's package, private root/state/socket), kubelet and
kube-proxy (iptables mode), all started as processes of the test session.

Network, all inside this machine:

* a bridge ``csdns0`` with ``NODE_IP``/24 = the node's address (the apiserver binds
  it, the ``kubernetes`` Service points at it); pods get addresses of ``POD_CIDR`` from
  the CNI ``bridge`` plugin (host-local IPAM, ``isDefaultGateway``, hairpin) plus
  ``loopback``; Services get ClusterIPs of ``SERVICE_CIDR``; kube-proxy writes the
  ``KUBE-*`` chains.
* a FORWARD rule drops anything from the pod range that would leave through another
  interface than the bridge, so no pod can reach beyond this machine.
* ``net.ipv4.ip_forward`` is set to 1 while the cluster runs, and restored.
* dual-stack (``Cluster(dual_stack=True)``), the same for IPv6 besides: the bridge
  also has ``NODE_IP6``/64 (the node's second address), pods a second address of
  ``POD_CIDR6`` (a second host-local range), Services a second ClusterIP of
  ``SERVICE_CIDR6``, the Node both pod CIDRs (node IPAM), kube-proxy both families,
  an ip6tables FORWARD rule like the IPv4 one, ``net.ipv6.conf.all.forwarding``
  set and restored.

Everything lives under one fixed directory (:data:`STATE_DIR`) so that a later run
finds what a failed one left: :func:`cleanup` (also run at start) kills the processes
recorded there, kills the containers of the ``kubepods`` cgroups, unmounts every mount
below the directory, removes the CNI network namespaces, the bridge and its veths,
the ``KUBE-*`` chains and our FORWARD rules (both families), the kubepods cgroups,
and restores both forwarding switches.

By hand (root)::

    python3 -m clusterset_dns_testkit.cluster up    # start, print the kubeconfig path, stay up
    python3 -m clusterset_dns_testkit.cluster up --dual-stack  # the same, IPv4 and IPv6
    python3 -m clusterset_dns_testkit.cluster down  # clean up whatever is left
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusterset_dns_testkit.clusterhost import (
    BRIDGE,
    CLUSTER_DNS_IP,
    CLUSTER_DNS_IP6,
    FORWARD_COMMENT,
    FORWARDING,
    NODE_IP,
    NODE_IP6,
    NODE_NAME,
    POD_CIDR,
    POD_CIDR6,
    SERVICE_CIDR,
    SERVICE_CIDR6,
    STATE_DIR,
    ClusterError,
    _forward_rule,
    _record_pid,
    _run,
    cleanup,
    leftovers,
)
from clusterset_dns_testkit.peers import (
    KubeAPI,
    Proc,
    _wait,
    cache_dir,
    write_kubeconfig,
)

# what the tests use, with what clusterhost keeps (one module to import from)
__all__ = ["BRIDGE", "CLUSTER_DNS_IP", "CLUSTER_DNS_IP6", "FORWARDING", "FORWARD_COMMENT",
           "NODE_IP", "NODE_IP6", "NODE_NAME", "POD_CIDR", "POD_CIDR6", "SERVICE_CIDR",
           "SERVICE_CIDR6", "STATE_DIR", "Cluster", "ClusterError", "Pod", "bin_path",
           "cleanup", "image_refs", "leftovers", "main", "write_kubeconfig"]

CNI_BIN = Path("/usr/lib/cni")
REPO_ROOT = Path(__file__).resolve().parents[1]

JSONObj = dict[str, Any]


def bin_path(name: str) -> Path:
    p = cache_dir() / "bin" / name
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise ClusterError(f"{p} missing: run `scripts/build-peers cluster`")
    return p


def image_refs() -> dict[str, JSONObj]:
    """refs.json written by scripts/build-images: image name -> {ref, archive}."""
    p = cache_dir() / "images" / "refs.json"
    if not p.exists():
        raise ClusterError(f"{p} missing: run `scripts/build-images`")
    refs: dict[str, JSONObj] = json.loads(p.read_text())
    return refs


# ----------------------------------------------------------------------------
# the cluster
# ----------------------------------------------------------------------------


CONTAINERD_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # root here lacks CAP_SYS_RESOURCE: no negative oom_score_adj for containers
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"""


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    namespace: str
    ip: str
    phase: str
    ready: bool
    restarts: int
    ips: tuple[str, ...] = ()  # status.podIPs: one a family


class Cluster:
    """The single-node cluster. ``start()`` brings it up (cleaning leftovers first),
    ``close()`` tears it all down. :attr:`api` is the :class:`peers.KubeAPI` (admin
    client); :meth:`kubectl` runs the kubectl built by scripts/build-peers.

    ``dual_stack``: IPv4 and IPv6 both (IPv4 first, the primary family): the bridge, the
    node, pods and Services get an address of each, kube-proxy serves both, and the
    ``kube-dns`` Service has a ClusterIP of each (CLUSTER_DNS_IP, CLUSTER_DNS_IP6)."""

    def __init__(self, dual_stack: bool = False) -> None:
        self.dual_stack = dual_stack
        six = dual_stack
        self.node_ips = [NODE_IP, *([NODE_IP6] if six else [])]
        self.pod_cidrs = [POD_CIDR, *([POD_CIDR6] if six else [])]
        self.service_cidrs = [SERVICE_CIDR, *([SERVICE_CIDR6] if six else [])]
        self.cluster_dns_ips = [CLUSTER_DNS_IP, *([CLUSTER_DNS_IP6] if six else [])]
        self.dir = STATE_DIR
        self.procs: list[Proc] = []
        self.api: KubeAPI | None = None
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.images = image_refs()

    # -- helpers --

    def _proc(self, name: str, argv: Sequence[str | os.PathLike[str]]) -> Proc:
        p = Proc(name, argv, self.dir / "logs" / f"{name}.log")
        _record_pid(name, p.pid)
        self.procs.append(p)
        return p

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        return _run([bin_path("kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                    check=check, timeout=timeout, input=input)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def logs(self) -> list[Path]:
        return sorted((self.dir / "logs").glob("*.log"))

    # -- start --

    def start(self, timeout: float = 300.0) -> None:
        t0 = time.monotonic()
        cleanup()
        self.dir.mkdir(parents=True)
        (self.dir / "logs").mkdir()
        try:
            self._network()
            self._control_plane(timeout)
            self._containerd(timeout)
            self._node(timeout)
            self._cluster_dns(timeout)
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - t0

    def _network(self) -> None:
        switches = FORWARDING if self.dual_stack else FORWARDING[:1]
        for switch, name in switches:
            (self.dir / name).write_text(switch.read_text())
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE])
        if self.dual_stack:
            # nodad: usable at once (nothing else is on this new link)
            _run(["ip", "-6", "addr", "add", f"{NODE_IP6}/64", "dev", BRIDGE, "nodad"])
        _run(["ip", "link", "set", BRIDGE, "up"])
        # pods may talk to each other and to this host, never leave it
        _run(["iptables", *_forward_rule("-I", POD_CIDR)])
        if self.dual_stack:
            _run(["ip6tables", *_forward_rule("-I", POD_CIDR6)])
        for switch, _ in switches:
            switch.write_text("1\n")

    def _pki(self) -> Path:
        """A client CA of our own: the node's client certificate (the kubelet is
        ``system:node:<name>`` in ``system:nodes``, what the Node authorizer and
        NodeRestriction judge) and the API server's client certificate for the
        kubelet's API (logs, exec), which the kubelet checks by webhook."""
        pki = self.dir / "pki"
        pki.mkdir()
        _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
              "-subj", "/CN=clusterset-dns-test-cluster-ca", "-keyout", pki / "ca.key",
              "-out", pki / "ca.crt"])
        for name, subject in (("node", f"/O=system:nodes/CN=system:node:{NODE_NAME}"),
                              ("apiserver-kubelet-client",
                               "/O=system:masters/CN=kube-apiserver-kubelet-client")):
            _run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                  "-keyout", pki / f"{name}.key", "-out", pki / f"{name}.csr"])
            _run(["openssl", "x509", "-req", "-in", pki / f"{name}.csr", "-CA", pki / "ca.crt",
                  "-CAkey", pki / "ca.key", "-CAcreateserial", "-days", "2",
                  "-out", pki / f"{name}.crt"])
        return pki

    def _control_plane(self, timeout: float) -> None:
        pki = self.pki = self._pki()
        users: list[tuple[str, list[str]]] = [
            ("system:kube-controller-manager", []), ("system:kube-scheduler", []),
            ("system:kube-proxy", [])]
        self.api = KubeAPI(
            bind_address=NODE_IP, service_cidr=",".join(self.service_cidrs),
            enable_admission=["NodeRestriction"], authorization_mode="Node,RBAC",
            endpoint_reconciler="lease", users=users, directory=self.dir / "kube",
            watch_cache=True, keep_tmp=False,
            extra_args=["--allow-privileged=true", f"--client-ca-file={pki / 'ca.crt'}",
                        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                        # reach the kubelet by the node's address: its name is in no DNS
                        "--kubelet-preferred-address-types=InternalIP"])
        self.api.start(timeout)
        self.procs_api = [p for p in (self.api.etcd, self.api.apiserver) if p is not None]
        for p in self.procs_api:
            _record_pid(p.name, p.pid)
        assert self.api.ca_file is not None
        self.ca_file = self.api.ca_file
        shutil.copy(self.api.kubeconfig, self.kubeconfig)
        kc = {}
        for user in ("system:kube-controller-manager", "system:kube-scheduler",
                     "system:kube-proxy"):
            short = user.split(":")[1]
            kc[short] = write_kubeconfig(self.dir / f"{short}.kubeconfig", self.api.url,
                                         self.api.tokens[user], self.ca_file, short)
        node_kc = yaml.safe_load(write_kubeconfig(
            self.dir / "node.kubeconfig", self.api.url, "", self.ca_file, "node").read_text())
        node_kc["users"][0]["user"] = {"client-certificate": str(pki / "node.crt"),
                                       "client-key": str(pki / "node.key")}
        (self.dir / "node.kubeconfig").write_text(yaml.safe_dump(node_kc))
        kc["node"] = self.dir / "node.kubeconfig"
        self.component_kubeconfigs = kc
        self._proc("kube-controller-manager", [
            bin_path("kube-controller-manager"), f"--kubeconfig={kc['kube-controller-manager']}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
            f"--service-account-private-key-file={self.api.dir / 'sa.key'}",
            f"--root-ca-file={self.ca_file}", "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={','.join(self.service_cidrs)}",
            *self._node_ipam()])
        self._proc("kube-scheduler", [
            bin_path("kube-scheduler"), f"--kubeconfig={kc['kube-scheduler']}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0"])

    def _node_ipam(self) -> list[str]:
        """Single-stack: no node IPAM (the CNI's host-local range is the pod range).
        Dual-stack: the Node gets ``spec.podCIDRs`` of both families, the very ranges
        the CNI hands out (one node: the node's mask is the cluster range's)."""
        if not self.dual_stack:
            return ["--controllers=*,-nodeipam,-cloud-node-lifecycle"]
        return ["--controllers=*,-cloud-node-lifecycle", "--allocate-node-cidrs=true",
                f"--cluster-cidr={','.join(self.pod_cidrs)}",
                f"--node-cidr-mask-size-ipv4={POD_CIDR.split('/')[1]}",
                f"--node-cidr-mask-size-ipv6={POD_CIDR6.split('/')[1]}"]

    def _containerd(self, timeout: float) -> None:
        d = self.dir / "containerd"
        (d / "cni-conf").mkdir(parents=True)
        self.containerd_sock = d / "containerd.sock"
        (d / "config.toml").write_text(CONTAINERD_CONFIG.format(
            root=d / "root", state=d / "state", sock=self.containerd_sock,
            pause=self.images["pause"]["ref"], runc_root=d / "runc", cni_bin=CNI_BIN,
            cni_conf=d / "cni-conf"))
        # CNI config written elsewhere, then moved in: containerd reads half-written files
        conf = {
            "cniVersion": "0.4.0", "name": "csdns-pods",
            "plugins": [
                {"type": "bridge", "bridge": BRIDGE, "isGateway": True,
                 "isDefaultGateway": True, "hairpinMode": True, "ipMasq": False,
                 "ipam": {"type": "host-local", "dataDir": str(self.dir / "cni-ipam"),
                          # one range set a family: a pod gets an address of each
                          "ranges": [[{"subnet": cidr, "gateway": gateway}] for cidr, gateway
                                     in zip(self.pod_cidrs, self.node_ips, strict=True)]}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ]}
        tmp = d / "10-csdns.conflist.tmp"
        tmp.write_text(json.dumps(conf, indent=1))
        tmp.rename(d / "cni-conf" / "10-csdns.conflist")
        # (containerd's CRI brings every pod's `lo` up itself with CNI's loopback plugin)
        p = self._proc("containerd", ["containerd", "--config", d / "config.toml"])
        _wait(lambda: self.containerd_sock.exists() and _run(
            ["ctr", "--address", self.containerd_sock, "version"], check=False).returncode == 0,
            timeout, "containerd", p, 0.2)
        for name in ("pause", "coredns", "clusterset-dns", "client"):
            _run(["ctr", "--address", self.containerd_sock, "-n", "k8s.io", "images", "import",
                  "--no-unpack", self.images[name]["archive"]], timeout=300)

    def _node(self, timeout: float) -> None:
        assert self.api is not None
        k = self.dir / "kubelet"
        k.mkdir()
        # dnsPolicy Default pods get this file: a host address where no DNS server is,
        # so nothing ever leaves the machine (and CoreDNS's loop check stays quiet)
        (k / "resolv.conf").write_text(f"nameserver {NODE_IP}\n")
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # its API (logs, exec) only for client certificates of our CA or tokens the
            # API server vouches for, and only what the API server authorizes
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.pki / "ca.crt")}},
            "authorization": {"mode": "Webhook"},
            "address": NODE_IP, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
            "cgroupDriver": "cgroupfs", "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "clusterDNS": [CLUSTER_DNS_IP], "clusterDomain": "cluster.local",
            "resolvConf": str(k / "resolv.conf"),
            "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE: -999 cannot be set
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%"},
            "serializeImagePulls": False, "registerNode": True,
            "podPidsLimit": -1, "maxPods": 50,
            "podLogsDir": str(k / "pod-logs"),  # not /var/log/pods: cleaned with the rest
        }
        (k / "config.yaml").write_text(yaml.safe_dump(cfg))
        kubelet = self._proc("kubelet", [
            bin_path("kubelet"), f"--config={k / 'config.yaml'}",
            f"--kubeconfig={self.component_kubeconfigs['node']}",
            f"--root-dir={k / 'root'}", f"--hostname-override={NODE_NAME}",
            f"--node-ip={','.join(self.node_ips)}", f"--cert-dir={k / 'pki'}", "--v=1"])

        def node_ready() -> bool:
            node = self.api.get("v1", "Node", None, NODE_NAME) if self.api else None
            conds = {c["type"]: c["status"]
                     for c in ((node or {}).get("status") or {}).get("conditions") or []}
            return conds.get("Ready") == "True"
        _wait(node_ready, timeout, f"node {NODE_NAME} Ready", kubelet, 1.0)
        self._proc("kube-proxy", [
            bin_path("kube-proxy"), f"--kubeconfig={self.component_kubeconfigs['kube-proxy']}",
            f"--hostname-override={NODE_NAME}", "--proxy-mode=iptables",
            f"--cluster-cidr={','.join(self.pod_cidrs)}", "--oom-score-adj=0",
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0",
            "--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249",
            "--nodeport-addresses=" + ",".join(
                f"{ip}/{32 if ':' not in ip else 128}" for ip in self.node_ips)])

    def _cluster_dns(self, timeout: float) -> None:
        """kube-system/coredns as in a kubeadm cluster: ConfigMap, Deployment (the
        CoreDNS image), kube-dns Service at :attr:`cluster_dns_ips`, RBAC."""
        manifest = (REPO_ROOT / "tests" / "cluster" / "manifests" / "coredns.yaml").read_text()
        manifest = manifest.replace("COREDNS_IMAGE", self.images["coredns"]["ref"])
        manifest = manifest.replace("CLUSTER_DNS_IPS", ", ".join(self.cluster_dns_ips))
        manifest = manifest.replace("CLUSTER_DNS_IP", CLUSTER_DNS_IP)
        self.kubectl("apply", "-f", "-", input=manifest)
        self.wait_rollout("kube-system", "deployment/coredns", timeout)

    # -- queries --

    def wait_rollout(self, namespace: str, what: str, timeout: float = 180) -> None:
        out = self.kubectl("-n", namespace, "rollout", "status", what, f"--timeout={int(timeout)}s",
                           check=False, timeout=timeout + 30)
        if out.returncode != 0:
            raise ClusterError(f"rollout of {namespace}/{what} not done: {out.stderr.strip()}\n"
                               + self.describe(namespace))

    def pods(self, namespace: str, selector: str) -> list[Pod]:
        items = self.kubectl_json("-n", namespace, "get", "pods", "-l", selector)["items"]
        out = []
        for it in items:
            st = it.get("status") or {}
            cs = st.get("containerStatuses") or []
            out.append(Pod(
                it["metadata"]["name"], namespace, st.get("podIP", ""), st.get("phase", ""),
                bool(cs) and all(c.get("ready") for c in cs),
                sum(int(c.get("restartCount", 0)) for c in cs),
                tuple(ip["ip"] for ip in st.get("podIPs") or [])))
        return out

    def describe(self, namespace: str) -> str:
        out = self.kubectl("-n", namespace, "get", "pods,events", "-o", "wide", check=False)
        return out.stdout[-4000:] + out.stderr[-1000:]

    def exec(self, namespace: str, pod: str, *argv: str, timeout: float = 60,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl("-n", namespace, "exec", pod, "--", *argv, timeout=timeout,
                            check=check)

    # -- stop --

    def close(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(Exception):
                p.stop(graceful=False, timeout=10)
        if self.api is not None:
            with contextlib.suppress(Exception):
                self.api.close()
        cleanup()


def main(argv: Sequence[str]) -> int:
    cmd = argv[0] if argv else ""
    if cmd == "down":
        cleanup()
        print(f"cluster: cleaned up {STATE_DIR}")
        return 0
    if cmd == "up" and argv[1:] in ([], ["--dual-stack"]):
        c = Cluster(dual_stack=argv[1:] == ["--dual-stack"])
        c.start()
        stack = "dual-stack" if c.dual_stack else "IPv4"
        print(f"cluster: {stack}, up in {c.start_seconds:.0f}s; logs in {STATE_DIR / 'logs'}")
        print(f"  export KUBECONFIG={c.kubeconfig}")
        print(f"  kubectl: {bin_path('kubectl')}")
        print("cluster: Ctrl-C (or SIGTERM) stops and cleans up")
        stop = False

        def _stop(*_: object) -> None:
            nonlocal stop
            stop = True
        signal.signal(signal.SIGTERM, _stop)
        try:
            while not stop:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        c.close()
        return 0
    print("usage: python3 -m clusterset_dns_testkit.cluster up [--dual-stack] | down",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
