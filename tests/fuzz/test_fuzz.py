"""The fuzz targets, bounded for CI: 100,000 inputs each, from the seed corpus
(real queries), in a subprocess (libFuzzer owns its process). Longer runs: see
docs/testing.md, "Fuzzing"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RUNS = 100_000


@pytest.mark.timeout(900)
@pytest.mark.parametrize("target", ["fuzz_handler", "fuzz_tcp"])
def test_fuzz(tmp_path: Path, target: str) -> None:
    corpus = tmp_path / "corpus"
    cmd = [sys.executable, str(HERE / f"{target}.py"), f"-runs={RUNS}", "-seed=1",
           f"-artifact_prefix={tmp_path}/", "-print_final_stats=1", str(corpus)]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=840)
    log = done.stdout + done.stderr
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("crash-"))
    assert done.returncode == 0 and not crashes, f"{target}: {crashes}\n{log[-6000:]}"
    assert f"Done {RUNS} runs" in log, log[-3000:]
    assert len(list(corpus.iterdir())) > 1  # it started from the seeds
