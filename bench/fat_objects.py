"""Memory with large API objects: the peak and the resident size while listing and
watching EndpointSlices that carry annotations near the API's limit.

    python bench/fat_objects.py [--slices 1000] [--annotation-kib 250] [--labels 0]
                                [--baseline PATH]

A real etcd + kube-apiserver (``scripts/build-peers``) holds two namespaces with the
same ``--slices`` EndpointSlices (20 headless ServiceImports): ``fat`` with an
annotation of ``--annotation-kib`` KiB and ``--labels`` more labels on each slice
(none of them read by the server), ``thin`` without (the
reference: the zone is the same). One server per namespace (``--namespace``) from
this checkout, and one on ``fat`` from ``--baseline`` (another checkout, e.g. the code
before a change), start together; each one's VmHWM (peak) and VmRSS are read once it
is ready (after the list), then every slice is replaced (new address, new annotation)
and read again once each server answers the last one (after the watch). Nothing
here is a test: figures go to docs/benchmark.md and docs/reliability.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dns.exception

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterset_dns_testkit.bench import cli  # noqa: E402
from clusterset_dns_testkit.bench import results as bench_results  # noqa: E402
from clusterset_dns_testkit.dnsserver import ServerProcess, wait_for  # noqa: E402
from clusterset_dns_testkit.fat import last_address, memory_kib, write_objects  # noqa: E402
from clusterset_dns_testkit.peers import KubeAPI  # noqa: E402


class Checkout(ServerProcess):
    """The server of one checkout (its own clusterset_dns package)."""

    def __init__(self, repo: Path, *args: str) -> None:
        super().__init__(*args)
        self.repo = repo

    def start(self) -> Checkout:
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(self.repo))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, cwd=self.repo, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self


def has(server: ServerProcess, name: str, address: str) -> bool:
    """Whether ``name`` answers ``address`` (over TCP: 50 addresses do not fit 512 bytes)."""
    try:
        response = server.ask(name, "A", tcp=True)
    except (OSError, dns.exception.DNSException):
        return False
    return any(str(rdata) == address for rrset in response.answer for rdata in rrset)


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def main() -> int:
    parser = cli.parser(__doc__)
    parser.add_argument("--slices", type=int, default=1000)
    parser.add_argument("--annotation-kib", type=int, default=250)
    parser.add_argument("--labels", type=int, default=0, help="more labels on each fat slice")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout measured in the same run (e.g. the code before)")
    args = parser.parse_args()
    runs = [("thin", "this code, no annotations (reference)", ROOT),
            ("fat", "this code", ROOT)]
    if args.baseline is not None:
        runs.append(("fat", f"baseline ({bench_results.git_version(args.baseline)})",
                     args.baseline.resolve()))
    with KubeAPI() as api:
        api.install_crds(["mcs-api-v0.5.0"])
        started = time.monotonic()
        write_objects(api, "thin", args.slices, 0)
        # Many labels are validated one by one: a few writes at a time stay within the
        # API server's request timeout.
        threads = 2 if args.labels else 8
        write_objects(api, "fat", args.slices, args.annotation_kib, labels=args.labels,
                      threads=threads)
        print(f"wrote 2 x {args.slices} slices in {time.monotonic() - started:.0f} s")
        servers = [(ns, label, Checkout(repo, "--kubeconfig", str(api.kubeconfig),
                                         "--namespace", ns, "--startup-timeout", "600"))
                   for ns, label, repo in runs]
        rows: list[dict[str, object]] = []
        try:
            for _, _, server in servers:
                server.start()
            for ns, label, server in servers:
                server.wait_ready(600)
                assert server.proc is not None
                listed = memory_kib(server.proc.pid)
                rows.append({"namespace": ns, "code": label,
                             "peak_list_mib": mib(listed["VmHWM"]),
                             "rss_listed_mib": mib(listed["VmRSS"])})
            write_objects(api, "thin", args.slices, 0, generation=1)
            write_objects(api, "fat", args.slices, args.annotation_kib, generation=1,
                          labels=args.labels, threads=threads)
            service, address = last_address(args.slices, 1)
            for (ns, _, server), row in zip(servers, rows, strict=True):
                name = f"{service}.{ns}.svc.clusterset.local."
                wait_for(lambda s=server, n=name: has(s, n, address), 600,
                         f"{name} to answer {address}")
                assert server.proc is not None
                watched = memory_kib(server.proc.pid)
                row["peak_watch_mib"] = mib(watched["VmHWM"])
                row["rss_watched_mib"] = mib(watched["VmRSS"])
        finally:
            for _, _, server in servers:
                server.stop()
    print("| namespace | code | peak, list MiB | RSS listed MiB | peak, watch MiB | RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['namespace']} | {r['code']} | {r['peak_list_mib']} | {r['rss_listed_mib']} "
              f"| {r['peak_watch_mib']} | {r['rss_watched_mib']} |")
    data = {"slices": args.slices, "annotation_kib": args.annotation_kib, "labels": args.labels,
            "rows": rows}
    cli.publish(args, bench_results.envelope(
        "fat_objects", data, versions=bench_results.peer_versions("kube-apiserver", "etcd")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
