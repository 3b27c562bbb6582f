"""apiload.settle: a benchmark's server starts once the API server is quiet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from clusterset_dns_testkit.bench import apiload


class Machine:
    """The API server's and etcd's CPU seconds at each sample, on a clock of its own
    (each sleep moves it on)."""

    def __init__(self, usage: list[float]) -> None:
        self.usage = usage  # cores used by both together in each window, in order
        self.now = 0.0
        self.spent = 0.0

    def cpu(self, pid: int) -> float:
        return self.spent / 2 if pid in (1, 2) else 0.0  # half each

    def sleep(self, seconds: float) -> None:
        self.spent += self.usage.pop(0) * seconds if self.usage else 0.0
        self.now += seconds


def settle(usage: list[float], **kwargs: Any) -> float:
    api: Any = SimpleNamespace(apiserver=SimpleNamespace(pid=1), etcd=SimpleNamespace(pid=2))
    machine = Machine(usage)
    return apiload.settle(api, cpu=machine.cpu, clock=lambda: machine.now,
                          sleep=machine.sleep, **kwargs)


def test_waits_until_a_window_below_the_quiet_share_of_a_core() -> None:
    # Busy for 3 windows of a second, the 3rd using exactly the quiet share (not below
    # it); the 4th uses less. (Shares that binary floating point holds exactly.)
    assert settle([1.5, 0.75, 0.125, 0.0625], quiet=0.125) == 4.0
    assert settle([0.0]) == 1.0  # quiet already: one window to see it
    assert settle([0.1875, 0.0], window=0.5, quiet=0.125) == 1.0  # a share of the window


def test_a_busy_api_server_is_waited_for_at_most_the_limit() -> None:
    assert settle([1.0] * 100, limit=10.0) == 10.0


def test_until_quiet_watches_only_the_pids_it_is_given() -> None:
    # pid 3 (our server) is not the API server's: the machine charges only 1 and 2, so
    # pid 3 is quiet from the first window, whatever the API server does.
    machine = Machine([1.0] * 10)
    assert apiload.until_quiet([3], 0.05, 0.5, 60.0, cpu=machine.cpu,
                               clock=lambda: machine.now, sleep=machine.sleep) == 0.5
    machine = Machine([1.0, 1.0, 0.0])
    assert apiload.until_quiet([1, 2], 0.05, 0.5, 60.0, cpu=machine.cpu,
                               clock=lambda: machine.now, sleep=machine.sleep) == 1.5
