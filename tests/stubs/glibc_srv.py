"""glibc's res_query() for SRV (through ctypes), for the stub-resolver tests:
``python3 glibc_srv.py NAME`` prints one "PRIORITY WEIGHT PORT TARGET." a line; exit 2
when the lookup fails. glibc retries a truncated answer over TCP itself."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import dns.message


def main() -> int:
    lib = ctypes.CDLL(ctypes.util.find_library("resolv") or "libresolv.so.2")
    buf = ctypes.create_string_buffer(65536)
    size = lib.res_query(sys.argv[1].encode(), 1, 33, buf, len(buf))  # class IN, type SRV
    if size < 0:
        print("res_query failed", file=sys.stderr)
        return 2
    for rrset in dns.message.from_wire(buf.raw[:size]).answer:
        for rdata in rrset:
            print(rdata.to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
