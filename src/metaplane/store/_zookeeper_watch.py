"""Watches on ZooKeeper: one persistent recursive watch per store session, its
notifications read back.

ZooKeeper 3.8's notifications carry no zxid: each names a changed znode, which the watch
reads back. A key read back with a newer mod_revision than the watch knows is a PUT; a key it
knew that is gone is a DELETE, at the zxid it is gone since (at the latest). The events of
one round of reads are grouped by revision, so a batch carries the revision of what was read,
and changes of one key between two reads arrive merged into the last. ZooKeeper sends a
notification before the reply to any later request: once the replies of a round are in,
every change they show has been notified, so rounds go on until one brings no new
notification, and batches come in strictly increasing revision order.

There is no history: a watch from a `start_revision` raises `Compacted` when anything under
its prefixes changed from that revision on before the watch was set up (it cannot tell what).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from metaplane.store._base import PrefixWatch, Watch
from metaplane.store._errors import Compacted, MetadataError
from metaplane.store._keys import ancestors, check_prefix
from metaplane.store._model import (
    Entry,
    EventType,
    WatchBatch,
    WatchEvent,
    deleted_entry,
)

if TYPE_CHECKING:
    from metaplane.store._zookeeper import ZooKeeperStore

PROGRESS_POLL = 0.05
"""Seconds between two looks at the store's zxid while a progress batch waits for it to
move (ZooKeeper says nothing of changes outside the chroot)."""


class Follower:
    """What both watch kinds share: the prefixes followed, the keys known under them, the
    notifications to read back, and the batches ready."""

    def __init__(
        self, store: ZooKeeperStore, prefixes: Iterable[str], start_revision: int | None
    ) -> None:
        self._store = store
        self._known: dict[str, int] = {}
        """Each key under the prefixes as last read: its mod_revision."""
        self._after: dict[str, int] = {}
        """Each prefix followed, and the revision after which its events are delivered."""
        self._hints: set[str] = set()
        self._ready: list[WatchBatch] = []
        self._handed_out = 0
        self._progress = False
        self._error: MetadataError | None = None
        self._ended = False
        self._wake = asyncio.Event()
        since, recent = store.follow(self)
        wanted = frozenset(prefixes)
        self._start = start_revision if start_revision is not None else since + 1
        self._after.update(dict.fromkeys(wanted, self._start - 1))
        mine = [key for key in recent if self._wanted(key)]  # (a store's writes of others)
        self._hints.update(mine)
        self._unsure: set[str] | None = set(mine) if start_revision is None else None
        """From now: the keys notified before the first read was in. One it did not find
        may have existed at the start and been deleted since: read back absent, it is a
        DELETE (one created and deleted meanwhile too: a DELETE of a key never shown)."""
        self._started = asyncio.get_running_loop().create_task(
            self._baseline(wanted, self._start, start_revision is not None)
        )

    # -- from the store ----------------------------------------------------------------

    def hint(self, key: str) -> None:
        if self._wanted(key):
            self._hints.add(key)
            if self._unsure is not None and not self._started.done():
                self._unsure.add(key)
            self._wake.set()

    def fail(self, error: MetadataError | None) -> None:
        """End the watch: with `error`, or (None) as the store closes."""
        if self._error is None and not self._ended:
            if error is None:
                self._ended = True
            else:
                self._error = error
        self._wake.set()

    # -- the prefixes --------------------------------------------------------------------

    def _wanted(self, key: str) -> bool:
        return any(ancestor in self._after for ancestor in ancestors(key))

    def _delivered(self, key: str, revision: int) -> bool:
        after = self._after
        return any(after.get(a, revision) < revision for a in ancestors(key))

    async def _baseline(self, prefixes: frozenset[str], start: int, given: bool) -> int:
        """Learn the keys under `prefixes` as they are. From a given `start_revision`, that
        is the state the caller has at `start - 1` only if nothing under the prefixes changed
        from `start` on (every mzxid and pzxid below it): else `Compacted`, since what
        changed before the watch was set up is gone."""
        if not prefixes:
            return self._store.seen
        entries, at, newest = await self._store_snapshot(prefixes, start if given else None)
        if given and newest >= start:
            raise _gone(prefixes, newest, start)
        for entry in entries:
            if entry.mod_revision >= start:
                self._hints.add(entry.key)
            else:
                self._known[entry.key] = entry.mod_revision
        return at

    async def _store_snapshot(
        self, prefixes: frozenset[str], start: int | None = None
    ) -> tuple[list[Entry], int, int]:
        """The keys under `prefixes` at one zxid, and the newest zxid among the znodes.
        From a `start` revision, `Compacted` as soon as a read shows a change at or after it
        (the watch cannot start there, whatever the rest reads: no walk again for a
        consistent read)."""
        store = self._store
        at = store.seen
        for _ in range(50):
            tree = await store._walk(sorted(prefixes), give_up=start)
            if tree is not None:
                nodes, newest = tree
                if start is not None and newest >= start:
                    raise _gone(prefixes, newest, start)
                if newest <= at:
                    return store._entries(nodes, None), at, newest
            at = await store.sync()
        tree = await store._walk(sorted(prefixes))
        if tree is None:
            raise Compacted(at + 1, "ZooKeeper: the prefixes kept changing; resync")
        nodes, newest = tree
        return store._entries(nodes, None), max(at, newest), newest

    async def add(self, prefixes: Iterable[str]) -> int:
        added = frozenset(check_prefix(p) for p in prefixes) - set(self._after)
        if not added:
            return self._store.seen
        since = self._store.seen
        for prefix in added:
            self._after[prefix] = since
        entries, at, _ = await self._store_snapshot(added)
        for prefix in added:
            self._after[prefix] = at
        for entry in entries:
            self._known.setdefault(entry.key, entry.mod_revision)
        return at

    async def add_and_read(self, prefixes: Iterable[str]) -> tuple[int, list[Entry], int]:
        """Follow `prefixes` from R, the last zxid this client saw, then walk them once,
        whatever writes meanwhile (what vanishes is left out): every change after R that
        the walk does not show is notified after the prefixes joined, read back and
        delivered, relative to what the walk read (`PrefixWatch.add_and_read`)."""
        wanted = sorted(frozenset(check_prefix(p) for p in prefixes))
        since = self._store.seen
        for prefix in wanted:
            self._after.setdefault(prefix, since)
        if not wanted:
            return since, [], since
        tree = await self._store._walk(wanted, fuzzy=True)
        assert tree is not None  # a fuzzy walk does not give up
        nodes, newest = tree
        entries = self._store._entries(nodes, None)
        known = self._known
        for entry in entries:
            known[entry.key] = max(known.get(entry.key, 0), entry.mod_revision)
        return since, entries, max(since, newest)

    async def remove(self, prefixes: Iterable[str]) -> None:
        for prefix in prefixes:
            self._after.pop(prefix, None)
        self._known = {k: r for k, r in self._known.items() if self._wanted(k)}
        self._hints = {k for k in self._hints if self._wanted(k)}
        kept = [
            WatchBatch(b.revision, tuple(e for e in b.events if self._wanted(e.key)))
            for b in self._ready
        ]
        self._ready = [batch for batch in kept if batch.events]

    # -- the batches ---------------------------------------------------------------------

    async def next_batch(self) -> WatchBatch:
        if not self._started.done() or self._started.exception() is not None:
            await self._started
        while True:
            if self._ready:
                batch = self._ready.pop(0)
                self._handed_out = batch.revision
                return batch
            if self._ended:
                raise StopAsyncIteration
            if self._error is not None:
                raise self._error
            if self._hints:
                await self._read_round()
                continue
            if self._progress:
                progress = await self._progress_batch()
                if progress is not None:
                    return progress
                await self._wait(PROGRESS_POLL)
                continue
            await self._wait(None)

    async def _wait(self, timeout: float | None) -> None:
        self._wake.clear()
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _read_round(self) -> None:
        """Read back every key notified until a round brings no new notification; the
        events found, grouped by revision, become the next batches."""
        events: dict[str, WatchEvent] = {}
        while self._hints:
            keys = sorted(self._hints)
            self._hints = set()
            read = await self._store.read_back_many(keys)
            for key, (entry, since) in zip(keys, read, strict=True):
                event = self._change(key, entry, since)
                if event is not None:
                    events[key] = event
        by_revision: dict[int, list[WatchEvent]] = {}
        for event in events.values():
            if self._delivered(event.key, event.revision):
                by_revision.setdefault(event.revision, []).append(event)
        for revision in sorted(by_revision):
            if revision <= self._handed_out:  # cannot happen (see the module): say so
                raise Compacted(revision, f"ZooKeeper watch: an event at {revision} came late")
            found = sorted(by_revision[revision], key=lambda event: event.key)
            self._ready.append(WatchBatch(revision, tuple(found)))

    def _change(self, key: str, entry: Entry | None, since: int) -> WatchEvent | None:
        known = self._known.get(key)
        unsure = self._unsure is not None and key in self._unsure
        if unsure:
            assert self._unsure is not None
            self._unsure.discard(key)
        if entry is not None:
            if known is not None and entry.mod_revision <= known:
                return None
            self._known[key] = entry.mod_revision
            return WatchEvent(EventType.PUT, entry)
        if known is None:
            return WatchEvent(EventType.DELETE, deleted_entry(key, since)) if unsure else None
        del self._known[key]
        return WatchEvent(EventType.DELETE, deleted_entry(key, since))

    async def _progress_batch(self) -> WatchBatch | None:
        """A batch without events at the zxid the store is at, once every notification up
        to it has been read back; None while the store has not moved past the last batch."""
        revision = await self._store.sync()
        if self._hints:
            return None  # read them first; the progress is asked for again after
        last = self._ready[-1].revision if self._ready else self._handed_out
        if revision <= last:
            return None
        self._progress = False
        self._handed_out = revision
        return WatchBatch(revision, ())

    def request_progress(self) -> None:
        self._progress = True
        self._wake.set()

    async def close(self) -> None:
        self._ended = True
        self._store.unfollow(self)
        self._wake.set()
        if not self._started.done():
            self._started.cancel()
        with contextlib.suppress(asyncio.CancelledError, MetadataError):
            await self._started


def _gone(prefixes: frozenset[str], newest: int, start: int) -> Compacted:
    return Compacted(
        newest + 1,
        f"ZooKeeper keeps no history: {', '.join(sorted(prefixes))} changed at "
        f"{newest}, at or after start revision {start}; resync",
    )


class ZooKeeperWatch(Watch):
    """`MetadataStore.watch` on ZooKeeper (see the module)."""

    def __init__(self, store: ZooKeeperStore, prefix: str, start_revision: int | None) -> None:
        super().__init__(prefix, start_revision)
        self._follower = Follower(store, (prefix,), start_revision)

    async def __aenter__(self) -> ZooKeeperWatch:
        await self._follower._started
        return self

    async def __anext__(self) -> WatchBatch:
        return await self._follower.next_batch()

    def request_progress(self) -> None:
        self._follower.request_progress()

    async def aclose(self) -> None:
        await self._follower.close()


class ZooKeeperPrefixWatch(PrefixWatch):
    """`MetadataStore.watch_prefixes` on ZooKeeper (see the module)."""

    def __init__(
        self, store: ZooKeeperStore, prefixes: frozenset[str], start_revision: int | None
    ) -> None:
        self._follower = Follower(store, prefixes, start_revision)

    @property
    def prefixes(self) -> frozenset[str]:
        return frozenset(self._follower._after)

    async def add(self, prefixes: Iterable[str]) -> int:
        return await self._follower.add(prefixes)

    async def add_and_read(self, prefixes: Iterable[str]) -> tuple[int, list[Entry], int]:
        return await self._follower.add_and_read(prefixes)

    async def remove(self, prefixes: Iterable[str]) -> None:
        await self._follower.remove(prefixes)

    async def __aenter__(self) -> ZooKeeperPrefixWatch:
        await self._follower._started
        return self

    async def __anext__(self) -> WatchBatch:
        return await self._follower.next_batch()

    def request_progress(self) -> None:
        self._follower.request_progress()

    async def aclose(self) -> None:
        await self._follower.close()
