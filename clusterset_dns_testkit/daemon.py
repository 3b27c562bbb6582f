"""What the launchers of other DNS software share (BIND, NSD, PowerDNS, Unbound,
dnsmasq): each runs its real program from Debian's package (scripts/setup-test installs
them) as an unprivileged process (``nobody`` when the tests run as root), on a free
loopback port, in a temporary directory of its own, and is killed by ``stop`` (and at
interpreter exit, and when the test process dies: see ``peers.Proc``).

The directory is under the system's temporary directory, not pytest's ``tmp_path``:
pytest's parents are closed to other users, and the daemon must write its zone copy,
journal or database there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Self

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset

from clusterset_dns_testkit.peers import HOST, PeerError, Proc, _keep_tmp, _wait, free_port

NOBODY = 65534
ZONE = "clusterset.local"


def program(name: str, package: str) -> str:
    """The path of ``name`` (also looked up in the sbin directories, which a user's
    PATH may lack); a clear error naming the package when it is missing."""
    found = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).is_file()), None)
    if found is None:
        raise PeerError(f"{name} not installed: run scripts/setup-test (Debian package "
                        f"{package})")
    return found


def work_dir(prefix: str) -> Path:
    """A new directory the unprivileged daemon owns."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    return path


def give(path: Path) -> Path:
    """Hands a file the test wrote to the daemon's user (it writes there too)."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    return path


def unprivileged(argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    """``argv`` run as ``nobody`` when we are root: no daemon here needs a privilege
    (every port is a high one), so none is given one."""
    prefix = [] if os.geteuid() != 0 else [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return [*prefix, *(str(a) for a in argv)]


def ask(port: int, name: str, rdtype: str, *, tcp: bool = True, recurse: bool = False,
        timeout: float = 10.0, payload: int | None = None) -> dns.message.Message:
    """One query to ``127.0.0.1:port`` (TCP by default: the whole RRset, whatever its
    size); ``recurse`` sets RD, as a stub resolver does; ``payload``: EDNS UDP size."""
    query = dns.message.make_query(name, rdtype, use_edns=payload is not None,
                                   payload=payload or 1232)
    if not recurse:
        query.flags &= ~dns.flags.RD
    if tcp:
        return dns.query.tcp(query, HOST, port=port, timeout=timeout)
    return dns.query.udp(query, HOST, port=port, timeout=timeout)


def rrsets(reply: dns.message.Message) -> tuple[str, set[tuple[str, str, int, frozenset[str]]]]:
    """The reply's rcode and its answer RRsets as (owner, type, TTL, rdata texts)."""
    return dns.rcode.to_text(reply.rcode()), {
        (rrset.name.to_text().lower(), dns.rdatatype.to_text(rrset.rdtype), rrset.ttl,
         frozenset(rdata.to_text().lower() for rdata in rrset))
        for rrset in reply.answer}


def serial_at(port: int, zone: str = ZONE) -> int | None:
    """The SOA serial ``127.0.0.1:port`` answers for ``zone``, or None (no answer yet,
    no zone yet)."""
    try:
        reply = ask(port, zone, "SOA", tcp=False, timeout=1)
    except (dns.exception.Timeout, OSError):
        return None
    if reply.rcode() != dns.rcode.NOERROR or not reply.answer:
        return None
    return int(reply.answer[0][0].serial)


class Daemon:
    """One running program on ``127.0.0.1:port`` in its own directory."""

    program_name = ""
    package = ""

    def __init__(self, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.dir = work_dir(f"{self.program_name}-")
        self.log_path = self.dir / f"{self.program_name}.log"
        self.proc: Proc | None = None

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Around a launcher's set-up: on any failure (a tool that fails, a wait that
        times out) the program is stopped and its directory removed before the error
        goes on, as no caller holds the half-made object to stop it."""
        try:
            yield
        except BaseException:
            self.stop()
            raise

    def run(self, argv: Sequence[str | os.PathLike[str]]) -> None:
        self.log_path.touch()
        give(self.log_path)  # the program may write its own log there too
        self.proc = Proc(self.program_name, unprivileged(argv), self.log_path, cwd=self.dir)

    def wait(self, pred: object, what: str, timeout: float = 30.0) -> None:
        """Polls ``pred`` until true (bounded); the daemon's log tail on failure."""
        _wait(pred, timeout, what, self.proc)

    def wait_answering(self, name: str = ZONE, rdtype: str = "SOA",
                       timeout: float = 30.0) -> None:
        def answers() -> bool:
            try:
                ask(self.port, name, rdtype, tcp=False, recurse=True, timeout=1)
            except (dns.exception.Timeout, OSError):
                return False
            return True
        self.wait(answers, f"{self.program_name} to answer on port {self.port}", timeout)

    def ask(self, name: str, rdtype: str, *, tcp: bool = True, recurse: bool = False,
            timeout: float = 10.0, payload: int | None = None) -> dns.message.Message:
        return ask(self.port, name, rdtype, tcp=tcp, recurse=recurse, timeout=timeout,
                   payload=payload)

    def serial(self) -> int | None:
        return serial_at(self.port)

    def wait_serial(self, serial: int, timeout: float = 30.0) -> None:
        self.wait(lambda: self.serial() == serial, f"{self.program_name} at serial {serial}",
                  timeout)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
        if not _keep_tmp():
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Named(Daemon):
    """``named`` (BIND 9) in the foreground on ``127.0.0.1:port``: the options every
    role shares (its directory, no pid or session-key file, IPv4 loopback only, no
    validation, no control channel) around a role's own options and zones."""

    program_name = "named"
    package = "bind9"

    def start_named(self, options: str, zones: str, max_records: int | None = None,
                    max_types: int | None = None) -> None:
        """``options``: lines inside ``options { }``; ``zones``: what follows it.
        ``max_records``, ``max_types``: ``max-records-per-type`` and
        ``max-types-per-name`` (None: BIND's default)."""
        named = program("named", self.package)
        limits = "".join(f"    {option} {value};\n" for option, value in (
            ("max-records-per-type", max_records), ("max-types-per-name", max_types))
            if value is not None)
        conf = f"""\
options {{
    directory "{self.dir}";
    pid-file none;
    session-keyfile none;
    listen-on port {self.port} {{ {HOST}; }};
    listen-on-v6 {{ none; }};
    dnssec-validation no;
{options}{limits}}};
controls {{ }};
{zones}"""
        (self.dir / "named.conf").write_text(conf)
        with self.starting():
            self.run([named, "-g", "-n", "1", "-c", self.dir / "named.conf"])
            self.wait(lambda: "running" in self.log_text(), "named to start")
