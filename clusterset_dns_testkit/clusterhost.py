"""What the test cluster of :mod:`cluster` does to this machine, and its undoing: the
addresses and ranges, the directory everything lives under, the processes recorded
there, and :func:`cleanup` (see :mod:`cluster`'s docstring) and :func:`leftovers`."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.peers import PeerError

STATE_DIR = Path(os.environ.get("CLUSTERSET_DNS_CLUSTER_DIR", "/var/tmp/clusterset-dns-cluster"))
NODE_NAME = "csdns-node"
BRIDGE = "csdns0"
NODE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DNS_IP = "10.96.0.10"
# the second family of the dual-stack variant: unique local addresses (never global),
# clear of fd00::/64 (this machine's own link)
NODE_IP6 = "fd00:10:244::1"
POD_CIDR6 = "fd00:10:244::/64"
SERVICE_CIDR6 = "fd00:10:96::/112"
CLUSTER_DNS_IP6 = "fd00:10:96::a"
# the forwarding switches set while the cluster runs: (sysctl file, where its old value is kept)
FORWARDING = ((Path("/proc/sys/net/ipv4/ip_forward"), "ip_forward.saved"),
              (Path("/proc/sys/net/ipv6/conf/all/forwarding"), "ipv6_forwarding.saved"))
FORWARD_COMMENT = "clusterset-dns-test-cluster"


class ClusterError(PeerError):
    """The test cluster could not be started or used."""


def _run(argv: Sequence[str | os.PathLike[str]], check: bool = True, timeout: float = 120,
         input: str | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                         timeout=timeout, input=input)
    if check and out.returncode != 0:
        raise ClusterError(f"{' '.join(map(str, argv))}: exit {out.returncode}: "
                           f"{out.stderr.strip() or out.stdout.strip()}")
    return out


# ----------------------------------------------------------------------------
# clean-up (also of a previous failed run)
# ----------------------------------------------------------------------------


def _pids_file() -> Path:
    return STATE_DIR / "pids"


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22), so a
    recorded pid is never confused with a later process that reuses it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _record_pid(name: str, pid: int) -> None:
    with open(_pids_file(), "a") as f:
        f.write(f"{pid} {_start_time(pid)} {name}\n")


def _kill_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _cgroup_pids() -> list[int]:
    """Processes of our pods: every pid in a kubepods cgroup (v1 hierarchies)."""
    pids: set[int] = set()
    for root in Path("/sys/fs/cgroup").glob("*/kubepods"):
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in procs.read_text().split())
    return sorted(pids)


def _shim_pids() -> list[int]:
    """containerd shims started for our containerd (their argv names our socket)."""
    sock = str(STATE_DIR / "containerd" / "containerd.sock")
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and sock.encode() in cmd:
                out.append(int(d.name))
    return out


def _any_shim() -> bool:
    for d in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if d.name.isdigit() and (d / "comm").read_text().startswith("containerd-shim"):
                return True
    return False


def _mounts_below(path: Path) -> list[str]:
    prefix = str(path)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == prefix or mnt.startswith(prefix + "/"):
                found.append(mnt)
    return found


def _rmdir_tree(root: Path) -> None:
    """rmdir a cgroup directory tree, deepest first (cgroup dirs cannot be rm -r'd)."""
    if not root.is_dir():
        return
    dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for d in [*dirs, root]:
        with contextlib.suppress(OSError):
            d.rmdir()


def _remove_kube_chains() -> None:
    """Remove the KUBE-* chains kube-proxy and the kubelet wrote (iptables and ip6tables,
    every table), and the jumps to them. (``kube-proxy --cleanup`` leaves the kubelet's
    chains, e.g. KUBE-FIREWALL, and fails on a machine without ipset.)"""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            out = _run([f"{tool}-save", "-t", table], check=False).stdout
            chains = re.findall(r"^:(KUBE-[^ ]+) ", out, re.M)
            if not chains:
                continue
            for rule in re.findall(r"^-A ([A-Z]+ .*-j KUBE-.*)$", out, re.M):
                if rule.split()[0].startswith("KUBE-"):
                    continue
                _run([tool, "-t", table, "-D", *shlex.split(rule)], check=False)
            for chain in chains:
                _run([tool, "-t", table, "-F", chain], check=False)
            for chain in chains:
                _run([tool, "-t", table, "-X", chain], check=False)


def _forward_rule(op: str, cidr: str) -> list[str]:
    """The FORWARD rule (inserted first, or deleted) that drops what the pod range
    ``cidr`` sends out of any interface but the bridge."""
    where = ["-I", "FORWARD", "1"] if op == "-I" else [op, "FORWARD"]
    return [*where, "-s", cidr, "!", "-o", BRIDGE, "-m", "comment", "--comment",
            FORWARD_COMMENT, "-j", "DROP"]


def leftovers() -> list[str]:
    """What of a cluster is still on this machine (after :func:`cleanup`: nothing)."""
    found = []
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        found.append(f"bridge {BRIDGE}")
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            out = _run([f"{tool}-save", "-t", table], check=False).stdout
            found += [f"{tool} {table}: {line}" for line in out.splitlines()
                      if "KUBE-" in line or FORWARD_COMMENT in line]
    if STATE_DIR.exists():
        found.append(str(STATE_DIR))
    return found


def cleanup(log: Any = print) -> None:
    """Undo everything a cluster run (this or an earlier, failed one) left behind."""
    # 1. processes: the control plane and node daemons we recorded, the pods' processes,
    #    the shims; kubelet first so that it does not restart containers meanwhile
    if _pids_file().exists():
        for line in _pids_file().read_text().splitlines():
            with contextlib.suppress(ValueError, IndexError):
                pid, started = int(line.split()[0]), line.split()[1]
                if _start_time(pid) == started:
                    _kill_pid(pid)
    for _ in range(3):
        pids = _cgroup_pids() + _shim_pids()
        if not pids:
            break
        for pid in pids:
            _kill_pid(pid)
        time.sleep(0.5)
    # 2. mounts under our directory (pod volumes, overlay roots, shm), deepest first
    for mnt in sorted(_mounts_below(STATE_DIR), key=len, reverse=True):
        _run(["umount", "-l", mnt], check=False)
    # 3. network namespaces made by containerd's CNI (/var/run/netns/cni-*)
    netns = Path("/var/run/netns")
    if netns.is_dir():
        for ns in netns.glob("cni-*"):
            _run(["umount", "-l", str(ns)], check=False)
            with contextlib.suppress(OSError):
                ns.unlink()
    # 4. the bridge (its veths die with the namespaces), NAT/filter chains, our rule
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        _run(["ip", "link", "del", BRIDGE], check=False)
    _remove_kube_chains()
    for tool, cidr in (("iptables", POD_CIDR), ("ip6tables", POD_CIDR6)):
        if shutil.which(tool) is None:
            continue
        while _run([tool, *_forward_rule("-D", cidr)], check=False).returncode == 0:
            pass
    # 5. host-local IPAM state, libcni's result cache of our network and of the pods'
    #    loopback, shim sockets left by killed shims (no other containerd runs here:
    #    only when no shim at all is left), our cgroups, the directory itself
    shutil.rmtree(STATE_DIR / "cni-ipam", ignore_errors=True)
    results = Path("/var/lib/cni/results")
    if results.is_dir():
        for f in [*results.glob("csdns-pods-*"), *results.glob("cni-loopback-*")]:
            with contextlib.suppress(OSError):
                f.unlink()
    shim_sockets = Path("/run/containerd/s")
    if shim_sockets.is_dir() and not _any_shim():
        for f in shim_sockets.iterdir():
            with contextlib.suppress(OSError):
                if f.is_socket():
                    f.unlink()
    for root in Path("/sys/fs/cgroup").glob("*/kubepods"):
        _rmdir_tree(root)
    for switch, name in FORWARDING:
        saved = STATE_DIR / name
        if saved.exists():
            switch.write_text(saved.read_text())
    if STATE_DIR.exists() and not _mounts_below(STATE_DIR):
        shutil.rmtree(STATE_DIR, ignore_errors=True)
    elif STATE_DIR.exists():
        log(f"cluster: mounts still below {STATE_DIR}: {_mounts_below(STATE_DIR)[:5]}")
