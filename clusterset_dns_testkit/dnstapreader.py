"""golang-dnstap's ``dnstap`` reader (built by ``scripts/build-peers dnstap``) as the
collector of end-to-end tests, and a protobuf reader to look at what it received.

The reader listens on a Unix socket (``-u``) or a TCP address (``-l``, loopback) and
writes the frames it reads to a Frame Streams file (``-w``). :meth:`Reader.take`
rotates that file as a log rotation would (rename, then SIGHUP: the reader ends the
old file with STOP and opens a new one) and returns the payloads of the rotated one;
:meth:`Reader.as_json` has the reader itself decode a file (``-r FILE -j``: Go's
protobuf decoding, the DNS messages as text). Every wait is a bounded poll.
"""

from __future__ import annotations

import contextlib
import json
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.peers import cache_dir, free_port

STOP_FRAME = b"\0\0\0\0\0\0\0\x04\0\0\0\x03"


def binary() -> Path:
    path = cache_dir() / "bin" / "dnstap"
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run `scripts/build-peers dnstap`")
    return path


# -- protobuf, read from its wire format (varint, fixed32, length-delimited) -----------

def varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> dict[int, Any]:
    """field number -> value (int, or bytes when length-delimited); a field seen twice
    is an error (dnstap's fields are all optional or required, none repeated)."""
    out: dict[int, Any] = {}
    at = 0
    while at < len(data):
        key, at = varint(data, at)
        number, kind = key >> 3, key & 7
        value: Any
        if kind == 0:
            value, at = varint(data, at)
        elif kind == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
            if at > len(data):
                raise ValueError("length-delimited field past the end")
        elif kind == 5:
            value, at = struct.unpack_from("<I", data, at)[0], at + 4
        else:
            raise ValueError(f"wire type {kind} (field {number})")
        if number in out:
            raise ValueError(f"field {number} twice")
        out[number] = value
    return out


def payloads(stream: bytes) -> list[bytes]:
    """The data frames of a whole unidirectional Frame Streams file (START ... STOP)."""
    out: list[bytes] = []
    at = 0
    while at < len(stream):
        (length,) = struct.unpack_from("!I", stream, at)
        at += 4
        if length == 0:  # a control frame: its length, then its body
            (length,) = struct.unpack_from("!I", stream, at)
            at += 4 + length
            continue
        out.append(stream[at:at + length])
        at += length
    return out


class Reader:
    """``dnstap -u SOCKET -w FILE`` (or ``-l 127.0.0.1:PORT``); a context manager."""

    def __init__(self, tmp: Path, tcp: bool = False) -> None:
        self.tmp = tmp
        self.tcp = tcp
        self.socket = tmp / "dnstap.sock"
        self.port = free_port() if tcp else 0
        self.out = tmp / "frames.fstrm"
        self.log_path = tmp / "reader.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.rotations = 0

    @property
    def target(self) -> str:
        """The server's --dnstap value for this reader."""
        return f"tcp:127.0.0.1:{self.port}" if self.tcp else f"unix:{self.socket}"

    def __enter__(self) -> Reader:
        """Starts the reader unless it runs (``with Reader(...).start():`` is fine too)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def start(self) -> Reader:
        self.socket.unlink(missing_ok=True)  # a killed reader leaves its socket file
        where = ["-l", f"127.0.0.1:{self.port}"] if self.tcp else ["-u", str(self.socket)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([str(binary()), *where, "-w", str(self.out)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.wait(self.listening, "the reader to listen")
        return self

    def listening(self) -> bool:
        self.check_alive()
        if not self.tcp:
            return self.socket.exists()
        import socket
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.port), timeout=0.5):
            return True
        return False

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the dnstap reader exited with {self.proc.returncode}:\n"
                                 f"{self.log_path.read_text(errors='replace')}")

    def wait(self, probe: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not probe():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.05)

    def take(self) -> Path:
        """The frames read so far, in a file of their own (rotated; see the module)."""
        assert self.proc is not None
        self.rotations += 1
        taken = self.tmp / f"taken-{self.rotations}.fstrm"
        self.out.rename(taken)
        self.proc.send_signal(signal.SIGHUP)
        self.wait(lambda: taken.read_bytes().endswith(STOP_FRAME), f"{taken} to be closed")
        self.wait(self.out.exists, f"{self.out} to be opened again")
        return taken

    def messages(self, until: Callable[[list[dict[int, Any]]], bool],
                 timeout: float = 20.0) -> tuple[list[dict[int, Any]], list[Path]]:
        """Every Dnstap received, decoded (``fields``; the Message under 14, decoded too),
        taken until ``until`` holds of them all; and the files they came in."""
        found: list[dict[int, Any]] = []
        files: list[Path] = []

        def more() -> bool:
            self.check_alive()
            files.append(self.take())
            for payload in payloads(files[-1].read_bytes()):
                top = fields(payload)
                top[14] = fields(top[14])
                found.append(top)
            return until(found)

        self.wait(more, "the expected dnstap messages", timeout)
        return found, files

    @staticmethod
    def as_json(path: Path) -> list[dict[str, Any]]:
        """The reader's own decoding of a Frame Streams file (``dnstap -r FILE -j``)."""
        done = subprocess.run([str(binary()), "-r", str(path), "-j"], capture_output=True,
                              text=True, timeout=30, check=True)
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def pause(self) -> None:
        """SIGSTOP: the reader reads nothing until :meth:`resume`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)
