"""Runs INSIDE the client pod (python3 + dnspython from Debian), fed on stdin by
``kubectl exec -i POD -- python3 - COMMAND ...``. Prints one JSON object.

  load SERVER NAME IP RATE SECONDS   UDP queries at RATE/s for SECONDS, each from a new
                                     socket (a new conntrack flow, like a stub resolver);
                                     an answer is correct when it is NOERROR with exactly
                                     the A record IP; no answer in 2 s = lost (no retries)
  until SERVER NAME TYPE WANT SECS   ask every 0.1 s until the answer's rdata set is WANT
                                     (comma-separated, or NXDOMAIN); prints the wall-clock
                                     time (shared with the host) of the first match
  scrape URL                         GET URL, print the body
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time
import urllib.request

import dns.message
import dns.rcode
import dns.rdatatype


def load(server: str, name: str, ip: str, rate: float, seconds: float) -> dict[str, object]:
    sel = selectors.DefaultSelector()
    pending: dict[socket.socket, tuple[float, int]] = {}
    sent = ok = wrong = lost = 0
    samples: list[str] = []
    lost_at: list[float] = []
    start = time.monotonic()
    total = int(rate * seconds)
    while sent < total or pending:
        now = time.monotonic()
        while sent < total and now >= start + sent / rate:
            q = dns.message.make_query(name, "A")
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.sendto(q.to_wire(), (server, 53))
            pending[s] = (now, q.id)
            sel.register(s, selectors.EVENT_READ)
            sent += 1
        for key, _ in sel.select(timeout=0.002):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(4096)
            except OSError as e:  # e.g. ICMP port unreachable: an answer that is not one
                data = b""
                samples.append(f"recv: {e}")
            _, qid = pending.pop(s)
            sel.unregister(s)
            s.close()
            try:
                r = dns.message.from_wire(data)
                got = sorted(str(rd) for rrset in r.answer for rd in rrset)
                good = r.id == qid and r.rcode() == dns.rcode.NOERROR and got == [ip]
            except Exception as e:
                good, got = False, [repr(e)]
            if good:
                ok += 1
            else:
                wrong += 1
                if len(samples) < 10:
                    samples.append(f"{got}")
        now = time.monotonic()
        for s, (t, _) in list(pending.items()):
            if now - t > 2.0:
                pending.pop(s)
                sel.unregister(s)
                s.close()
                lost += 1
                lost_at.append(round(t - start, 2))
    return {"sent": sent, "ok": ok, "wrong": wrong, "lost": lost, "lost_at": lost_at[:50],
            "samples": samples, "seconds": round(time.monotonic() - start, 2)}


def until(server: str, name: str, rdtype: str, want: str, seconds: float) -> dict[str, object]:
    wanted = "NXDOMAIN" if want == "NXDOMAIN" else sorted(want.split(","))
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        q = dns.message.make_query(name, rdtype)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1.0)
        try:
            s.sendto(q.to_wire(), (server, 53))
            r = dns.message.from_wire(s.recv(4096))
            if r.rcode() == dns.rcode.NXDOMAIN:
                last = "NXDOMAIN"
            else:
                last = sorted(str(rd) for rrset in r.answer for rd in rrset
                              if rrset.rdtype == dns.rdatatype.from_text(rdtype))
        except OSError as e:
            last = f"error: {e}"
        finally:
            s.close()
        if last == wanted:
            return {"matched": True, "at": time.time()}
        time.sleep(0.1)
    return {"matched": False, "last": last}


def main(argv: list[str]) -> None:
    cmd = argv[0]
    if cmd == "load":
        out = load(argv[1], argv[2], argv[3], float(argv[4]), float(argv[5]))
    elif cmd == "until":
        out = until(argv[1], argv[2], argv[3], argv[4], float(argv[5]))
    elif cmd == "scrape":
        with urllib.request.urlopen(argv[1], timeout=10) as r:
            sys.stdout.write(r.read().decode())
        return
    else:
        raise SystemExit(f"unknown command {cmd}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
