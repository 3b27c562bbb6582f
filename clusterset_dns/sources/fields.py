"""Checks of single fields that both kinds of object have (names, addresses, ports):
each turns what the API wrote into the model's form or raises :class:`InvalidObject`.
Kept apart from :mod:`convert`, which reads the objects, so that each stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from ipaddress import IPv4Address, ip_address
from socket import AF_INET, inet_pton
from typing import Any

from clusterset_dns.base import names
from clusterset_dns.zone.model import IP, Port

Warn = Callable[[str], None]


class InvalidObject(ValueError):
    """The object cannot be served at all; the message says why."""


def ignore(_: str) -> None:
    pass


def lower(text: str) -> str:
    """``text`` lower-cased, the same object when it already is: every key holds the
    name as the API wrote it, and a copy per object would be a string per object more."""
    lowered = text.lower()
    return text if lowered == text else lowered


# Port lists repeat across objects (every import of one kind of service): one tuple each.
# Bounded, since objects choose them: at most _SHARED_PORTS_CAP lists of at most
# SHARED_PORTS_MAX ports (a longer list, which the API allows by the tens of thousands,
# is neither shared nor remembered, so the tables never hold more than the zone does);
# starting over only costs the sharing.
_SHARED_PORTS_CAP = 4096
SHARED_PORTS_MAX = 16
_shared_ports: dict[tuple[Port, ...], tuple[Port, ...]] = {}


def shared(ports: tuple[Port, ...]) -> tuple[Port, ...]:
    if len(ports) > SHARED_PORTS_MAX:
        return ports
    found = _shared_ports.get(ports)
    if found is None:
        if len(_shared_ports) >= _SHARED_PORTS_CAP:
            _shared_ports.clear()
        _shared_ports[ports] = found = ports
    return found


def parse_ip(raw: Any) -> IP | None:
    """An address written as text; not a number (YAML ``yes`` or ``167772161``), not a
    scoped IPv6 address (``fe80::1%eth0`` means nothing to another host)."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    try:
        # A quarter of ip_address()'s time, for the common case (100,000 endpoint
        # addresses at start-up). inet_pton's IPv4 form is as strict as ipaddress's:
        # four decimal octets, no leading zeros; anything else takes ip_address().
        return IPv4Address(inet_pton(AF_INET, text))
    except (OSError, ValueError, UnicodeError):
        pass
    try:
        ip = ip_address(text)
    except ValueError:
        return None
    return None if getattr(ip, "scope_id", None) else ip


def dns_label(text: Any, what: str) -> str:
    """A field that becomes one label of a name (names.label's rule)."""
    if not isinstance(text, str):
        raise InvalidObject(f"{what} {text!r} is not a string")
    try:
        return names.label(text).decode("ascii")
    except names.InvalidName as exc:
        raise InvalidObject(f"{what}: {exc}") from None


# Port lists as written (each entry's port, protocol and name) to their checked tuple:
# most objects repeat one of a few, and checking an entry is a sixth of an import's
# conversion. Only lists that were checked whole and clean are kept, and only keys whose
# ports are ints (True == 1 and 1.0 == 1 would otherwise find a valid list). Bounded,
# since objects choose them; starting over only costs the checks.
_CHECKED_PORTS_CAP = 4096
_checked_ports: dict[tuple[tuple[int, Any, Any], ...], tuple[Port, ...]] = {}


def _port_key(raw: list[Any]) -> tuple[tuple[int, Any, Any], ...] | None:
    key = []
    for item in raw:
        if type(item) is not dict:
            return None
        number = item.get("port")
        if type(number) is not int:
            return None
        key.append((number, item.get("protocol"), item.get("name")))
    return tuple(key)


def ports(raw: Any, where: str, warn: Warn) -> tuple[Port, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidObject(f"{where} is not a list")
    key = _port_key(raw) if len(raw) <= SHARED_PORTS_MAX else None
    if key is not None:
        try:
            found = _checked_ports.get(key)
        except TypeError:  # a protocol or name that is a list or an object
            key = found = None
        if found is not None:
            return found
    checked = _check_ports(raw, where, warn)
    # clean when every entry became a port (each one that did not was warned about)
    if key is not None and len(checked) == len(raw):
        if len(_checked_ports) >= _CHECKED_PORTS_CAP:
            _checked_ports.clear()
        _checked_ports[key] = checked
    return checked


def _check_ports(raw: list[Any], where: str, warn: Warn) -> tuple[Port, ...]:
    ports: list[Port] = []
    for i, item in enumerate(raw):
        try:
            if not isinstance(item, Mapping):
                raise InvalidObject("not an object")
            number = item.get("port")
            if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
                raise InvalidObject(f"port {number!r} is not in 1..65535")
            protocol = item.get("protocol") or "TCP"
            if not isinstance(protocol, str) or protocol.upper() not in ("TCP", "UDP", "SCTP"):
                raise InvalidObject(f"protocol {protocol!r} is not TCP, UDP or SCTP")
            name = item.get("name") or ""
            name = dns_label(name, "port name") if name else ""
            ports.append(Port(name=name, protocol=protocol.lower(), port=number))
        except InvalidObject as exc:
            warn(f"{where}[{i}] skipped: {exc}")
    return shared(tuple(ports))
