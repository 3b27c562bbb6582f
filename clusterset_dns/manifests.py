"""The manifest-file source: YAML/JSON files or a directory of them, re-read on change.

Each file's objects are remembered separately, so a file that stops parsing
keeps the objects it gave before (the error names the file) while every
other file goes on being served. Synced = the path was found and read once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clusterset_dns import convert
from clusterset_dns.cache import Op, ReplaceImports, ReplaceSlices, SetSynced
from clusterset_dns.model import EndpointSlice, ObjectKey, ServiceImport

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml", ".json")
Signature = tuple[int, int, int]  # mtime_ns, size, inode
Invalid = Callable[[str], None]  # called with the kind of a skipped object


@dataclass(slots=True)
class FileObjects:
    signature: Signature
    imports: dict[ObjectKey, ServiceImport] = field(default_factory=dict)
    slices: dict[ObjectKey, EndpointSlice] = field(default_factory=dict)


def find_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    found: list[Path] = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(Path(root, f) for f in sorted(files)
                     if f.endswith(SUFFIXES) and not f.startswith("."))
    return found


def _documents(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def _objects(docs: list[Any]) -> Iterator[Any]:
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list) and \
                str(doc.get("kind", "")).endswith("List"):
            yield from _objects(doc["items"])
        else:
            yield doc


def read_file(path: Path, signature: Signature, groups: frozenset[str],
              namespaces: frozenset[str], invalid: Invalid) -> FileObjects:
    """Raises OSError / ValueError / yaml.YAMLError when the file as a whole is broken."""
    result = FileObjects(signature)
    for obj in _objects(_documents(path)):
        if not isinstance(obj, Mapping):
            log.warning("%s: a document is not an object, skipped", path)
            continue
        what = convert.describe(obj)

        def warn(message: str, what: str = what) -> None:
            log.warning("%s: %s: %s", path, what, message)

        try:
            if convert.is_service_import(obj, groups):
                imp = convert.service_import(obj, warn)
                if not namespaces or imp.namespace in namespaces:
                    result.imports[(imp.namespace, imp.name)] = imp
            elif convert.is_endpoint_slice(obj):
                piece = convert.endpoint_slice(obj, warn)
                if piece is not None and (not namespaces or piece.namespace in namespaces):
                    result.slices[(piece.namespace, piece.name)] = piece
        except convert.InvalidObject as exc:
            log.warning("%s: %s skipped: %s", path, what, exc)
            invalid(convert.kind_of(obj))
    return result


class ManifestSource:
    def __init__(self, path: Path, apply: Callable[[list[Op]], None], poll_interval: float,
                 groups: frozenset[str] = frozenset({convert.GROUP}),
                 namespaces: frozenset[str] = frozenset(),
                 invalid: Invalid = lambda kind: None) -> None:
        self.path = path
        self.apply = apply
        self.poll_interval = poll_interval
        self.groups = groups
        self.namespaces = namespaces
        self.invalid = invalid
        self.files: dict[Path, FileObjects] = {}
        self.synced = False
        self.errors = 0

    def scan(self) -> bool:
        """Re-reads what changed and applies it; True when anything changed."""
        ops = self.collect()
        if ops:
            self.apply(ops)
        return bool(ops)

    def pending(self) -> bool:
        """Whether :meth:`collect` has anything to do: a walk and a stat per file, no
        reading. Cheap enough for the event loop, which keeps the thread for parsing
        only (a polling thread would take the GIL from the DNS path every poll)."""
        if not self.path.exists():
            return not self.synced and not self.errors
        seen = 0
        for path in find_files(self.path):
            seen += 1
            old = self.files.get(path)
            try:
                st = path.stat()
            except OSError:
                return True
            if old is None or old.signature != (st.st_mtime_ns, st.st_size, st.st_ino):
                return True
        return seen != len(self.files) or not self.synced

    def collect(self) -> list[Op]:
        """Re-reads what changed; the ops that bring the cache up to date (may be empty).

        Touches only this object and the file system, so it can run in a thread."""
        if not self.path.exists():
            if not self.synced and not self.errors:
                self.errors += 1
                log.warning("%s does not exist (yet); answering SERVFAIL for unknown names",
                            self.path)
            return []
        changed = False
        seen: set[Path] = set()
        for path in find_files(self.path):
            seen.add(path)
            try:
                st = path.stat()
            except OSError:
                continue  # removed between the walk and the stat
            signature = (st.st_mtime_ns, st.st_size, st.st_ino)
            old = self.files.get(path)
            if old is not None and old.signature == signature:
                continue
            try:
                self.files[path] = read_file(path, signature, self.groups, self.namespaces,
                                             self.invalid)
                log.info("%s: %d ServiceImports, %d EndpointSlices", path,
                         len(self.files[path].imports), len(self.files[path].slices))
            except (OSError, ValueError, yaml.YAMLError) as exc:
                self.errors += 1
                log.error("%s: cannot be read, keeping its %s objects: %s", path,
                          "previous" if old else "(no)", str(exc).replace("\n", " "))
                if old is not None:
                    old.signature = signature  # report once per change, not per poll
                else:
                    self.files[path] = FileObjects(signature)
                continue
            changed = True
        for gone in [p for p in self.files if p not in seen]:
            log.info("%s: removed", gone)
            del self.files[gone]
            changed = True
        if changed or not self.synced:
            imports: dict[ObjectKey, ServiceImport] = {}
            slices: dict[ObjectKey, EndpointSlice] = {}
            for objects in self.files.values():
                imports.update(objects.imports)
                slices.update(objects.slices)
            ops: list[Op] = [ReplaceImports(imports), ReplaceSlices(slices)]
            if not self.synced:
                ops.append(SetSynced(True))
                self.synced = True
            return ops
        return []

    async def run(self) -> None:
        while True:
            try:
                # Parsing a large file must not stall the DNS answers: read in a thread,
                # apply on the loop (the cache is only ever touched from the loop).
                if self.pending():
                    ops = await asyncio.to_thread(self.collect)
                    if ops:
                        self.apply(ops)
            except Exception:  # never let the source die: log and try again next poll
                log.exception("reading %s failed", self.path)
            await asyncio.sleep(self.poll_interval)
