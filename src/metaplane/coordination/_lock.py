"""`FencedLock`: a lock among processes that queue in order, each watching only the waiter
before it, with a fencing token for the writes that rely on holding it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from metaplane import layout
from metaplane.coordination._session import Session
from metaplane.store import (
    ABSENT,
    AlreadyExists,
    Compare,
    Delete,
    Entry,
    EventType,
    Fenced,
    MetadataError,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LockToken:
    """The holder's key and its create_revision: the fence of writes made under the lock."""

    name: str
    key: str
    create_revision: int


class FencedLock:
    """A lock named `name` among the processes that ask for it.

    Each waiter puts a key of its own under `/cluster/locks/{name}`, with its session's
    lease; the waiter whose key was created first holds the lock; every other waiter watches
    only the key created just before its own (no herd when the holder lets go). A waiter
    whose session dies leaves the queue with its key.

    Holding the lock alone guarantees nothing: the holder may pause past its lease's TTL
    while the next waiter takes the lock. Writes that rely on holding it must include
    `fence()`, which compares the holder key's create_revision, and so fail once the lock
    has passed on.
    """

    def __init__(self, session: Session, name: str, *, holder_id: int = 0) -> None:
        self.session = session
        self.name = layout.check_lock_name(name)
        self.holder_id = holder_id
        self._store = session.store
        self._token: LockToken | None = None

    @property
    def token(self) -> LockToken | None:
        return self._token

    def fence(self) -> Compare:
        """The compare that makes a write depend on holding the lock."""
        if self._token is None or not self.session.alive:
            raise Fenced(f"the lock {self.name} is not held")
        return Compare.create_revision(self._token.key, "==", self._token.create_revision)

    async def acquire(self, timeout: float | None = None) -> LockToken:
        """Queue for the lock and return once it is held; on timeout leave the queue."""
        key = layout.lock(self.name, self.session.lease.id)
        mine = await self._enqueue(key)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    ahead = await self._waiter_ahead(mine)
                    if ahead is None:
                        self._token = LockToken(self.name, key, mine.create_revision)
                        log.info("lock %s held by %s", self.name, key)
                        return self._token
                    await self._until_gone(ahead)
        except BaseException:
            with contextlib.suppress(MetadataError):
                await self._store.delete(key, expect=mine.version)
            raise

    async def release(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            with contextlib.suppress(MetadataError):
                await self._store.txn(
                    [Compare.create_revision(token.key, "==", token.create_revision)],
                    [Delete(token.key)],
                    [],
                )

    async def __aenter__(self) -> Self:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    async def _enqueue(self, key: str) -> Entry:
        with contextlib.suppress(AlreadyExists):  # queued already with this lease: keep place
            await self._store.put(
                key, str(self.holder_id).encode(), expect=ABSENT, lease=self.session.lease
            )
        entry = await self._store.get(key)
        if entry is None:
            raise Fenced(f"the lock {self.name}: our waiter key vanished (session lost)")
        return entry

    async def _waiter_ahead(self, mine: Entry) -> Entry | None:
        """The waiter created just before `mine`, or None when `mine` is first."""
        waiters = list(await self._store.list(layout.lock_prefix(self.name)))
        if all(entry.key != mine.key for entry in waiters):
            raise Fenced(f"the lock {self.name}: our waiter key vanished (session lost)")
        ahead = [entry for entry in waiters if entry.create_revision < mine.create_revision]
        return max(ahead, key=lambda entry: entry.create_revision) if ahead else None

    async def _until_gone(self, waiter: Entry) -> None:
        """Wait until `waiter`'s key is deleted (it got and released the lock, or died)."""
        async with self._store.watch(waiter.key, start_revision=waiter.mod_revision + 1) as watch:
            async for batch in watch:
                if any(event.type is EventType.DELETE for event in batch.events):
                    return
