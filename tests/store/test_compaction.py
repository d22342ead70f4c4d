"""Conformance: compaction behaves as etcd's on every backend. Compacting at or below the
last compaction raises `Compacted` with that compaction's revision; a future revision is an
`InvalidRequest`; a read at a compacted or future revision raises even when it would list
nothing; a local store trimming its history moves its floor as etcd's auto-compaction."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from metaplane.store import (
    Compacted,
    InvalidRequest,
    Listing,
    MemoryStore,
    MetadataStore,
    SqliteStore,
)
from tests.store import zk_subsets


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.COMPACTION)
async def test_compacting_again_raises_compacted_with_the_real_revision(
    store: MetadataStore,
) -> None:
    first = await store.put("/cmp/a", b"1")
    second = await store.put("/cmp/a", b"2")
    third = await store.put("/cmp/a", b"3")
    await store.compact(second)
    for again in (second, first):
        with pytest.raises(Compacted) as raised:
            await store.compact(again)
        assert raised.value.compact_revision == second
    await store.compact(third)  # a later revision compacts further
    with pytest.raises(Compacted) as raised:
        await store.compact(third)
    assert raised.value.compact_revision == third


async def test_compacting_a_future_revision_is_invalid(store: MetadataStore) -> None:
    current = await store.put("/cmp/a", b"1")
    with pytest.raises(InvalidRequest):
        await store.compact(current + 1)
    await store.compact(current)  # the current revision itself can be compacted
    assert (await store.list("/cmp")).keys() == ["/cmp/a"]


EMPTY_OR_NOT: dict[str, Callable[[MetadataStore, int], Awaitable[Listing]]] = {
    "a key": lambda store, at: store.list("/cmp", revision=at),
    "an empty prefix": lambda store, at: store.list("/cmp/nothing", revision=at),
    "bounds that select nothing": lambda store, at: store.list(
        "/cmp", revision=at, start_after="/cmp/z", end_before="/cmp/a"
    ),
    "nothing under the root": lambda store, at: store.list(
        "/", revision=at, start_after="/zz", end_before="/a"
    ),
}


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.COMPACTION)
@pytest.mark.parametrize("selection", list(EMPTY_OR_NOT))
async def test_reads_at_compacted_or_future_revisions_raise_even_when_empty(
    store: MetadataStore, selection: str
) -> None:
    read = EMPTY_OR_NOT[selection]
    old = await store.put("/cmp/k", b"1")
    kept = await store.put("/cmp/k", b"2")
    await store.compact(kept)
    with pytest.raises(Compacted) as raised:
        await read(store, old)
    assert raised.value.compact_revision == kept
    with pytest.raises(InvalidRequest):
        await read(store, kept + 1)
    assert (await read(store, kept)).revision == kept


@pytest.mark.backends(
    "memory", "sqlite", reason="a local store's own history trimming (etcd: auto-compaction)"
)
async def test_trimmed_history_counts_as_compacted(tmp_path: Path, backend: str) -> None:
    store: MetadataStore
    if backend == "memory":
        store = MemoryStore(history=3)
    else:
        store = await SqliteStore.open(tmp_path / "store.db", history=3)
    async with store:
        first = await store.put("/trim/0", b"")
        for i in range(1, 10):
            last = await store.put(f"/trim/{i}", b"")
        floor = await _floor_after_trim(store, first)
        assert first < floor <= last
        for again in (floor, floor - 1):
            with pytest.raises(Compacted) as raised:
                await store.compact(again)
            assert raised.value.compact_revision == floor
        await store.compact(last)
        with pytest.raises(Compacted) as raised:
            await store.list("/trim", revision=last - 1)
        assert raised.value.compact_revision == last


async def _floor_after_trim(store: MetadataStore, first: int) -> int:
    """The compact revision once the store trimmed `first` away. Sqlite trims in the
    background by the wall clock: poll with a deadline, there is nothing to await."""
    deadline = time.monotonic() + 10
    while True:
        try:
            await store.list("/trim", revision=first)
        except Compacted as compacted:
            return compacted.compact_revision
        assert time.monotonic() < deadline, "the history was never trimmed"
        await asyncio.sleep(0.05)
