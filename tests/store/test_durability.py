"""The sqlite backend keeps every write it acknowledged when its writer is SIGKILLed, and
several processes share one file."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from metaplane.store import Compacted, SqliteStore, connect_store
from tests.store.processes import Child

pytestmark = pytest.mark.backends("sqlite", reason="the embedded store's own guarantees")


async def test_acknowledged_writes_survive_sigkill(store_url: str, backend: str) -> None:
    child = await Child.start("write-sequence", store_url, "/seq")
    acknowledged: list[str] = []
    try:
        while len(acknowledged) < 300:
            acknowledged.append(await child.line())
    finally:
        await child.kill()
    # What it acknowledged before the signal and we had not read yet.
    assert child.process.stdout is not None
    acknowledged += (await child.process.stdout.read()).decode().split()
    async with await connect_store(store_url) as store:
        kept = set((await store.list("/seq", keys_only=True)).keys())
        # Every acknowledged write is there; at most the one in flight was written unacked.
        assert set(acknowledged) <= kept
        assert all(key.startswith("/seq/") for key in kept)
        assert len(kept) - len(acknowledged) <= 1


async def test_the_file_is_in_wal_mode_and_shared(store_url: str, backend: str) -> None:
    async with await connect_store(store_url) as first, await connect_store(store_url) as second:
        revision = await first.put("/shared", b"1")
        entry = await second.get("/shared")
        assert entry is not None and entry.mod_revision == revision
    path = store_url.removeprefix("sqlite://")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_reopening_keeps_revisions_and_history(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "store.db"
    async with await SqliteStore.open(path) as store:
        first = await store.put("/k", b"1")
        last = await store.put("/k", b"2")
    async with await SqliteStore.open(path) as store:
        assert await store.revision() == last
        entry = await store.get("/k")
        assert entry is not None and (entry.version, entry.create_revision) == (2, first)
        assert [e.value for e in await store.list("/k", revision=first)] == [b"1"]


async def test_history_is_trimmed_by_count(tmp_path: Path, backend: str) -> None:
    async with await SqliteStore.open(tmp_path / "store.db", history=5) as store:
        for i in range(20):
            last = await store.put(f"/k/{i}", b"")
        await store._maintain_once()
        assert store._compact_floor() == last - 4
        assert (await store.list("/k", revision=last - 4)).revision == last - 4
        with pytest.raises(Compacted):
            await store.list("/k", revision=last - 5)
        with pytest.raises(Compacted):
            async with store.watch("/k", start_revision=last - 5) as watch:
                await anext(watch)


async def test_history_is_trimmed_by_age(tmp_path: Path, backend: str) -> None:
    async with await SqliteStore.open(
        tmp_path / "store.db", history=1000, history_age=0.2
    ) as store:
        first = await store.put("/k/0", b"")
        for i in range(1, 10):
            last = await store.put(f"/k/{i}", b"")
        # Poll with a deadline: the history ages by the wall clock, nothing to await.
        deadline = time.monotonic() + 10
        while store._compact_floor() < last:
            assert time.monotonic() < deadline, store._compact_floor()
            await store._maintain_once()
            await asyncio.sleep(0.05)
        assert (await store.list("/k", revision=last)).revision == last  # the latest stays
        with pytest.raises(Compacted):
            await store.list("/k", revision=first)
        with pytest.raises(Compacted):
            async with store.watch("/k", start_revision=first) as watch:
                await anext(watch)


async def test_not_a_store(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database" * 100)
    from metaplane.store import MetadataError

    with pytest.raises(MetadataError, match="not"):
        await SqliteStore.open(path)
