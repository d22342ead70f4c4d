"""The leader and a broker's cache at scale keep their session alive: the work of placing
100,000 topics, or of following 10,000 topics' keys at once, hands the event loop back often
enough that every lease refresh is sent and answered while it runs (the loop the session's
keep-alive shares). Recorded: each refresh and each change of the session's state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.cluster import LoadManager, LoadManagerConfig, Ranking
from metaplane.coordination import LeaderElection, Session, SessionState
from metaplane.layout import TopicName
from metaplane.resources import NULL, BrokerMode, BrokerRegistration, BrokerState, encode
from metaplane.store import Lease, MemoryStore, MetadataStore, Put

TTL = 6
"""A session's usual TTL: a refresh every second, each with a second to be answered; a loop
held past that suspends the session, one held for six seconds loses it. (The loop was held
for up to 55 s before the fix; with TTL 2 a third of a second of CPU contention on a shared
2-core machine was enough to suspend it, whatever the code did.)"""


@dataclass
class Refreshes:
    """Every refresh the session sent, with what the work had done by then."""

    progress: list[int] = field(default_factory=list)
    states: list[SessionState] = field(default_factory=list)


@pytest.fixture
async def memory() -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    yield store
    await store.aclose()


async def recorded_session(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch, progress: object
) -> tuple[Session, Refreshes]:
    """A session whose refreshes are recorded with `progress()` at the moment each is sent."""
    assert callable(progress)
    seen = Refreshes()
    refresh = store.refresh

    async def recording(lease: Lease | int, *, timeout: float | None = None) -> int:
        seen.progress.append(progress())
        return await refresh(lease, timeout=timeout)

    monkeypatch.setattr(store, "refresh", recording)
    session = await Session(store, ttl=TTL).start()
    session.listen(seen.states.append)
    return session, seen


async def waiting(store: MetadataStore, count: int) -> list[TopicName]:
    topics = [TopicName(f"ns{i % 10}", f"t{i:06d}") for i in range(count)]
    for start in range(0, count, 128):
        chunk = topics[start : start + 128]
        await store.txn([], [Put(layout.unassigned(topic), NULL) for topic in chunk], [])
    return topics


async def active_brokers(store: MetadataStore, brokers: range) -> None:
    registration = BrokerRegistration(admin_addr="a", advertised_addr="b", broker_addr="c")
    state = BrokerState(mode=BrokerMode.ACTIVE, reason="test")
    for broker_id in brokers:
        await store.put(layout.broker_registration(broker_id), encode(registration))
        await store.put(layout.broker_state(broker_id), encode(state))


@pytest.mark.timeout(900)
async def test_the_leader_places_100k_topics_while_its_session_keeps_refreshing(
    memory: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant: the leader never stops leading, and refreshes go out between its cycles'
    steps (some while only part of the topics is placed), not only before and after."""
    topics = await waiting(memory, 100_000)
    await active_brokers(memory, range(1, 11))
    load_manager: LoadManager | None = None

    def placed() -> int:
        return 0 if load_manager is None else load_manager.cycles

    session, seen = await recorded_session(memory, monkeypatch, placed)
    election = LeaderElection(session, node_id=1)
    config = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=30, rebalance_every=3600)
    load_manager = LoadManager(election, config)
    await election.start()
    await load_manager.start()
    try:
        while await memory.list(layout.unassigned_prefix(), keys_only=True, limit=1):
            await load_manager.wait_cycled(await memory.revision(), timeout=300)
        assigned = await memory.list(layout.brokers_prefix(), keys_only=True)
        assert sum(1 for entry in assigned if not entry.key.endswith("/state")) == len(topics)
        assert election.is_leader
    finally:
        await load_manager.stop()
        await election.stop()
        await session.close()
    assert seen.states == [SessionState.CLOSED], "the session left CONNECTED while placing"
    cycles = load_manager.cycles
    during = [at for at in seen.progress if 1 <= at < cycles]
    assert len(during) >= 2, f"refreshes at cycles {seen.progress} of {cycles}"


async def test_a_cache_follows_10k_topics_at_once_while_the_session_keeps_refreshing(
    memory: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker assigned 10,000 topics at once follows two prefixes each (20,000): the
    follow never holds the loop past a refresh's deadline."""
    count = 10_000
    topics = [f"/topics/ns/t{i:05d}" for i in range(count)]
    for start in range(0, count, 64):
        ops = []
        for topic in topics[start : start + 64]:
            ops += [Put(topic, b"0"), Put(f"{topic}/delivery", b'"Reliable"')]
        await memory.txn([], ops, [])
    storage = [f"/danube-data/storage{topic}" for topic in topics]
    async with LocalCache(memory, [layout.cluster_prefix()]) as cache:
        session, seen = await recorded_session(memory, monkeypatch, lambda: len(cache))
        try:
            revision = await cache.follow(topics + storage, timeout=120)
            await cache.wait_for(revision, timeout=60)
            assert len(cache) == 2 * count
        finally:
            await session.close()
    assert seen.states == [SessionState.CLOSED], "the session left CONNECTED while following"
