"""`LoadManager`: runs on every broker, acts only while its node leads. It reassigns a lost
broker's topics, assigns waiting topics by a ranking, drains and rebalances — every write a
fenced transaction, so that a deposed leader's decisions never land."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from metaplane import layout
from metaplane._tasks import cancel_and_wait
from metaplane.cache import CacheLagged, CacheTimeout, LocalCache, Subscription
from metaplane.cluster._moves import BROKER_LOST, UNLOAD, Target, move_change
from metaplane.cluster._rankings import BrokerLoad, Ranking, choose_targets
from metaplane.cluster._rebalance import RebalanceConfig, Rebalancer
from metaplane.cluster._view import ClusterView, ViewReader
from metaplane.coordination import LeaderElection
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerState,
    Change,
    ClusterManager,
    Condition,
    Marker,
    OwnershipManager,
    RetryPolicy,
    Versioned,
    Write,
    decode_value,
)
from metaplane.store import (
    MAX_TXN_OPS,
    Compare,
    Delete,
    Fenced,
    MetadataError,
    Unavailable,
    WatchBatch,
    in_prefix,
)

log = logging.getLogger(__name__)

_LEADER_WRITES = RetryPolicy(conflicts=1, unavailable=5.0)
"""A leader's change is sent again for a few seconds while the store is away (the cycle that
made it is then retried from a fresh view), and never after it stopped leading."""


@dataclass(frozen=True)
class LoadManagerConfig:
    ranking: Ranking = Ranking.BALANCED
    rebalance: RebalanceConfig = field(default_factory=RebalanceConfig)
    rebalance_every: float = 5.0
    """Seconds between rebalancing cycles (the rebalancer counts cycles)."""
    idle_every: float = 1.0
    """A cycle at least this often, even when nothing in /cluster changed."""
    batch_size: int = 60
    """Assignments a fenced transaction carries (each: 2 compares and 2 writes, plus the
    target's 2 compares and the fence: at most 62 fit in etcd's 128)."""
    seal_timeout: float = 30.0
    """How long a move waits for its source to seal the topic before assigning anyway."""
    place_per_cycle: int = 5_000
    """Waiting topics a cycle places at most; the next cycle follows at once with the
    rest. Choosing targets is work that holds the event loop, and the node's session must
    keep refreshing its lease meanwhile: 100,000 topics created at once are placed in
    steps, never in one stretch of seconds."""


class LoadManager:
    """The leader's work on topic placement.

    Each cycle reads the cluster from a LocalCache of `/cluster` (at one revision), then:
    1. a broker that owns topics but is no longer registered is lost: each of its topics
       becomes an unassigned marker {"reason": "broker_lost"} and its load report goes;
    2. waiting topics are assigned by the ranking, in batches of fenced transactions that
       compare every marker they consume and the target's registration and state — a topic
       is always either assigned or waiting, never lost; a moved topic is assigned only once
       its source has sealed it (or is gone, or `seal_timeout` passed);
    3. every `rebalance_every` seconds, the rebalancer's moves start (a move is an unload
       with a target), draining brokers are emptied and, once empty, marked drained.
    """

    def __init__(self, election: LeaderElection, config: LoadManagerConfig | None = None) -> None:
        self.election = election
        self.config = config or LoadManagerConfig()
        self.store = election.session.store
        self.ownership = OwnershipManager(self.store)
        self.cluster = ClusterManager(self.store)
        self.rebalancer = Rebalancer(self.config.rebalance)
        self.cycles = 0
        self.rebalances = 0
        """Rebalancing cycles run while leading."""
        self.moves_started = 0
        self.cycled_revision = 0
        """The revision of the cluster the last cycle read."""
        self._rebalanced = asyncio.Event()
        self._cycled = asyncio.Event()
        self._cache = self._new_cache()
        self._views = ViewReader(self._cache)
        self._task: asyncio.Task[None] | None = None
        self._last_rebalance = 0.0
        self._waiting_since: dict[TopicName, float] = {}

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="load manager")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self._cache.aclose()

    def _new_cache(self) -> LocalCache:
        return LocalCache(self.store, [layout.cluster_prefix()], decoder=decode_value)

    # -- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            token = await self.election.wait_elected()
            # The whole of /cluster (every topic's assignment or marker) is held only while
            # leading: a follower's memory does not grow with the cluster.
            self._cache = self._new_cache()
            self._views = ViewReader(self._cache)
            try:
                await self._cache.start()
                await self._cache.wait_for(token.create_revision)
            except (CacheTimeout, MetadataError) as late:  # the store is away: try again
                log.warning("load manager: %s", late)
                await self._cache.aclose()
                await asyncio.sleep(0.5)
                continue
            self.rebalancer.reset()  # a new term: what an earlier one planned is not ours
            self._waiting_since.clear()
            log.info("load manager leads (epoch %d)", token.epoch)
            events = self._cache.subscribe(layout.cluster_prefix())
            try:
                await self._lead(events)
            finally:
                events.close()
                await self._cache.aclose()

    async def _lead(self, events: Subscription) -> None:
        while self.election.is_leader:
            try:
                await self.cycle()
            except Fenced:
                return
            except MetadataError as error:
                log.warning("load manager cycle failed: %s", error)
            if not await self._next(events):
                return

    async def _next(self, events: Subscription) -> bool:
        """Until something changes in /cluster, or `idle_every` passes. The changes only
        wake the next cycle, which reads everything again: whatever else is queued is
        dropped, so that a burst of changes is one cycle, not one each. A load report alone
        wakes nothing: every broker writes one every second, and each woke a cycle, whose
        copy of the view costs a walk of every topic — at 1M topics the leader's loop spent
        80 % of its time on cycles that found nothing to do, and loaded its own topics at
        1,000 a minute. The next cycle (`idle_every` at the latest) reads the reports.
        False when the subscription fell behind and must be replaced."""
        try:
            async with asyncio.timeout(self.config.idle_every):
                while not _wakes(await anext(events)):
                    pass
        except TimeoutError:
            pass
        except CacheLagged:
            return False
        events.drain()
        return True

    async def cycle(self) -> None:
        """One round of the leader's work (see the class). Raises Fenced once deposed."""
        self.cycles += 1
        view = await self._views.read()
        try:
            await self._cycle(view)
        finally:
            self.cycled_revision = view.revision
            cycled, self._cycled = self._cycled, asyncio.Event()
            cycled.set()

    async def wait_cycled(self, revision: int, timeout: float | None = None) -> None:
        """Return once a cycle has read the cluster at `revision` or later."""
        async with asyncio.timeout(timeout):
            while self.cycled_revision < revision:
                await self._cycled.wait()

    async def _cycle(self, view: ClusterView) -> None:
        if await self._reassign_lost(view):
            view = await self._fresh_view()
        if await self._assign_waiting(view):
            view = await self._fresh_view()
        now = time.monotonic()
        if now - self._last_rebalance >= self.config.rebalance_every:
            self._last_rebalance = now
            await self._rebalance(view, now)

    async def _fresh_view(self) -> ClusterView:
        await self._cache.wait_for(await self.store.revision())
        return await self._views.read()

    # -- 1. lost brokers ---------------------------------------------------------------

    async def _reassign_lost(self, view: ClusterView) -> bool:
        """Turn each assignment of a broker that is gone into a waiting marker."""
        lost = view.lost()
        changes: list[Change] = []
        for broker_id in sorted(lost):
            log.warning("broker %d is lost; its topics are reassigned", broker_id)
            for topic in sorted(view.assigned_to(broker_id)):
                owner = next(o for o in view.owners[topic] if o.value == broker_id)
                if topic in view.waiting:
                    changes.append(Change((), (Delete(owner.key),)))
                else:
                    changes.append(self.ownership.unassign_change(topic, owner, reason=BROKER_LOST))
            if broker_id in view.reports:
                changes.append(Change((), (Delete(view.reports[broker_id].key),)))
        await self._apply_batched(changes)
        return bool(changes)

    # -- 2. waiting topics -------------------------------------------------------------

    async def _assign_waiting(self, view: ClusterView) -> bool:
        ready = await self._ready_to_place(view)
        if not ready:
            return False
        loads = broker_loads(view, listed=False)  # no topic weights: counts rank alike
        preferred: dict[TopicName, int] = {}
        avoid: dict[TopicName, int] = {}
        for topic in ready:
            marker = view.waiting[topic]
            if marker.value is None:
                continue
            if isinstance(marker.value.to_broker, int):
                preferred[topic] = marker.value.to_broker
            elif marker.value.reason == UNLOAD:
                avoid[topic] = marker.value.from_broker  # an unload moves away from its owner
        targets = choose_targets(
            ready, loads, self.config.ranking, preferred=preferred, avoid=avoid
        )
        by_broker: defaultdict[int, list[TopicName]] = defaultdict(list)
        for topic, broker_id in targets.items():
            by_broker[broker_id].append(topic)
        assigned = 0
        for broker_id, topics in sorted(by_broker.items()):
            assigned += await self._assign(view, broker_id, sorted(topics))
        for topic in ready:
            self._waiting_since.pop(topic, None)
        # An operator's move to a named broker is not undone by the next rebalance.
        self.rebalancer.moved(
            (t for t, broker_id in preferred.items() if targets.get(t) == broker_id),
            time.monotonic(),
        )
        log.info("assigned %d of %d waiting topics", assigned, len(ready))
        return assigned > 0

    async def _assign(self, view: ClusterView, broker_id: int, topics: list[TopicName]) -> int:
        """Assign `topics` to one broker, `batch_size` to a fenced transaction; a refused
        batch is retried topic by topic, so that one stale marker holds back no other."""
        state = view.states[broker_id]
        assigned = 0
        for start in range(0, len(topics), self.config.batch_size):
            chunk = topics[start : start + self.config.batch_size]
            waiting = [(topic, view.waiting[topic]) for topic in chunk]
            if await self._fenced(
                self.ownership.assign_many_change(broker_id, waiting, state=state)
            ):
                assigned += len(chunk)
                continue
            for topic, marker in waiting:
                one = self.ownership.assign_change(topic, broker_id, marker=marker, state=state)
                assigned += await self._fenced(one)
        return assigned

    async def _ready_to_place(self, view: ClusterView) -> list[TopicName]:
        """The waiting topics this cycle places: those ready, `place_per_cycle` at most."""
        ready: list[TopicName] = []
        for topic, marker in view.waiting.items():
            if len(ready) >= self.config.place_per_cycle:
                break
            if await self._ready(view, topic, marker):
                ready.append(topic)
        return ready

    async def _ready(self, view: ClusterView, topic: TopicName, marker: Versioned[Marker]) -> bool:
        """A waiting topic may be assigned unless it is being moved from a broker that is
        still here and has not sealed it yet (and `seal_timeout` has not passed)."""
        value = marker.value
        if value is None or value.reason != UNLOAD or value.from_broker not in view.registered:
            return True
        sealed = await self.store.get(layout.storage_state(topic))
        if sealed is not None and sealed.mod_revision > marker.mod_revision:
            return True
        since = self._waiting_since.setdefault(topic, time.monotonic())
        if time.monotonic() - since > self.config.seal_timeout:
            log.warning("%s: its source did not seal it in time; assigning anyway", topic)
            return True
        return False

    # -- 3. rebalancing and draining ---------------------------------------------------

    async def wait_rebalances(self, count: int, timeout: float | None = None) -> None:
        """Return once `count` rebalancing cycles have run (in all)."""
        async with asyncio.timeout(timeout):
            while self.rebalances < count:
                await self._rebalanced.wait()

    async def _rebalance(self, view: ClusterView, now: float) -> None:
        try:
            await self._plan_and_move(view, now)
        finally:
            self.rebalances += 1
            rebalanced, self._rebalanced = self._rebalanced, asyncio.Event()
            rebalanced.set()

    async def _plan_and_move(self, view: ClusterView, now: float) -> None:
        plan = self.rebalancer.plan(broker_loads(view), self.config.ranking, now)
        for move in plan.moves:
            owners = view.owners.get(move.topic, [])
            owner = next((o for o in owners if o.value == move.from_broker), None)
            if owner is None or move.topic in view.waiting:
                self.rebalancer.cancel(move.topic)
                continue
            target = Target(move.to_broker, view.states[move.to_broker])
            change = move_change(self.ownership, move.topic, owner, target)
            if await self._fenced(change):
                self.moves_started += 1
            else:
                self.rebalancer.cancel(move.topic)
        drained = []
        for broker_id in plan.drained:
            state = view.states.get(broker_id)
            if state is not None and state.value.mode is BrokerMode.DRAINING:
                value = BrokerState(mode=BrokerMode.DRAINED, reason=state.value.reason)
                drained.append(self.cluster.set_state_change(broker_id, value, state.version))
        await self._apply_batched(drained)
        if plan.moves or drained:
            log.info(
                "rebalance: imbalance %.3f -> %.3f, %d moves, drained %s",
                plan.imbalance,
                plan.imbalance_after,
                len(plan.moves),
                list(plan.drained),
            )

    # -- fenced writes -----------------------------------------------------------------

    async def _apply_batched(self, changes: Sequence[Change]) -> int:
        """Apply changes in batched fenced transactions; a refused batch is retried one
        change at a time, so that one stale change does not hold back the others. Returns
        how many changes landed. Raises Fenced once this node no longer leads."""
        applied = 0
        for batch in _batches(changes, self.config.batch_size):
            if await self._fenced(combine(batch)):
                applied += len(batch)
                continue
            for change in batch:
                applied += await self._fenced(change)
        return applied

    async def _fenced(self, change: Change) -> bool:
        """Apply `change` as the leader (through the one runner, fenced): True if it
        landed, False if one of its own conditions refused it (logged). Raises Fenced once
        this node no longer leads, and Unavailable once the store stayed away too long."""
        try:
            await self.election.apply(change, _LEADER_WRITES)
        except (Fenced, Unavailable):
            raise
        except MetadataError as refused:
            log.info("change refused: %s", refused)
            return False
        return True


def broker_loads(view: ClusterView, *, listed: bool = True) -> list[BrokerLoad]:
    """The rankings' input: each registered broker, its mode, the topics the store says it
    owns, and the CPU and memory of its last load report. Not `listed`: each broker's topics
    counted, not listed (`BrokerLoad.counted`) — as the placement of waiting topics ranks
    them (every topic weighs the same), at no cost that grows with the cluster."""
    loads = []
    owned = view.by_broker() if listed else {}
    for broker_id in sorted(view.registered):
        mode = view.mode(broker_id)
        if mode is None:
            continue
        report = view.reports.get(broker_id)
        usage = (
            {}
            if report is None
            else {u.resource: float(u.usage) for u in report.value.resources_usage}
        )
        loads.append(
            BrokerLoad(
                broker_id=broker_id,
                mode=mode,
                topics=frozenset(owned.get(broker_id, ())),
                counted=None if listed else view.owned_count.get(broker_id, 0),
                cpu=usage.get("CPU"),
                memory=usage.get("Memory"),
            )
        )
    return loads


def combine(changes: Iterable[Change]) -> Change:
    """One change of several; a compare they share is made once."""
    seen: set[Compare] = set()
    conditions: list[Condition] = []
    ops: list[Write] = []
    for change in changes:
        for condition in change.conditions:
            if condition.compare not in seen:
                seen.add(condition.compare)
                conditions.append(condition)
        ops.extend(change.ops)
    return Change(tuple(conditions), tuple(ops))


def _batches(changes: Sequence[Change], size: int) -> Iterable[list[Change]]:
    """Consecutive changes, at most `size` at a time and as many as fit in one fenced
    transaction (the fence adds a compare, and a read to the failure branch)."""
    batch: list[Change] = []
    compares: set[object] = set()
    ops = 0
    for change in changes:
        new = {c.compare for c in change.conditions} - compares
        if batch and (
            len(batch) == size
            or len(compares) + len(new) + 1 > MAX_TXN_OPS
            or ops + len(change.ops) > MAX_TXN_OPS
        ):
            yield batch
            batch, compares, ops = [], set(), 0
            new = {c.compare for c in change.conditions}
        batch.append(change)
        compares |= new
        ops += len(change.ops)
    if batch:
        yield batch


_LOAD_REPORTS = layout.load_reports_prefix()


def _wakes(batch: WatchBatch) -> bool:
    """Whether a batch applied under /cluster wakes the leader's next cycle: a change other
    than a load report's."""
    return any(not in_prefix(event.key, _LOAD_REPORTS) for event in batch.events)
