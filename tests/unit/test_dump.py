"""``clusterset-dns dump`` on a path it cannot read: exit status 1 and nothing printed
(a partial zone would pass for the whole one). Written for the survivors of
scripts/mutate on process/dump.py; dump's flags are held by tests/unit/test_offline.py."""

from __future__ import annotations

import io
from pathlib import Path

from clusterset_dns.base.config import Config
from clusterset_dns.process import dump


def test_a_path_that_cannot_be_read_prints_nothing(tmp_path: Path) -> None:
    out = io.StringIO()
    assert dump.dump(Config(manifests=tmp_path / "absent"), out) == 1
    assert out.getvalue() == ""
