"""A careless operator's client configuration: the server stops at once with exit
status 2 and one line that names the file and the problem (no traceback), instead of
waiting out --startup-timeout or dying with a stack dump."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterset_dns_testkit.dnsserver import ServerProcess

GOOD_SHAPE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""

CASES = [
    # (id, kubeconfig text or None for a missing file, extra flags, words the error names;
    # "" where the words are the YAML library's own)
    ("missing-file", None, (), "no such file"),
    ("broken-yaml", "clusters: [\n", (), ""),
    ("no-current-context", "apiVersion: v1\nkind: Config\n", (), "current-context"),
    ("unknown-context", GOOD_SHAPE, ("--context", "nosuch"), "nosuch"),
    ("not-a-mapping", "- just\n- a list\n", (), "kubeconfig"),
]


@pytest.mark.parametrize(("text", "extra", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_unusable_kubeconfig_stops_with_one_line(tmp_path: Path, text: str | None,
                                                 extra: tuple[str, ...], words: str) -> None:
    path = tmp_path / "kubeconfig"
    if text is not None:
        path.write_text(text)
    srv = ServerProcess("--kubeconfig", str(path), "--startup-timeout", "120", *extra).start()
    try:
        assert srv.proc is not None
        try:
            code = srv.proc.wait(timeout=60)  # well before --startup-timeout
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running with an unusable kubeconfig\n{srv.log_text()}")
        log = srv.log_text()
        assert code == 2, log
        errors = [line for line in log.splitlines() if " ERROR " in line]
        assert len(errors) == 1 and "cannot start: kubeconfig" in errors[0], log
        assert str(path) in errors[0] and words in errors[0], errors[0]
        assert errors[0].split(str(path), 1)[1].strip(" :"), errors[0]  # a problem is named
        assert "Traceback" not in log, log
    finally:
        srv.stop()
