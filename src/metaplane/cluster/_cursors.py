"""Subscription cursors written in batches: after so many acks or so many seconds, whichever
comes first — on a timer, not on the next ack — and always fenced on still owning the topic."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.layout import TopicName
from metaplane.resources import encode
from metaplane.store import Compare, MetadataError, MetadataStore, Put

log = logging.getLogger(__name__)

DEFAULT_EVERY = 1000
# The promise is "written within 5 s of the first unwritten ack": the timer fires half a
# second early so that the transaction itself (a few ms, more on a slow disk) fits in it.
DEFAULT_INTERVAL = 4.5


@dataclass(slots=True)
class _Pending:
    offset: int
    acks: int
    since: float


class CursorBatcher:
    """The acknowledged offsets of a broker's subscriptions, written in batches.

    A subscription's cursor is written once `every` acks have come since its last write, or
    `interval` seconds after the first of them, whichever is sooner; a topic's cursors are
    written together, in one transaction that holds only while this broker still owns the
    topic — a broker that lost a topic never writes its cursors.
    """

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        *,
        every: int = DEFAULT_EVERY,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self._store = store
        self._broker_id = broker_id
        self._every = every
        self._interval = interval
        self._pending: dict[TopicName, dict[str, _Pending]] = {}
        self._due: set[TopicName] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

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

    def take(self, topic: TopicName) -> dict[str, int]:
        """The pending cursors of `topic`, no longer pending: for a caller that writes them
        itself (a topic being unloaded writes them with its sealed state)."""
        return {name: p.offset for name, p in self._pending.pop(topic, {}).items()}

    def ops(self, topic: TopicName, cursors: dict[str, int]) -> list[Put]:
        return [Put(layout.cursor(topic, name), encode(offset)) for name, offset in cursors.items()]

    async def flush(self, topic: TopicName) -> int | None:
        """Write `topic`'s pending cursors now, fenced on owning it; the revision, or None
        when there was nothing to write or the topic is no longer ours (they are dropped)."""
        cursors = self.take(topic)
        self._due.discard(topic)
        if not cursors:
            return None
        owned = Compare.exists(layout.assignment(self._broker_id, topic))
        try:
            result = await self._store.txn([owned], self.ops(topic, cursors), [])
        except MetadataError as error:
            log.warning("cursors of %s not written (%s); they stay pending", topic, error)
            self._restore(topic, cursors)
            return None
        if not result.succeeded:
            log.info("cursors of %s dropped: broker %d no longer owns it", topic, self._broker_id)
            return None
        return result.revision

    async def flush_all(self) -> None:
        for topic in list(self._pending):
            await self.flush(topic)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer(), name="cursor timer")

    async def stop(self) -> None:
        """Stop the timer and write what is pending."""
        await cancel_and_wait(self._task)
        await self.flush_all()

    async def _timer(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            for topic in self._topics_due(loop.time()):
                await self.flush(topic)
            self._wake.clear()
            wait = self._next_deadline(loop.time())
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
        return sorted(due)

    def _next_deadline(self, now: float) -> float | None:
        starts = [p.since for subs in self._pending.values() for p in subs.values()]
        return None if not starts else max(min(starts) + self._interval - now, 0.0)

    def _restore(self, topic: TopicName, cursors: dict[str, int]) -> None:
        now = asyncio.get_running_loop().time()
        subscriptions = self._pending.setdefault(topic, {})
        for name, offset in cursors.items():
            current = subscriptions.get(name)
            if current is None:
                subscriptions[name] = _Pending(offset, 0, now)
            else:
                current.offset = max(current.offset, offset)
