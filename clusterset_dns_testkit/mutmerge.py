"""scripts/mutate's two ways of adding to a file's recorded entry without running the whole
file again (a fresh checkout has no cached verdicts, and any change to the server drops
them all):

- ``--rejudge``: the entry's survivors that are not judged equivalent are run again against
  today's code and tests. One now killed counts as killed only if its change still reads
  as recorded: a mutant of a function that changed since may be another change under the
  same name, and then it stays listed (run the file whole to judge it).
- ``--add``: a run of functions the by-function entry does not cover yet is added to it;
  refused when one of its mutants was selected by an earlier pattern (its verdict would
  be counted twice).

The entry keeps where each part came from (``parts``, ``rejudged``), so the table can say
which commits its figures stand on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# the verdict of a mutant that the tests noticed (mutation.KILLED; kept apart to keep this
# module free of the command's imports)
KILLED = "killed"
LOG = "log"


def unjudged(entry: Mapping[str, Any], equivalent: Sequence[Mapping[str, Any]]) -> list[str]:
    """The mutmut names (without the module) of the entry's survivors that are neither
    judged equivalent nor inside a log call or HELP text."""
    same = {e["mutation"] for e in equivalent}
    return [s["mutant"] for s in entry["survivors"]
            if s["kind"] != LOG and s["mutation"] not in same]


def rejudged(entry: Mapping[str, Any], outcome: Mapping[str, tuple[str, str]],
             stamp: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The entry after its survivors named in ``outcome`` (name: (verdict, change as it
    reads now)) were run again; and the names killed whose change no longer reads as
    recorded (left listed). ``stamp``: commit, date and tests of the run."""
    kept: list[dict[str, Any]] = []
    killed, changed = 0, []
    for survivor in entry["survivors"]:
        found = outcome.get(survivor["mutant"])
        if found is not None and found[0] == KILLED:
            if found[1] == survivor["mutation"]:
                killed += 1
                continue
            changed.append(survivor["mutant"])
        kept.append(dict(survivor))
    new = dict(entry)
    new["killed"] = entry["killed"] + killed
    new["survivors"] = kept
    new["rejudged"] = [*entry.get("rejudged", ()),
                       {**stamp, "mutants": len(outcome), "killed": killed}]
    return new, changed


def overlap(names: Sequence[str], earlier: Sequence[str], new: Sequence[str],
            selected: Any) -> list[str]:
    """The mutants (full names) both an earlier pattern of the entry and a new one select."""
    return [n for n in names if selected(n, earlier) and selected(n, new)]


def added(entry: Mapping[str, Any], part: Mapping[str, Any], patterns: Sequence[str],
          whole: bool, finished: bool, stamp: Mapping[str, Any]) -> dict[str, Any]:
    """The by-function entry with ``part`` (mutants, killed, not_run, survivors of a run of
    ``patterns``) added; ``whole``: the patterns now select every mutant of the file."""
    if not entry.get("only"):
        raise ValueError("the recorded entry is of the whole file: nothing to add to")
    parts = list(entry.get("parts") or [{"commit": entry["commit"], "date": entry["date"],
                                         "only": list(entry["only"]),
                                         "tests": list(entry["tests"])}])
    tests = list(stamp["tests"])
    survivors = sorted([*entry["survivors"], *part["survivors"]],
                       key=lambda s: (s["line"], s["mutant"]))
    new = dict(entry)
    new.update({
        "commit": stamp["commit"], "date": stamp["date"],
        "tests": list(dict.fromkeys([*entry["tests"], *tests])),
        "finished": bool(entry["finished"]) and finished and part["not_run"] == 0,
        "only": [] if whole else sorted({*entry["only"], *patterns}),
        "mutants": entry["mutants"] + part["mutants"],
        "killed": entry["killed"] + part["killed"],
        "not_run": entry["not_run"] + part["not_run"],
        "survivors": survivors,
        "parts": [*parts, {"commit": stamp["commit"], "date": stamp["date"],
                           "only": list(patterns), "tests": tests}]})
    return new


def provenance(entry: Mapping[str, Any]) -> str:
    """What the table says of an entry put together from several runs."""
    notes = []
    if entry.get("parts"):
        notes.append("by parts at " + ", ".join(p["commit"] for p in entry["parts"]))
    if entry.get("rejudged"):
        notes.append("survivors run again at " + ", ".join(r["commit"]
                                                           for r in entry["rejudged"]))
    return "; ".join(notes)
