"""`BrokerNode`: what a broker embeds. It registers under its session's lease, keeps its
state and load report, loads and unloads the topics the leader assigns it, batches cursors,
and hands a topic over (sealed) when it is moved away."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import psutil

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.cache import LocalCache, Subscription
from metaplane.cluster._cursors import DEFAULT_EVERY, DEFAULT_INTERVAL, CursorBatcher
from metaplane.coordination import Session, SessionState
from metaplane.layout import KeyKind, TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerRegistered,
    BrokerRegistration,
    BrokerState,
    ClusterManager,
    LoadReport,
    NoSealedState,
    ObjectDescriptor,
    ResourceUsage,
    SealedState,
    StorageManager,
    Versioned,
    decode,
    decode_value,
    encode,
)
from metaplane.store import (
    ANY,
    Compare,
    EventType,
    MetadataError,
    MetadataStore,
    Put,
)

log = logging.getLogger(__name__)


class TopicHost(Protocol):
    """The broker's side of topic ownership: the BrokerNode calls it."""

    async def load(self, topic: TopicName, start_offset: int) -> None:
        """Start serving `topic`; its next message gets `start_offset`."""

    async def unload(self, topic: TopicName, fence: Compare) -> int:
        """Stop serving `topic`; return its last committed offset (-1 if it has none).

        The topic is no longer assigned to this broker: metadata the host still writes for
        it (its last storage object) must be written under `fence`, which holds while the
        hand-over is not finished."""


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    registration: BrokerRegistration
    session_ttl: int = 10
    load_report_interval: float = 5.0
    cursor_every: int = DEFAULT_EVERY
    cursor_interval: float = DEFAULT_INTERVAL
    registration_wait: float = 60.0
    """How long to wait for a predecessor's registration (same id, a dead process) to go."""


class BrokerNode:
    """One broker's membership of the cluster.

    Start: a session, the registration (absent before, under the session's lease), the
    state `active`, a LocalCache of the broker's own keys (its state and assignments), then
    the topics assigned to it. Assignments arriving later are loaded; assignments deleted
    (a move, a drain, a rebalance) are unloaded and sealed: the cursors and the sealed
    state are written in one transaction that holds only while the unassigned marker that
    took the topic away is unchanged — so the leader, which waits for the sealed state,
    never assigns the topic before it is sealed, and nothing is written once it has.
    """

    def __init__(self, store: MetadataStore, config: BrokerConfig, host: TopicHost) -> None:
        self.store = store
        self.config = config
        self.broker_id = config.broker_id
        self.host = host
        self.session = Session(store, ttl=config.session_ttl)
        self.cursors = CursorBatcher(
            store, config.broker_id, every=config.cursor_every, interval=config.cursor_interval
        )
        self._cluster = ClusterManager(store)
        self._storage = StorageManager(store)
        self._owned: set[TopicName] = set()
        self._cache: LocalCache | None = None
        self._subscription: Subscription | None = None
        self._handled = 0
        self._progress = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._process = psutil.Process(os.getpid())

    @property
    def owned(self) -> frozenset[TopicName]:
        """The topics this broker serves now."""
        return frozenset(self._owned)

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        await self.session.start()
        await self._register()
        await self._cluster.set_state(
            self.broker_id, BrokerState(mode=BrokerMode.ACTIVE, reason="boot"), ANY
        )
        self.session.listen(self._on_session)
        self._cache = LocalCache(
            self.store, [layout.broker_prefix(self.broker_id)], decoder=decode_value
        )
        await self._cache.start()
        subscription = self._cache.subscribe(layout.broker_prefix(self.broker_id))
        self._subscription = subscription
        await self._apply_assignments(self._assigned_now())
        await self.cursors.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._follow(subscription), name=f"broker {self.broker_id}"),
            loop.create_task(self._report_load(), name=f"load report {self.broker_id}"),
        ]
        log.info("broker %d started with %d topics", self.broker_id, len(self._owned))

    async def stop(self) -> None:
        """A clean shutdown: every topic unloaded and sealed with its cursors (so that its
        next owner resumes exactly), then the session revoked (the registration goes)."""
        for task in self._tasks:
            await cancel_and_wait(task)
        for topic in sorted(self._owned):
            await self._hand_over(topic, fence=Compare.exists(self._assignment(topic)))
        await self.cursors.stop()
        if self._cache is not None:
            await self._cache.aclose()
        await self.session.close()
        log.info("broker %d stopped", self.broker_id)

    async def drain(self, reason: str = "drain") -> int:
        """Ask the leader to move every topic away; it sets `drained` once none is left."""
        state = BrokerState(mode=BrokerMode.DRAINING, reason=reason)
        return await self._cluster.set_state(self.broker_id, state, ANY)

    def ack(self, topic: TopicName, subscription: str, offset: int) -> None:
        """A consumer of `subscription` acknowledged up to `offset` (batched, see cursors)."""
        if topic in self._owned:
            self.cursors.ack(topic, subscription, offset)

    # -- registration ------------------------------------------------------------------

    async def _register(self) -> None:
        """Register under the session's lease; a predecessor's registration (the same id,
        a process that died) is waited out until its lease expires."""
        deadline = time.monotonic() + self.config.registration_wait
        key = layout.broker_registration(self.broker_id)
        while True:
            try:
                await self._cluster.register(
                    self.broker_id, self.config.registration, self.session.lease
                )
                return
            except BrokerRegistered:
                if time.monotonic() > deadline:
                    raise
                log.warning("broker %d: a previous registration is still there", self.broker_id)
                await self._until_deleted(key)

    async def _until_deleted(self, key: str) -> None:
        entry = await self.store.get(key)
        if entry is None:
            return
        async with self.store.watch(key, start_revision=entry.mod_revision + 1) as watch:
            async for batch in watch:
                if any(event.type is EventType.DELETE for event in batch.events):
                    return

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.REESTABLISHED:
            # The old lease took the registration with it: register again.
            task = asyncio.get_running_loop().create_task(self._register())
            self._tasks.append(task)

    # -- assignments -------------------------------------------------------------------

    def _assigned_now(self) -> list[tuple[EventType, TopicName]]:
        assert self._cache is not None
        entries = self._cache.list(layout.broker_prefix(self.broker_id))
        return [(EventType.PUT, topic) for topic in _assignments(e.key for e in entries)]

    async def _follow(self, subscription: Subscription) -> None:
        async for batch in subscription:
            changes = [
                (event.type, topic) for event in batch.events for topic in _assignments([event.key])
            ]
            await self._apply_assignments(changes)
            self._handled = batch.revision
            progress, self._progress = self._progress, asyncio.Event()
            progress.set()

    async def caught_up(self, revision: int, timeout: float | None = None) -> None:
        """Return once this node has loaded and unloaded what every change of its keys up
        to `revision` asked for (read your writes, at the broker)."""
        assert self._cache is not None and self._subscription is not None
        async with asyncio.timeout(timeout):
            await self._cache.wait_for(revision)
            target = self._subscription.last_offered
            while self._handled < target:
                await self._progress.wait()

    async def _apply_assignments(self, changes: list[tuple[EventType, TopicName]]) -> None:
        for kind, topic in changes:
            try:
                if kind is EventType.PUT and topic not in self._owned:
                    await self._load(topic)
                elif kind is EventType.DELETE and topic in self._owned:
                    await self._unload(topic)
            except MetadataError as error:
                log.error(
                    "broker %d: %s of %s failed: %s",
                    self.broker_id,
                    "load" if kind is EventType.PUT else "unload",
                    topic,
                    error,
                )

    async def _load(self, topic: TopicName) -> None:
        """Serve a topic assigned to us: resume after its sealed state if it was moved here,
        else after its last stored object; then consume the sealed state."""
        sealed = await self._storage_sealed(topic)
        if sealed is not None:
            start = sealed.value.last_committed_offset + 1
        else:
            start = await self._recovered_start(topic)
        await self.host.load(topic, start)
        self._owned.add(topic)
        if sealed is not None:
            with contextlib.suppress(MetadataError):
                await self._storage.delete_sealed_state(topic, sealed.version)
        log.info("broker %d loaded %s at offset %d", self.broker_id, topic, start)

    async def _storage_sealed(self, topic: TopicName) -> Versioned[SealedState] | None:
        try:
            return await self._storage.sealed_state(topic)
        except NoSealedState:
            return None

    async def _recovered_start(self, topic: TopicName) -> int:
        """After the last stored object: where a topic whose owner vanished resumes."""
        latest = await self.store.list(
            layout.storage_objects_prefix(topic),
            end_before=layout.storage_cur(topic),
            reverse=True,
            limit=1,
        )
        if not latest:
            return 0
        descriptor = decode(ObjectDescriptor, latest[0].value)
        return descriptor.end_offset + 1

    async def _unload(self, topic: TopicName) -> None:
        """Our assignment was deleted: stop serving, and seal the topic under the marker
        that took it away, if that marker is still there."""
        marker = await self.store.get(layout.unassigned(topic))
        if marker is None:
            self._owned.discard(topic)
            await self.host.unload(topic, Compare.exists(self._assignment(topic)))
            self.cursors.take(topic)
            log.warning("broker %d: %s taken without a marker; not sealed", self.broker_id, topic)
            return
        await self._hand_over(
            topic, fence=Compare.mod_revision(marker.key, "==", marker.mod_revision)
        )

    async def _hand_over(self, topic: TopicName, *, fence: Compare) -> None:
        """Unload `topic` and write its cursors and sealed state in one transaction that
        holds only under `fence`.

        A topic that never published (last offset -1) is sealed at 0, as the seal's offset
        is unsigned: its next owner starts at 1 — an offset skipped, never one used twice."""
        self._owned.discard(topic)
        last = await self.host.unload(topic, fence)
        cursors = self.cursors.take(topic)
        sealed = SealedState(
            sealed=True,
            last_committed_offset=max(last, 0),
            broker_id=self.broker_id,
            timestamp=int(time.time()),
        )
        ops = [*self.cursors.ops(topic, cursors), Put(layout.storage_state(topic), encode(sealed))]
        result = await self.store.txn([fence], ops, [])
        if result.succeeded:
            log.info("broker %d sealed %s at offset %d", self.broker_id, topic, last)
        else:
            log.warning("broker %d: %s moved on before it could be sealed", self.broker_id, topic)

    def _assignment(self, topic: TopicName) -> str:
        return layout.assignment(self.broker_id, topic)

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
        """The host's CPU and memory (percent), this process's, and the topics served."""
        topics = sorted(topic.path for topic in self._owned)
        usage = [
            ResourceUsage(resource="CPU", usage=round(psutil.cpu_percent(interval=None))),
            ResourceUsage(resource="Memory", usage=round(psutil.virtual_memory().percent)),
            ResourceUsage(resource="ProcessCPU", usage=round(self._process.cpu_percent(None))),
            ResourceUsage(resource="ProcessMemory", usage=round(self._process.memory_percent())),
        ]
        return LoadReport(resources_usage=usage, topic_list=topics, topics_len=len(topics))


def _assignments(keys: Iterable[str]) -> list[TopicName]:
    found = []
    for key in keys:
        parsed = layout.parse(key)
        if parsed.kind is KeyKind.ASSIGNMENT and parsed.topic_name is not None:
            found.append(parsed.topic_name)
    return found
