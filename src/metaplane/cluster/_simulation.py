"""Simulated traffic for a standalone cluster: topics whose offsets advance as if producers
published, storage objects uploaded as a broker's tiered storage would, and consumers that
acknowledge — so that every kind of key of the layout moves as on a real cluster."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.cluster._journal import NO_JOURNAL, Journal
from metaplane.layout import TopicName
from metaplane.resources import (
    Condition,
    CurrentObject,
    ObjectDescriptor,
    RetryPolicy,
    StorageManager,
    SubscriptionManager,
    Versioned,
)
from metaplane.store import Fenced, MetadataError, MetadataStore


class Acknowledger(Protocol):
    """Where consumers' acknowledgements go: a BrokerNode."""

    def ack(self, topic: TopicName, subscription: str, offset: int) -> None: ...


log = logging.getLogger(__name__)

_UPLOAD = RetryPolicy(conflicts=1, unavailable=2.0)


@dataclass
class _Log:
    """One topic's log as the simulation keeps it."""

    start: int  # the first offset this broker published
    next_offset: int
    uploaded_to: int  # the first offset not yet in a storage object
    owned: Condition  # the fence of what the broker writes about the topic while serving
    subscriptions: list[str] = field(default_factory=list)
    unloading: bool = False  # publishing has stopped: the last upload is the unload's
    uploading: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One upload of the log at a time: the unload's waits for one in flight, then uploads
    what is left after it."""


class SimulatedTopics:
    """A `TopicHost` whose topics publish `rate` messages a second each, upload a storage
    object every `object_size` messages (fenced on the broker still owning the topic) and
    whose subscriptions acknowledge `ack_lag` messages behind the head — only what this
    broker published itself, and only what is in storage: a consumer is dispatched durable
    messages only (a real broker's are in its log first), so a crash loses no acknowledged
    message and leaves no gap in storage."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        *,
        rate: float = 20.0,
        object_size: int = 50,
        ack_lag: int = 5,
        tick: float = 0.25,
        journal: Journal = NO_JOURNAL,
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.rate = rate
        self.object_size = object_size
        self.ack_lag = ack_lag
        self.tick = tick
        self.journal = journal
        self.logs: dict[TopicName, _Log] = {}
        self._storage = StorageManager(store, policy=_UPLOAD)
        self._subscriptions = SubscriptionManager(store)
        self._task: asyncio.Task[None] | None = None
        self.acknowledger: Acknowledger | None = None  # the BrokerNode, once wired

    async def load(self, topic: TopicName, start_offset: int, owned: Condition) -> None:
        subscriptions = await self._read_subscriptions(topic)
        self.logs[topic] = _Log(start_offset, start_offset, start_offset, owned, subscriptions)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._publish(), name="traffic")

    async def unload(self, topic: TopicName, fence: Condition) -> int:
        """Stop publishing, upload what is not in storage yet under `fence`, and return the
        last offset published: the last one stored. A store away raises (the broker tries
        again); a fence that no longer holds leaves the rest unstored, and those messages
        unpublished (never acknowledged: their producers would have been told they failed;
        the hand-over is abandoned anyway)."""
        log_ = self.logs.get(topic)
        if log_ is None:
            return -1
        log_.unloading = True  # no more publishing: this is the last upload
        log_.owned = fence
        await self._upload(topic, log_, fence, raising=True)
        del self.logs[topic]
        return log_.uploaded_to - 1

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _publish(self) -> None:
        started = time.monotonic()
        published = 0.0
        while True:
            await asyncio.sleep(self.tick)
            due = (time.monotonic() - started) * self.rate - published
            count = int(due)
            published += count
            for topic, log_ in list(self.logs.items()):
                if log_.unloading:  # (also one unloaded while this loop awaited)
                    continue
                log_.next_offset += count
                if log_.next_offset - log_.uploaded_to >= self.object_size:
                    await self._upload(topic, log_, log_.owned)
                    # Subscriptions come and go while a topic is served (one created just
                    # after the topic was assigned here would otherwise never be acked).
                    with contextlib.suppress(MetadataError):
                        log_.subscriptions = await self._read_subscriptions(topic)
                self._acknowledge(topic, log_)

    def _acknowledge(self, topic: TopicName, log_: _Log) -> None:
        acked = min(log_.next_offset - 1 - self.ack_lag, log_.uploaded_to - 1)
        if acked < log_.start or self.acknowledger is None:
            return
        for subscription in log_.subscriptions:
            self.acknowledger.ack(topic, subscription, acked)

    async def _upload(
        self, topic: TopicName, log_: _Log, fence: Condition, *, raising: bool = False
    ) -> None:
        """Record the storage object of what was published since the last one, under
        `fence` (owning the topic, or handing it over)."""
        async with log_.uploading:
            await self._upload_next(topic, log_, fence, raising)

    async def _upload_next(
        self, topic: TopicName, log_: _Log, fence: Condition, raising: bool
    ) -> None:
        start, end = log_.uploaded_to, log_.next_offset - 1
        if end < start:
            return
        descriptor = ObjectDescriptor(
            completed=True,
            created_at=int(time.time()),
            end_offset=end,
            etag=None,
            object_id=f"data-{start}-{end}.dnb1",
            offset_index=[(start, 0)],
            size=(end - start + 1) * 240,
            start_offset=start,
        )
        try:
            current = await self._current(topic)
            change = self._storage.add_object_change(topic, descriptor, current).guarded(fence)
            revision = await self._storage.writer.apply(change)
        except Fenced as error:
            log.info("object %s of %s not recorded: %s", descriptor.object_id, topic, error)
            return
        except MetadataError as error:
            log.warning("object %s of %s not recorded: %s", descriptor.object_id, topic, error)
            if raising:
                raise
            return
        log_.uploaded_to = end + 1
        self.journal.record("upload", topic=topic.path, start=start, end=end, revision=revision)

    async def _read_subscriptions(self, topic: TopicName) -> list[str]:
        return sorted(await self._subscriptions.read_subscriptions(topic))

    def read_through(self, storage: StorageManager, subscriptions: SubscriptionManager) -> None:
        """Read the topics' keys through these managers (a broker's, from its cache)."""
        self._storage = StorageManager(storage.store, storage.reader.cache, policy=_UPLOAD)
        self._subscriptions = subscriptions

    async def _current(self, topic: TopicName) -> Versioned[CurrentObject] | None:
        return await self._storage.reader.get(layout.storage_cur(topic), CurrentObject)
