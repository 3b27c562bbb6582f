"""Constants of the comparison and its log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ZONE = "clusterset.local"
HOST = "127.0.0.1"
OBJECTS = REPO / "tests" / "conformance" / "objects"
API_OBJECT_PATHS = (OBJECTS / "00-namespaces.yaml", OBJECTS / "core", OBJECTS / "extended")
REPORT = REPO / "docs" / "coredns-comparison.md"
MCS_CRDS = "mcs-api-v0.5.0"
EDNS_PAYLOAD = 1232

JSONObj = dict[str, Any]


def log(msg: str) -> None:
    print(f"compare_coredns: {msg}", file=sys.stderr, flush=True)

