"""The in-memory backend: one process, one event loop; for tests and tools.

Every operation runs to completion without yielding, so a transaction is atomic with respect
to every other coroutine of the loop.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field

from sortedcontainers import SortedDict

from metaplane.store._errors import Compacted, InvalidRequest, LeaseNotFound
from metaplane.store._keys import ROOT, children_prefix, in_prefix, prefix_end, ranges_in_key_order
from metaplane.store._local import (
    Change,
    LocalStore,
    apply_txn,
    paged,
    rewind,
    rewound,
    select,
    trim,
    under_any,
    undo_map,
)
from metaplane.store._model import (
    Entry,
    EventType,
    Lease,
    List,
    Listing,
    Put,
    Txn,
    TxnResult,
    WatchEvent,
    deleted_entry,
)

DEFAULT_HISTORY = 100_000
"""Revisions kept for watches and reads of the past."""

_MAX_EVENTS_READ = 10_000


@dataclass(slots=True)
class _Lease:
    ttl: int
    keys: set[str] = field(default_factory=set)
    timer: asyncio.TimerHandle | None = None


class MemoryStore(LocalStore):
    """A store in this process's memory."""

    def __init__(self, *, history: int = DEFAULT_HISTORY) -> None:
        super().__init__()
        if history < 1:
            raise InvalidRequest("history must keep at least one revision")
        self.url = "memory://"
        self._data: SortedDict[str, Entry] = SortedDict()
        self._rev = 1  # as etcd: an empty store is at revision 1
        self._compacted = 0  # the revision of the last compaction (or trim); 0: none yet
        self._history = history
        self._log: deque[tuple[int, list[Change]]] = deque()
        self._leases: dict[int, _Lease] = {}

    # -- reads -------------------------------------------------------------------------

    async def _get(self, key: str) -> Entry | None:
        entry: Entry | None = self._data.get(key)
        return entry

    async def _list(self, op: List, revision: int | None) -> Listing:
        if revision is None or revision == self._rev:
            entries, more = _View(self).range(op)
            return Listing(tuple(entries), self._rev, more)
        self._check_readable(revision)
        state = {entry.key: entry for entry in _entries(self._data, List(op.prefix))}
        rewind(state, op.prefix, self._changes_after(revision))
        entries, more = select((state[key] for key in sorted(state)), op)
        return Listing(tuple(entries), revision, more)

    async def _revision(self) -> int:
        return self._rev

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        """The state at `revision` is taken whole before the first page (references to the
        entries, and the changes since undone in one pass), so that writes between pages
        change nothing."""
        if revision is None:
            revision = self._rev
        self._check_readable(revision)
        current = [
            entry
            for start, end in ranges_in_key_order(prefixes)
            for entry in _in_range(self._data, start, end)
        ]
        undo = undo_map(self._changes_after(revision), under_any(prefixes))
        for listing in paged(rewound(current, undo), revision, page, keys_only):
            yield listing

    # -- writes ------------------------------------------------------------------------

    async def _put(self, op: Put) -> int:
        return (await self._txn(Txn((), (op,), ()))).revision

    async def _txn(self, txn: Txn) -> TxnResult:
        result, changes = apply_txn(_View(self), txn, self._rev + 1)
        if changes:
            self._commit(changes)
        return result

    async def _compact(self, revision: int) -> None:
        if revision <= self._compacted:
            raise Compacted(self._compacted)
        self._check_readable(revision)
        while self._log and self._log[0][0] < revision:
            self._log.popleft()
        self._compacted = revision

    def _commit(self, changes: list[Change]) -> None:
        self._rev += 1
        self._log.append((self._rev, changes))
        while len(self._log) > self._history:
            self._log.popleft()
            self._compacted = self._log[0][0]  # as etcd's automatic compaction
        self._notify()

    # -- leases ------------------------------------------------------------------------

    async def _grant(self, ttl: int) -> Lease:
        lease_id = random.getrandbits(62) + 1
        while lease_id in self._leases:
            lease_id = random.getrandbits(62) + 1
        self._leases[lease_id] = _Lease(ttl)
        self._arm(lease_id)
        return Lease(lease_id, ttl)

    async def _refresh(self, lease: int, timeout: float | None) -> int:
        state = self._leases.get(lease)
        if state is None:
            raise LeaseNotFound(lease)
        self._arm(lease)
        return state.ttl

    async def _revoke(self, lease: int) -> None:
        if lease not in self._leases:
            raise LeaseNotFound(lease)
        self._expire(lease)

    def _arm(self, lease: int) -> None:
        state = self._leases[lease]
        if state.timer is not None:
            state.timer.cancel()
        loop = asyncio.get_running_loop()
        state.timer = loop.call_later(state.ttl, self._expire, lease)

    def _expire(self, lease: int) -> None:
        """Drop the lease and delete its keys, all in one revision."""
        state = self._leases.pop(lease, None)
        if state is None:
            return
        if state.timer is not None:
            state.timer.cancel()
        if not state.keys:
            return
        revision = self._rev + 1
        changes: list[Change] = []
        for key in sorted(state.keys):
            prev = self._data.pop(key)
            changes.append((WatchEvent(EventType.DELETE, deleted_entry(key, revision)), prev))
        self._commit(changes)

    # -- the change log ----------------------------------------------------------------

    def _current_revision(self) -> int:
        return self._rev

    def _compact_floor(self) -> int:
        return max(self._compacted, 1)

    def _changes_after(self, revision: int) -> Iterator[Change]:
        for log_revision, changes in self._log:
            if log_revision > revision:
                yield from changes

    def _read_log(self, prefix: str, start: int) -> tuple[Sequence[WatchEvent], int]:
        if not self._log or start > self._rev:
            return [], self._rev
        events: list[WatchEvent] = []
        seen = start - 1
        first = self._log[0][0]
        for index in range(max(start - first, 0), len(self._log)):
            log_revision, changes = self._log[index]
            events.extend(event for event, _ in changes if in_prefix(event.key, prefix))
            seen = log_revision
            if len(events) >= _MAX_EVENTS_READ:
                break
        return events, seen

    async def _close(self) -> None:
        for state in self._leases.values():
            if state.timer is not None:
                state.timer.cancel()
        await super()._close()


class _View:
    """The state view of a transaction on a memory store."""

    def __init__(self, store: MemoryStore) -> None:
        self._data = store._data
        self._leases = store._leases

    def get(self, key: str) -> Entry | None:
        entry: Entry | None = self._data.get(key)
        return entry

    def range(self, op: List) -> tuple[list[Entry], bool]:
        return trim(list(_entries(self._data, op)), op)

    def lease_exists(self, lease: int) -> bool:
        return lease in self._leases

    def write(self, key: str, entry: Entry | None, prev: Entry | None) -> None:
        if prev is not None and prev.lease:
            self._leases[prev.lease].keys.discard(key)
        if entry is None:
            del self._data[key]
            return
        self._data[key] = entry
        if entry.lease:
            self._leases[entry.lease].keys.add(key)


def _in_range(data: SortedDict[str, Entry], start: str, end: str | None) -> Iterator[Entry]:
    """The entry at `start` when `end` is None, else the entries in [start, end)."""
    if end is None:
        if start in data:
            yield data[start]
        return
    for key in data.irange(start, end, inclusive=(True, False)):
        yield data[key]


def _entries(data: SortedDict[str, Entry], op: List) -> Iterator[Entry]:
    """The entries `op` selects, in its order, before its limit."""
    own = data.get(op.prefix) if op.prefix != ROOT and op.within(op.prefix) else None
    low, high = children_prefix(op.prefix), prefix_end(op.prefix)
    low_inclusive = True
    if op.start_after is not None and op.start_after >= low:
        low, low_inclusive = op.start_after, False
    if op.end_before is not None and op.end_before < high:
        high = op.end_before
    if own is not None and not op.reverse:
        yield own
    if low < high:
        for key in data.irange(low, high, inclusive=(low_inclusive, False), reverse=op.reverse):
            yield data[key]
    if own is not None and op.reverse:
        yield own
