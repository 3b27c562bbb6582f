"""The app's serve, in this process: each run has its own metrics, so a server started
again (or a second one beside it) exposes its own /metrics, counted from zero."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from pathlib import Path

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import app
from clusterset_dns_testkit.objects import service_import
from clusterset_dns_testkit.peers import free_port

LOCAL = "127.0.0.1"


def write_manifests(directory: Path) -> None:
    directory.mkdir()
    (directory / "web.json").write_text(json.dumps(
        service_import("web", "prod", ips=["10.1.0.1"])))
    (directory / "bad.json").write_text(json.dumps(service_import("bad", "prod", type_="Weird")))


async def get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection(LOCAL, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


def query_a(port: int, name: bytes) -> bytes:
    labels = b"".join(bytes([len(p)]) + p for p in name.split(b".")) + b"\x00"
    packet = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + labels + b"\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(packet, (LOCAL, port))
        return sock.recv(4096)


def metric(body: str, sample: str) -> float:
    """The value of ``sample`` (a name with its labels, as /metrics writes them)."""
    for line in body.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{sample} not in /metrics:\n{body}")


async def serve_once(config: Config) -> tuple[int, str]:
    """One run of the app: asked once, scraped, stopped by SIGTERM; (exit status, the
    /metrics body)."""
    assert config.ready_listen and config.metrics_listen
    dns_port, ready_port, metrics_port = (config.listen[0][1], config.ready_listen[1],
                                          config.metrics_listen[1])
    server = asyncio.create_task(app.serve(config))
    status = 503
    for _ in range(500):  # at most 10 s
        if server.done():
            break
        with contextlib.suppress(OSError):  # not listening yet
            status, _ = await get(ready_port, "/ready")
        if status == 200:
            break
        await asyncio.sleep(0.02)
    if server.done():
        await server  # raises what ended it
    assert status == 200, "not ready"
    answer = await asyncio.to_thread(query_a, dns_port, b"web.prod.svc.clusterset.local")
    assert answer[3] & 0x0F == 0 and answer[6:8] == b"\x00\x01"  # NOERROR, one answer
    code, body = await get(metrics_port, "/metrics")
    assert code == 200
    os.kill(os.getpid(), signal.SIGTERM)
    return await asyncio.wait_for(server, 10), body


@pytest.mark.timeout(60)
def test_serve_twice_in_one_process_each_with_its_own_metrics(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    write_manifests(manifests)
    for _ in range(2):
        config = Config(manifests=manifests, listen=((LOCAL, free_port()),),
                        metrics_listen=(LOCAL, free_port()), health_listen=None,
                        ready_listen=(LOCAL, free_port()), lameduck=0)
        code, body = asyncio.run(serve_once(config))
        assert code == 0
        # This run's counts only: one query, one import, one invalid.
        assert metric(body, "clusterset_dns_requests_total{proto=\"udp\",rcode=\"NOERROR\","
                            "type=\"A\"}") == 1
        assert metric(body, 'clusterset_dns_imports{state="served"}') == 1
        assert metric(body, 'clusterset_dns_invalid_objects_total{kind="ServiceImport"}') == 1


@pytest.mark.timeout(60)
def test_the_lame_duck_waits_on_the_clock(tmp_path: Path) -> None:
    """--lameduck 30 after SIGTERM: /ready is 503 and DNS still answers while the lame
    duck waits on the injected clock, which the test moves past the 30 s (no real
    wait); then the server exits 0."""
    from .fakeclock import FakeClock

    manifests = tmp_path / "manifests"
    write_manifests(manifests)
    dns_port, ready_port = free_port(), free_port()
    config = Config(manifests=manifests, listen=((LOCAL, dns_port),), metrics_listen=None,
                    health_listen=None, ready_listen=(LOCAL, ready_port), lameduck=30)
    clock = FakeClock()

    async def main() -> None:
        server = asyncio.create_task(app.Server(config, clock).serve())
        status = 503
        for _ in range(500):  # at most 10 s
            with contextlib.suppress(OSError):
                status, _ = await get(ready_port, "/ready")
            if status == 200 or server.done():
                break
            await asyncio.sleep(0.02)
        assert status == 200, "not ready"
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(500):
            if clock.pending() and clock.pending()[-1] == clock.now + 30:
                break
            await asyncio.sleep(0.02)
        assert clock.pending()[-1] == clock.now + 30  # the lame duck, on the clock
        assert (await get(ready_port, "/ready"))[0] == 503
        answer = await asyncio.to_thread(query_a, dns_port, b"web.prod.svc.clusterset.local")
        assert answer[3] & 0x0F == 0  # still answering
        clock.advance(29.999)
        await asyncio.sleep(0.05)
        assert not server.done()  # the last millisecond has not passed
        clock.advance(0.001)
        assert await asyncio.wait_for(server, 10) == 0
        assert 30 in clock.sleeps
    asyncio.run(main())
