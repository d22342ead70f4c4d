"""Snapshots of real stores: a live store paged through at one pinned revision, or the JSON
that `etcdctl get / --prefix -w json` printed (keys and values in base64).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from metaplane.pipeline._errors import EtcdctlOutputError, SnapshotError
from metaplane.pipeline._snapshot import Snapshot, SnapshotWriter
from metaplane.store import Compacted, MetadataStore

ROOT = "/"
DEFAULT_PAGE_SIZE = 10_000

Progress = Callable[[int], None]
"""Called with the number of keys read so far."""


async def export_snapshot(
    store: MetadataStore,
    folder: Path,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: Progress | None = None,
) -> Snapshot:
    """Every key of `store`, read page by page at the revision of the first page.

    Writers may run meanwhile: the snapshot holds exactly the keys of that revision. If the
    store compacts it away before the last page, the export fails (`SnapshotError`) and
    leaves nothing behind; run it again.
    """
    taken_at = time.time()
    async with store.scan(ROOT, page=page_size) as pages:
        first = await anext(pages)
        with SnapshotWriter(
            folder, revision=first.revision, source=store.url, taken_at=taken_at
        ) as writer:
            writer.add_entries(first)
            try:
                async for page in pages:
                    _report(progress, writer.count)
                    writer.add_entries(page)
            except Compacted as error:
                raise SnapshotError(
                    f"revision {first.revision} was compacted during the export "
                    f"({error}); run it again"
                ) from None
            _report(progress, writer.count)
            return writer.close()


def _report(progress: Progress | None, count: int) -> None:
    if progress is not None:
        progress(count)


# etcdctl ------------------------------------------------------------------------------------


class _KeyValue(msgspec.Struct, frozen=True):
    """One of `kvs`: etcd's mvccpb.KeyValue as JSON, bytes in base64, zero fields omitted."""

    key: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    value: bytes = b""
    lease: int = 0


class _Header(msgspec.Struct, frozen=True):
    revision: int = 0


class _RangeResponse(msgspec.Struct, frozen=True):
    header: _Header
    kvs: list[_KeyValue] = msgspec.field(default_factory=list)
    more: bool = False
    count: int = 0


def snapshot_from_etcdctl(source: Path, folder: Path) -> Snapshot:
    """A snapshot of the keys in `etcdctl get / --prefix -w json` output, at its revision."""
    response = _read_etcdctl(source)
    with SnapshotWriter(
        folder,
        revision=response.header.revision,
        source=f"etcdctl:{source.name}",
        taken_at=source.stat().st_mtime,
    ) as writer:
        for kv in response.kvs:
            # A key that is not UTF-8 cannot be one of ours; kept (replaced characters and
            # all) so that the analysis reports it as an unknown key.
            key = kv.key.decode("utf-8", errors="replace")
            writer.add(key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)
        return writer.close()


def _read_etcdctl(source: Path) -> _RangeResponse:
    try:
        data = source.read_bytes()
    except OSError as error:
        raise EtcdctlOutputError(f"{source}: cannot read: {error.strerror}") from None
    try:
        response = msgspec.json.decode(data, type=_RangeResponse)
    except msgspec.MsgspecError as error:
        raise EtcdctlOutputError(
            f"{source}: not the output of `etcdctl get / --prefix -w json`: {error}"
        ) from None
    if response.header.revision < 1:
        raise EtcdctlOutputError(f"{source}: the header carries no revision")
    if response.more:
        raise EtcdctlOutputError(
            f'{source}: the output is cut short ("more": true); run etcdctl without --limit'
        )
    if response.count and response.count != len(response.kvs):
        raise EtcdctlOutputError(
            f"{source}: {len(response.kvs)} keys listed, but the count says {response.count} "
            "(was it run with --count-only?)"
        )
    return response
