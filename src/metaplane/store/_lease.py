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


def refresh_deadline(ttl: float) -> float:
    """How long one refresh of a lease of `ttl` seconds may take before the lease counts as
    in danger (SUSPENDED): a sixth of the TTL (but at least half a second, or a third of a
    TTL shorter than that), so that a hung store is noticed with most of the TTL left."""
    return max(ttl / 6, min(0.5, ttl / 3))


class LeaseKeeper:
    """Refreshes a lease every sixth of its TTL; each refresh must answer within
    `refresh_deadline(ttl)`.

    A refresh that fails or misses its deadline reports SUSPENDED at once — the lease is
    alive still, but whoever relies on it must stop acting — and the refresh is sent again
    (on etcd, to the next member: a hung member is treated as a dead one). The first refresh
    that succeeds reports ALIVE again, the same lease. Once the TTL has run out since the
    last refresh that succeeded (counted from when that request was sent, so that the local
    deadline is never later than the store's) it reports EXPIRED and stops; so does a store
    that says the lease is gone. Leaving the context stops the loop; it does not revoke.
    """

    def __init__(
        self,
        refresh: Callable[[Lease, float], Awaitable[int]],
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
        interval = ttl / 6
        answer_within = refresh_deadline(ttl)
        pause = min(ttl / 10, 0.25)
        while True:
            sent = loop.time()
            if sent >= self._deadline:
                self._set(KeepAliveState.EXPIRED)
                return
            within = min(answer_within, self._deadline - sent)
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
                # cancellation that arrives as the refresh completes, and the loop would
                # outlive its context. The store has the same deadline and gives up first
                # (moving to another member); this one is the backstop.
                async with asyncio.timeout(within + 0.25):
                    granted = await self._refresh(self.lease, within)
            except LeaseNotFound:
                self._set(KeepAliveState.EXPIRED)
                return
            except (MetadataError, TimeoutError) as exc:  # Unavailable, or anything transient
                if loop.time() >= self._deadline:
                    self._set(KeepAliveState.EXPIRED)
                    return
                log.warning(
                    "lease %d: refresh failed (%s); %.1f s left, retrying",
                    self.lease.id,
                    _failure(exc, within + 0.25),
                    self._deadline - loop.time(),
                )
                self._set(KeepAliveState.SUSPENDED)
                await asyncio.sleep(min(pause, max(self._deadline - loop.time(), 0.0)))
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


def _failure(exc: BaseException, waited: float) -> str:
    """What a failed refresh says in the log: its type always (a timeout has no message of
    its own), then its message, or how long it went unanswered."""
    text = str(exc) or f"no answer within {waited:.2f} s"
    return f"{type(exc).__name__}: {text}"
