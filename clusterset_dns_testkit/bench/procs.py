"""/proc helpers: CPU and memory of a whole process tree, and of the machine."""

from __future__ import annotations

import os
import time
from typing import Any

from clusterset_dns_testkit.bench.common import CLK_TCK


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    # comm may contain spaces/parens: fields after the last ')'
    return s[s.rindex(")") + 2 :].split()


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _stat(int(d))
        if st is not None:
            children.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        if _stat(p) is None:
            continue
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_cpu_seconds(root: int) -> float:
    total = 0
    for pid in process_tree(root):
        st = _stat(pid)
        if st is not None:  # fields 14,15 (utime, stime) -> index 11, 12 here
            total += int(st[11]) + int(st[12])
    return total / CLK_TCK


def status_kib(pid: int, *keys: str) -> dict[str, int]:
    """Sizes from /proc/PID/status (VmRSS, VmHWM, ...), in KiB: the one reader of them
    for the tests and the benchmarks. A process that is gone has none."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in keys:
                    found[key] = int(rest.split()[0])
    except OSError:
        pass
    return found


def rss_kib(pid: int) -> int:
    """The resident size (VmRSS) of one process, in KiB; 0 for a process that is gone."""
    return status_kib(pid, "VmRSS").get("VmRSS", 0)


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory_mib(root: int) -> tuple[float, float, int]:
    """(sum of VmRSS, sum of PSS, number of processes) of the tree."""
    pids = process_tree(root)
    rss = sum(rss_kib(p) for p in pids)
    pss = sum(_pss_kb(p) for p in pids)
    return rss / 1024, pss / 1024, len(pids)


def system_cpu() -> dict[str, Any]:
    """CPU time of all cores, from /proc/stat, in seconds: busy (any non-idle
    time but steal; irq and softirq included, since processes are charged
    for the ticks they spend there), irq+softirq, steal; and every process's
    own CPU ticks, to name the busy ones."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]  # the aggregate "cpu" line
    user, nice, system, _idle, _iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    procs: dict[int, tuple[str, int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2 :].split()
            procs[int(d)] = (raw[raw.index("(") + 1 : raw.rindex(")")],
                             int(fields[11]) + int(fields[12]))
    return {"busy": (user + nice + system + irq + softirq) / CLK_TCK,
            "irq": (irq + softirq) / CLK_TCK, "steal": steal / CLK_TCK, "t": time.time(),
            "procs": procs}


def start_time(pid: int) -> str | None:
    st = _stat(pid)
    return st[19] if st else None

