"""The registry's writes on the one write path: a write reads keys at one revision, decides,
and hands its decision — a `resources.Change` whose conditions name their typed errors — to
the one runner, `resources.Writer`. A lost race (`ChangedSinceRead`) is decided again from
what the refused transaction's failure branch read, so that it costs one round trip, and
`Writer.run` retries it with the registry's attempts and backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from metaplane.resources import (
    Change,
    ChangedSinceRead,
    Condition,
    RetryPolicy,
    Writer,
    decode,
    unchanged,
)
from metaplane.schema._errors import RegistryConflict
from metaplane.store import Entry, Get, MetadataStore, TxnResult

T = TypeVar("T")
V = TypeVar("V")

FIRST_BACKOFF = 0.002
MAX_BACKOFF = 0.25
"""After a lost race the failure branch has read the keys again, so the first retry goes at
once (a round trip ahead of a newcomer); later ones back off at random, doubling from a few
milliseconds to at most 250 ms, so that the writers that keep colliding spread out."""


def registry_policy(attempts: int) -> RetryPolicy:
    """The runner's policy for the registry: `attempts` lost races in a row, the backoff above,
    and the runner's own patience with an unavailable store."""
    return RetryPolicy(conflicts=attempts, first_backoff=FIRST_BACKOFF, max_backoff=MAX_BACKOFF)


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

    def unchanged(self, *keys: str) -> list[Condition]:
        """Conditions that hold only if none of `keys` was written, created or deleted since
        (a key not read: if it is still absent); else `ChangedSinceRead`, a lost race."""
        return [unchanged(key, self.mod_revision(key)) for key in keys]


@dataclass(frozen=True)
class Commit(Generic[T]):
    """Apply `change`; `outcome` makes the result from its revision. `queue`: the hot key this
    write races for, if any: writers of one process queue for it (KeyQueues)."""

    change: Change
    outcome: Callable[[int], T]
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
    queue instead, in front of the runner, so only writers of other processes ever race.
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


class RegistryWrites:
    """The registry's reads and writes: decisions made from snapshots, their changes applied
    by the one runner. `conflicts` counts the races lost to other writers (and retried)."""

    def __init__(self, store: MetadataStore, attempts: int) -> None:
        self.store = store
        self.attempts = attempts
        self.writer = Writer(store, registry_policy(attempts))
        self.queues = KeyQueues()
        self.conflicts = 0

    async def run(
        self, what: str, keys: Sequence[str], decide: Callable[[Snapshot], Decision[T]]
    ) -> T:
        """Decide from a snapshot of `keys` and apply the decision's change through the
        runner, which retries a lost race; RegistryConflict after `attempts` lost races."""
        async with contextlib.AsyncExitStack() as held:
            attempt = _Attempt(self, list(dict.fromkeys(keys)), decide, held)
            try:
                return await self.writer.run(attempt, what)
            except ChangedSinceRead as lost:
                raise RegistryConflict(what, self.attempts) from lost

    async def view(
        self, what: str, keys: Sequence[str], decide: Callable[[Snapshot], Decision[T]]
    ) -> T:
        """Decide from a snapshot of `keys` (read further as `decide` asks) without writing."""
        async with contextlib.AsyncExitStack() as held:
            attempt = _Attempt(self, list(dict.fromkeys(keys)), decide, held)
            decision = await attempt.decided(await self.read(attempt.wanted))
        if not isinstance(decision, Done):
            raise RuntimeError(f"{what}: a read decided to write")
        return decision.outcome

    async def read(self, keys: Sequence[str]) -> Snapshot:
        """`keys` at one revision, from the store itself: a write must not decide on a stale
        cache (the conditions would catch it, at the cost of a retry)."""
        result = await self.store.txn((), [Get(key) for key in keys], ())
        return Snapshot.of(keys, result)


class _Attempt(Generic[T]):
    """One write's attempts, as `Writer.run` makes them: each decides from the snapshot the
    last refusal read (else from a read of its own) and sends the decided change."""

    def __init__(
        self,
        writes: RegistryWrites,
        keys: list[str],
        decide: Callable[[Snapshot], Decision[T]],
        held: contextlib.AsyncExitStack,
    ) -> None:
        self.writes, self.wanted, self.decide, self.held = writes, keys, decide, held
        self.refused: Snapshot | None = None
        self.queued = False

    async def __call__(self, fresh: bool) -> T:
        snapshot, self.refused = self.refused, None
        decision = await self.decided(snapshot or await self.writes.read(self.wanted))
        if isinstance(decision, Done):
            return decision.outcome
        return await self.commit(decision)

    async def decided(self, snapshot: Snapshot) -> Done[T] | Commit[T]:
        """The decision once every key it depends on is read, and this process's writers of
        its hot key ahead of it are done."""
        while True:
            decision = self.decide(snapshot)
            if isinstance(decision, Read):
                snapshot = await self.read_more(decision.keys)
            elif isinstance(decision, Commit) and await self.queue_for(decision):
                snapshot = await self.writes.read(self.wanted)
            else:
                return decision

    async def read_more(self, keys: Sequence[str]) -> Snapshot:
        if set(keys) <= set(self.wanted):
            raise RuntimeError("a registry write asked again for keys it has read")
        self.wanted = list(dict.fromkeys([*self.wanted, *keys]))
        return await self.writes.read(self.wanted)

    async def queue_for(self, decision: Commit[T]) -> bool:
        """Queue behind this process's other writers of the decision's hot key (once a
        write); True when one was ahead, so that the decision must be made again."""
        if decision.queue is None or self.queued:
            return False
        self.queued = True
        return await self.held.enter_async_context(self.writes.queues.hold(decision.queue))

    async def commit(self, decision: Commit[T]) -> T:
        """Send the change, its failure branch reading every key this write read; a lost
        race keeps that read for the next attempt and is raised for the runner to retry."""
        change = decision.change
        compared = {c.compare.key for c in change.conditions if not c.compare.whole_prefix}
        reads = tuple(Get(key) for key in self.wanted if key not in compared)
        change = replace(change, reads=change.reads + reads)
        outcome = await self.writes.writer.send(change)
        if isinstance(outcome, int):
            return decision.outcome(outcome)
        refused = change.refusal(outcome)
        if refused is None:
            raise AssertionError(f"a registry write failed with its conditions holding: {change}")
        if isinstance(refused, ChangedSinceRead):
            self.writes.conflicts += 1
            self.refused = Snapshot(change.seen(outcome))
        raise refused
