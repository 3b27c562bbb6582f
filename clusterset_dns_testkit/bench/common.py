"""Constants of the benchmark: cores, the zone, loopback; its log."""

from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ZONE = "clusterset.local"
SERVER_CORE = "0"
SERVER_CORES_2 = "0-1"
CLIENT_CORE = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOOPBACK = "127.0.0.1"


class Skip(Exception):
    """A server column that cannot be measured here (reason printed)."""


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)

