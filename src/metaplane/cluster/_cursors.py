"""Subscription cursors written in batches: after so many acks or so many seconds, whichever
comes first — on a timer, not on the next ack — each write fenced on still owning the topic
and on the subscription still existing. An acknowledged cursor stays pending until the write
that carries it commits: a flush that fails, is refused or is cancelled loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from functools import partial

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.cluster._journal import NO_JOURNAL, Journal
from metaplane.layout import TopicName
from metaplane.resources import (
    Change,
    Condition,
    NoSubscription,
    RetryPolicy,
    TopicNotOwned,
    Writer,
    encode,
)
from metaplane.resources._change import key_exists
from metaplane.store import Fenced, MetadataError, MetadataStore, Put

log = logging.getLogger(__name__)

DEFAULT_EVERY = 1000
# The promise is "written within 5 s of the first unwritten ack": the timer fires half a
# second early so that the transaction itself (a few ms, more on a slow disk) fits in it.
DEFAULT_INTERVAL = 4.5

_FLUSH = RetryPolicy(conflicts=1, unavailable=1.0)
"""A flush sends its change again for a second at most; the timer tries again later."""

Fence = Callable[[TopicName], Condition | None]
"""The ownership fence of a topic's writes, or None when the broker does not serve it now."""


@dataclass(slots=True)
class _Pending:
    offset: int
    acks: int
    since: float


class CursorBatcher:
    """The acknowledged offsets of a broker's subscriptions, written in batches.

    A subscription's cursor is written once `every` acks have come since its last write, or
    `interval` seconds after the first of them, whichever is sooner. A topic's cursors are
    written together, in one change fenced by `fence(topic)` (the broker still owns the
    topic; default: its assignment exists) and by each subscription existing: a cursor is
    never written for a topic the broker lost, nor re-created for a deleted subscription
    (that cursor is dropped, with a log line). A cursor stays pending until the write that
    carries it commits; a newer ack that arrives meanwhile stays pending after it.

    A topic's writes are serialised (`hold(topic)`): the hand-over of a topic takes its
    cursors with the seal while no flush of it is in flight.
    """

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        *,
        every: int = DEFAULT_EVERY,
        interval: float = DEFAULT_INTERVAL,
        fence: Fence | None = None,
        journal: Journal = NO_JOURNAL,
    ) -> None:
        self._store = store
        self._broker_id = broker_id
        self._every = every
        self._interval = interval
        self._fence = fence or self._assigned
        self._journal = journal
        self._writer = Writer(store, _FLUSH)
        self._pending: dict[TopicName, dict[str, _Pending]] = {}
        self._locks: dict[TopicName, asyncio.Lock] = {}
        self._due: set[TopicName] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.written = 0
        """Cursor writes committed (a cursor of one subscription counts once)."""
        self.dropped = 0
        """Cursors dropped because their subscription was deleted."""

    def ack(self, topic: TopicName, subscription: str, offset: int) -> None:
        """Record that `subscription` acknowledged everything up to `offset`."""
        loop = asyncio.get_running_loop()
        subscriptions = self._pending.setdefault(topic, {})
        pending = subscriptions.get(subscription)
        if pending is None:
            subscriptions[subscription] = _Pending(offset, 1, loop.time())
            self._wake.set()  # a new deadline: the timer may have to fire sooner
            return
        pending.offset = max(pending.offset, offset)
        pending.acks += 1
        if pending.acks >= self._every:
            self._due.add(topic)
            self._wake.set()

    @property
    def pending_count(self) -> int:
        """Subscriptions with an acknowledged cursor not yet written."""
        return sum(len(subscriptions) for subscriptions in self._pending.values())

    def pending(self, topic: TopicName) -> dict[str, int]:
        """The cursors of `topic` acknowledged and not yet written."""
        return {name: p.offset for name, p in self._pending.get(topic, {}).items()}

    def ops(self, topic: TopicName, cursors: dict[str, int]) -> list[Put]:
        return [Put(layout.cursor(topic, name), encode(offset)) for name, offset in cursors.items()]

    def change(self, topic: TopicName, cursors: dict[str, int]) -> Change:
        """The write of `cursors`, refused unless each subscription still exists."""
        conditions = tuple(
            key_exists(layout.subscription(topic, name), partial(NoSubscription, topic, name))
            for name in sorted(cursors)
        )
        return Change(conditions, tuple(self.ops(topic, cursors)))

    def committed(self, topic: TopicName, cursors: dict[str, int]) -> None:
        """`cursors` of `topic` are written: what they carried is pending no more (an ack
        that came after them stays, as if it were the first since the write)."""
        subscriptions = self._pending.get(topic, {})
        now = asyncio.get_running_loop().time()
        for name, offset in cursors.items():
            pending = subscriptions.get(name)
            if pending is None:
                continue
            if pending.offset <= offset:
                del subscriptions[name]
            else:
                pending.acks, pending.since = 1, now
        self.written += len(cursors)
        if not subscriptions:
            self._pending.pop(topic, None)
            self._due.discard(topic)

    def forget(self, topic: TopicName, subscription: str | None = None) -> None:
        """Drop the pending cursors of `topic` (of one subscription): the topic is gone, or
        the subscription was deleted, or its cursor was set by an administrator."""
        if subscription is None:
            self._pending.pop(topic, None)
            self._due.discard(topic)
        else:
            self._pending.get(topic, {}).pop(subscription, None)

    @contextlib.asynccontextmanager
    async def hold(self, topic: TopicName) -> AsyncIterator[None]:
        """No other write of `topic`'s cursors runs meanwhile."""
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            yield

    async def flush(self, topic: TopicName) -> int | None:
        """Write `topic`'s pending cursors now, fenced; the revision, or None when there was
        nothing to write or the write failed or was refused (they stay pending, except those
        of deleted subscriptions)."""
        self._due.discard(topic)
        async with self.hold(topic):
            while True:
                cursors = self.pending(topic)
                fence = self._fence(topic)
                if not cursors or fence is None:
                    return None
                try:
                    revision = await self._writer.apply(self.change(topic, cursors).guarded(fence))
                except NoSubscription as gone:
                    self._drop_deleted(topic, gone.subscription)
                    continue
                except (Fenced, TopicNotOwned) as error:
                    log.info("cursors of %s not written: %s", topic, error)
                    return None
                except MetadataError as error:  # Unavailable, or a refusal that may pass
                    log.warning("cursors of %s not written (%s); they stay pending", topic, error)
                    return None
                self.committed(topic, cursors)
                self._journal.record(
                    "cursors", topic=topic.path, cursors=cursors, revision=revision
                )
                return revision

    def _drop_deleted(self, topic: TopicName, subscription: str) -> None:
        log.warning(
            "cursor of %s/%s dropped: the subscription was deleted", topic.path, subscription
        )
        self.forget(topic, subscription)
        self.dropped += 1
        self._journal.record("cursor-dropped", topic=topic.path, subscription=subscription)

    async def flush_all(self, topics: Iterable[TopicName] | None = None) -> None:
        for topic in sorted(self._pending if topics is None else topics):
            await self.flush(topic)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer(), name="cursor timer")

    async def stop(self, timeout: float = 10.0) -> dict[str, dict[str, int]]:
        """Stop the timer and write what is pending, within `timeout` seconds. Returns what
        could not be written (by topic path; empty when everything was), and says so in
        an error line: the store did not take it in time, or the topic is no longer ours."""
        await cancel_and_wait(self._task)
        try:
            async with asyncio.timeout(timeout):
                await self.flush_all()
        except TimeoutError:
            pass
        left = {topic.path: cursors for topic in self._pending if (cursors := self.pending(topic))}
        if left:
            log.error("broker %d stopped with cursors not written: %s", self._broker_id, left)
        return left

    async def _timer(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # Cleared before looking: an ack that makes a topic due while its flush runs
            # sets it again, and the next round writes it at once.
            self._wake.clear()
            for topic in self._topics_due(loop.time()):
                await self.flush(topic)
            wait = self._next_deadline(loop.time())
            if wait == 0.0:
                wait = self._interval / 10  # due but not written (refused, store away)
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _topics_due(self, now: float) -> list[TopicName]:
        due = set(self._due)
        for topic, subscriptions in self._pending.items():
            if any(now - p.since >= self._interval for p in subscriptions.values()):
                due.add(topic)
        return sorted(topic for topic in due if self._fence(topic) is not None)

    def _next_deadline(self, now: float) -> float | None:
        starts = [
            p.since
            for topic, subs in self._pending.items()
            if self._fence(topic) is not None
            for p in subs.values()
        ]
        return None if not starts else max(min(starts) + self._interval - now, 0.0)

    def _assigned(self, topic: TopicName) -> Condition:
        key = layout.assignment(self._broker_id, topic)
        return key_exists(key, partial(TopicNotOwned, topic, self._broker_id))
