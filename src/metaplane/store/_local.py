"""What the two local backends (memory and sqlite) share: transactions applied to a state
view with etcd's semantics, a change log that serves watches and reads of the past, and the
watch that follows it.

The revision is a counter bumped once per transaction that changed something; every change
of that transaction carries it. An empty store is at revision 1, as etcd's is. The log keeps
each change with the entry it replaced, so that the state at an older revision is the
current state rewound.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeAlias

from metaplane.store._base import MetadataStore, PrefixWatch, Watch
from metaplane.store._errors import Compacted, InvalidRequest, LeaseNotFound
from metaplane.store._keys import ROOT, ancestors, check_prefix, in_prefix
from metaplane.store._model import (
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    EventType,
    Get,
    List,
    Listing,
    OpResult,
    Put,
    Txn,
    TxnResult,
    WatchBatch,
    WatchEvent,
    deleted_entry,
)

Change: TypeAlias = tuple[WatchEvent, Entry | None]
"""A change and the entry it replaced (None when the key did not exist)."""


class StateView(Protocol):
    """The current state, as a transaction sees and changes it."""

    def get(self, key: str) -> Entry | None: ...

    def range(self, op: List) -> tuple[list[Entry], bool]:
        """The entries `op` selects, in its order, and whether more than its limit matched."""

    def lease_exists(self, lease: int) -> bool: ...

    def write(self, key: str, entry: Entry | None, prev: Entry | None) -> None: ...


def apply_txn(view: StateView, txn: Txn, revision: int) -> tuple[TxnResult, list[Change]]:
    """Apply `txn` to `view`; its changes (if any) take `revision`.

    The result's revision is `revision` when something changed, else `revision - 1`.
    Operations run in order, so a Get after a Put in the same branch sees the Put.
    """
    succeeded = all(_holds(view, compare) for compare in txn.compares)
    ops = txn.on_success if succeeded else txn.on_failure
    for op in ops:
        if isinstance(op, Put) and op.lease and not view.lease_exists(op.lease):
            raise LeaseNotFound(op.lease)
    results: list[OpResult] = []
    changes: list[Change] = []
    for op in ops:
        if isinstance(op, Get):
            results.append(view.get(op.key))
        elif isinstance(op, List):
            entries, more = view.range(op)
            results.append(Listing(tuple(entries), revision, more))
        elif isinstance(op, Put):
            changes.append(_put(view, op, revision))
            results.append(revision)
        elif isinstance(op, Delete):
            prev = view.get(op.key)
            if prev is not None:
                changes.append(_delete(view, prev, revision))
            results.append(0 if prev is None else 1)
        elif isinstance(op, DeletePrefix):
            entries, _ = view.range(List(op.prefix))
            changes.extend(_delete(view, prev, revision) for prev in entries)
            results.append(len(entries))
    final = revision if changes else revision - 1
    if not changes:
        results = [_at(result, final) for result in results]
    return TxnResult(succeeded, final, tuple(results)), changes


def _holds(view: StateView, compare: Compare) -> bool:
    if not compare.whole_prefix:
        return compare.holds(view.get(compare.key))
    entries, _ = view.range(List(compare.key))
    return compare.holds(None) if not entries else all(compare.holds(e) for e in entries)


def _put(view: StateView, op: Put, revision: int) -> Change:
    prev = view.get(op.key)
    if prev is None:
        entry = Entry(op.key, op.value, 1, revision, revision, op.lease)
    else:
        entry = Entry(op.key, op.value, prev.version + 1, prev.create_revision, revision, op.lease)
    view.write(op.key, entry, prev)
    return WatchEvent(EventType.PUT, entry), prev


def _delete(view: StateView, prev: Entry, revision: int) -> Change:
    view.write(prev.key, None, prev)
    return WatchEvent(EventType.DELETE, deleted_entry(prev.key, revision)), prev


def _at(result: OpResult, revision: int) -> OpResult:
    if isinstance(result, Listing):
        return Listing(result.entries, revision, result.more)
    return result


def rewind(entries: dict[str, Entry], prefix: str, later: Iterable[Change]) -> None:
    """Undo `later` (changes in revision order) on `entries`, the current state of a prefix."""
    for event, prev in reversed(list(later)):
        if not in_prefix(event.key, prefix):
            continue
        if prev is None:
            entries.pop(event.key, None)
        else:
            entries[event.key] = prev


def select(ascending: Iterable[Entry], op: List) -> tuple[list[Entry], bool]:
    """What `op` selects from the entries of its prefix, given in ascending key order."""
    selected = [entry for entry in ascending if op.within(entry.key)]
    if op.reverse:
        selected.reverse()
    return trim(selected, op)


def trim(selected: list[Entry], op: List) -> tuple[list[Entry], bool]:
    """Apply `op`'s limit and keys_only to entries already selected and ordered."""
    more = op.limit is not None and len(selected) > op.limit
    if op.limit is not None:
        selected = selected[: op.limit]
    if op.keys_only:
        selected = [
            Entry(e.key, b"", e.version, e.create_revision, e.mod_revision, e.lease)
            for e in selected
        ]
    return selected, more


def under_any(prefixes: Iterable[str]) -> Callable[[str], bool]:
    """A test of whether a key lies under one of `prefixes`: a look-up of the key's
    ancestors in a set, whatever the number of prefixes."""
    wanted = frozenset(prefixes)
    if ROOT in wanted:
        return lambda key: True
    return lambda key: not wanted.isdisjoint(ancestors(key))


def undo_map(later: Iterable[Change], wanted: Callable[[str], bool]) -> dict[str, Entry | None]:
    """What each wanted key was before `later` (changes in revision order) changed it: the
    entry it replaced first, or None when it did not exist."""
    undo: dict[str, Entry | None] = {}
    for event, prev in later:
        key = event.key
        if key not in undo and wanted(key):
            undo[key] = prev
    return undo


def rewound(current: Iterable[Entry], undo: dict[str, Entry | None]) -> Iterator[Entry]:
    """`current` (entries in ascending key order) as they were before the changes `undo`
    describes, in ascending key order: one merge, linear in both."""
    restored = sorted(undo)
    position, end = 0, len(restored)
    for entry in current:
        key = entry.key
        while position < end and restored[position] < key:
            before = undo[restored[position]]
            position += 1
            if before is not None:
                yield before
        if position < end and restored[position] == key:
            position += 1
            before = undo[key]
            if before is not None:
                yield before
            continue
        yield entry
    for key in restored[position:]:
        before = undo[key]
        if before is not None:
            yield before


def paged(entries: Iterable[Entry], revision: int, page: int, keys_only: bool) -> Iterator[Listing]:
    """`entries` cut into Listings of `page` entries (values dropped with `keys_only`); at
    least one, empty when there are none. Cut by slices, not entry by entry: a scan of a
    million keys spends its time reading them, not paging them."""
    stream = iter(entries)
    if keys_only:
        stream = (
            dataclasses.replace(entry, value=b"") if entry.value else entry for entry in stream
        )
    any_page = False
    while chunk := tuple(itertools.islice(stream, page)):
        any_page = True
        yield Listing(chunk, revision)
    if not any_page:
        yield Listing((), revision)


def group(events: Iterable[WatchEvent]) -> list[WatchBatch]:
    """Events in revision order → one batch per revision."""
    batches: list[WatchBatch] = []
    current: list[WatchEvent] = []
    for event in events:
        if current and current[0].revision != event.revision:
            batches.append(WatchBatch(current[0].revision, tuple(current)))
            current = []
        current.append(event)
    if current:
        batches.append(WatchBatch(current[0].revision, tuple(current)))
    return batches


class LocalStore(MetadataStore):
    """A store whose change log lives with it: watches read the log directly."""

    def __init__(self) -> None:
        self._tick = asyncio.Event()
        self._closed = False

    def _notify(self) -> None:
        """Wake every watch: the revision moved, or the store closed."""
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def _wait_beyond(self, revision: int) -> None:
        """Wait for the next change unless the store is already beyond `revision`. It may
        return early (a progress request, the store closing): callers look again."""
        if not self._closed and self._current_revision() <= revision:
            await self._tick.wait()

    def _check_readable(self, revision: int) -> None:
        floor = self._compact_floor()
        if revision < floor:
            raise Compacted(floor)
        current = self._current_revision()
        if revision > current:
            raise InvalidRequest(f"revision {revision} is in the future (current {current})")

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        if start_revision is None:
            start_revision = self._current_revision() + 1
        return LogWatch(self, prefix, start_revision)

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        if start_revision is None:
            start_revision = self._current_revision() + 1
        return LogPrefixWatch(self, prefixes, start_revision)

    async def _close(self) -> None:
        self._closed = True
        self._notify()

    @abc.abstractmethod
    def _current_revision(self) -> int: ...

    @abc.abstractmethod
    def _compact_floor(self) -> int:
        """The oldest revision still readable and watchable."""

    @abc.abstractmethod
    def _read_log(self, prefix: str, start: int) -> tuple[Sequence[WatchEvent], int]:
        """Events under `prefix` from revision `start` on, in revision order, each revision
        whole; and the highest revision that was looked at."""


class LogWatch(Watch):
    """A watch that reads the change log of a local store.

    The log is read in revision order, so batches come in order by construction; a progress
    batch is one more batch, at the last revision read, and only when that revision is
    above the last batch handed out (else it waits for the store to move on)."""

    def __init__(self, store: LocalStore, prefix: str, start_revision: int) -> None:
        super().__init__(prefix, start_revision)
        self._store = store
        self._next = start_revision
        self._handed_out = 0  # the revision of the last batch returned
        self._ready: list[WatchBatch] = []
        self._progress = False
        self._closed = False

    async def __anext__(self) -> WatchBatch:
        while True:
            if self._closed or self._store._closed:
                raise StopAsyncIteration
            if self._ready:
                batch = self._ready.pop(0)
                self._handed_out = batch.revision
                return batch
            floor = self._store._compact_floor()
            if self._next < floor:
                self._closed = True
                raise Compacted(floor)
            events, seen = self._store._read_log(self.prefix, self._next)
            self._ready = group(events)
            self._next = max(self._next, seen + 1)
            await _hand_back()
            if self._ready:
                continue
            if self._progress and self._next - 1 > self._handed_out:
                self._progress = False
                self._handed_out = self._next - 1
                return WatchBatch(self._next - 1, ())
            await self._store._wait_beyond(self._next - 1)

    def request_progress(self) -> None:
        self._progress = True
        self._store._notify()

    async def aclose(self) -> None:
        self._closed = True


class LogPrefixWatch(PrefixWatch):
    """A watch of a set of prefixes that reads the change log of a local store once for
    all of them: each event is kept if one of its key's ancestors is a prefix followed at
    its revision (a look-up in a dict per ancestor, whatever the number of prefixes). The
    log is read in revision order and a revision whole, so batches are in order and whole
    by construction; progress as `LogWatch`'s."""

    def __init__(self, store: LocalStore, prefixes: frozenset[str], start_revision: int) -> None:
        self._store = store
        self._after: dict[str, int] = dict.fromkeys(prefixes, start_revision - 1)
        """Each prefix followed, and the revision after which its events are delivered."""
        self._next = start_revision
        self._handed_out = 0
        self._ready: list[WatchBatch] = []
        self._progress = False
        self._closed = False

    @property
    def prefixes(self) -> frozenset[str]:
        return frozenset(self._after)

    async def add(self, prefixes: Iterable[str]) -> int:
        added = [check_prefix(prefix) for prefix in prefixes]
        revision = self._store._current_revision()
        for prefix in added:
            self._after.setdefault(prefix, revision)
        return revision

    async def remove(self, prefixes: Iterable[str]) -> None:
        for prefix in prefixes:
            self._after.pop(prefix, None)
        kept = [self._followed(batch) for batch in self._ready]
        self._ready = [batch for batch in kept if batch.events]

    def _followed(self, batch: WatchBatch) -> WatchBatch:
        return WatchBatch(batch.revision, tuple(e for e in batch.events if self._wanted(e)))

    def _wanted(self, event: WatchEvent) -> bool:
        after = self._after
        revision = event.revision
        for ancestor in ancestors(event.key):
            since = after.get(ancestor)
            if since is not None and since < revision:
                return True
        return False

    async def __anext__(self) -> WatchBatch:
        store = self._store
        while True:
            if self._closed or store._closed:
                raise StopAsyncIteration
            if self._ready:
                batch = self._ready.pop(0)
                self._handed_out = batch.revision
                return batch
            floor = store._compact_floor()
            if self._next < floor:
                self._closed = True
                raise Compacted(floor)
            events, seen = store._read_log(ROOT, self._next)
            self._ready = group(event for event in events if self._wanted(event))
            self._next = max(self._next, seen + 1)
            await _hand_back()
            if self._ready:
                continue
            if self._progress and self._next - 1 > self._handed_out:
                self._progress = False
                self._handed_out = self._next - 1
                return WatchBatch(self._next - 1, ())
            await store._wait_beyond(self._next - 1)

    def request_progress(self) -> None:
        self._progress = True
        self._store._notify()

    async def aclose(self) -> None:
        self._closed = True


async def _hand_back() -> None:
    """Let the loop run other tasks after each read of the log. A watch that is behind
    reads and hands out batches without ever waiting, and its consumer applies them
    without waiting either: catching up on 400,000 changes held the loop for seconds, and
    every session of the process missed its lease refreshes."""
    await asyncio.sleep(0)
