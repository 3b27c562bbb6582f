"""clusterset_dns_request_duration_seconds: 1 in N answers of each transport is timed,
by count (the 64th answer is, the 63rd is not), over batched and plain UDP and TCP,
over real loopback sockets; the histogram's buckets and its folding across workers."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from prometheus_client.core import HistogramMetricFamily

from clusterset_dns.process.collector import durations
from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.server import Counters, DNSServer, UDPReader, make_socket
from clusterset_dns.serving.stats import DURATION_BUCKETS, Durations, Sampler, Stats
from clusterset_dns_testkit.objects import service_import

from .fakeclock import FakeClock
from .helpers import DEFAULT_UDP_CAP, build_cache, query, udp_client

WEB = "web.prod.svc.clusterset.local."


def handler() -> Handler:
    return Handler(build_cache([service_import("web", "prod", ips=["10.1.0.1"])]).zone,
                   DEFAULT_UDP_CAP)


def sampled(stats: Durations, tcp: bool) -> int:
    return sum(stats.counts[tcp])


client = pytest.fixture(udp_client, name="client")


def ask_udp(reader: UDPReader | udpbatch.BatchReader, client: socket.socket,
            where: tuple[str, int], count: int) -> None:
    """``count`` queries, every one answered (read back) before this returns."""
    for i in range(count):
        client.sendto(query(WEB, qid=i), where)
    got = 0
    for _ in range(count * 10):
        reader._readable()
        client.settimeout(0.01)
        try:
            while got < count:
                client.recvfrom(4096)
                got += 1
        except TimeoutError:
            pass
        if got == count:
            return
    raise AssertionError(f"{got} of {count} answers")


@pytest.mark.parametrize("kind", ["batched", "plain"])
def test_udp_the_64th_answer_is_timed_the_63rd_not(kind: str, client: socket.socket) -> None:
    if kind == "batched" and udpbatch.load() is not None:
        pytest.skip(f"no batched UDP I/O here: {udpbatch.load()}")  # the plain case runs
    answers = handler()
    histogram = Durations()
    sampler = Sampler(64, histogram, False)
    sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
    reader: UDPReader | udpbatch.BatchReader = (
        udpbatch.BatchReader(sock, answers.handle, answers, None, sampler) if kind == "batched"
        else UDPReader(sock, answers.handle, None, sampler))
    where = sock.getsockname()
    ask_udp(reader, client, where, 63)
    assert sampled(histogram, False) == 0 and sampler.left == 1
    ask_udp(reader, client, where, 1)
    assert sampled(histogram, False) == 1 and sampler.left == 64
    ask_udp(reader, client, where, 63)
    assert sampled(histogram, False) == 1
    ask_udp(reader, client, where, 1)
    assert sampled(histogram, False) == 2 and sampled(histogram, True) == 0
    assert histogram.sums[0] > 0
    sock.close()


def test_tcp_the_64th_answer_is_timed_the_63rd_not() -> None:
    stats = Counters()

    async def main() -> None:
        dns = DNSServer(handler().handle, [("127.0.0.1", 0)], 5.0, stats=stats)
        await dns.start()
        try:
            reader, writer = await asyncio.open_connection(*dns.bound[0])

            async def ask(count: int) -> None:
                data = query(WEB)
                writer.write((struct.pack("!H", len(data)) + data) * count)
                for _ in range(count):
                    size = struct.unpack("!H", await reader.readexactly(2))[0]
                    await reader.readexactly(size)

            await ask(63)
            assert sampled(stats.durations, True) == 0
            await ask(1)
            assert sampled(stats.durations, True) == 1 and sampled(stats.durations, False) == 0
            writer.close()
        finally:
            await dns.stop()

    asyncio.run(main())


def test_sampling_off() -> None:
    dns = DNSServer(handler().handle, [("127.0.0.1", 0)], 5.0, sample_every=0)
    assert dns.udp_sampler is None and dns.tcp_sampler is None


def test_a_batch_holding_two_sampled_answers_counts_two() -> None:
    """Every 4th answer: a batch of 9 holds the 4th and the 8th; the next is the 12th."""
    histogram = Durations()
    sampler = Sampler(4, histogram, False)
    sampler.left -= 9
    sampler.timed(0.001)
    assert sampled(histogram, False) == 2 and sampler.left == 3
    assert histogram.sums[0] == pytest.approx(0.002)


def test_bucket_bounds_are_inclusive() -> None:
    histogram = Durations()
    first = DURATION_BUCKETS[0]
    histogram.record(False, first)
    histogram.record(False, first * 1.0001)
    histogram.record(True, DURATION_BUCKETS[-1] * 2)
    assert histogram.counts[0][0] == 1 and histogram.counts[0][1] == 1
    assert histogram.counts[1][-1] == 1


def test_the_family_folds_every_process() -> None:
    parent, worker, gone = Stats(), Stats(), Stats()
    parent.durations.record(False, 0.00001)
    worker.durations.record(False, 0.001)
    gone.durations.record(True, 0.5)
    parent.add(gone)  # a worker that went away: its counts are kept
    family: HistogramMetricFamily = durations([parent, worker])
    samples = {(s.name, s.labels.get("proto"), s.labels.get("le")): s.value
               for s in family.samples}
    name = "clusterset_dns_request_duration_seconds"
    assert samples[(name + "_count", "udp", None)] == 2
    assert samples[(name + "_bucket", "udp", repr(DURATION_BUCKETS[0]))] == 1
    assert samples[(name + "_bucket", "udp", "+Inf")] == 2
    assert samples[(name + "_count", "tcp", None)] == 1
    assert samples[(name + "_sum", "tcp", None)] == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["batched", "plain"])
def test_udp_timings_read_the_injected_clock(kind: str, client: socket.socket) -> None:
    """The stopwatch is the reader's clock: a fake one moving a quarter second a
    reading times a sampled answer at exactly 0.25 s, and stamps an observed answer
    with its own first reading."""
    if kind == "batched" and udpbatch.load() is not None:
        pytest.skip(f"no batched UDP I/O here: {udpbatch.load()}")  # the plain case runs
    answers = handler()
    seen: list[int] = []

    def observe(query: bytes, response: bytes | None, tcp: bool, peer: object,
                started: int) -> None:
        seen.append(started)

    for sampler, observer in ((Sampler(1, Durations(), False), None), (None, observe)):
        clock = FakeClock(tick=0.25)
        sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
        reader: UDPReader | udpbatch.BatchReader = (
            udpbatch.BatchReader(sock, answers.handle, answers, observer, sampler, clock)
            if kind == "batched" else UDPReader(sock, answers.handle, observer, sampler, clock))
        ask_udp(reader, client, sock.getsockname(), 1)
        sock.close()
        if sampler is not None:
            assert sampler.durations.sums[0] == 0.25
            assert sampled(sampler.durations, False) == 1
    assert seen == [round(1000.25 * 1e9)]
