"""The keep-alive loop of one lease, shared by every backend.

A single refresh is a ping; a lease stays alive only if something refreshes it well before
its TTL runs out and notices at once when it cannot.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Self

from metaplane._tasks import cancel_and_wait
from metaplane.store._errors import LeaseNotFound, MetadataError

if TYPE_CHECKING:
    from metaplane.store._model import Lease

log = logging.getLogger(__name__)


class KeepAliveState(enum.Enum):
    ALIVE = "alive"
    """The last refresh succeeded."""
    SUSPENDED = "suspended"
    """Refreshes are failing; the lease may still be alive until its deadline."""
    EXPIRED = "expired"
    """The lease is gone, or its TTL has run out since the last successful refresh."""


class LeaseKeeper:
    """Refreshes a lease at a third of its TTL.

    When a refresh fails it reports SUSPENDED and retries quickly until the TTL has run out
    since the last refresh that succeeded (counted from when that request was sent, so that
    the local deadline is never later than the store's), then reports EXPIRED and stops.
    Leaving the context stops the loop; it does not revoke the lease.
    """

    def __init__(
        self,
        refresh: Callable[[Lease], Awaitable[int]],
        lease: Lease,
        on_state: Callable[[KeepAliveState], None] | None = None,
    ) -> None:
        self.lease = lease
        self.state = KeepAliveState.ALIVE
        self._refresh = refresh
        self._on_state = on_state
        self._expired = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._deadline = 0.0

    @property
    def deadline(self) -> float:
        """The loop time by which the lease is gone unless a refresh succeeds."""
        return self._deadline

    async def wait_expired(self) -> None:
        await self._expired.wait()

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self.lease.ttl
        self._task = loop.create_task(self._run(), name=f"keep-alive {self.lease.id}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        ttl = self.lease.ttl
        interval = ttl / 3
        retry = min(ttl / 10, 0.5)
        while True:
            sent = loop.time()
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
                # cancellation that arrives as the refresh completes, and the loop would
                # outlive its context.
                async with asyncio.timeout(max(self._deadline - sent, retry)):
                    granted = await self._refresh(self.lease)
            except LeaseNotFound:
                self._set(KeepAliveState.EXPIRED)
                return
            except (MetadataError, TimeoutError) as exc:  # Unavailable, or anything transient
                if loop.time() >= self._deadline:
                    self._set(KeepAliveState.EXPIRED)
                    return
                log.warning("lease %d: refresh failed (%s); retrying", self.lease.id, exc)
                self._set(KeepAliveState.SUSPENDED)
                await asyncio.sleep(min(retry, max(self._deadline - loop.time(), 0.0)))
                continue
            self._deadline = sent + granted
            self._set(KeepAliveState.ALIVE)
            await asyncio.sleep(interval)

    def _set(self, state: KeepAliveState) -> None:
        if state is self.state:
            return
        log.info("lease %d: %s", self.lease.id, state.value)
        self.state = state
        if state is KeepAliveState.EXPIRED:
            self._expired.set()
        if self._on_state is not None:
            self._on_state(state)
