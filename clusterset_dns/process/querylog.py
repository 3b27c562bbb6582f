"""The query log (``--query-log``): one line per answer of the chosen classes, in the
log's format (text or JSON, see logs), through the answer observer (serving.observe).

Classes, as CoreDNS's ``log`` plugin names them: ``denial`` is NXDOMAIN, or NOERROR
with no answer record (NODATA); ``error`` is any other rcode (SERVFAIL, REFUSED,
FORMERR, NOTIMP, NOTAUTH, BADVERS); ``all`` is every answer, successes included.

Bounded: at most ``rate`` lines a second with a burst of one second's worth (a token
bucket on the injected clock); a line over the limit is not written but counted
(``Stats.query_log_dropped``), so that a flood costs a counter, not a write per
packet that could stall answers behind a slow log reader. The limit is the server's:
with ``--workers N`` each process gets 1/N of it.
"""

from __future__ import annotations

import logging
import re

from clusterset_dns.base.clock import Clock
from clusterset_dns.base.metrics import RCODES
from clusterset_dns.serving.observe import Address
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone import wire

log = logging.getLogger("clusterset_dns.query")

DENIAL, ERROR, SUCCESS = 1, 2, 4
_BITS = {"all": DENIAL | ERROR | SUCCESS, "denial": DENIAL, "error": ERROR}
_TYPE_TEXT = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT",
              28: "AAAA", 33: "SRV", 35: "NAPTR", 41: "OPT", 64: "SVCB", 65: "HTTPS",
              251: "IXFR", 252: "AXFR", 255: "ANY"}
# Labels joined by dots, of printable ASCII but for the two characters a label escapes
# besides the dot (" and \\).
_PLAIN = re.compile(rb"[\x21\x23-\x5b\x5d-\x7e]+")
_PRINTABLE = frozenset(range(0x21, 0x7F)) - {ord("."), ord("\\"), ord('"')}
_TC = 0x02  # in the flags' first byte
MAX_NAME = 255  # octets of a name in wire form, its length bytes and the root's included
_EPSILON = 1e-9  # float slack of the token count (rates like 3/s are not exact in binary)


class RateLimit:
    """A token bucket: ``burst`` tokens, refilled at ``rate`` a second."""

    def __init__(self, rate: float, burst: float, clock: Clock) -> None:
        self.rate, self.burst, self.clock = rate, max(burst, 1.0), clock
        self.tokens = self.burst
        self.last = clock.monotonic()

    def take(self) -> bool:
        now = self.clock.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0 - _EPSILON:
            self.tokens -= 1.0
            return True
        return False


def name_text(data: bytes, offset: int) -> tuple[str, int] | None:
    """The uncompressed name at ``offset`` as presentation text (RFC 1035 5.1 escapes),
    and where it ends; None when malformed or longer than a name may be (255 octets:
    a 64 KB query of 63-byte labels would otherwise make a line of 250 KB)."""
    labels: list[bytes] = []
    end = min(len(data), offset + MAX_NAME)
    while offset < end:
        length = data[offset]
        if length == 0:
            joined = b".".join(labels)
            # The usual name: one check of every label at once (a dot inside a label
            # would pass it, so the dots are counted too).
            if _PLAIN.fullmatch(joined) and joined.count(b".") == len(labels) - 1:
                return joined.decode("ascii") + ".", offset + 1
            return "".join(_escaped(label) + "." for label in labels) or ".", offset + 1
        if length > 63:
            return None
        # a label running up to or past ``end`` leaves no room for the root's byte: the
        # loop ends on the next test, with None
        labels.append(data[offset + 1 : offset + 1 + length])
        offset += 1 + length
    return None


def _escaped(label: bytes) -> str:
    return "".join(chr(b) if b in _PRINTABLE else
                   ("\\" + chr(b) if b in (0x2E, 0x5C, 0x22) else f"\\{b:03d}")
                   for b in label)


def rcode_and_ede(response: bytes) -> tuple[int, int | None]:
    """The response's rcode (with an OPT's upper bits: BADVERS is 16) and the
    INFO-CODE of its first Extended DNS Error option, if any."""
    rcode = response[3] & 0x0F
    qd, an, ns, ar = wire.COUNTS.unpack_from(response, 4)
    if not ar:
        return rcode, None
    offset = 12
    for _ in range(qd):
        walked = wire.walk_name(response, offset, pointers=True)
        if walked is None:
            return rcode, None
        offset = walked[1] + 4
    for _ in range(an + ns + ar):
        parsed = wire.skip_rr(response, offset)
        if parsed is None:
            return rcode, None
        rtype, _, ttl, end, root_owner = parsed
        if rtype == wire.OPT and root_owner:
            rcode |= (ttl >> 24) << 4
            at = offset + 11  # the root owner, then TYPE, CLASS, TTL, RDLENGTH
            while at + 6 <= end:  # room for an option's head and an INFO-CODE
                code = (response[at] << 8) | response[at + 1]
                length = (response[at + 2] << 8) | response[at + 3]
                if code == wire.EDE_OPTION and length >= 2:
                    return rcode, (response[at + 4] << 8) | response[at + 5]
                at += 4 + length
            return rcode, None
        offset = end
    return rcode, None


def rcode_text(rcode: int) -> str:
    return RCODES.get(rcode, f"RCODE{rcode}")


class QueryLog:
    """The observer writing the query log (see the module's docstring)."""

    def __init__(self, classes: str, rate: float, stats: Stats,
                 clock: Clock | None = None) -> None:
        """``classes``: as --query-log gives them (``denial,error``); ``rate``: lines a
        second, with a burst of as many."""
        self.want = 0
        for name in classes.split(","):
            self.want |= _BITS[name]
        self.success = bool(self.want & SUCCESS)
        self.stats = stats
        self.clock = clock = clock or Clock()
        self.limit = RateLimit(rate, rate, clock)
        self._stopwatch_ns = clock.perf_counter_ns  # the transports' (``started``)
        log.setLevel(logging.INFO)  # asked for: written whatever --log-level says

    def __call__(self, query: bytes, response: bytes | None, tcp: bool, peer: Address,
                 started: int) -> None:
        self.observe(query, response, tcp, peer, started)

    def observe(self, query: bytes, response: bytes | None, tcp: bool, peer: Address,
                started: int) -> None:
        """The observer (observe.Observer): a bound method, cheaper to call than the
        instance."""
        if response is None or len(response) < 12:
            return  # nothing was sent: not an answer
        if not response[3] & 0x0F and (response[6] or response[7] or response[2] & _TC):
            if not self.success:  # the common case, decided on the header's bytes
                return
            rcode, ede = 0, None
        else:
            rcode, ede = rcode_and_ede(response)
            kind = DENIAL if rcode in (wire.NOERROR, wire.NXDOMAIN) else ERROR
            if not self.want & kind:
                return
        if not self.limit.take():
            self.stats.query_log_dropped += 1
            return
        duration = (self._stopwatch_ns() - started) / 1e9
        question = name_text(query, 12) if len(query) > 12 and query[5] else None
        if question is None:
            name, qtype = "-", "-"
        else:
            name, at = question
            number = (query[at] << 8) | query[at + 1] if at + 2 <= len(query) else -1
            qtype = _TYPE_TEXT.get(number, f"TYPE{number}") if number >= 0 else "-"
        host, port = peer[0], peer[1]  # the transports give ("", 0) when they do not know
        client = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
        transport = "tcp" if tcp else "udp"
        text = rcode_text(rcode)
        size = len(response)
        message = (f"{client} {transport} {name} {qtype} {text} "
                   f"ede={'-' if ede is None else ede} size={size} duration={duration:.6f}s")
        # Made and handed to the handlers directly: Logger.info would also walk the stack
        # for the caller's file and line, which nobody reads here.
        log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, message, (), None,
                                  extra={"query": {"client": host, "port": port,
                                                   "transport": transport, "name": name,
                                                   "type": qtype, "rcode": text, "ede": ede,
                                                   "size": size, "duration": duration}}))
