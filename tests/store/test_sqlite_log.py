"""The sqlite backend's decoded tail of the change log: the watches of one process that read
the whole log (the caches of its brokers) share one decoding of each change, and a read
served from the tail is exactly the read of the log it stands for."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from metaplane.store import Compacted, Delete, Put, SqliteStore, WatchEvent
from metaplane.store import _sqlite as sqlite_backend
from metaplane.store._keys import ROOT


async def write_history(store: SqliteStore, seed: int) -> int:
    """Transactions of 1 to 12 changes (puts and deletes) over a few keys; the last
    revision."""
    pick = random.Random(seed)
    revision = 0
    for _ in range(120):
        ops: list[Put | Delete] = []
        for key in pick.sample(range(40), pick.randint(1, 12)):
            if pick.random() < 0.2:
                ops.append(Delete(f"/k/{key:02d}"))
            else:
                ops.append(Put(f"/k/{key:02d}", pick.randbytes(3)))
        revision = (await store.txn((), ops)).revision
    return revision


Read = Callable[[str, int], tuple[Sequence[WatchEvent], int]]


def read_through(read: Read, start: int) -> list[tuple[int, str, str]]:
    """Every change from `start` on, read as a watch reads them: a read, then the next from
    the revision after the last one it covered; each read's changes within what it covered."""
    found = []
    while True:
        events, seen = read(ROOT, start)
        assert all(start <= event.revision <= seen for event in events)
        found += [(event.revision, event.key, event.type.name) for event in events]
        if seen < start:
            return found
        start = seen + 1


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bound", ["events", "bytes"])
async def test_reads_from_the_tail_are_the_reads_of_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, bound: str
) -> None:
    """Readers at different places, one after another, as the caches of a process are: what
    each gets is exactly what it reads from the log itself, in the same order."""
    monkeypatch.setattr(sqlite_backend, "_MAX_EVENTS_READ", 7)
    if bound == "events":
        monkeypatch.setattr(sqlite_backend, "_TAIL_EVENTS", 200)
    else:  # the values' 3 bytes each: about as many changes as the bound of 200 changes
        monkeypatch.setattr(sqlite_backend, "_TAIL_BYTES", 600)
    async with await SqliteStore.open(tmp_path / "store.db") as store:
        last = await write_history(store, seed)
        pick = random.Random(seed)
        near = [pick.randint(last - 20, last + 1) for _ in range(40)]
        starts = near + [pick.randint(1, last - 60) for _ in range(10)]
        served = 0
        for start in [last - 30, *starts]:
            served += store._tail_from <= start <= store._tail_to
            assert read_through(store._read_log, start) == read_through(store._read_log_rows, start)
            assert len(store._tail) <= 200 or store._tail_bytes <= 600
            assert store._tail_bytes == sum(len(event.entry.value) for event in store._tail)
        assert served >= 35  # most readers near the end were served from the tail


async def test_a_read_from_the_tail_below_the_floor_is_compacted(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "store.db", history=1) as store:
        last = await write_history(store, 0)
        read_through(store._read_log, last - 5)
        assert store._tail_from <= last - 5 <= store._tail_to
        await store.compact(last)
        with pytest.raises(Compacted):
            store._read_log(ROOT, last - 5)
