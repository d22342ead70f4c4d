"""The snapshot format: every key of a store read at one revision, as Parquet files (key,
value, create_revision, mod_revision, version, lease, revision) beside a manifest,
snapshot.json. Written here from Python (export, etcdctl, synth); read by Spark.
"""

from __future__ import annotations

import itertools
import operator
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import msgspec
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from metaplane.pipeline._errors import SnapshotError
from metaplane.store import Entry

FORMAT = "metaplane-snapshot"
FORMAT_VERSION = 1
MANIFEST = "snapshot.json"
KEYS_FOLDER = "keys"

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("create_revision", pa.int64(), nullable=False),
        pa.field("mod_revision", pa.int64(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("lease", pa.int64(), nullable=False),
        pa.field("revision", pa.int64(), nullable=False),
    ]
)
SPARK_SCHEMA = T.StructType(
    [
        T.StructField("key", T.StringType(), False),
        T.StructField("value", T.BinaryType(), False),
        *(T.StructField(name, T.LongType(), False) for name in ARROW_SCHEMA.names[2:]),
    ]
)


class _Manifest(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    format_version: int
    revision: int
    keys: int
    source: str
    taken_at: float
    files: list[str]


@dataclass(frozen=True)
class Snapshot:
    """A snapshot on disk: its folder and what its manifest says.

    `revision` is the store revision every key was read at; `taken_at` the Unix time it was
    taken (the "now" of retention); `source` where it came from (a store URL, a file, synth).
    """

    folder: Path
    revision: int
    keys: int
    source: str
    taken_at: float
    files: tuple[str, ...] = field(default=())

    @property
    def paths(self) -> list[str]:
        return [str(self.folder / name) for name in self.files]

    def describe(self) -> dict[str, object]:
        """The manifest's facts, as the outputs repeat them."""
        return {
            "revision": self.revision,
            "keys": self.keys,
            "source": self.source,
            "taken_at": self.taken_at,
        }


def read_snapshot(folder: Path) -> Snapshot:
    """The snapshot in `folder`; a missing, partial or foreign folder is a `SnapshotError`."""
    manifest_path = folder / MANIFEST
    try:
        manifest = msgspec.json.decode(manifest_path.read_bytes(), type=_Manifest)
    except FileNotFoundError:
        raise SnapshotError(
            f"{folder}: no {MANIFEST}; not a snapshot (or an unfinished one)"
        ) from None
    except (OSError, msgspec.MsgspecError) as error:
        raise SnapshotError(f"{manifest_path}: not a snapshot manifest: {error}") from None
    if manifest.format != FORMAT or manifest.format_version != FORMAT_VERSION:
        raise SnapshotError(
            f"{manifest_path}: format {manifest.format!r} v{manifest.format_version}; "
            f"this version reads {FORMAT!r} v{FORMAT_VERSION}"
        )
    snapshot = Snapshot(
        folder,
        manifest.revision,
        manifest.keys,
        manifest.source,
        manifest.taken_at,
        tuple(manifest.files),
    )
    for path in snapshot.paths:
        _check_file(Path(path))
    return snapshot


def _check_file(path: Path) -> None:
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        raise SnapshotError(f"{path}: not a readable Parquet file: {error}") from None
    if not schema.remove_metadata().equals(ARROW_SCHEMA, check_metadata=False):
        raise SnapshotError(f"{path}: columns {schema.names}, expected {ARROW_SCHEMA.names}")


def snapshot_frame(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """The snapshot's rows as a DataFrame (one row per key)."""
    if not snapshot.files:
        return spark.createDataFrame([], SPARK_SCHEMA)
    return spark.read.schema(SPARK_SCHEMA).parquet(*snapshot.paths)


class SnapshotWriter:
    """Writes a snapshot, row by row, into a folder that must be new or empty.

    Files go to `FOLDER.partial` and the folder appears whole when `close()` writes the
    manifest; a failed write leaves nothing behind.
    """

    def __init__(
        self,
        folder: Path,
        *,
        revision: int,
        source: str,
        taken_at: float | None = None,
        rows_per_file: int = 2_000_000,
        rows_per_group: int = 250_000,
    ) -> None:
        if rows_per_group < 1 or rows_per_file < 1:
            raise SnapshotError(
                f"rows per group and per file must be at least 1 ({rows_per_group}, "
                f"{rows_per_file} given)"
            )
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise SnapshotError(f"{folder}: exists and is not an empty folder")
        self.folder = folder
        self.revision = revision
        self.source = source
        self.taken_at = time.time() if taken_at is None else taken_at
        self._partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(self._partial, ignore_errors=True)
        (self._partial / KEYS_FOLDER).mkdir(parents=True)
        self._rows_per_file = rows_per_file
        self._rows_per_group = rows_per_group
        self._pending: list[tuple[str, bytes, int, int, int, int]] = []
        self._batches: list[pa.RecordBatch] = []
        self._buffered = 0
        self._files: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0
        self._closed = False
        self.count = 0

    def add(
        self,
        key: str,
        value: bytes,
        create_revision: int,
        mod_revision: int,
        version: int,
        lease: int = 0,
    ) -> None:
        """One key as the store holds it."""
        self._pending.append((key, value, create_revision, mod_revision, version, lease))
        if len(self._pending) >= _BATCH_ROWS:
            self._seal()

    def add_entries(self, entries: Iterable[Entry]) -> None:
        """Keys as the store holds them (a page of a scan: its rows taken in C, no Python
        step per entry; sealed into a batch once 10,000 rows or more wait, whatever the
        page size)."""
        self._pending.extend(map(_ROW, entries))
        if len(self._pending) >= _BATCH_ROWS:
            self._seal()

    def _seal(self) -> None:
        """The pending rows into an Arrow batch: a row group waits in Arrow's memory, not as
        a quarter of a million Python tuples (less memory, and less for the collector)."""
        if not self._pending:
            return
        columns = zip(*self._pending, strict=True)
        try:
            arrays = [pa.array(column, kind) for column, kind in zip(columns, _TYPES, strict=True)]
        except UnicodeEncodeError:
            # A key another client wrote in bytes that are not UTF-8 (etcd keeps any bytes;
            # metaplane reads them with surrogates): a snapshot holds keys as text.
            key = next(row[0] for row in self._pending if not _is_utf8(row[0]))
            raise SnapshotError(
                f"the key {key!r} is not UTF-8: a snapshot holds keys as text"
            ) from None
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=_ROWS_SCHEMA))
        self._buffered += len(self._pending)
        self._pending = []
        while self._buffered >= self._rows_per_group:
            self._flush()

    def _flush(self) -> None:
        """Up to one row group of the sealed batches into the file."""
        if not self._buffered:
            return
        buffered = pa.Table.from_batches(self._batches, schema=_ROWS_SCHEMA)
        rows = min(self._rows_per_group, self._buffered)
        group = buffered.slice(0, rows)
        revision = pa.array(itertools.repeat(self.revision, rows), pa.int64(), size=rows)
        table = pa.Table.from_arrays([*group.columns, revision], schema=ARROW_SCHEMA)
        self._file_writer().write_table(table)
        self._batches = buffered.slice(rows).to_batches()
        self._buffered -= rows
        self._in_file += rows
        self.count += rows
        if self._in_file >= self._rows_per_file:
            self._close_file()

    def _file_writer(self) -> pq.ParquetWriter:
        if self._writer is None:
            name = f"{KEYS_FOLDER}/part-{len(self._files):05d}.parquet"
            self._files.append(name)
            self._writer = pq.ParquetWriter(self._partial / name, ARROW_SCHEMA)
        return self._writer

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._in_file = 0

    def close(self) -> Snapshot:
        """Write what is buffered and the manifest; the snapshot then exists."""
        self._seal()
        while self._buffered:
            self._flush()
        self._close_file()
        manifest = _Manifest(
            format=FORMAT,
            format_version=FORMAT_VERSION,
            revision=self.revision,
            keys=self.count,
            source=self.source,
            taken_at=self.taken_at,
            files=self._files,
        )
        (self._partial / MANIFEST).write_bytes(msgspec.json.format(msgspec.json.encode(manifest)))
        if self.folder.exists():
            self.folder.rmdir()
        self._partial.rename(self.folder)
        self._closed = True
        return read_snapshot(self.folder)

    def abort(self) -> None:
        """Drop everything written so far."""
        self._close_file()
        shutil.rmtree(self._partial, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None or not self._closed:
            self.abort()


_TYPES = [field.type for field in ARROW_SCHEMA][:6]
_ROWS_SCHEMA = pa.schema(list(ARROW_SCHEMA)[:6])
_BATCH_ROWS = 10_000
"""Rows added one by one that are turned into one Arrow batch."""
_ROW = operator.attrgetter("key", "value", "create_revision", "mod_revision", "version", "lease")
"""An entry's row, in the columns' order."""


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
