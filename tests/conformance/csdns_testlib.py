"""Helpers for the dig-based conformance suite.

Written from docs/dns-behaviour.md, not from the server's code:

* ``run_dig`` runs the real ``dig`` binary and parses its normal text output
  (dig 9.18 has no ``+json``) into a :class:`DigResult`;
* :class:`ServerProcess` starts ``python -m clusterset_dns serve`` as a
  subprocess, polls its ``/ready`` endpoint and stops it;
* a few raw-socket helpers for what dig cannot express (pipelining, malformed
  packets, idle connections).

Only 127.0.0.0/8 and ::1 are ever contacted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from clusterset_dns_testkit.dnsserver import ServerProcess as _ServerBase

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
OBJECTS_DIR = HERE / "objects"

ZONE = "clusterset.local"
TTL = 5
DNS_VERSION_TTL = 28800
SERIAL_PLACEHOLDER = "SERIAL"

#: The SOA every negative answer carries in AUTHORITY (serial normalised).
SOA = (
    f"{ZONE}. {TTL} IN SOA ns.dns.{ZONE}. hostmaster.{ZONE}. "
    f"{SERIAL_PLACEHOLDER} 7200 1800 86400 {TTL}"
)

DIG_DEFAULTS = ("+norecurse", "+time=2", "+tries=1")


# --------------------------------------------------------------------------
# expected-record helpers


def rr(name: str, rtype: str, rdata: str, ttl: int = TTL) -> str:
    """One resource record as normalised zone-file text."""
    return f"{name} {ttl} IN {rtype} {rdata}"


def svc(name: str, ns: str = "conf") -> str:
    """Absolute service name ``<name>.<ns>.svc.clusterset.local.``."""
    return f"{name}.{ns}.svc.{ZONE}."


def a_records(name: str, addrs: Iterable[str], ttl: int = TTL) -> list[str]:
    return [rr(name, "A", a, ttl) for a in addrs]


def aaaa_records(name: str, addrs: Iterable[str], ttl: int = TTL) -> list[str]:
    return [rr(name, "AAAA", a, ttl) for a in addrs]


# --------------------------------------------------------------------------
# dig


class DigError(AssertionError):
    pass


@dataclass
class DigResult:
    cmd: list[str]
    raw: str
    returncode: int
    responded: bool = False
    opcode: str | None = None
    rcode: str | None = None
    id: int | None = None
    flags: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    question: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)
    authority: list[str] = field(default_factory=list)
    additional: list[str] = field(default_factory=list)
    opt: dict[str, str] | None = None
    opt_lines: list[str] = field(default_factory=list)
    msg_size: int | None = None
    transport: str | None = None  # "UDP" or "TCP", from dig's SERVER line
    serials: list[int] = field(default_factory=list)

    @property
    def udp_size(self) -> int | None:
        if self.opt is None or "udp" not in self.opt:
            return None
        return int(self.opt["udp"])

    @property
    def ede(self) -> tuple[int, str] | None:
        """(INFO-CODE, EXTRA-TEXT) of the response's Extended DNS Error, as dig prints
        it (``EDE: 14 (Not Ready): (text)``); None without one."""
        for line in self.opt_lines:
            m = re.match(r"EDE: (\d+)(?: \([^)]*\))?(?:: \((.*)\))?$", line)
            if m:
                return int(m.group(1)), m.group(2) or ""
        return None

    def describe(self) -> str:
        return "$ " + shlex.join(self.cmd) + "\n" + self.raw


_HEADER_RE = re.compile(r";; ->>HEADER<<- opcode: ([A-Z0-9]+), status: ([A-Z0-9]+), id: (\d+)")
_FLAGS_RE = re.compile(
    r";; flags:([^;]*);\s*QUERY: (\d+), ANSWER: (\d+), AUTHORITY: (\d+), ADDITIONAL: (\d+)"
)
_MSGSIZE_RE = re.compile(r";; MSG SIZE\s+rcvd: (\d+)")
_SERVER_RE = re.compile(r";; SERVER: \S+ \((UDP|TCP)\)")
_SECTIONS = {
    ";; QUESTION SECTION:": "question",
    ";; ANSWER SECTION:": "answer",
    ";; AUTHORITY SECTION:": "authority",
    ";; ADDITIONAL SECTION:": "additional",
    ";; OPT PSEUDOSECTION:": "opt",
}


def normalise_rr(line: str, serials: list[int] | None = None) -> str:
    """``name ttl class type rdata`` with single spaces, SOA serial replaced."""
    toks = line.split()
    if len(toks) >= 7 and toks[3].upper() == "SOA":
        if serials is not None and toks[6].isdigit():
            serials.append(int(toks[6]))
        toks[6] = SERIAL_PLACEHOLDER
    return " ".join(toks)


def parse_dig(cmd: list[str], out: str, returncode: int) -> DigResult:
    res = DigResult(cmd=cmd, raw=out, returncode=returncode)
    # dig prints one message per response; after a TC retry there are two.
    # Keep the last one.
    starts = [m.start() for m in _HEADER_RE.finditer(out)]
    if not starts:
        return res
    text = out[starts[-1] :]
    res.responded = True
    m = _HEADER_RE.search(text)
    assert m is not None
    res.opcode, res.rcode, res.id = m.group(1), m.group(2), int(m.group(3))
    fm = _FLAGS_RE.search(text)
    if fm:
        res.flags = set(fm.group(1).split())
        res.counts = {
            "query": int(fm.group(2)),
            "answer": int(fm.group(3)),
            "authority": int(fm.group(4)),
            "additional": int(fm.group(5)),
        }
    sm = _MSGSIZE_RE.search(text)
    if sm:
        res.msg_size = int(sm.group(1))
    tm = _SERVER_RE.search(text)
    if tm:
        res.transport = tm.group(1)
    section: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in _SECTIONS:
            section = _SECTIONS[stripped]
            if section == "opt":
                res.opt = {}
            continue
        if not stripped:
            section = None
            continue
        if section is None:
            continue
        if section == "opt":
            if stripped.startswith(";; "):
                section = None
                continue
            res.opt_lines.append(stripped.lstrip("; "))
            em = re.match(r";\s*EDNS: version: (\d+), flags:([^;]*);(.*)", stripped)
            if em:
                assert res.opt is not None
                res.opt["version"] = em.group(1)
                res.opt["flags"] = em.group(2).strip()
                um = re.search(r"udp: (\d+)", em.group(3))
                if um:
                    res.opt["udp"] = um.group(1)
            continue
        if section == "question":
            res.question.append(" ".join(stripped.lstrip(";").split()))
            continue
        if stripped.startswith(";"):
            continue
        getattr(res, section).append(normalise_rr(stripped, res.serials))
    return res


def run_dig(
    host: str,
    port: int,
    name: str,
    rdtype: str = "A",
    *opts: str,
    rdclass: str | None = None,
    timeout: float = 20.0,
) -> DigResult:
    """Run ``dig @host -p port [opts] [-c class] -t type -q name``.

    ``opts`` come after the defaults (``+norecurse +time=2 +tries=1``), so a
    caller's ``+rec`` wins over the default ``+norecurse``.
    """
    cmd = ["dig", f"@{host}", "-p", str(port), *DIG_DEFAULTS, *opts]
    if rdclass:
        cmd += ["-c", rdclass]
    cmd += ["-t", rdtype, "-q", name]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise DigError(f"dig did not finish in {timeout}s: {shlex.join(cmd)}") from exc
    out = proc.stdout + (("\n;; STDERR:\n" + proc.stderr) if proc.stderr else "")
    return parse_dig(cmd, out, proc.returncode)


class Dig:
    """``dig`` bound to one server: ``dig(name, type, *opts, rdclass=...)``."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def __call__(self, name: str, rdtype: str = "A", *opts: str, **kw: object) -> DigResult:
        return run_dig(self.host, self.port, name, rdtype, *opts, **kw)  # type: ignore[arg-type]


def ensure_dig() -> str:
    """Path of ``dig``; installs bind9-dnsutils when missing and running as root."""
    path = shutil.which("dig")
    if path:
        return path
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(
            ["apt-get", "install", "-y", "bind9-dnsutils"], env=env, capture_output=True, text=True
        )
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
            subprocess.run(
                ["apt-get", "install", "-y", "bind9-dnsutils"],
                env=env,
                capture_output=True,
                text=True,
            )
        path = shutil.which("dig")
        if path:
            return path
    raise RuntimeError("dig is not installed (apt-get install -y bind9-dnsutils)")


# --------------------------------------------------------------------------
# assertions


def check(
    res: DigResult,
    rcode: str = "NOERROR",
    answer: Sequence[str] | None = None,
    authority: Sequence[str] | None = None,
    additional: Sequence[str] | None = None,
    *,
    authoritative: bool = True,
    ci_authority: bool = False,
) -> None:
    """Assert one dig result. Record lists compare as sorted lists (duplicates
    count); ``None`` means "not checked". For in-zone answers (the default)
    AA must be set and RA clear."""
    ctx = "\n" + res.describe()
    if not res.responded:
        raise AssertionError("no response from the server" + ctx)
    if res.rcode != rcode:
        raise AssertionError(f"rcode {res.rcode}, expected {rcode}" + ctx)
    if "qr" not in res.flags:
        raise AssertionError("QR flag not set" + ctx)
    if authoritative:
        if "aa" not in res.flags:
            raise AssertionError(f"AA flag not set (flags {sorted(res.flags)})" + ctx)
        if "ra" in res.flags:
            raise AssertionError("RA flag set" + ctx)
    for label, got, want in (
        ("ANSWER", res.answer, answer),
        ("AUTHORITY", res.authority, authority),
        ("ADDITIONAL", res.additional, additional),
    ):
        if want is None:
            continue
        g, w = sorted(got), sorted(want)
        if label == "AUTHORITY" and ci_authority:
            g, w = sorted(x.lower() for x in got), sorted(x.lower() for x in want)
        if g != w:
            missing = [x for x in w if x not in g]
            extra = [x for x in g if x not in w]
            raise AssertionError(
                f"{label} section differs\n  expected: {w}\n  got:      {g}\n"
                f"  missing: {missing}\n  unexpected: {extra}" + ctx
            )


def check_nxdomain(res: DigResult) -> None:
    check(res, "NXDOMAIN", answer=[], authority=[SOA], ci_authority=True)


def check_nodata(res: DigResult) -> None:
    check(res, "NOERROR", answer=[], authority=[SOA], ci_authority=True)


# --------------------------------------------------------------------------
# polling

T = TypeVar("T")


def poll(
    fn: Callable[[], T], ok: Callable[[T], bool], timeout: float, interval: float = 0.1
) -> tuple[bool, T, float]:
    """Call ``fn`` until ``ok(value)`` or ``timeout``; returns (ok, last, seconds)."""
    start = time.monotonic()
    while True:
        value = fn()
        elapsed = time.monotonic() - start
        if ok(value):
            return True, value, elapsed
        if elapsed >= timeout:
            return False, value, elapsed
        time.sleep(interval)


# --------------------------------------------------------------------------
# server process


def http_status(url: str, timeout: float = 1.0) -> int | None:
    """HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


class ServerProcess(_ServerBase):
    """``python -m clusterset_dns serve --manifests PATH`` on free 127.0.0.1 ports: the
    shared harness of clusterset_dns_testkit/dnsserver.py, with this suite's conveniences."""

    def __init__(self, manifests: Path | str, extra_args: Sequence[str] = ()) -> None:
        self.manifests = str(manifests)
        self.extra_args = list(extra_args)
        super().__init__("--manifests", self.manifests, *self.extra_args)

    @property
    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.ready_port}/ready"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready_status(self) -> int | None:
        """The /ready status, or None when nothing answers (also after an exit)."""
        return http_status(self.ready_url)

    def wait_listening(self, timeout: float = 30.0) -> None:
        """Wait until the DNS TCP port accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(self._failure("server exited during start-up"))
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), timeout=0.5),
            ):
                return
            time.sleep(0.1)
        raise RuntimeError(self._failure(f"DNS port not listening after {timeout}s"))

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Poll ``/ready`` until 200; returns the seconds it took."""
        start = time.monotonic()
        last: int | None = None
        while time.monotonic() - start < timeout:
            if not self.alive():
                raise RuntimeError(self._failure("server exited before becoming ready"))
            last = self.ready_status()
            if last == 200:
                return time.monotonic() - start
            time.sleep(0.1)
        raise RuntimeError(self._failure(f"/ready not 200 after {timeout}s (last: {last})"))

    def _failure(self, what: str) -> str:
        rc = self.proc.poll() if self.proc else None
        return f"{what} (exit code {rc})\n$ {shlex.join(self.cmd)}\n--- server log ---\n" + (
            self.log_text()
        )


@dataclass
class Target:
    """The DNS server under test."""

    host: str
    port: int
    process: ServerProcess | None  # None when --dns-server was given


# --------------------------------------------------------------------------
# raw sockets


def family_of(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def udp_exchange(host: str, port: int, payload: bytes, timeout: float = 2.0) -> bytes | None:
    """Send one datagram, return the first reply or None on timeout."""
    with socket.socket(family_of(host), socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(payload, (host, port))
        try:
            data, _ = s.recvfrom(65535)
        except TimeoutError:
            return None
        return data


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def tcp_frame(wire: bytes) -> bytes:
    return struct.pack("!H", len(wire)) + wire


def tcp_read_message(sock: socket.socket) -> bytes:
    (length,) = struct.unpack("!H", recv_exact(sock, 2))
    return recv_exact(sock, length)


@dataclass
class Header:
    id: int
    qr: bool
    opcode: int
    aa: bool
    tc: bool
    rd: bool
    ra: bool
    rcode: int
    qdcount: int
    ancount: int
    nscount: int
    arcount: int


def parse_header(data: bytes) -> Header:
    ident, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", data[:12])
    return Header(
        id=ident,
        qr=bool(flags & 0x8000),
        opcode=(flags >> 11) & 0xF,
        aa=bool(flags & 0x0400),
        tc=bool(flags & 0x0200),
        rd=bool(flags & 0x0100),
        ra=bool(flags & 0x0080),
        rcode=flags & 0xF,
        qdcount=qd,
        ancount=an,
        nscount=ns,
        arcount=ar,
    )


def make_header(
    ident: int,
    *,
    opcode: int = 0,
    rd: bool = False,
    qd: int = 1,
    an: int = 0,
    ns: int = 0,
    ar: int = 0,
) -> bytes:
    flags = (opcode & 0xF) << 11 | (0x0100 if rd else 0)
    return struct.pack("!HHHHHH", ident, flags, qd, an, ns, ar)


def encode_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        b = label.encode("ascii")
        out += bytes([len(b)]) + b
    return out + b"\x00"


def question_bytes(name: str, qtype: int = 1, qclass: int = 1) -> bytes:
    return encode_name(name) + struct.pack("!HH", qtype, qclass)
