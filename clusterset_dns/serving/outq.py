"""What the kernel still holds to send on a TCP socket (the idle check's view of it).

A connection's progress is its client taking bytes. asyncio shows only its own write
buffer, which does not move while the kernel's send queue (often hundreds of KiB with
the client's receive buffer) is the part draining; the kernel's count of bytes not yet
acknowledged (SIOCOUTQ) moves as the client reads, and stays put while it does not.
"""

from __future__ import annotations

import fcntl
import struct
import termios
from typing import Any, Protocol

_SIOCOUTQ = termios.TIOCOUTQ  # the same request number on a socket (Linux)
_INT = struct.Struct("i")


def kernel_unsent(sock: Any) -> int:
    """Bytes the kernel holds for ``sock`` that the peer has not acknowledged; 0 when
    there is no socket or the system cannot tell (the idle check then sees asyncio's
    buffer only, as before)."""
    if sock is None:
        return 0
    try:
        return int(_INT.unpack(fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0"))[0])
    except (OSError, ValueError, AttributeError):
        return 0


class Transport(Protocol):
    def get_write_buffer_size(self) -> int: ...
    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


def unsent_bytes(transport: Transport) -> int:
    """Bytes written to ``transport`` that its client has not taken yet: asyncio's
    write buffer and the kernel's unacknowledged queue."""
    return transport.get_write_buffer_size() + kernel_unsent(transport.get_extra_info("socket"))
