"""What the benchmark commands share: their options (where results go, the checkouts
measured, the API data set) and how a result is written and announced."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterset_dns_testkit.bench import results as bench_results
from clusterset_dns_testkit.bench.common import REPO

# The data set of the published API figures (kube_scale, xfr_scale, startup): another one is
# a smoke run of the pipeline, which the page leaves out.
STANDARD_DATASET = (10000, 1000, 100)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A command's parser, described by its docstring's first paragraph, with ``--results``."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    p.add_argument("--results", type=Path, default=bench_results.RESULTS,
                   help="where the result is written (bench/results)")
    return p


def add_checkouts(p: argparse.ArgumentParser, baseline: bool = True) -> None:
    """``--repo`` (whose clusterset_dns is started) and ``--baseline`` (measured too)."""
    p.add_argument("--repo", type=Path, default=REPO,
                   help="checkout whose clusterset_dns is started (to compare)")
    if baseline:
        p.add_argument("--baseline", type=Path,
                       help="another checkout measured in the same run (e.g. the code before)")


def add_dataset(p: argparse.ArgumentParser, updates: bool = True) -> None:
    """The API data set (apiload.load) and, with ``updates``, the writes measured on it."""
    imports, headless, endpoints = STANDARD_DATASET
    p.add_argument("--imports", type=int, default=imports)
    p.add_argument("--headless", type=int, default=headless)
    p.add_argument("--endpoints", type=int, default=endpoints)
    if updates:
        p.add_argument("--updates", type=int, default=1000)
        p.add_argument("--rate", type=float, default=100.0)


def smaller(args: argparse.Namespace) -> bool:
    """Whether the data set is not the published one (the result is marked quick)."""
    return (args.imports, args.headless, args.endpoints) != STANDARD_DATASET


def add_out(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, help="also write the result's JSON here")


def checkouts(args: argparse.Namespace, data: dict[str, Any],
              measure: Callable[[Path], Any]) -> None:
    """``data["ours"]`` measured on ``--repo``; with ``--baseline``, ``data["baseline"]``
    and the baseline's version."""
    print(f"this checkout ({args.repo}):", flush=True)
    data["ours"] = measure(args.repo)
    print("  ->", data["ours"], flush=True)
    if args.baseline is not None:
        print(f"baseline ({args.baseline}):", flush=True)
        data["baseline"] = measure(args.baseline)
        data["baseline_version"] = bench_results.git_version(args.baseline)
        print("  ->", data["baseline"], flush=True)


def publish(args: argparse.Namespace, result: dict[str, Any]) -> Path | None:
    """Writes ``result`` under ``--results`` and says so; a command with ``--out`` also
    prints its JSON (and writes it there when given). A run of another checkout
    (``--repo``) writes nothing: the results are this checkout's."""
    repo: Path = getattr(args, "repo", REPO)
    if repo.resolve() != REPO:
        print("another checkout (--repo): no result written", flush=True)
        return None
    path = bench_results.write(result, args.results)
    print(f"wrote {path}; regenerate the page with python bench/report.py", flush=True)
    if hasattr(args, "out"):
        text = json.dumps(result, indent=2)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        print(text)
    return path
