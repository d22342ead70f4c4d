"""`LeaderElection`: one leader per cluster, elected through `/cluster/leader`, with an epoch
and a fencing token. Leadership alone guarantees nothing: writes must be fenced."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.coordination._session import Session, SessionState
from metaplane.resources import (
    ONCE,
    Change,
    ChangedSinceRead,
    Condition,
    RetryPolicy,
    Writer,
    unchanged,
)
from metaplane.store import (
    AlreadyExists,
    Compacted,
    Compare,
    Delete,
    Entry,
    EventType,
    Fenced,
    Get,
    MetadataError,
    Put,
)

log = logging.getLogger(__name__)

_CAMPAIGN = RetryPolicy(conflicts=1, unavailable=2.0)
"""A campaign sends its change again for a short while; the campaign loop retries after."""


@dataclass(frozen=True, slots=True)
class LeaderToken:
    """What a leader holds while it leads: its epoch, and the create_revision of the leader
    key it created — the fence every leader-only write compares."""

    node_id: int
    epoch: int
    create_revision: int


ElectionListener = Callable[[LeaderToken | None], None]


class LeaderElection:
    """Elects one leader among the nodes that campaign, through `/cluster/leader`.

    A node becomes leader by creating the leader key (absent before) under its session's
    lease, in the transaction that bumps `/cluster/leader_epoch`. Its token is (epoch,
    create_revision of the key). Followers watch the key and campaign when it goes.

    Leadership alone guarantees nothing: a leader may be paused, partitioned or deposed
    between learning that it leads and the moment its write lands. Every leader-only write
    is a change guarded by `fences()` (or applied by `apply()`), which compare the leader
    key's create_revision with this node's token, and the epoch key's mod_revision with it
    too (see `fences`): a deposed leader's write fails with
    `Fenced` and writes nothing. A leader whose session is suspended stops acting at once
    (listeners hear `None`, and a change not yet sent is refused before it leaves), before
    its lease can expire; if the session recovers with the same lease, it leads again with
    the same token.
    """

    def __init__(self, session: Session, node_id: int) -> None:
        self.session = session
        self.node_id = node_id
        self._store = session.store
        self._key = layout.leader()
        self._epoch_key = layout.leader_epoch()
        self._token: LeaderToken | None = None
        self._listeners: list[ElectionListener] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        session.listen(self._on_session)

    # -- what users see ----------------------------------------------------------------

    @property
    def token(self) -> LeaderToken | None:
        """This node's token while it leads and its session is alive, else None."""
        return self._token

    @property
    def is_leader(self) -> bool:
        return self._token is not None

    def listen(self, listener: ElectionListener) -> None:
        """Called with the token on election and with None on demotion, synchronously."""
        self._listeners.append(listener)

    async def wait_elected(self, timeout: float | None = None) -> LeaderToken:
        async with asyncio.timeout(timeout):
            while self._token is None:
                await self._changed.wait()
            return self._token

    async def wait_demoted(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            while self._token is not None:
                await self._changed.wait()

    def fence(self) -> Compare:
        """The compare that makes a transaction leader-only. Raises Fenced if not leading."""
        return self.fenced().compare

    def fenced(self) -> Condition:
        """The condition that makes a change leader-only: it holds at the store only while
        this node's leader key is the current one, and it is refused here before the change
        is sent once this node has stopped leading (its session suspended, say). A change
        refused by it raises `Fenced`, and this node steps down. Raises Fenced at once if
        this node does not lead."""
        return self.fences()[0]

    def fences(self) -> tuple[Condition, Condition]:
        """`fenced()`, and the same fence on the epoch key: its mod_revision is the leader
        key's create_revision (one transaction wrote both) until another node is elected.
        The epoch key is never deleted, so a store that checks a compare by a version that
        restarts when a key is created again (ZooKeeper's znode versions) still tells this
        epoch's key from a later one, where a leader key deleted and created again by the
        next leader may look unchanged to it. Raises Fenced at once if this node does not
        lead."""
        token = self._token
        if token is None or not self.session.alive:
            raise Fenced(f"node {self.node_id} is not the leader")

        def refusal(_: Entry | None) -> MetadataError:
            self._demote(token, "fenced: another node leads")
            return Fenced(f"node {self.node_id} (epoch {token.epoch}) no longer leads")

        def local() -> None:
            if self._token is not token or not self.session.alive:
                raise Fenced(f"node {self.node_id} (epoch {token.epoch}) stopped leading")

        leader = Compare.create_revision(self._key, "==", token.create_revision)
        epoch = Compare.mod_revision(self._epoch_key, "==", token.create_revision)
        return Condition(leader, refusal, local), Condition(epoch, refusal, local)

    async def apply(self, change: Change, policy: RetryPolicy | None = None) -> int:
        """Apply `change` as a leader-only write (guarded by `fences()`): its revision, or
        `Fenced` once another node leads, or the typed error of its own failed condition."""
        return await Writer(self._store, policy).apply(change.guarded(*self.fences()))

    async def leader(self) -> tuple[int, int] | None:
        """The current leader's node id and epoch, read from the store."""
        result = await self._store.txn([], [Get(self._key), Get(self._epoch_key)], [])
        leader, epoch = result.entry(0), result.entry(1)
        if leader is None:
            return None
        return int(leader.value), int(epoch.value) if epoch is not None else 0

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Campaign now and whenever the leader goes, until stopped."""
        self._task = asyncio.get_running_loop().create_task(
            self._campaign(), name=f"election {self.node_id}"
        )

    async def stop(self, *, resign: bool = True) -> None:
        """Stop campaigning; a leader resigns (deletes the key) so that another node can
        lead at once rather than after the lease's TTL."""
        await cancel_and_wait(self._task)
        token = self._token
        if token is not None:
            self._demote(token, "stopped")
            if resign:
                with contextlib.suppress(MetadataError):
                    await self._resign(token)

    async def _resign(self, token: LeaderToken) -> None:
        mine = Condition(
            Compare.create_revision(self._key, "==", token.create_revision),
            lambda _: Fenced(f"node {self.node_id}: the leader key is no longer ours"),
        )
        await Writer(self._store, ONCE).apply(Change((mine,), (Delete(self._key),)))
        log.info("node %d resigned leadership (epoch %d)", self.node_id, token.epoch)

    # -- campaigning -------------------------------------------------------------------

    async def _campaign(self) -> None:
        while True:
            await self.session.wait_alive()
            try:
                token, seen = await self._try_lead()
                if token is None:
                    await self._until_vacant(seen)
                else:
                    self._elect(token)
                    await self._while_leading(token, seen)
            except (Compacted, MetadataError) as error:
                if isinstance(error, Fenced):
                    continue
                log.warning("election of node %d: %s; retrying", self.node_id, error)
                await asyncio.sleep(0.1)

    async def _try_lead(self) -> tuple[LeaderToken | None, int]:
        """Create the leader key if it is vacant, or recognise it as ours (same lease).
        Returns the token (None: another node leads) and the revision it was read at."""
        while True:
            lease = self.session.lease
            epoch_entry = await self._store.get(self._epoch_key)
            epoch = int(epoch_entry.value) if epoch_entry is not None else 0
            vacant = Condition(Compare.absent(self._key), lambda _: AlreadyExists(self._key))
            read_epoch = 0 if epoch_entry is None else epoch_entry.mod_revision
            change = Change(
                (vacant, unchanged(self._epoch_key, read_epoch)),
                (
                    Put(self._key, str(self.node_id).encode(), lease=lease.id),
                    Put(self._epoch_key, str(epoch + 1).encode()),
                ),
            )
            try:
                # A key of our own lease created by an attempt whose answer was lost is
                # found in place by the runner, and counts as created now.
                revision = await Writer(self._store, _CAMPAIGN).apply(change)
            except (AlreadyExists, ChangedSinceRead):
                pass
            else:
                return LeaderToken(self.node_id, epoch + 1, revision), revision
            result = await self._store.txn([], [Get(self._key), Get(self._epoch_key)], [])
            leader, current_epoch = result.entry(0), result.entry(1)
            if leader is None:
                continue  # the leader went between the two reads: campaign again
            if self._is_mine(leader):
                held = int(current_epoch.value) if current_epoch is not None else epoch
                return LeaderToken(self.node_id, held, leader.create_revision), result.revision
            return None, result.revision

    def _is_mine(self, leader: Entry) -> bool:
        return leader.lease == self.session.lease.id and leader.value == str(self.node_id).encode()

    async def _until_vacant(self, seen: int) -> None:
        """A follower: watch the leader key from `seen` + 1 until it is deleted."""
        async with self._store.watch(self._key, start_revision=seen + 1) as watch:
            async for batch in watch:
                if any(event.type is EventType.DELETE for event in batch.events):
                    return

    async def _while_leading(self, token: LeaderToken, seen: int) -> None:
        """The leader: wait until its key is deleted or replaced, or it is demoted (its
        session suspended or lost), whichever comes first."""
        loop = asyncio.get_running_loop()
        key_gone = loop.create_task(self._until_key_changes(token, seen))
        demoted = loop.create_task(self.wait_demoted())
        try:
            done, _ = await asyncio.wait({key_gone, demoted}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raise what the watch raised
        finally:
            for task in (key_gone, demoted):
                await cancel_and_wait(task)

    async def _until_key_changes(self, token: LeaderToken, seen: int) -> None:
        async with self._store.watch(self._key, start_revision=seen + 1) as watch:
            async for batch in watch:
                for event in batch.events:
                    if event.type is EventType.DELETE:
                        self._demote(token, "the leader key was deleted")
                        return
                    if event.entry.create_revision != token.create_revision:
                        self._demote(token, "another node created the leader key")
                        return

    # -- state changes -----------------------------------------------------------------

    def _on_session(self, state: SessionState) -> None:
        token = self._token
        if token is not None and state in (SessionState.SUSPENDED, SessionState.LOST):
            self._demote(token, f"session {state.value}")
        if state in (SessionState.CONNECTED, SessionState.REESTABLISHED):
            self._wake()

    def _elect(self, token: LeaderToken) -> None:
        log.info("node %d leads (epoch %d)", self.node_id, token.epoch)
        self._token = token
        self._tell(token)

    def _demote(self, token: LeaderToken, why: str) -> None:
        if self._token is not token:
            return
        log.warning("node %d stops leading (epoch %d): %s", self.node_id, token.epoch, why)
        self._token = None
        self._tell(None)

    def _tell(self, token: LeaderToken | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(token)
            except Exception:
                log.exception("election listener failed")
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
