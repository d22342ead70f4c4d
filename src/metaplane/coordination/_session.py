"""`Session`: one lease per process, kept alive, with the states a holder of ephemeral keys
must react to — connected, suspended (act no more), lost, and reestablished (re-create)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections.abc import Callable
from types import TracebackType
from typing import Self

from metaplane._tasks import cancel_and_wait
from metaplane.store import (
    KeepAliveState,
    Lease,
    LeaseKeeper,
    LeaseNotFound,
    MetadataError,
    MetadataStore,
)

log = logging.getLogger(__name__)

DEFAULT_TTL = 10


class SessionState(enum.Enum):
    CONNECTED = "connected"
    """The lease is alive and refreshed."""
    SUSPENDED = "suspended"
    """Refreshes fail; the lease may still live, but nothing may be done that relies on it."""
    LOST = "lost"
    """The lease is gone: every key put with it is gone too."""
    REESTABLISHED = "reestablished"
    """A new lease replaced a lost one: keys put with the old one must be put again."""
    CLOSED = "closed"


StateListener = Callable[[SessionState], None]


class Session:
    """One lease for this process, refreshed at a third of its TTL.

    States: CONNECTED → SUSPENDED (a refresh failed) → CONNECTED (it recovered) or LOST (the
    TTL ran out, or the store says the lease is gone) → REESTABLISHED (a new lease; `lease`
    and `generation` change). Listeners are called synchronously, in order, at each change:
    a recipe that must stop acting on SUSPENDED does so before anything else runs.
    """

    def __init__(self, store: MetadataStore, ttl: int = DEFAULT_TTL) -> None:
        self.store = store
        self.ttl = ttl
        self.generation = 0
        self._lease: Lease | None = None
        self._state = SessionState.CLOSED
        self._listeners: list[StateListener] = []
        self._waiters: list[tuple[frozenset[SessionState], asyncio.Future[SessionState]]] = []
        self._task: asyncio.Task[None] | None = None
        self._keeper: LeaseKeeper | None = None

    @property
    def lease(self) -> Lease:
        if self._lease is None:
            raise MetadataError("the session has no lease: start it first")
        return self._lease

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def alive(self) -> bool:
        """True while the lease is known alive (connected or reestablished)."""
        return self._state in (SessionState.CONNECTED, SessionState.REESTABLISHED)

    def listen(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def wait_state(self, *states: SessionState, timeout: float | None = None) -> SessionState:
        """Return at once if the session is in one of `states`, else at its next transition
        into one of them — even one that lasts no time (LOST, then REESTABLISHED at once)."""
        if self._state in states:
            return self._state
        future: asyncio.Future[SessionState] = asyncio.get_running_loop().create_future()
        waiter = (frozenset(states), future)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._waiters.remove(waiter)

    async def wait_alive(self, timeout: float | None = None) -> None:
        await self.wait_state(SessionState.CONNECTED, SessionState.REESTABLISHED, timeout=timeout)

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> Self:
        self._lease = await self.store.grant(self.ttl)
        self.generation = 1
        self._set(SessionState.CONNECTED)
        self._task = asyncio.get_running_loop().create_task(
            self._keep(), name=f"session {self._lease.id:x}"
        )
        return self

    async def close(self, *, revoke: bool = True) -> None:
        """Stop refreshing; with `revoke` (the default) delete the lease and its keys now,
        so that others need not wait for the TTL."""
        await cancel_and_wait(self._task)
        if revoke and self._lease is not None and self.alive:
            with contextlib.suppress(LeaseNotFound):
                await self.store.revoke(self._lease)
        self._set(SessionState.CLOSED)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def deadline(self) -> float:
        """The loop time by which the lease is gone unless a refresh succeeds."""
        return self._keeper.deadline if self._keeper is not None else 0.0

    # -- keeping the lease -------------------------------------------------------------

    async def _keep(self) -> None:
        while True:
            keeper = self.store.keep_alive(self.lease, on_state=self._on_keeper)
            self._keeper = keeper
            async with keeper:
                await keeper.wait_expired()
            await self._reestablish()

    def _on_keeper(self, state: KeepAliveState) -> None:
        if state is KeepAliveState.ALIVE:
            self._set(SessionState.CONNECTED)
        elif state is KeepAliveState.SUSPENDED:
            self._set(SessionState.SUSPENDED)
        else:
            self._set(SessionState.LOST)

    async def _reestablish(self) -> None:
        old = self._lease
        if old is not None:
            # Our clock gave up on the old lease; the store may not have yet. Revoke it so
            # that its keys (a leader key, registrations) do not outlive our giving up.
            with contextlib.suppress(MetadataError):
                await self.store.revoke(old)
        delay = 0.1
        while True:
            try:
                self._lease = await self.store.grant(self.ttl)
            except MetadataError as error:
                log.warning("session: cannot grant a new lease (%s); retrying", error)
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.ttl / 3)
                continue
            self.generation += 1
            self._set(SessionState.REESTABLISHED)
            return

    def _set(self, state: SessionState) -> None:
        if state is self._state:
            return
        if state is SessionState.CONNECTED and self._state is SessionState.REESTABLISHED:
            return  # still the new lease, alive
        log.info("session %x: %s", self._lease.id if self._lease else 0, state.value)
        self._state = state
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("session listener failed on %s", state.value)
        for states, future in self._waiters:
            if state in states and not future.done():
                future.set_result(state)
