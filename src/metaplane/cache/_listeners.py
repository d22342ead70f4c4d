"""Listeners of a LocalCache: each has a bounded buffer of its own, so that a slow one never
holds the cache back; one that falls too far behind is told to re-read instead."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Self

from metaplane.store import MetadataError, WatchBatch, in_prefix

log = logging.getLogger(__name__)

Listener = Callable[[WatchBatch], Awaitable[None] | None]


class CacheLagged(MetadataError):
    """A subscriber fell more batches behind than its buffer holds; re-read the cache."""


class CacheClosed(MetadataError):
    """The cache was closed."""


class CacheTimeout(MetadataError, TimeoutError):
    """The cache's watch did not pass a revision in the time given (the store is away,
    or slow): the cache still serves what it has, as of its applied revision."""


class Subscription:
    """The batches of a cache under one prefix, in revision order, from the moment of
    subscribing. An async iterator; raises `CacheLagged` once it overflowed."""

    def __init__(self, prefix: str, buffer: int, on_close: Callable[[Subscription], None]):
        self.prefix = prefix
        self._queue: asyncio.Queue[WatchBatch | None] = asyncio.Queue(maxsize=buffer)
        self._lagged = False
        self._closed = False
        self._on_close = on_close
        self.last_offered = 0
        """The revision of the last batch handed to this subscription."""

    def offer(self, batch: WatchBatch) -> None:
        """Called by the cache: keep the part of `batch` under the prefix, never block."""
        if self._lagged or self._closed:
            return
        events = tuple(event for event in batch.events if in_prefix(event.key, self.prefix))
        if not events:
            return
        try:
            self._queue.put_nowait(WatchBatch(batch.revision, events))
            self.last_offered = batch.revision
        except asyncio.QueueFull:
            self._lagged = True
            log.warning("cache subscriber of %s fell behind; it must re-read", self.prefix)

    def end(self) -> None:
        """Called by the cache when it closes."""
        self._closed = True
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchBatch:
        if self._lagged:
            raise CacheLagged(f"the subscriber of {self.prefix} fell behind the cache")
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        batch = await self._queue.get()
        if batch is None:
            raise StopAsyncIteration
        return batch

    def take(self) -> list[WatchBatch] | None:
        """The batches waiting here, without waiting (none: an empty list); None once the
        cache closed. Raises `CacheLagged` once it overflowed."""
        if self._lagged:
            raise CacheLagged(f"the subscriber of {self.prefix} fell behind the cache")
        batches = []
        while not self._queue.empty():
            batch = self._queue.get_nowait()
            if batch is None:
                return None
            batches.append(batch)
        return None if self._closed else batches

    def drain(self) -> int:
        """Discard the batches waiting here; return how many (for a subscriber that only
        needs to know that something changed)."""
        dropped = 0
        while not self._queue.empty():
            self._queue.get_nowait()
            dropped += 1
        return dropped

    def close(self) -> None:
        self._closed = True
        self._on_close(self)


class ListenerTask:
    """Calls `listener` with each batch of a subscription, in a task of its own. A listener
    that raises is logged and keeps listening; one that lags is told nothing more."""

    def __init__(self, subscription: Subscription, listener: Listener) -> None:
        self.subscription = subscription
        self._listener = listener
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"cache listener {subscription.prefix}"
        )

    async def _run(self) -> None:
        try:
            async for batch in self.subscription:
                try:
                    outcome = self._listener(batch)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception:
                    log.exception("cache listener of %s failed", self.subscription.prefix)
        except CacheLagged as lagged:
            log.error("%s; the listener is dropped", lagged)

    def cancel(self) -> None:
        self.subscription.close()
        self._task.cancel()
