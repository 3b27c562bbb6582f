"""The manifest files under a path: a directory walk that reports what it could not list."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Walk:
    """The manifest files found, and the directories that could not be listed."""

    files: list[Path]
    failed: list[tuple[Path, OSError]]

    def covers(self, path: Path) -> bool:
        """Whether ``path`` lies under a directory that could not be listed (so its
        absence from ``files`` says nothing)."""
        return any(path.is_relative_to(d) for d, _ in self.failed)


def find_files(root: Path) -> Walk:
    """Every ``*.yaml``/``*.yml``/``*.json`` below ``root`` (or ``root`` itself when it is
    not a directory), skipping dot files and dot directories and not following
    symbolic links to directories. A directory that cannot be listed is reported,
    not skipped."""
    try:
        if not stat.S_ISDIR(os.stat(root).st_mode):
            return Walk([root], [])
    except (FileNotFoundError, NotADirectoryError):
        return Walk([], [])
    except OSError as exc:
        return Walk([], [(root, exc)])
    files: list[Path] = []
    failed: list[tuple[Path, OSError]] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            failed.append((directory, exc))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()  # follows a link, as os.walk classifies
                is_link = is_dir and entry.is_symlink()
            except OSError:
                is_dir = is_link = False
            if is_dir:
                if not is_link:
                    pending.append(Path(entry.path))
            elif entry.name.endswith(SUFFIXES):
                files.append(Path(entry.path))
    return Walk(sorted(files), failed)
