"""The registry's write loop: read keys at one revision, decide, commit with compares; when a
compare fails, decide again from what the transaction's failure branch read, a bounded number
of times, so that a lost race costs one round trip and never a lost update.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from metaplane.resources import decode
from metaplane.schema._errors import RegistryConflict
from metaplane.store import (
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Get,
    MetadataStore,
    Put,
    TxnResult,
)

Operation = Put | Delete | DeletePrefix

T = TypeVar("T")
V = TypeVar("V")

log = logging.getLogger(__name__)

# After a lost race the failure branch has read the keys again, so the first retry goes at
# once (a round trip ahead of a newcomer); later ones back off at random, so that the writers
# that keep colliding spread out.
IMMEDIATE_RETRIES = 1
FIRST_BACKOFF = 0.002
MAX_BACKOFF = 0.25


def backoff(lost: int) -> float:
    """Seconds to wait after the `lost`-th lost race in a row."""
    if lost <= IMMEDIATE_RETRIES:
        return 0.0
    return random.uniform(0, min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (lost - IMMEDIATE_RETRIES)))


@dataclass(frozen=True)
class Snapshot:
    """Keys read at one revision; a key that was not read counts as missing."""

    entries: Mapping[str, Entry | None]

    @classmethod
    def of(cls, keys: Sequence[str], result: TxnResult) -> Snapshot:
        return cls({key: result.entry(index) for index, key in enumerate(keys)})

    def entry(self, key: str) -> Entry | None:
        return self.entries.get(key)

    def has_read(self, key: str) -> bool:
        return key in self.entries

    def exists(self, key: str) -> bool:
        return self.entry(key) is not None

    def value(self, key: str, value_type: type[V]) -> V | None:
        """The key's value decoded as `value_type`, or None if the key is missing."""
        entry = self.entry(key)
        return None if entry is None else decode(value_type, entry.value)

    def mod_revision(self, key: str) -> int:
        """The key's mod_revision, 0 when missing: what a compare that it is unchanged takes."""
        entry = self.entry(key)
        return 0 if entry is None else entry.mod_revision

    def unchanged(self, *keys: str) -> list[Compare]:
        """Compares that hold only if none of `keys` was written, created or deleted since."""
        return [Compare.mod_revision(key, "==", self.mod_revision(key)) for key in keys]


@dataclass(frozen=True)
class Commit(Generic[T]):
    """Write `operations` if `compares` hold; `outcome` makes the result from the revision.

    `watch`: further keys the next attempt must see if a compare fails (a key the write
    expects absent, say), read by the failure branch in the same round trip. `queue`: the hot
    key this write races for, if any: writers of one process queue for it (KeyQueues).
    """

    compares: Sequence[Compare]
    operations: Sequence[Operation]
    outcome: Callable[[int], T]
    watch: Sequence[str] = ()
    queue: str | None = None


@dataclass(frozen=True)
class Done(Generic[T]):
    """Nothing to write: the result is already known."""

    outcome: T


@dataclass(frozen=True)
class Read:
    """Decide again once these keys are read too (they depend on what was read first)."""

    keys: Sequence[str]


Decision = Commit[T] | Done[T] | Read


class KeyQueues:
    """First-come first-served queues, one per hot key, for the writers of one process.

    Optimistic writers that race for one key (the id counter, a busy subject) starve the
    unlucky: a winner comes back at once while a loser backs off. Within a process they
    queue instead, so only writers of other processes ever race.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[bool]:
        """Hold `key`'s queue; yields whether another writer was ahead (and may have
        changed the store meanwhile)."""
        waited = self._users[key] > 0
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            async with lock:
                yield waited
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]


@dataclass
class WriteLoop:
    """Runs decisions against a store; `conflicts` counts the compares lost to other writers."""

    store: MetadataStore
    attempts: int
    conflicts: int = field(default=0)
    queues: KeyQueues = field(default_factory=KeyQueues)

    async def run(
        self, what: str, keys: Iterable[str], decide: Callable[[Snapshot], Decision[T]]
    ) -> T:
        """Decide from a snapshot of `keys` and commit, until a commit holds or `decide`
        needs no write; raises RegistryConflict after `attempts` lost races."""
        async with contextlib.AsyncExitStack() as held:
            write = _Write(self, what, list(dict.fromkeys(keys)), decide, held)
            return await write.run()

    async def read(self, keys: Sequence[str]) -> Snapshot:
        """`keys` at one revision, from the store itself: a write must not decide on a stale
        cache (the compares would catch it, at the cost of a retry)."""
        result = await self.store.txn((), [Get(key) for key in keys], ())
        return Snapshot.of(keys, result)


class _Write(Generic[T]):
    """One write's way through the loop: its snapshot, its lost races, its queue."""

    def __init__(
        self,
        loop: WriteLoop,
        what: str,
        keys: list[str],
        decide: Callable[[Snapshot], Decision[T]],
        held: contextlib.AsyncExitStack,
    ) -> None:
        self.loop, self.what, self.wanted, self.decide = loop, what, keys, decide
        self.held = held
        self.queued = False
        self.lost = 0

    async def run(self) -> T:
        snapshot = await self.loop.read(self.wanted)
        while True:
            decision = self.decide(snapshot)
            if isinstance(decision, Done):
                return decision.outcome
            if isinstance(decision, Read):
                snapshot = await self.read_more(decision.keys)
            elif await self.queue_for(decision):
                snapshot = await self.loop.read(self.wanted)
            else:
                result = await self.commit(decision)
                if isinstance(result, Snapshot):
                    snapshot = result
                else:
                    return decision.outcome(result)

    async def read_more(self, keys: Sequence[str]) -> Snapshot:
        if set(keys) <= set(self.wanted):
            raise RuntimeError(f"{self.what}: asked again for keys it has read")
        self.wanted = list(dict.fromkeys([*self.wanted, *keys]))
        return await self.loop.read(self.wanted)

    async def queue_for(self, decision: Commit[T]) -> bool:
        """Queue behind this process's other writers of the decision's hot key; True when
        one was ahead, so that the decision must be made again on a fresh snapshot."""
        if decision.queue is None or self.queued:
            return False
        self.queued = True
        return await self.held.enter_async_context(self.loop.queues.hold(decision.queue))

    async def commit(self, decision: Commit[T]) -> int | Snapshot:
        """The revision of the commit, or what the failure branch read when a compare failed."""
        fetched = list(dict.fromkeys([*self.wanted, *decision.watch]))
        result = await self.loop.store.txn(
            decision.compares, decision.operations, [Get(key) for key in fetched]
        )
        if result.succeeded:
            return result.revision
        self.lost += 1
        self.loop.conflicts += 1
        if self.lost >= self.loop.attempts:
            raise RegistryConflict(self.what, self.lost)
        log.debug("%s: lost a race (%d), deciding again", self.what, self.lost)
        await asyncio.sleep(backoff(self.lost))
        return Snapshot.of(fetched, result)
