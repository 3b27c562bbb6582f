"""--transfer-tsig-key: every file that cannot be used is one line and exit 2; an empty
or short secret is refused, one shorter than the hash warned about."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clusterset_dns.base.config import ConfigError
from clusterset_dns.transfers import keyfile

REPO = Path(__file__).resolve().parents[2]


def b64(size: int) -> str:
    return base64.b64encode(bytes(range(65, 65 + size))).decode()


@pytest.mark.parametrize(("text", "name"), [
    (f"xfr-key:{b64(32)}\n", "xfr-key."),
    (f"hmac-sha256:xfr-key:{b64(32)}", "xfr-key."),
    (f"HMAC-SHA256:Other.Key.:{b64(16)}\r\n", "Other.Key."),  # 16 bytes: the least
])
def test_good_key_files(tmp_path: Path, text: str, name: str) -> None:
    path = tmp_path / "key"
    path.write_text(text)
    key = keyfile.load_key(path)
    assert key.name.to_text() == name and key.algorithm.to_text() == "hmac-sha256."


BAD = [
    # (what, the file's bytes, a word the one line says)
    ("empty secret", b"xfr-key:\n", "empty"),
    ("empty secret with algorithm", b"hmac-sha256:xfr-key:", "empty"),
    ("3-byte secret", f"xfr-key:{b64(3)}".encode(), "3 bytes"),
    ("15-byte secret", f"xfr-key:{b64(15)}".encode(), "15 bytes"),
    ("not base64", b"xfr-key:not*base64", "base64"),
    # a stray character in a good secret: lenient base64 would drop it and load the key
    ("a stray character", f"xfr-key:{b64(32)[:8]}*{b64(32)[8:]}".encode(), "base64"),
    ("not UTF-8", b"xfr-key:\xff\xfe\x00secret", "UTF-8"),
    ("another algorithm", f"hmac-md5:xfr-key:{b64(32)}".encode(), "HMAC-SHA256"),
    ("no colon", b"just-a-secret", "NAME:BASE64SECRET"),
    ("empty file", b"", "NAME:BASE64SECRET"),
    ("empty name", f":{b64(32)}".encode(), "name"),
    ("bad name", f"a..b:{b64(32)}".encode(), "not a domain name"),
    ("too large", b"x" * 5000, "larger than"),
    ("two lines", f"xfr-key:{b64(32)}\nother:{b64(32)}\n".encode(), "NAME:BASE64SECRET"),
]


@pytest.mark.parametrize(("what", "data", "word"), BAD, ids=[b[0] for b in BAD])
def test_unusable_key_files_are_one_line(tmp_path: Path, what: str, data: bytes,
                                         word: str) -> None:
    path = tmp_path / "key"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        keyfile.load_key(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"--transfer-tsig-key {path}: ")
    assert word in message


def test_missing_directory_and_fifo_are_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened for reading, it would wait for a writer forever
    for path, word in ((tmp_path / "missing", "No such file"), (tmp_path, "not a regular"),
                       (fifo, "not a regular")):
        with pytest.raises(ConfigError, match=word) as caught:
            keyfile.load_key(path)
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("size", "weak"), [(16, True), (31, True), (32, False), (64, False)])
def test_a_secret_shorter_than_the_hash_is_warned_about(tmp_path: Path, size: int,
                                                        weak: bool) -> None:
    path = tmp_path / "key"
    path.write_text(f"xfr-key:{b64(size)}")
    warning = keyfile.weakness(keyfile.load_key(path))
    assert (warning is not None) == weak
    if weak:
        assert f"{size} bytes" in str(warning) and "32" in str(warning)


def serve_argv(key: Path) -> list[str]:
    return [sys.executable, "-m", "clusterset_dns", "serve", "--manifests",
            str(REPO / "examples"), "--listen", "127.0.0.1:0", "--health-listen", "off",
            "--ready-listen", "off", "--metrics-listen", "off", "--allow-transfer",
            "127.0.0.1", "--transfer-tsig-key", str(key)]


def test_links_to_devices_are_refused_unread(tmp_path: Path) -> None:
    """A link to /dev/zero or /dev/urandom (an endless file): refused as not a regular
    file, whatever it would give."""
    for device in ("/dev/zero", "/dev/urandom"):
        link = tmp_path / Path(device).name
        link.symlink_to(device)
        with pytest.raises(ConfigError, match="not a regular file") as caught:
            keyfile.load_key(link)
        assert "\n" not in str(caught.value)


def test_the_largest_file_is_read_one_byte_more_is_refused(tmp_path: Path) -> None:
    """A key line padded with blanks to exactly MAX_BYTES loads; one byte more is refused."""
    line = f"xfr-key:{b64(32)}".encode()
    path = tmp_path / "key"
    path.write_bytes(line + b" " * (keyfile.MAX_BYTES - len(line)))
    assert keyfile.load_key(path).name.to_text() == "xfr-key."
    path.write_bytes(line + b" " * (keyfile.MAX_BYTES + 1 - len(line)))
    with pytest.raises(ConfigError, match=f"larger than {keyfile.MAX_BYTES} bytes"):
        keyfile.load_key(path)


def test_a_file_written_while_it_is_read_is_refused(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A file rewritten in place as the server reads it (``echo ... > key``): the read
    finds the new line half written (its secret cut to 24 base64 characters, still a
    valid 18-byte secret), the writer finishes just after. Before, that other, shorter
    key was loaded without a word; now the file is refused as having changed."""
    path = tmp_path / "key"
    path.write_text(f"old-key:{b64(32)}\n")
    new = f"xfr-key:{b64(32)}\n".encode()
    cut = len("xfr-key:") + 24
    real_read = os.read

    def torn_read(fd: int, size: int) -> bytes:
        os.truncate(path, 0)
        with open(path, "r+b") as out:
            out.write(new[:cut])
        data = real_read(fd, size)
        with open(path, "ab") as out:
            out.write(new[cut:])
        return data

    monkeypatch.setattr(keyfile.os, "read", torn_read)
    with pytest.raises(ConfigError, match="changed while it was read") as caught:
        keyfile.load_key(path)
    assert str(caught.value) == (f"--transfer-tsig-key {path}: the file changed while it "
                                 "was read; start again once it is written")
    monkeypatch.setattr(keyfile.os, "read", real_read)
    assert len(keyfile.load_key(path).secret) == 32


def serve(key: Path) -> subprocess.CompletedProcess[str]:
    """The real command line, stopped by its own start-up check (or by the timeout)."""
    return subprocess.run(serve_argv(key), capture_output=True, text=True, timeout=60,
                          cwd=REPO, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("what", "data", "word"),
                         [BAD[0], BAD[2], BAD[5]], ids=["empty", "3-byte", "not-utf8"])
def test_the_cli_exits_2_with_one_line(tmp_path: Path, what: str, data: bytes,
                                       word: str) -> None:
    """Before: an empty or 3-byte secret started the server (an AXFR signed with the
    empty key got the zone); a file not in UTF-8 exited 1 with a traceback."""
    path = tmp_path / "key"
    path.write_bytes(data)
    done = serve(path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in done.stderr, lines


def test_a_weak_key_starts_with_a_warning(tmp_path: Path) -> None:
    """20 bytes: served (at least 16), with one warning line at start."""
    path = tmp_path / "key"
    path.write_text(f"xfr-key:{b64(20)}")
    process = subprocess.Popen(
        [*serve_argv(path)], stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    killer = threading.Timer(60, process.kill)  # a start that never comes ends the reads
    killer.start()
    try:
        assert process.stderr is not None
        lines = []
        for _ in range(50):  # the warning comes before the first answer; bounded anyway
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "serving DNS on" in line:
                break
        assert process.poll() is None, lines  # still running: the key is usable
        warned = [line for line in lines if "WARNING" in line and "20 bytes" in line]
        assert len(warned) == 1, lines
    finally:
        killer.cancel()
        process.terminate()
        process.wait(30)


# what each refusal of BAD says after "--transfer-tsig-key PATH: ", whole
WHY = {
    "empty secret": "the secret is empty (an unset value in a templated Secret?)",
    "3-byte secret": "the secret is 3 bytes; at least 16 are needed (32 recommended: "
                     "openssl rand -base64 32)",
    "15-byte secret": "the secret is 15 bytes; at least 16 are needed (32 recommended: "
                      "openssl rand -base64 32)",
    "not base64": "the secret is not base64",
    "not UTF-8": "not UTF-8 text",
    "another algorithm": "want [hmac-sha256:]NAME:BASE64SECRET on one line (only "
                         "HMAC-SHA256 is accepted)",
    "empty name": "the key name is empty",
    "bad name": "the key name 'a..b' is not a domain name: A DNS label is empty.",
    "too large": "larger than 4096 bytes: not a key file",
}


@pytest.mark.parametrize(("what", "why"), WHY.items(), ids=list(WHY))
def test_each_refusal_says_exactly_why(tmp_path: Path, what: str, why: str) -> None:
    data = next(b[1] for b in BAD if b[0] == what)
    path = tmp_path / "key"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        keyfile.load_key(path)
    assert str(caught.value) == f"--transfer-tsig-key {path}: {why}"


def test_a_file_that_is_not_regular_says_so_exactly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        keyfile.load_key(tmp_path)
    assert str(caught.value) == f"--transfer-tsig-key {tmp_path}: not a regular file"


def test_blanks_around_each_part_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(f" hmac-sha256 : xfr-key : {b64(32)} \n")
    key = keyfile.load_key(path)
    assert key.name.to_text() == "xfr-key." and len(key.secret) == 32


def test_the_weakness_warning_says_exactly_why(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(f"xfr-key:{b64(20)}")
    assert keyfile.weakness(keyfile.load_key(path)) == (
        "the TSIG key's secret is 20 bytes, shorter than HMAC-SHA256's 32: use a longer one "
        "(openssl rand -base64 32)")


class Trickle:
    """os.read as a slow file system may do it: at most ``chunk`` bytes a call, however
    many are asked; counts what it hands out."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk
        self.given = 0
        self.real = os.read

    def __call__(self, fd: int, size: int) -> bytes:
        data = self.real(fd, min(size, self.chunk))
        self.given += len(data)
        return data


@pytest.mark.parametrize("chunk", [1000, 4096])
def test_short_reads_are_joined_and_bounded(tmp_path: Path, chunk: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A read may return less than asked: the pieces make the whole key; the largest file
    still loads, one byte more is still "larger", and a big file is read no further
    than MAX_BYTES + 1."""
    line = f"xfr-key:{b64(32)}".encode()
    path = tmp_path / "key"
    trickle = Trickle(chunk)
    monkeypatch.setattr(keyfile.os, "read", trickle)
    path.write_bytes(line + b" " * (keyfile.MAX_BYTES - len(line)))
    assert len(keyfile.load_key(path).secret) == 32
    for size in (keyfile.MAX_BYTES + 1, 3 * keyfile.MAX_BYTES):
        path.write_bytes(line + b" " * (size - len(line)))
        trickle.given = 0
        with pytest.raises(ConfigError) as caught:
            keyfile.load_key(path)
        assert str(caught.value) == (f"--transfer-tsig-key {path}: larger than "
                                     f"{keyfile.MAX_BYTES} bytes: not a key file")
        assert trickle.given == keyfile.MAX_BYTES + 1


def test_an_error_without_a_text_is_named_by_its_type(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> int:
        raise PermissionError  # no errno, no text

    monkeypatch.setattr(keyfile.os, "open", refuse)
    with pytest.raises(ConfigError) as caught:
        keyfile.load_key(tmp_path / "key")
    assert str(caught.value) == f"--transfer-tsig-key {tmp_path / 'key'}: PermissionError"
