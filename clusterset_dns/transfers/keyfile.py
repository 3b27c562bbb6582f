"""The TSIG key file of --transfer-tsig-key: ``[hmac-sha256:]NAME:BASE64SECRET``.

Read once at start; whatever makes it unusable (missing, not a regular file, not
UTF-8, not that form, a bad name or base64, another algorithm, an empty or short
secret, changed while it was read) is a :class:`ConfigError` of one line, so the
server exits 2 with that line and no traceback. An empty secret is what a templated
Secret with an unset value gives: HMAC with it is no authentication at all.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path

import dns.exception
import dns.name
import dns.tsig

from clusterset_dns.base.config import ConfigError

MAX_BYTES = 4096  # a key line is under 200 bytes; more is not a key file
MIN_SECRET = 16  # bytes: below this a secret is refused (guessable offline from one MAC)
HASH_BYTES = 32  # HMAC-SHA256's output: a shorter secret is weaker than the MAC (RFC 2104 3)


def _read(path: Path) -> bytes:
    # Non-blocking and checked as a regular file before reading: a FIFO or a device
    # must not hang or flood the start.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise ConfigError("not a regular file")
        data = b""
        while len(data) <= MAX_BYTES:  # a read may return less than asked: until the end
            more = os.read(fd, MAX_BYTES + 1 - len(data))
            if not more:
                break
            data += more
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ConfigError(f"larger than {MAX_BYTES} bytes: not a key file")
    # A file rewritten in place while it was read (echo ... > key) can give a prefix of
    # the new line, which may still parse as a shorter, wrong key: what was read must be
    # the whole file, and the file the same as before the read.
    if (len(data), before.st_mtime_ns, before.st_ctime_ns) != (
            after.st_size, after.st_mtime_ns, after.st_ctime_ns):
        raise ConfigError("the file changed while it was read; start again once it is written")
    return data


def _parse(data: bytes) -> dns.tsig.Key:
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text") from None
    parts = text.split(":")
    if len(parts) == 2:
        parts.insert(0, "hmac-sha256")
    if len(parts) != 3 or parts[0].strip().lower() != "hmac-sha256":
        raise ConfigError("want [hmac-sha256:]NAME:BASE64SECRET on one line "
                          "(only HMAC-SHA256 is accepted)")
    name = parts[1].strip()
    if not name:
        raise ConfigError("the key name is empty")
    try:
        secret = base64.b64decode(parts[2].strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError("the secret is not base64") from None
    if not secret:
        raise ConfigError("the secret is empty (an unset value in a templated Secret?)")
    if len(secret) < MIN_SECRET:
        raise ConfigError(f"the secret is {len(secret)} bytes; at least {MIN_SECRET} are "
                          f"needed ({HASH_BYTES} recommended: openssl rand -base64 {HASH_BYTES})")
    try:
        return dns.tsig.Key(dns.name.from_text(name), secret, dns.tsig.HMAC_SHA256)
    except (ValueError, dns.exception.DNSException) as exc:
        raise ConfigError(f"the key name {name!r} is not a domain name: {exc}") from None


def load_key(path: Path) -> dns.tsig.Key:
    """The key in the file at ``path``; ConfigError (one line, naming the flag and the
    file) when it cannot be used."""
    try:
        return _parse(_read(path))
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    except ConfigError as exc:
        why = str(exc)
    raise ConfigError(" ".join(f"--transfer-tsig-key {path}: {why}".split()))


def weakness(key: dns.tsig.Key) -> str | None:
    """Why a usable key is weak, for a warning at start; None when it is not."""
    size = len(key.secret)
    if size < HASH_BYTES:
        return (f"the TSIG key's secret is {size} bytes, shorter than HMAC-SHA256's "
                f"{HASH_BYTES}: use a longer one (openssl rand -base64 {HASH_BYTES})")
    return None
