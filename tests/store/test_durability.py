"""The sqlite backend keeps every write it acknowledged when its writer is SIGKILLed, and
several processes share one file."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaplane.store import SqliteStore, connect_store
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
    async with await connect_store(store_url) as store:
        kept = set((await store.list("/seq", keys_only=True)).keys())
        # What the writer acknowledged is there; what it wrote after is allowed too.
        assert set(acknowledged) <= kept
        assert all(key.startswith("/seq/") for key in kept)
        assert len(kept) - len(acknowledged) <= 1


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


async def test_not_a_store(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database" * 100)
    from metaplane.store import MetadataError

    with pytest.raises(MetadataError, match="not"):
        await SqliteStore.open(path)
