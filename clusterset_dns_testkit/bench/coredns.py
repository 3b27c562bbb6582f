"""CoreDNS with its kubernetes plugin's multicluster mode, on a real API server."""

from __future__ import annotations

import json
import os
import subprocess
import time

from clusterset_dns_testkit import peers
from clusterset_dns_testkit.bench.common import LOOPBACK, SERVER_CORE, ZONE, Skip, log
from clusterset_dns_testkit.bench.net import dns_rcode
from clusterset_dns_testkit.bench.servers import Context, Server, spawn, wait_until
from clusterset_dns_testkit.peers import free_port


def start_coredns(ctx: Context) -> Server:
    """CoreDNS on the objects of ``ctx``: etcd + kube-apiserver from
    :mod:`clusterset_dns_testkit.peers` with the mcs-api v0.5.0 CRDs, every item of
    ``ctx.objects`` created through the API (CoreDNS's multicluster mode reads them
    as v1alpha1, which v0.5.0 serves too), then the CoreDNS binary pinned like the
    others (``taskset -c 0``, ``GOMAXPROCS=1``) with the ``kubernetes`` plugin's
    ``multicluster clusterset.local``.

    CPU and RSS are those of CoreDNS's own process; the apiserver and etcd run
    beside it (idle during the load, but on the same two cores: the foreign-load
    figures in the JSON show what they used). CoreDNS answers ``dns-version`` with
    "1.1.0": the probe checks only that a TXT exists. Skipped, with the reason
    printed, when a peer binary is missing.
    """
    try:
        binary = peers.find_binaries().coredns
    except peers.PeerError as e:
        raise Skip(str(e)) from e

    t0 = time.time()
    api = peers.KubeAPI()
    try:
        api.start()
        api.install_crds(["mcs-api-v0.5.0"])
        items = json.loads(ctx.objects.read_text())["items"]
        for ns in sorted({o["metadata"]["namespace"] for o in items}):
            api.ensure_namespace(ns)
        for o in items:
            api.create(o)
        log(f"apiserver: {len(items):,} objects created in {time.time() - t0:.0f} s")
        port = free_port()
        cdir = ctx.tmp / "coredns"
        cdir.mkdir(exist_ok=True)
        corefile = cdir / "Corefile"
        corefile.write_text(
            f"{ZONE}:{port} {{\n"
            f"    bind {LOOPBACK}\n"
            f"    errors\n"
            f"    kubernetes cluster.local {ZONE} {{\n"
            f"        kubeconfig {api.kubeconfig}\n"
            f"        multicluster {ZONE}\n"
            f"        ttl {ctx.args.ttl}\n"
            f"    }}\n"
            f"}}\n")
        version = subprocess.run([str(binary), "-version"], capture_output=True,
                                 text=True).stdout.strip().replace("\n", " ")
        env = dict(os.environ, GOMAXPROCS="1")
        srv = Server("CoreDNS", spawn(["taskset", "-c", SERVER_CORE, str(binary), "-conf",
                                       str(corefile)], cdir / "coredns.log", env),
                     port, SERVER_CORE, cdir / "coredns.log", version=version)
    except BaseException:
        api.close()
        raise
    srv.cleanup.append(api.close)
    srv.notes.append("kubernetes plugin, multicluster clusterset.local, reading a "
                     "real kube-apiserver (running beside it); GOMAXPROCS=1")
    try:
        wait_until(srv, ctx.args.ready_timeout)
        # synced: the last objects created answer
        deadline = time.time() + ctx.args.ready_timeout
        last = [p for p in ctx.probes if p["rcode"] == "NOERROR" and p["type"] == "A"]
        while any(dns_rcode(port, p["name"], "A") != 0 for p in last):
            if time.time() > deadline or srv.proc.poll() is not None:
                raise RuntimeError(f"CoreDNS did not sync:\n{srv.log_tail()}")
            time.sleep(0.3)
        srv.notes.append(f"ready in {time.time() - t0:.1f} s (apiserver start and object "
                         f"creation included)")
    except BaseException:
        srv.stop()
        raise
    return srv


