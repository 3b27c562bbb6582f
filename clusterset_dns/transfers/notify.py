"""NOTIFY (RFC 1996) to the secondaries named by ``--notify``.

:meth:`Notifier.changed` only sets a flag and wakes one task per target, so a
burst of updates costs one NOTIFY (of the newest serial) per target. Each is
retried, with back-off doubling up to ``MAX_BACKOFF`` plus jitter, until the
target acknowledges it, for at most ``ATTEMPTS`` tries; a newer serial
restarts the tries. Sent by the parent process only (workers hold the same
serial). Signed with the transfer TSIG key when there is one. Each carries the
zone's SOA record as it is when sent (RFC 1996 3.7), so that a secondary knows the
new serial at once (BIND logs one without it as "no serial").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tsig

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import HostPort

log = logging.getLogger(__name__)

TIMEOUT = 2.0  # seconds to wait for one acknowledgement
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 60.0
ATTEMPTS = 10  # about ten minutes of tries at most, then the next change tries again
# Seconds a change waits for the rest of its burst: none, the serial already steps at
# most once a tick (serials.TICKS), and a wait would only delay the secondaries.
COALESCE = 0.0


# The zone's SOA as it is now: (TTL, RDATA in wire form, names uncompressed).
Soa = Callable[[], tuple[int, bytes]]


class Notifier:
    def __init__(self, zone: str, targets: tuple[HostPort, ...], soa: Soa,
                 key: dns.tsig.Key | None, on_result: Callable[[str], None],
                 clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self.zone = dns.name.from_text(zone)
        self.targets = targets
        self.soa = soa
        self.key = key
        self.on_result = on_result  # "sent", "acknowledged", "failed"
        self._wake = [asyncio.Event() for _ in targets]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._follow(target, wake), name=f"notify-{target}")
                       for target, wake in zip(self.targets, self._wake, strict=True)]

    def changed(self) -> None:
        for wake in self._wake:
            wake.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def current(self) -> tuple[int, dns.rdata.Rdata]:
        """The zone's SOA now: (TTL, record data)."""
        ttl, rdata = self.soa()
        return ttl, dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.SOA, rdata, 0,
                                        len(rdata))

    def message(self, soa: tuple[int, dns.rdata.Rdata]) -> dns.message.Message:
        message = dns.message.make_query(self.zone, dns.rdatatype.SOA)
        message.flags = dns.flags.AA  # no RD; the opcode (kept in the flags) after this
        message.set_opcode(dns.opcode.NOTIFY)
        # RFC 1996 3.7: the zone's SOA in the answer section, its serial a hint; the
        # secondary still asks us for the SOA before it transfers.
        rrset = message.find_rrset(message.answer, self.zone, dns.rdataclass.IN,
                                   dns.rdatatype.SOA, create=True)
        rrset.add(soa[1], soa[0])
        if self.key is not None:
            message.use_tsig({self.key.name: self.key}, keyname=self.key.name)
        return message

    async def _follow(self, target: HostPort, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            await self.clock.sleep(COALESCE)
            wake.clear()
            soa = self.current()
            serial = soa[1].serial  # type: ignore[attr-defined]
            backoff = FIRST_BACKOFF
            for _attempt in range(ATTEMPTS):
                if await self._send(target, soa, serial):
                    break
                # Jitter: secondaries restarted together are not all retried at once.
                if await self.clock.wait(wake, self.clock.jitter(backoff, 0.2)):
                    break  # a newer serial: start over with it
                backoff = min(backoff * 2, MAX_BACKOFF)
            else:
                self.on_result("failed")
                log.warning("NOTIFY of serial %d to %s:%d: no acknowledgement after %d tries",
                            serial, *target, ATTEMPTS)

    async def _send(self, target: HostPort, soa: tuple[int, dns.rdata.Rdata], serial: int
                    ) -> bool:
        import dns.asyncquery  # not at import: it pulls in the async backends

        host, port = target
        self.on_result("sent")
        try:
            reply = await self.clock.within(
                dns.asyncquery.udp(self.message(soa), host, port=port), TIMEOUT)
        except TimeoutError:
            log.info("NOTIFY of serial %d to %s:%d: no answer in %gs", serial, host, port,
                     TIMEOUT)
            return False
        except (dns.exception.DNSException, OSError) as exc:
            log.info("NOTIFY of serial %d to %s:%d: %s", serial, host, port, exc or "timeout")
            return False
        if reply.rcode() != dns.rcode.NOERROR or reply.opcode() != dns.opcode.NOTIFY:
            log.info("NOTIFY of serial %d to %s:%d answered %s", serial, host, port,
                     dns.rcode.to_text(reply.rcode()))
            return False
        self.on_result("acknowledged")
        log.info("NOTIFY of serial %d acknowledged by %s:%d", serial, host, port)
        return True
