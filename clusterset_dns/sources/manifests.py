"""The manifest-file source: YAML/JSON files or a directory of them, re-read on change.

Each file is read in isolation: whatever goes wrong with one file (it cannot be
opened, is not a regular file, is too large, does not parse, exceeds the YAML
limits, or its conversion raises) keeps the objects that file gave before and
never stops the others. The error is logged once per change of the file, with
its path and reason, and counted (``error(reason)``).

A directory that cannot be listed (EMFILE, EACCES, ...) is an error too, never
an empty directory: the files known under it keep their objects until a later
walk succeeds.

The same (namespace, name) in several files: the file that sorts last (paths
compared component by component) wins, whatever order the files were read or
changed in. Synced = the path was found and read once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.sources import convert, properties, yamlsafe
from clusterset_dns.sources.dirwalk import Walk, find_files
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, ServiceImport
from clusterset_dns.zone.ops import (
    Op,
    ReplaceImports,
    ReplaceRejected,
    ReplaceSlices,
    SetClusterId,
    SetSynced,
)

log = logging.getLogger(__name__)

Signature = tuple[int, int, int]  # mtime_ns, size, inode
UNKNOWN: Signature = (-1, -1, -1)  # a file that cannot be stat()ed
Invalid = Callable[[str], None]  # called with the kind of a skipped object
Error = Callable[[str], None]  # called with the reason a file or a walk failed

# A small hostile file must not cost much memory; the largest generated test data set
# is a few MiB. The YAML and JSON limits are in yamlsafe.
MAX_FILE_BYTES = 64 << 20

# Reads of a directory whose links changed meanwhile, dropped and read again, before
# waiting for the next poll (a link swap is rare: a ConfigMap update, a git-sync).
GENERATION_TRIES = 3

# Reasons passed to ``error`` (the label values of the metric).
REASONS = ("walk", "read", "not-regular", "too-large", "parse", "limits", "convert")


class FileError(Exception):
    """A file that cannot be used as a whole; ``reason`` is one of REASONS."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _read_text(path: Path) -> str:
    # O_NONBLOCK: a FIFO named *.yaml must not block the reader forever.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileError("read", f"cannot open: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileError("not-regular", "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise FileError("too-large", f"{st.st_size} bytes, more than {MAX_FILE_BYTES}")
        try:
            data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise FileError("read", f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:  # grew while we read
        raise FileError("too-large", f"more than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileError("parse", f"not UTF-8: {exc}") from exc


def _documents(path: Path, read_from: Path | None = None) -> list[Any]:
    text = _read_text(read_from or path)
    try:
        return yamlsafe.documents(text, path.suffix == ".json")
    except yamlsafe.DocumentError as exc:
        raise FileError(exc.reason, str(exc)) from exc


def _objects(docs: list[Any]) -> Iterator[Any]:
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list) and \
                str(doc.get("kind", "")).endswith("List"):
            yield from _objects(doc["items"])
        else:
            yield doc


@dataclass(slots=True)
class FileObjects:
    signature: Signature
    imports: dict[ObjectKey, ServiceImport] = field(default_factory=dict)
    slices: dict[ObjectKey, EndpointSlice] = field(default_factory=dict)
    # From the ClusterProperties naming the cluster (properties.CLUSTER_ID_PROPERTIES), by name.
    cluster_ids: dict[str, str] = field(default_factory=dict)
    # Objects that failed to convert: (kind, key) -> (their service, when known, why).
    rejected: dict[tuple[str, ObjectKey], tuple[ObjectKey | None, str]] = field(
        default_factory=dict)


def read_file(path: Path, signature: Signature, groups: frozenset[str],
              namespaces: frozenset[str], invalid: Invalid,
              read_from: Path | None = None) -> FileObjects:
    """The objects of one file (``path`` in messages; read from ``read_from`` when
    given: its resolved target). Raises :class:`FileError` (and nothing else) when the
    file cannot be used as a whole."""
    result = FileObjects(signature)
    what = ""
    try:
        docs = _documents(path, read_from)
        for obj in _objects(docs):
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
                elif properties.is_cluster_property(obj):
                    cluster_id = properties.cluster_property(obj, warn)
                    if cluster_id is not None:
                        result.cluster_ids[convert.key_of(obj)[1]] = cluster_id
            except convert.InvalidObject as exc:
                log.warning("%s: %s skipped: %s", path, what, exc)
                invalid(convert.kind_of(obj))
                kind = convert.kind_of(obj)
                try:
                    key = convert.key_of(obj)
                except convert.InvalidObject:
                    continue
                if kind in ("ServiceImport", "EndpointSlice"):
                    result.rejected[(kind, key)] = (convert.service_key(obj), str(exc))
    except FileError:
        raise
    except RecursionError as exc:
        raise FileError("limits", f"{what or 'a document'}: nested too deeply") from exc
    except Exception as exc:
        # Conversion promises InvalidObject only; anything else (a bug, or data shaped
        # in a way nobody foresaw) must cost this file, never the source.
        raise FileError("convert", f"{what or 'a document'}: {type(exc).__name__}: {exc}") \
            from exc
    return result


class ManifestSource:
    def __init__(self, path: Path, apply: Callable[[list[Op]], None], poll_interval: float,
                 groups: frozenset[str] = frozenset({convert.GROUP}),
                 namespaces: frozenset[str] = frozenset(),
                 invalid: Invalid = lambda kind: None,
                 error: Error = lambda reason: None, cluster_property: bool = True,
                 clock: Clock = SYSTEM) -> None:
        """``cluster_property``: files may name the local cluster with a ClusterProperty
        ``cluster.clusterset.k8s.io`` (False when --cluster-id, which wins, is given).
        ``clock``: what the poll waits on."""
        self.clock = clock
        self.path = path
        self.apply = apply
        self.poll_interval = poll_interval
        self.groups = groups
        self.namespaces = namespaces
        self.invalid = invalid
        self.error = error
        self.files: dict[Path, FileObjects] = {}
        self.synced = False
        self.missing_reported = False
        self.walk_error: str | None = None  # the failing walk being reported, if any
        self.cluster_property = cluster_property
        self.cluster_id: str | None = None  # what the files' ClusterProperty last said

    def scan(self) -> bool:
        """Re-reads what changed and applies it; True when anything changed."""
        ops = self.collect()
        if ops:
            self.apply(ops)
        return bool(ops)

    def poll(self) -> list[Op]:
        """One poll, in a thread: the walk and a stat per file (0.5 s at 20,000 files
        would stall every answer on the loop; in a thread the loop takes the GIL back
        every switch interval, and the system calls release it), then the reading of
        what changed."""
        return self.collect() if self.pending() else []

    def pending(self) -> bool:
        """Whether :meth:`collect` has anything to do: a walk and a stat per file, no
        reading."""
        walk = find_files(self.path)
        if walk.failed or self.walk_error is not None:
            return True  # collect reports it, or reports the recovery
        if not walk.files and not self.files and not self._exists():
            return not self.synced and not self.missing_reported
        present = 0
        for path in walk.files:
            old = self.files.get(path)
            try:
                st = path.stat()
                signature = (st.st_mtime_ns, st.st_size, st.st_ino)
            except FileNotFoundError:  # a dangling link counts as absent
                continue
            except OSError:
                signature = UNKNOWN
            present += 1
            if old is None or old.signature != signature:
                return True
        return present != len(self.files) or not self.synced

    def _exists(self) -> bool:
        try:
            os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True
        return True

    def _walk_failed(self, walk: Walk) -> None:
        self.error("walk")
        message = "; ".join(f"{d}: {exc.strerror or exc}" for d, exc in walk.failed)
        if message != self.walk_error:
            log.error("cannot list %s; keeping the objects of the files known there "
                      "until a walk succeeds", message)
            self.walk_error = message

    def collect(self) -> list[Op]:
        """Re-reads what changed; the ops that bring the cache up to date (may be empty).

        One generation whole or nothing: a directory swapped by a symbolic link (a
        ConfigMap volume's ``..data``, git-sync) may change in the middle of a read.
        Links are resolved once, the files read through the resolved paths, and the
        links checked again after: when any changed, what was read is dropped and read
        again (at most GENERATION_TRIES times, else at the next poll), so no mix of two
        versions is ever applied.

        Touches only this object and the file system, so it can run in a thread."""
        for _ in range(GENERATION_TRIES):
            ops = self._collect_once()
            if ops is not None:
                return ops
        log.warning("%s changed during each of %d reads; reading it again at the next "
                    "poll", self.path, GENERATION_TRIES)
        return []

    def _collect_once(self) -> list[Op] | None:
        """None: a link changed while the files were read (nothing was kept)."""
        root = Path(os.path.realpath(self.path))
        walk = find_files(root)
        if root != self.path:  # the path is (under) a link: keep the names it was given
            walk = Walk([self.path / p.relative_to(root) for p in walk.files],
                        [(self.path / d.relative_to(root), e) for d, e in walk.failed])
        # Each file's target as first resolved (links only), checked again at the end.
        resolved: dict[Path, str] = {}
        staged: dict[Path, FileObjects] = {}
        errors: list[tuple[Path, FileError, FileObjects | None, Signature]] = []
        seen = set(walk.files)
        for path in walk.files:
            real = root / path.relative_to(self.path) if root != self.path else path
            if os.path.islink(real):
                real = Path(os.path.realpath(real))
                resolved[path] = str(real)
            try:
                st = real.stat()
            except FileNotFoundError:  # removed since the walk, or a dangling link
                seen.discard(path)
                continue
            except OSError:
                st = None
            signature = (st.st_mtime_ns, st.st_size, st.st_ino) if st else UNKNOWN
            old = self.files.get(path)
            if old is not None and old.signature == signature:
                continue
            try:
                staged[path] = read_file(path, signature, self.groups, self.namespaces,
                                         self.invalid, real)
            except FileError as exc:
                errors.append((path, exc, old, signature))
        if os.path.realpath(self.path) != str(root) or any(
                os.path.realpath(root / p.relative_to(self.path)) != target
                for p, target in resolved.items()):
            return None
        return self._commit(walk, seen, staged, errors)

    def _commit(self, walk: Walk, seen: set[Path], staged: dict[Path, FileObjects],
                errors: list[tuple[Path, FileError, FileObjects | None, Signature]]
                ) -> list[Op]:
        """Applies one whole read to this object's state; the ops for the cache."""
        if walk.failed:
            self._walk_failed(walk)
            if not self.synced and walk.covers(self.path):
                return []  # nothing known yet: stay unsynced until a walk works
        elif self.walk_error is not None:
            log.info("%s can be listed again", self.path)
            self.walk_error = None
        if not walk.files and not walk.failed and not self._exists():
            if not self.synced:
                if not self.missing_reported:
                    self.missing_reported = True
                    log.warning("%s does not exist (yet); answering SERVFAIL for unknown "
                                "names", self.path)
                return []
            if self.files:
                log.warning("%s does not exist any more; its objects are removed", self.path)
        changed = False
        for path, exc, old, signature in errors:
            self.error(exc.reason)
            log.error("%s: cannot be used (%s), keeping its %s objects: %s", path,
                      exc.reason, "previous" if old else "(no)", exc)
            if old is not None:
                old.signature = signature  # report once per change, not per poll
            else:
                self.files[path] = FileObjects(signature)
        for path, objects in staged.items():
            self.files[path] = objects
            log.info("%s: %d ServiceImports, %d EndpointSlices", path,
                     len(objects.imports), len(objects.slices))
            changed = True
        for gone in [p for p in self.files if p not in seen and not walk.covers(p)]:
            log.info("%s: removed", gone)
            del self.files[gone]
            changed = True
        if changed or not self.synced:
            # Rejections after the objects: a valid object put clears its key's.
            ops: list[Op] = [ReplaceImports(self._merge("imports")),
                             ReplaceSlices(self._merge("slices")),
                             ReplaceRejected(self._merge("rejected"))]
            cluster_id = self._cluster_id()
            if self.cluster_property and cluster_id != self.cluster_id:
                log.info("cluster id %s (ClusterProperty %s in the manifests)",
                         cluster_id or "unknown", " or ".join(properties.CLUSTER_ID_PROPERTIES))
                ops.insert(0, SetClusterId(cluster_id))
                self.cluster_id = cluster_id
            if not self.synced:
                ops.append(SetSynced(True))
                self.synced = True
            return ops
        return []

    def _cluster_id(self) -> str | None:
        """The ClusterProperties' value (cluster.clusterset.k8s.io wins over id.k8s.io);
        one name in two files: the file that sorts last wins."""
        values: dict[str, str | None] = {}
        for path in sorted(self.files):
            values.update(self.files[path].cluster_ids)
        return properties.pick_cluster_id(values)

    def _merge(self, what: str) -> dict[Any, Any]:
        """Every file's objects; on a duplicate key the file that sorts last wins,
        so the result never depends on the order files were read in."""
        merged: dict[ObjectKey, Any] = {}
        source: dict[ObjectKey, Path] = {}
        for path in sorted(self.files):
            for key, obj in getattr(self.files[path], what).items():
                if key in source:
                    log.warning("%s/%s is in %s and %s; using %s", key[0], key[1],
                                source[key], path, path)
                merged[key] = obj
                source[key] = path
        return merged

    async def run(self) -> None:
        while True:
            try:
                # Walking many files or parsing a large one must not stall the DNS
                # answers: poll in a thread (only this coroutine touches the source's
                # state, one poll at a time), apply on the loop (the cache is only ever
                # touched from the loop).
                ops = await asyncio.to_thread(self.poll)
                if ops:
                    self.apply(ops)
            except Exception:  # never let the source die: log and try again next poll
                log.exception("reading %s failed", self.path)
            await self.clock.sleep(self.poll_interval)
