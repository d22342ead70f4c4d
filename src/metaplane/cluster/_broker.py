"""`BrokerNode`: what a broker embeds. It registers under its session's lease, keeps its
state and load report, and reconciles the topics the leader assigns it with those its host
serves: loading, clearing a seal, unloading and handing over — each step idempotent and
retried until it succeeds or the assignments change. Every write it makes about a topic is
fenced on owning it (or, handing it over, on the marker that took it away)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import psutil

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.cache import LocalCache
from metaplane.cluster._cursors import DEFAULT_EVERY, DEFAULT_INTERVAL, CursorBatcher
from metaplane.cluster._journal import NO_JOURNAL, Journal
from metaplane.cluster._moves import UNLOAD
from metaplane.coordination import Session, SessionState
from metaplane.layout import KeyKind, TopicName
from metaplane.resources import (
    LOAD_REPORT_TOPICS,
    BrokerMode,
    BrokerRegistered,
    BrokerRegistration,
    BrokerState,
    Change,
    ChangedSinceRead,
    ClusterManager,
    Condition,
    LoadReport,
    NoSubscription,
    ObjectDescriptor,
    ResourceUsage,
    RetryPolicy,
    SealedState,
    StorageManager,
    SubscriptionManager,
    TopicManager,
    TopicNotOwned,
    UnassignedMarker,
    Versioned,
    Writer,
    decode,
    decode_value,
    encode,
    owned,
    unchanged,
)
from metaplane.store import (
    ANY,
    BadVersion,
    Entry,
    EventType,
    Fenced,
    Get,
    List,
    MetadataError,
    MetadataStore,
    NotFound,
    Put,
    Unavailable,
    WatchBatch,
)

log = logging.getLogger(__name__)

_STEP = RetryPolicy(conflicts=2, unavailable=2.0)
"""A step sends its change again for two seconds at most; the loop retries the step after."""

_MARKERS_A_SECOND = 5_000
"""The looks at the unassigned markers read at most about so many markers a second, on
average: with many topics waiting (100,000 created at once, a cluster starting with all its
topics unplaced) the looks space out instead of reading the whole backlog every interval."""

_RESYNC_POLL = 0.5
"""How often the marker task checks whether the broker's cache has resynced (a counter: no
store access). A resync may complete without handing the loop over, so its state is not
waited for."""


class TopicHost(Protocol):
    """The broker's side of topic ownership: the BrokerNode calls it."""

    async def load(self, topic: TopicName, start_offset: int, owned: Condition) -> None:
        """Start serving `topic`; its next message gets `start_offset`. What the host writes
        about the topic while it serves it (its storage objects) is a change guarded by
        `owned`, which fails once the topic is no longer this broker's."""

    async def unload(self, topic: TopicName, fence: Condition) -> int:
        """Stop serving `topic`; return its last committed offset (-1 if it has none).

        What the host still writes about it (its last storage object) is guarded by `fence`,
        which holds while the hand-over is not finished."""


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    registration: BrokerRegistration
    session_ttl: int = 10
    load_report_interval: float = 5.0
    cursor_every: int = DEFAULT_EVERY
    cursor_interval: float = DEFAULT_INTERVAL
    registration_wait: float = 60.0
    """How long `start` waits for a predecessor's registration (same id, a dead process)."""
    stop_timeout: float = 15.0
    """How long `stop` tries to hand its topics over before it gives up (and says so)."""
    marker_interval: float = 2.0
    """How often the broker looks at the unassigned markers for those naming it (a topic
    assigned and taken away before its watch showed the assignment), besides at start and
    after each resync of its cache. Spaced out further while many topics wait."""


@dataclass(slots=True)
class _Served:
    """A topic the host has loaded: under which assignment, from which offset, whether its
    seal is still to be cleared, and — once the host unloaded it — its last offset."""

    token: int
    start: int
    seal: Versioned[SealedState] | None
    last: int | None = None
    releasing_since: float | None = None


class BrokerNode:
    """One broker's membership of the cluster.

    Start: a session, the registration (absent before, under the session's lease), the
    state `active`, a LocalCache of the broker's own keys (its state and assignments), then
    the reconciliation loop. Desired state: the assignments under the broker's prefix, each
    with the revision that created it (its ownership token). Actual state: the topics the
    host has loaded. Each round converges the two, step by step:

    - assigned, not loaded: recover the start offset (after the highest of the seal, the
      last stored object and the cursors), load, then clear the seal (a compare on its
      version, fenced on owning the topic);
    - loaded, no longer assigned: stop accepting acks, unload (the host's last object goes
      under the hand-over's fence), then write the cursors and the sealed state in one
      change that holds only while the unassigned marker that took the topic away is
      unchanged — the leader, which waits for the seal, never assigns it before;
    - loaded under an assignment since replaced (moved away and back): hand over to itself;
    - taken away before it was loaded (the leader waits for its seal): seal it under the
      marker that took it, at what the store shows as published. The broker learns of such a
      topic from the assignment's deletion or, when its watch showed neither the assignment
      nor its removal (both between two read-backs of a ZooKeeper watch, or before a resync
      of its cache), from the unassigned markers naming it, which it reads at start, after
      each resync and every `marker_interval` seconds.

    A step that fails (the store away, one transient error) is retried with backoff until it
    succeeds or the assignments change; a step that cannot succeed (the topic was deleted,
    the leader gave up waiting) ends with a log line and a count (`abandoned`).
    """

    def __init__(
        self,
        store: MetadataStore,
        config: BrokerConfig,
        host: TopicHost,
        *,
        journal: Journal = NO_JOURNAL,
    ) -> None:
        self.store = store
        self.config = config
        self.broker_id = config.broker_id
        self.host = host
        self.journal = journal
        self.session = Session(store, ttl=config.session_ttl)
        self.cursors = CursorBatcher(
            store,
            config.broker_id,
            every=config.cursor_every,
            interval=config.cursor_interval,
            fence=self._fence,
            journal=journal,
        )
        self._writer = Writer(store, _STEP)
        self._cluster = ClusterManager(store, policy=_STEP)
        self._storage = StorageManager(store, policy=_STEP)
        self._subscriptions = SubscriptionManager(store, policy=_STEP)
        self._cache = LocalCache(store, _cluster_wide(config.broker_id), decoder=decode_value)
        self._policies: dict[str, int] = {}
        """Namespaces of the topics followed, and how many: their policy is followed too."""
        self._following: set[TopicName] = set()
        self.topics = TopicManager(store, self._cache)
        self.subscriptions = SubscriptionManager(store, self._cache)
        self.storage = StorageManager(store, self._cache)
        """Managers reading from the broker's cache: the keys of the topics it serves, and
        the cluster-wide keys, are read from memory; anything else from the store."""
        self._served: dict[TopicName, _Served] = {}
        self._serving: set[TopicName] = set()
        self._published: dict[TopicName, int] = {}
        """The last offset this broker published of each topic it unloaded: should the topic
        come back, it starts after it even if the store never heard of those offsets."""
        self._taken_unserved: set[TopicName] = set()
        """Topics assigned to us and taken away again before we loaded them: the leader
        still waits for their seal."""
        self._dealt: dict[TopicName, int] = {}
        """Markers naming us that a hand-over or a seal has dealt with (sealed under it,
        found it sealed, or refused as changed), by topic: their mod_revision. A look at the
        markers skips them; it drops those it no longer sees."""
        self._changed = asyncio.Event()
        self._converged = asyncio.Condition()
        self._converged_at = 0
        self._registered_generation = 0
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._process = psutil.Process(os.getpid())
        self.loaded = 0
        """Topics loaded since start."""
        self.handed_over = 0
        """Topics unloaded and sealed with their cursors."""
        self.abandoned = 0
        """Topics unloaded without a seal: deleted, or taken without a marker to seal under."""
        self.step_failures = 0
        """Steps that failed and were retried."""
        self.marker_looks = 0
        """Looks at the unassigned markers (at start, after each resync, periodically)."""
        self.on_hand_over: Callable[[TopicName, float], None] | None = None
        """Called with a topic and the seconds its hand-over took, once it is sealed."""

    @property
    def cache(self) -> LocalCache:
        """The broker's LocalCache: the cluster-wide keys that do not grow with topics (its
        own state and assignments, the registrations, the leader, the schemas) and every key
        of the topics it serves, with their namespaces' policies. Read only."""
        return self._cache

    @property
    def owned(self) -> frozenset[TopicName]:
        """The topics this broker serves now (loaded, and assigned to it as far as it knows)."""
        return frozenset(self._serving)

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Join the cluster. A store that is away or fails once meanwhile is waited out (for
        `registration_wait` seconds), step by step; a predecessor's registration too."""
        deadline = asyncio.get_running_loop().time() + self.config.registration_wait
        await _joining(self.session.start, deadline)
        await _joining(partial(self._register, wait=self.config.registration_wait), deadline)
        active = BrokerState(mode=BrokerMode.ACTIVE, reason="boot")
        await _joining(partial(self._cluster.set_state, self.broker_id, active, ANY), deadline)
        self.session.listen(self._on_session)
        await _joining(self._cache.start, deadline)
        self._cache.listen(layout.broker_prefix(self.broker_id), self._on_assignments)
        await self.cursors.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._reconcile_loop(), name=f"broker {self.broker_id}"),
            loop.create_task(self._report_load(), name=f"load report {self.broker_id}"),
            loop.create_task(self._look_for_markers(), name=f"markers {self.broker_id}"),
        ]
        await self.caught_up(self._cache.applied_revision, timeout=None)
        log.info("broker %d started with %d topics", self.broker_id, len(self._serving))

    async def stop(self) -> None:
        """A clean shutdown: every topic unloaded and sealed with its cursors (so that its
        next owner resumes exactly), then the session revoked (the registration goes). With
        the store away it gives up after `stop_timeout` and says what was not handed over."""
        self._stopping = True
        self._changed.set()
        if self._tasks:
            # A step is let finish (a host half unloaded is not asked to unload again).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.stop_timeout / 2):
                    await asyncio.shield(self._tasks[0])
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        deadline = asyncio.get_running_loop().time() + self.config.stop_timeout
        for topic in sorted(self._served):
            await self._retrying(partial(self._hand_over_at_stop, topic), deadline)
        await self.cursors.stop(timeout=max(deadline - asyncio.get_running_loop().time(), 0.1))
        if self._served:
            log.error(
                "broker %d stopped without handing over %s",
                self.broker_id,
                sorted(topic.path for topic in self._served),
            )
        await self._cache.aclose()
        await self.session.close()
        log.info("broker %d stopped", self.broker_id)

    async def drain(self, reason: str = "drain") -> int:
        """Ask the leader to move every topic away; it sets `drained` once none is left."""
        state = BrokerState(mode=BrokerMode.DRAINING, reason=reason)
        return await self._cluster.set_state(self.broker_id, state, ANY)

    def ack(self, topic: TopicName, subscription: str, offset: int) -> None:
        """A consumer of `subscription` acknowledged up to `offset` (batched, see cursors)."""
        if topic in self._serving:
            self.cursors.ack(topic, subscription, offset)
            self.journal.record("ack", topic=topic.path, subscription=subscription, offset=offset)

    async def reset_cursor(self, topic: TopicName, subscription: str, offset: int) -> int:
        """Set a subscription's cursor on an administrator's word (a reset, a skip): written
        fenced on this broker owning the topic and on the subscription existing, and this
        broker's pending ack of it dropped once written, so that no batched cursor
        overwrites it. Not an acknowledgement. `TopicNotOwned` when this broker does not
        serve the topic; `NoSubscription`."""
        served = self._served.get(topic)
        if served is None or topic not in self._serving:
            raise TopicNotOwned(topic, self.broker_id)
        fence = owned(self.broker_id, topic, served.token)
        change = self._subscriptions.cursor_change(topic, subscription, offset).guarded(fence)
        async with self.cursors.hold(topic):
            revision = await self._writer.apply(change)
            self.cursors.forget(topic, subscription)
        self.journal.record(
            "cursor-reset",
            topic=topic.path,
            subscription=subscription,
            offset=offset,
            revision=revision,
        )
        return revision

    async def caught_up(self, revision: int, timeout: float | None = None) -> None:
        """Return once this node has loaded and unloaded what its assignments as of
        `revision` (or later) ask for (read your writes, at the broker)."""
        async with asyncio.timeout(timeout):
            await self._cache.wait_for(revision)
            async with self._converged:
                while self._converged_at < revision:
                    self._changed.set()  # a round that reads the assignments as of now
                    await self._converged.wait()

    # -- registration ------------------------------------------------------------------

    async def _register(self, wait: float = 0.0) -> None:
        """Register under the session's lease; a predecessor's registration (the same id,
        a process that died, or our own lost lease not yet expired at the store) is waited
        out for `wait` seconds, else `BrokerRegistered`."""
        deadline = time.monotonic() + wait
        key = layout.broker_registration(self.broker_id)
        generation = self.session.generation
        while True:
            try:
                await self._cluster.register(
                    self.broker_id, self.config.registration, self.session.lease
                )
            except BrokerRegistered:
                if time.monotonic() > deadline:
                    raise
                log.warning("broker %d: a previous registration is still there", self.broker_id)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(deadline - time.monotonic(), 0.1)):
                        await self._until_deleted(key)
                continue
            self._registered_generation = generation
            self.journal.record("registered", generation=generation)
            return

    async def _until_deleted(self, key: str) -> None:
        entry = await self.store.get(key)
        if entry is None:
            return
        async with self.store.watch(key, start_revision=entry.mod_revision + 1) as watch:
            async for batch in watch:
                if any(event.type is EventType.DELETE for event in batch.events):
                    return

    def _on_session(self, state: SessionState) -> None:
        self.journal.record("session", state=state.value, generation=self.session.generation)
        if state is SessionState.REESTABLISHED:
            self._changed.set()  # the old lease took the registration with it

    # -- the reconciliation loop -------------------------------------------------------

    def _on_assignments(self, batch: WatchBatch) -> None:
        for event in batch.events:
            topic = _assigned_topic(event.key)
            if event.type is EventType.DELETE and topic is not None and topic not in self._served:
                self._taken_unserved.add(topic)
        self._changed.set()

    def _desired(self) -> dict[TopicName, int]:
        """The topics assigned to this broker, each with the revision that created its
        assignment: what this broker's writes about it are fenced on."""
        return {
            topic: entry.create_revision
            for entry in self._cache.list(layout.broker_prefix(self.broker_id))
            if (topic := _assigned_topic(entry.key)) is not None
        }

    async def _reconcile_loop(self) -> None:
        failures = 0
        while not self._stopping:
            self._changed.clear()
            revision = self._cache.applied_revision
            if await self._reconcile():
                failures = 0
                async with self._converged:
                    self._converged_at = max(self._converged_at, revision)
                    self._converged.notify_all()
                await self._changed.wait()
                continue
            failures += 1
            self.step_failures += 1
            delay = min(0.05 * 2**failures, 2.0) * random.uniform(0.5, 1.0)
            try:
                async with asyncio.timeout(delay):
                    await self._changed.wait()  # a change of the assignments: look again now
            except TimeoutError:
                pass

    async def _reconcile(self) -> bool:
        """One round: every step the difference asks for; True when nothing is left."""
        done = True
        if self._registered_generation != self.session.generation and self.session.alive:
            done &= await self._step("register", None, self._register)
        desired = self._desired()
        for topic in sorted(self._taken_unserved):
            if topic in desired or topic in self._served:
                self._taken_unserved.discard(topic)
            else:
                done &= await self._step("seal", topic, partial(self._seal_unserved, topic))
        for topic, loaded in sorted(self._served.items()):
            if self._stopping:
                return False
            token = desired.get(topic)
            if token != loaded.token:
                done &= await self._step("release", topic, partial(self._release, topic, token))
        arriving = [topic for topic in desired if topic not in self._served]
        if len(arriving) > 1:  # many at once (a broker's start, a drain elsewhere): in bulk
            for start in range(0, len(arriving), FOLLOW_CHUNK):
                chunk = arriving[start : start + FOLLOW_CHUNK]
                if not await self._step("follow", None, partial(self._follow, *chunk)):
                    # Again in bulk next round: loaded one by one, each topic would be
                    # followed alone, a round trip (and on etcd 3.4 a proof of progress) each.
                    return False
        for topic, token in sorted(desired.items()):
            if self._stopping:
                return False
            served = self._served.get(topic)
            if served is None:
                done &= await self._step("load", topic, partial(self._acquire, topic, token))
            elif served.seal is not None:
                done &= await self._step("clear seal", topic, partial(self._clear_seal, topic))
        return done

    async def _step(self, what: str, topic: TopicName | None, step: _Step) -> bool:
        """Run one step; False (to be retried) when it failed, whatever failed: the store,
        or the host (whose own errors are logged with their traceback)."""
        try:
            await step()
        except Exception as error:
            about = topic.path if topic else "the broker"
            if isinstance(error, MetadataError):
                log.warning(
                    "broker %d: %s of %s failed (%s); retrying", self.broker_id, what, about, error
                )
            else:
                log.exception("broker %d: %s of %s failed; retrying", self.broker_id, what, about)
            self.journal.record("step-failed", step=what, topic=topic and topic.path)
            return False
        return True

    async def _retrying(self, step: _Step, deadline: float) -> bool:
        """`step` until it succeeds or `deadline` (loop time) passes."""
        loop = asyncio.get_running_loop()
        delay = 0.05
        while True:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.01)):
                    await step()
                return True
            except Exception as error:  # the store away, or the host failing: again, in time
                if loop.time() >= deadline:
                    log.error("broker %d: gave up: %r", self.broker_id, error)
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # -- loading -----------------------------------------------------------------------

    async def _acquire(self, topic: TopicName, token: int) -> None:
        """Serve `topic`, assigned to us at `token`: after the highest offset anything in
        the store shows as published, then clear the seal."""
        await self._follow(topic)
        start, seal, read_at = await self._recover(topic)
        start = max(start, self._published.get(topic, -1) + 1)
        await self.host.load(topic, start, owned(self.broker_id, topic, token))
        self._served[topic] = _Served(token, start, seal)
        self._serving.add(topic)
        self.loaded += 1
        self.journal.record("load", topic=topic.path, token=token, start=start, read=read_at)
        log.info("broker %d loaded %s at offset %d", self.broker_id, topic, start)
        if seal is not None:
            await self._clear_seal(topic)

    async def recover_start(self, topic: TopicName) -> tuple[int, Versioned[SealedState] | None]:
        """Where a new owner of `topic` starts, and the seal it found. After the highest of:
        the sealed state's last committed offset, the end of the last stored object, and the
        highest cursor of its subscriptions (an acknowledged offset was published) — read at
        one revision; a stale seal never wins over newer objects or cursors."""
        start, seal, _ = await self._recover(topic)
        return start, seal

    async def _recover(self, topic: TopicName) -> tuple[int, Versioned[SealedState] | None, int]:
        """`recover_start`, and the revision it read at."""
        objects = List(
            layout.storage_objects_prefix(topic),
            end_before=layout.storage_cur(topic),
            reverse=True,
            limit=1,
        )
        subscriptions = List(layout.subscriptions_prefix(topic))
        sealed_key = layout.storage_state(topic)
        result = await self.store.txn((), (Get(sealed_key), objects, subscriptions), ())
        seal_entry, latest, entries = result.entry(0), result.listing(1), result.listing(2)
        seal = None
        published = -1
        if seal_entry is not None:
            value = decode(SealedState, seal_entry.value)
            seal = Versioned(
                value,
                seal_entry.version,
                seal_entry.mod_revision,
                seal_entry.create_revision,
                seal_entry.key,
            )
            published = max(published, value.last_committed_offset)
        if latest:
            published = max(published, decode(ObjectDescriptor, latest[0].value).end_offset)
        published = max(published, *_cursors(entries))
        return published + 1, seal, result.revision

    async def _clear_seal(self, topic: TopicName) -> None:
        """Delete the seal the load found, with a compare on its version, fenced on owning
        the topic; retried by the loop until it is gone."""
        served = self._served[topic]
        seal = served.seal
        if seal is None:
            return
        change = self._storage.delete_sealed_state_change(topic, seal.version).guarded(
            owned(self.broker_id, topic, served.token)
        )
        try:
            revision = await self._writer.apply(change)
        except NotFound:  # gone already (a BadVersion is a seal we did not load: look again)
            revision = 0
        except BadVersion:
            _, served.seal = await self.recover_start(topic)
            raise
        served.seal = None
        self.journal.record("seal-cleared", topic=topic.path, revision=revision)

    # -- unloading ---------------------------------------------------------------------

    async def _release(
        self, topic: TopicName, token: int | None, *, retry_refused: bool = False
    ) -> None:
        """`topic` is no longer assigned to us under the token we loaded it with: stop, and
        hand it over under the marker that took it away — or to ourselves, when it was
        assigned to us again since (`token`). `retry_refused`: as `_hand_over`."""
        self._serving.discard(topic)
        fence: Condition | None = None
        marker: Entry | None = None
        if token is not None:
            fence = owned(self.broker_id, topic, token)
        else:
            marker = await self._marker(topic)
            if marker is not None:
                fence = unchanged(marker.key, marker.mod_revision)
                self._dealt[topic] = marker.mod_revision
        await self._hand_over(topic, fence, retry_refused=retry_refused)

    async def _hand_over_at_stop(self, topic: TopicName) -> None:
        """Hand `topic` over as we stop: under the assignment we loaded it with, as the
        store has it now — or, where it was taken meanwhile (a move while we stopped, after
        our reconciliation loop ended), as a release does: under the marker that took it,
        or to ourselves under an assignment since made. A fence refused (the topic taken
        between our read and our write) is read again, `_STOP_ATTEMPTS` times at most:
        fenced on an assignment that is gone, the topic would be abandoned with its acks."""
        for attempt in range(1, _STOP_ATTEMPTS + 1):
            served = self._served[topic]
            assigned = await self.store.get(layout.assignment(self.broker_id, topic))
            token = None if assigned is None else assigned.create_revision
            again = attempt < _STOP_ATTEMPTS
            try:
                if token != served.token:
                    await self._release(topic, token, retry_refused=again)
                else:
                    self._serving.discard(topic)
                    fence = owned(self.broker_id, topic, served.token)
                    await self._hand_over(topic, fence, retry_refused=again)
                return
            except _Refused as refused:
                log.info("broker %d: %s at stop: %s; reading again", self.broker_id, topic, refused)

    async def _marker(self, topic: TopicName) -> Entry | None:
        """The unassigned marker that took the topic from us, as it is now — a hand-over is
        fenced on it being unchanged; None when there is none (the topic was deleted, or
        taken otherwise)."""
        marker = await self.store.get(layout.unassigned(topic))
        if marker is None:
            return None
        value = decode_value(marker.key, marker.value)
        if not isinstance(value, UnassignedMarker) or value.from_broker != self.broker_id:
            return None
        return marker

    async def _hand_over(
        self, topic: TopicName, fence: Condition | None, *, retry_refused: bool = False
    ) -> None:
        """Unload `topic` (once), then write its cursors and sealed state in one change
        guarded by `fence`. Without a fence, or once the fence fails for good, the topic is
        abandoned: its next owner recovers from storage and cursors. With `retry_refused`,
        a refused fence raises `_Refused` instead, the cursors still pending, for the
        caller to read the topic's state again."""
        served = self._served[topic]
        if served.releasing_since is None:
            served.releasing_since = time.monotonic()
        if served.last is None:
            # The host's last upload is guarded by the fence when there is one, else by
            # our ownership, which no longer holds: nothing is written then.
            guard = fence or owned(self.broker_id, topic, served.token)
            served.last = await self.host.unload(topic, guard)
            self._published[topic] = max(served.last, self._published.get(topic, -1))
            self.journal.record("unload", topic=topic.path, last=served.last)
        if fence is None:
            await self._abandon(topic, "it was deleted or taken without a marker")
            return
        async with self.cursors.hold(topic):
            while True:
                cursors = self.cursors.pending(topic)
                sealed = SealedState(
                    sealed=True,
                    last_committed_offset=max(served.last, 0),
                    broker_id=self.broker_id,
                    timestamp=int(time.time()),
                )
                seal = Change((), (Put(layout.storage_state(topic), encode(sealed)),))
                change = (self.cursors.change(topic, cursors) + seal).guarded(fence)
                try:
                    revision = await self._writer.apply(change)
                except NoSubscription as gone:
                    self.cursors.forget(topic, gone.subscription)
                    self.journal.record(
                        "cursor-dropped", topic=topic.path, subscription=gone.subscription
                    )
                    continue
                except (ChangedSinceRead, Fenced) as refused:
                    if retry_refused:
                        raise _Refused(refused) from refused
                    await self._abandon(topic, f"the hand-over's fence failed ({refused})")
                    return
                break
            self.cursors.committed(topic, cursors)
        self.cursors.forget(topic)
        del self._served[topic]
        await self._unfollow(topic)
        self.handed_over += 1
        if self.on_hand_over is not None:
            self.on_hand_over(topic, time.monotonic() - served.releasing_since)
        self.journal.record(
            "sealed", topic=topic.path, last=served.last, cursors=cursors, revision=revision
        )
        log.info("broker %d sealed %s at offset %d", self.broker_id, topic, served.last)

    async def _seal_unserved(self, topic: TopicName) -> None:
        """Seal a topic taken from us before we loaded it, under the marker that took it, at
        what the store shows as published (or we published, if we served it before): the
        leader, waiting for the seal, may go on. Nothing is written when the marker is gone
        or names another broker, or a seal newer than the marker exists (ours, already);
        a seal whose marker changed meanwhile (assigned since: its new owner may have loaded
        it) is refused by its fence."""
        marker = await self._marker(topic)
        if marker is None:
            self._taken_unserved.discard(topic)
            return
        sealed = await self.store.get(layout.storage_state(topic))
        if sealed is not None and sealed.mod_revision > marker.mod_revision:
            self._dealt[topic] = marker.mod_revision
            self._taken_unserved.discard(topic)
            return
        start, _ = await self.recover_start(topic)
        last = max(start - 1, self._published.get(topic, -1))
        state = SealedState(
            sealed=True,
            last_committed_offset=max(last, 0),
            broker_id=self.broker_id,
            timestamp=int(time.time()),
        )
        fence = unchanged(marker.key, marker.mod_revision)
        change = Change((), (Put(layout.storage_state(topic), encode(state)),)).guarded(fence)
        self._dealt[topic] = marker.mod_revision  # (a failed write stays in _taken_unserved)
        try:
            revision = await self._writer.apply(change)
        except (ChangedSinceRead, Fenced) as refused:
            self._taken_unserved.discard(topic)
            log.warning("broker %d: %s not sealed: %s", self.broker_id, topic, refused)
            return
        self._taken_unserved.discard(topic)
        self.journal.record("sealed", topic=topic.path, last=last, cursors={}, revision=revision)
        log.info("broker %d sealed %s (never loaded) at offset %d", self.broker_id, topic, last)

    # -- markers naming this broker ----------------------------------------------------

    async def _look_for_markers(self) -> None:
        """Look at the unassigned markers at start, after each resync of the cache, and every
        `marker_interval` seconds — spaced out to about `_MARKERS_A_SECOND` markers read a
        second while many topics wait. A look that fails is tried again within a second."""
        loop = asyncio.get_running_loop()
        resyncs = self._cache.resyncs
        due = loop.time()  # a first look at once
        while True:
            if loop.time() >= due or self._cache.resyncs != resyncs:
                resyncs = self._cache.resyncs
                try:
                    read, _ = await self._look_at_markers()
                except MetadataError as error:
                    log.warning("broker %d: no look at the markers: %s", self.broker_id, error)
                    due = loop.time() + min(self.config.marker_interval, 1.0)
                else:
                    spaced = read / _MARKERS_A_SECOND
                    due = loop.time() + max(self.config.marker_interval, spaced)
            await asyncio.sleep(max(min(_RESYNC_POLL, due - loop.time()), 0.0))

    async def look_at_markers(self) -> list[TopicName]:
        """Look now at the unassigned markers for topics taken from this broker (`unload`
        markers naming it) that it neither serves nor is assigned, and has not sealed under
        that marker yet; hand them to the reconciliation, which seals each under its marker.
        Return those topics. The broker does this by itself (see `marker_interval`)."""
        _, found = await self._look_at_markers()
        return found

    async def _look_at_markers(self) -> tuple[int, list[TopicName]]:
        """One look: how many markers it read, and the topics it found to seal.

        A broker's watch shows it every assignment and its removal, except when both fall
        where the watch shows nothing: between two read-backs of a ZooKeeper watch, or
        before a resync of its cache (history compacted, or ZooKeeper's none). The marker
        that took the topic still names it, and the leader waits for its seal: found here.
        The markers are read, not followed: they grow with the topics waiting (all of them
        while no broker can take them), and a broker's memory grows only with what it serves.
        """
        self.marker_looks += 1
        needle, reason = str(self.broker_id).encode(), UNLOAD.encode()
        named: dict[TopicName, int] = {}
        read = 0
        async with self.store.scan(layout.unassigned_prefix()) as pages:
            async for page in pages:
                read += len(page)
                for entry in page:
                    if needle not in entry.value or reason not in entry.value:
                        continue  # most markers: `null` (a new topic), or another broker's
                    try:
                        value = decode_value(entry.key, entry.value)
                    except MetadataError:
                        continue  # malformed: not ours to judge here
                    topic = layout.parse(entry.key).topic_name
                    if (
                        isinstance(value, UnassignedMarker)
                        and value.reason == UNLOAD
                        and value.from_broker == self.broker_id
                        and topic is not None
                    ):
                        named[topic] = entry.mod_revision
                await asyncio.sleep(0)  # a page at a time (a memory store's scan never waits)
        self._dealt = {t: r for t, r in self._dealt.items() if t in named}
        found = sorted(
            topic
            for topic, revision in named.items()
            if topic not in self._served
            and self._dealt.get(topic) != revision
            and self._cache.get(layout.assignment(self.broker_id, topic)) is None
        )
        if found:
            log.info(
                "broker %d: taken before it saw them assigned: %s",
                self.broker_id,
                [topic.path for topic in found],
            )
            self._taken_unserved.update(found)
            self._changed.set()
        return read, found

    async def _follow(self, *topics: TopicName) -> None:
        """The cache follows these topics' keys (and their namespaces' policies) from now
        on, in one go; the host's reads of them come from memory once the cache holds them."""
        new = sorted(set(topics) - self._following)
        if not new:
            return
        prefixes = [prefix for topic in new for prefix in _topic_prefixes(topic)]
        namespaces = {topic.namespace for topic in new} - set(self._policies)
        prefixes.extend(layout.namespace_policy(namespace) for namespace in sorted(namespaces))
        revision = await self._cache.follow(prefixes)
        for topic in new:
            self._following.add(topic)
            self._policies[topic.namespace] = self._policies.get(topic.namespace, 0) + 1
        await self._cache.wait_for(revision)

    async def _unfollow(self, topic: TopicName) -> None:
        if topic not in self._following:
            return
        self._following.discard(topic)
        prefixes = _topic_prefixes(topic)
        held = self._policies.get(topic.namespace, 0)
        if held <= 1:
            self._policies.pop(topic.namespace, None)
            prefixes.append(layout.namespace_policy(topic.namespace))
        else:
            self._policies[topic.namespace] = held - 1
        await self._cache.unfollow(prefixes)

    async def _abandon(self, topic: TopicName, why: str) -> None:
        left = self.cursors.pending(topic)
        self.cursors.forget(topic)
        self._served.pop(topic, None)
        await self._unfollow(topic)
        self.abandoned += 1
        self.journal.record("abandon", topic=topic.path, why=why, cursors=left)
        log.warning(
            "broker %d: %s unloaded without a seal: %s (pending cursors %s dropped)",
            self.broker_id,
            topic,
            why,
            left or "none",
        )

    def _fence(self, topic: TopicName) -> Condition | None:
        """The fence of `topic`'s cursor writes: owning it under the assignment we loaded it
        with; None once we no longer serve it (its cursors then go with the hand-over)."""
        served = self._served.get(topic)
        if served is None or topic not in self._serving:
            return None
        return owned(self.broker_id, topic, served.token)

    # -- load reports ------------------------------------------------------------------

    async def _report_load(self) -> None:
        # A CPU reading measures the time since the previous one: the first only starts the
        # measure (read at once, it says 0 % — and an idle-looking broker would be sent
        # every topic), so the first report comes one interval later.
        psutil.cpu_percent(interval=None)
        self._process.cpu_percent(interval=None)
        while True:
            await asyncio.sleep(self.config.load_report_interval)
            try:
                await self._cluster.write_load_report(self.broker_id, self.load_report())
            except MetadataError as error:
                log.warning("broker %d: load report not written: %s", self.broker_id, error)

    def load_report(self) -> LoadReport:
        """The host's CPU and memory (percent), this process's, and the topics served: the
        first `LOAD_REPORT_TOPICS` listed, all counted."""
        topics = heapq.nsmallest(LOAD_REPORT_TOPICS, (topic.path for topic in self._serving))
        usage = [
            ResourceUsage(resource="CPU", usage=round(psutil.cpu_percent(interval=None))),
            ResourceUsage(resource="Memory", usage=round(psutil.virtual_memory().percent)),
            ResourceUsage(resource="ProcessCPU", usage=round(self._process.cpu_percent(None))),
            ResourceUsage(resource="ProcessMemory", usage=round(self._process.memory_percent())),
        ]
        return LoadReport(resources_usage=usage, topic_list=topics, topics_len=len(self._serving))


_STOP_ATTEMPTS = 3
"""How often a stop reads a topic's assignment again when its hand-over's fence is refused."""


class _Refused(Exception):
    """A hand-over's fence was refused (`_hand_over` with `retry_refused`)."""


class _Step(Protocol):
    async def __call__(self) -> None: ...


async def _joining(step: Callable[[], Awaitable[object]], deadline: float) -> None:
    """`step`, again while the store is `Unavailable`, until `deadline` (loop time)."""
    loop = asyncio.get_running_loop()
    delay = 0.05
    while True:
        try:
            await step()
            return
        except Unavailable as error:
            if loop.time() >= deadline:
                raise
            log.warning("joining the cluster: %s; trying again", error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


FOLLOW_CHUNK = 2_000
"""Topics arriving at once that one follow of the cache takes at most: a follow of 25,000
topics (50,000 prefixes) ran past its 30 s deadline on an etcd busy with 1M topics, and the
broker then followed them one at a time, about two seconds each."""


def _cluster_wide(broker_id: int) -> list[str]:
    """What every broker follows, whatever it serves: keys that do not grow with topics."""
    return [
        layout.broker_prefix(broker_id),  # its state and its assignments
        layout.registrations_prefix(),
        layout.leader(),
        layout.leader_epoch(),
        layout.schemas_prefix(),
    ]


def _topic_prefixes(topic: TopicName) -> list[str]:
    """Every key of a topic: its own (policy, delivery, producers, subscriptions, cursors)
    and its tiered storage's."""
    return [layout.topic_root(topic), layout.storage_topic_prefix(topic)]


def _assigned_topic(key: str) -> TopicName | None:
    parsed = layout.parse(key)
    if parsed.kind is KeyKind.ASSIGNMENT:
        return parsed.topic_name
    return None


def _cursors(entries: Iterable[Entry]) -> list[int]:
    """The offsets of the cursor keys among a topic's subscription keys (-1: none)."""
    found = [-1]
    for entry in entries:
        if layout.parse(entry.key).kind is KeyKind.CURSOR:
            offset = decode_value(entry.key, entry.value)
            if isinstance(offset, int):
                found.append(offset)
    return found
