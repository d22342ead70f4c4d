"""What the watch tests record and the invariants they check: batches in strictly increasing
revision order, every change once, none missing, and a progress batch only after every
change up to its revision."""

from __future__ import annotations

import asyncio

from metaplane.store import Compacted, MetadataStore, Watch, WatchBatch

Change = tuple[int, str, str]
"""(revision, PUT or DELETE, key): one event as the invariants compare it."""


def changes(batches: list[WatchBatch]) -> list[Change]:
    return [(b.revision, e.type.name, e.key) for b in batches for e in b.events]


async def collect(watch: Watch, until: int, timeout: float = 10.0) -> list[WatchBatch]:
    """The batches of `watch` up to revision `until` (no progress asked for)."""
    batches: list[WatchBatch] = []
    async with asyncio.timeout(timeout):
        async for batch in watch:
            batches.append(batch)
            if batch.revision >= until:
                break
    return batches


async def follow_with_progress(watch: Watch, until: int, timeout: float = 20.0) -> list[WatchBatch]:
    """The batches of `watch` up to a progress batch at or past `until`, asking for
    progress before the first batch and again after every batch."""
    batches: list[WatchBatch] = []
    async with asyncio.timeout(timeout):
        watch.request_progress()
        async for batch in watch:
            batches.append(batch)
            if not batch.events and batch.revision >= until:
                break
            watch.request_progress()
    return batches


def check_history(batches: list[WatchBatch], reference: list[Change]) -> None:
    """The invariants of a watch history against the changes a plain watch saw: strictly
    increasing revisions, exactly the reference's changes in its order, and a progress
    batch at P only once every reference change up to P came before it."""
    revisions = [batch.revision for batch in batches]
    assert revisions == sorted(set(revisions)), f"batches out of order: {revisions}"
    assert changes(batches) == reference
    seen = 0
    for batch in batches:
        if batch.events:
            seen += len(batch.events)
            continue
        due = sum(1 for change in reference if change[0] <= batch.revision)
        assert seen == due, f"progress at {batch.revision} came before {due - seen} change(s)"


async def oldest_revision(store: MetadataStore) -> int:
    """The oldest revision the store still keeps (1 unless compacted)."""
    try:
        await store.list("/", revision=1, limit=1)
    except Compacted as compacted:
        return compacted.compact_revision
    return 1
