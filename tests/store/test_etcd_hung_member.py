"""The etcd backend on a real 3-member cluster whose active member hangs (SIGSTOP) with two
healthy members left: lease refreshes, a session, a LocalCache and a raw watch move to
another member as they would from a dead one — no lease lost, no write missed, no batch
duplicated or out of order. And a lone member that hangs fails refreshes and watches in
time, never silently."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import metaplane.store._etcd_prefixes as etcd_prefixes
from metaplane.cache import LocalCache
from metaplane.coordination import Session, SessionState
from metaplane.store import (
    Delete,
    EtcdStore,
    MetadataStore,
    Put,
    Unavailable,
    WatchBatch,
    connect_store,
)
from metaplane.testing import EtcdCluster, EtcdMember
from tests.store.watching import changes, check_history, collect

pytestmark = [
    pytest.mark.backends("etcd", reason="members of a real etcd cluster hung on purpose"),
    pytest.mark.slow,
]

TTL = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with EtcdCluster(tmp_path_factory.mktemp("hung")) as running:
        yield running


@pytest.fixture
def healthy(cluster: EtcdCluster) -> Iterator[EtcdCluster]:
    """The module's cluster with every member running; whatever a test hung or killed runs
    again afterwards. A hung member is restarted, not continued: a leader continued after
    its TTLs ran out revokes every lease it held, on etcd before 3.4.31 (etcd issue 15247),
    and the next test would lose its session to that server bug."""
    yield cluster
    for member in cluster.members:
        if member.paused:
            member.kill()
        member.start()
    for member in cluster.members:
        member.wait_ready()


def leader(cluster: EtcdCluster) -> EtcdMember:
    for member in cluster.members:
        (status,) = json.loads(member.etcdctl("endpoint", "status", "-w", "json"))
        if status["Status"]["header"]["member_id"] == status["Status"]["leader"]:
            return member
    raise AssertionError("no leader")


async def client(cluster: EtcdCluster, first: EtcdMember, **query: str) -> EtcdStore:
    """A store on every member of `cluster`, talking to `first` until it fails."""
    others = [m.endpoint for m in cluster.members if m is not first]
    options = "&".join(f"{name}={value}" for name, value in {"timeout": "5", **query}.items())
    store = await connect_store(f"etcd://{first.endpoint},{','.join(others)}?{options}")
    assert isinstance(store, EtcdStore) and store.active_endpoint == first.endpoint
    return store


async def beside(cluster: EtcdCluster, hung: EtcdMember) -> MetadataStore:
    """A store on the members other than `hung`: a writer the hang does not touch."""
    others = [m.endpoint for m in cluster.members if m is not hung]
    return await connect_store("etcd://" + ",".join(others))


def follower(cluster: EtcdCluster) -> EtcdMember:
    chief = leader(cluster)
    return next(member for member in cluster.members if member is not chief)


@pytest.mark.timeout(60)
async def test_refresh_moves_past_a_hung_member(healthy: EtcdCluster, backend: str) -> None:
    victim = follower(healthy)
    async with await client(healthy, victim) as store:
        lease = await store.grant(TTL)
        healthy.pause(victim)
        loop = asyncio.get_running_loop()
        started = loop.time()
        # 1 s is what a TTL-6 lease's keeper gives a refresh: the hung member gets a share
        # of it, the next member the rest.
        granted = await store.refresh(lease, timeout=1.0)
        took = loop.time() - started
        assert granted == TTL
        assert store.active_endpoint != victim.endpoint
        assert took < 1.0 + 0.3


@pytest.mark.timeout(90)
async def test_session_survives_a_hung_leader(healthy: EtcdCluster, backend: str) -> None:
    """The member the client talks to is the leader, and hangs: the others elect a new one
    and the session's refreshes move to them. Suspended for a moment, perhaps; lost never,
    and still the same lease, whose keys stay."""
    victim = leader(healthy)
    async with await client(healthy, victim) as store:
        session = Session(store, ttl=TTL)
        states: list[SessionState] = []
        session.listen(states.append)
        async with session:
            lease, generation = session.lease, session.generation
            healthy.pause(victim)
            async with await beside(healthy, victim) as writer:
                # Past the TTL since the last refresh before the hang: a lost lease would
                # be lost by now.
                with pytest.raises(TimeoutError):
                    await session.wait_state(SessionState.LOST, timeout=TTL + 2)
                await session.wait_alive(timeout=10)
                assert (session.lease, session.generation) == (lease, generation)
                await writer.put("/session/owned", b"", lease=lease)  # LeaseNotFound if gone
            assert SessionState.LOST not in states
            assert SessionState.REESTABLISHED not in states


@pytest.mark.timeout(60)
async def test_cache_sees_writes_past_a_hung_member(healthy: EtcdCluster, backend: str) -> None:
    """A LocalCache on a client whose member hangs sees a write made through the healthy
    members within 3 s: its watch notices the silence and moves on by itself (nobody asks
    the cache for anything)."""
    victim = follower(healthy)
    async with (
        await client(healthy, victim) as store,
        LocalCache(store, ["/cache"]) as cache,
    ):
        subscription = cache.subscribe("/cache")
        healthy.pause(victim)
        async with await beside(healthy, victim) as writer:
            written = await writer.put("/cache/k", b"through the others")
            loop = asyncio.get_running_loop()
            acknowledged = loop.time()
            async with asyncio.timeout(3):
                batch = await anext(subscription)
            seen_after = loop.time() - acknowledged
        assert [(e.key, e.revision) for e in batch.events] == [("/cache/k", written)]
        entry = cache.get("/cache/k")
        assert entry is not None and entry.value == b"through the others"
        assert store.active_endpoint != victim.endpoint
        assert seen_after < 3


async def write_mixed(store: MetadataStore, count: int, tag: str) -> int:
    """Puts, deletes and transactions under /raw and beside it; the last revision."""
    revision = 0
    for i in range(count):
        key = f"/raw/k{i % 7}"
        if i % 5 == 4:
            revision = await store.delete(key)
        elif i % 5 == 2:
            ops = [Put(f"/raw/{tag}{i}", b"t"), Put(f"/raw-beside/{tag}{i}", b"t")]
            revision = (await store.txn([], ops, [])).revision
        elif i % 5 == 3:
            revision = (await store.txn([], [Delete(f"/raw/{tag}{i - 1}")], [])).revision
        else:
            revision = await store.put(key, f"{tag}{i}".encode())
    return revision


@pytest.mark.parametrize("fault", ["pause", "kill"])
@pytest.mark.timeout(90)
async def test_watch_resumes_on_another_member_without_gap_duplicate_or_reorder(
    healthy: EtcdCluster, backend: str, fault: str
) -> None:
    """A raw watch whose member hangs (or dies) mid-stream, with batches received but not yet
    handed out, carries on on another member from the revision after the last it passed:
    its history is exactly what a watch through the healthy members saw."""
    victim = follower(healthy)
    async with (
        await client(healthy, victim) as store,
        await beside(healthy, victim) as writer,
    ):
        start = await writer.revision() + 1
        await write_mixed(writer, 30, "a")
        watch = store.watch("/raw", start_revision=start)
        batches: list[WatchBatch] = [await asyncio.wait_for(anext(watch), timeout=10)]
        # One response carried the thirty revisions: the rest wait in the watch.
        if fault == "pause":
            healthy.pause(victim)
        else:
            victim.kill()
        await write_mixed(writer, 30, "b")
        marker = await writer.put("/raw/end", b"")
        batches += await collect(watch, marker, timeout=20)
        await watch.aclose()
        assert store.active_endpoint != victim.endpoint
        async with writer.watch("/raw", start_revision=start) as plain:
            reference = changes(await collect(plain, marker))
    check_history(batches, reference)


@pytest.mark.timeout(60)
async def test_a_lone_hung_member_fails_refreshes_and_watches_in_time(
    tmp_path: Path, backend: str
) -> None:
    """With no member to move to, a refresh raises `Unavailable` at its deadline and a
    watch at the store's timeout: the caller learns of the hang, it never waits on it."""
    with EtcdMember(tmp_path) as member:
        async with await connect_store(member.url + "?timeout=2") as store:
            lease = await store.grant(TTL)
            start = await store.revision() + 1
            watch = store.watch("/lone", start_revision=start)
            watch.request_progress()
            assert (await asyncio.wait_for(anext(watch), timeout=10)).revision == start - 1
            loop = asyncio.get_running_loop()
            member.pause()
            paused_at = loop.time()
            try:
                with pytest.raises(Unavailable):
                    await store.refresh(lease, timeout=1.0)
                assert loop.time() - paused_at < 1.0 + 0.3
                with pytest.raises(Unavailable):
                    await asyncio.wait_for(anext(watch), timeout=15)
                # The store's timeout (2 s) counts from the last answer, at most IDLE (0.5 s)
                # before the hang; an attempt under way may add a DEADLINE (1 s).
                assert 2.0 - 0.5 <= loop.time() - paused_at < 2.0 + 1.0 + 1.0
            finally:
                member.resume()
            await watch.aclose()


@pytest.mark.parametrize("fault", ["pause", "kill"])
@pytest.mark.parametrize("watchers", ["a watcher each", "their parent's"])
@pytest.mark.timeout(90)
async def test_prefix_watch_moves_past_a_failed_member_without_gap_duplicate_or_reorder(
    healthy: EtcdCluster, backend: str, fault: str, watchers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch of 40 prefixes whose member hangs (or dies) while writes run through the
    others re-opens on another member: its watchers are created again from now and the
    revisions in between read from history, so its batches are exactly what a plain watch
    through the healthy members saw under those prefixes, in order, each revision whole.
    Also when the 40 are watched through their parent's one watcher."""
    if watchers == "their parent's":
        monkeypatch.setattr(etcd_prefixes, "WATCHERS_PER_PARENT", 1)
    victim = follower(healthy)
    prefixes = [f"/many/topic-{i:02d}" for i in range(40)]
    async with (
        await client(healthy, victim) as store,
        await beside(healthy, victim) as writer,
    ):
        start = await writer.revision() + 1

        async def write(tag: str) -> int:
            revision = 0
            for i in range(40):
                a, b = prefixes[i], prefixes[(i * 7 + 3) % 40]
                ops = [Put(f"{a}/{tag}", b"v"), Put(f"{b}/{tag}-pair", b"v")]
                revision = (await writer.txn([], ops, [])).revision
                await writer.put(f"/many/beside-{i}", b"v")
            return revision

        watch = store.watch_prefixes(prefixes, start_revision=start)
        await write("a")
        batches = [await asyncio.wait_for(anext(watch), timeout=10)]
        if fault == "pause":
            healthy.pause(victim)
        else:
            victim.kill()
        await write("b")
        marker = await writer.put(f"{prefixes[0]}/end", b"")
        async with asyncio.timeout(30):
            while batches[-1].revision < marker:
                batches.append(await anext(watch))
        await watch.aclose()
        assert store.active_endpoint != victim.endpoint
        async with writer.watch("/many", start_revision=start) as plain:
            everything = await collect(plain, marker)
    reference = [
        WatchBatch(b.revision, tuple(e for e in b.events if not e.key.startswith("/many/beside")))
        for b in everything
    ]
    reference = [b for b in reference if b.events]

    def by_key(found: list[WatchBatch]) -> list[tuple[int, list[str]]]:
        return [(b.revision, sorted(e.key for e in b.events)) for b in found if b.events]

    assert by_key(batches) == by_key(reference)
