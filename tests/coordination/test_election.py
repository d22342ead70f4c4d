"""Leader election in one process: hand-over, epochs, fencing, and a suspended leader that
stops at once."""

from __future__ import annotations

import asyncio

import pytest

from metaplane import layout
from metaplane.coordination import LeaderElection, LeaderToken, Session, SessionState
from metaplane.resources import Change, Condition
from metaplane.store import Compare, Fenced, MetadataStore, NotFound, Put
from metaplane.testing import FaultyStore
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND


async def test_one_leads_the_other_follows_then_takes_over(store: MetadataStore) -> None:
    async with Session(store, ttl=5) as one, Session(store, ttl=5) as two:
        first, second = LeaderElection(one, 1), LeaderElection(two, 2)
        await first.start()
        token = await first.wait_elected(timeout=10)
        await second.start()
        assert await second.leader() == (1, token.epoch)
        assert not second.is_leader
        leader = await store.get(layout.leader())
        assert leader is not None and leader.value == b"1" and leader.lease == one.lease.id
        await first.stop()  # resigns
        taken = await second.wait_elected(timeout=5)
        assert (taken.node_id, taken.epoch) == (2, token.epoch + 1)
        await second.stop()


async def test_fenced_writes(store: MetadataStore) -> None:
    async with Session(store, ttl=5) as one, Session(store, ttl=5) as two:
        first, second = LeaderElection(one, 1), LeaderElection(two, 2)
        await first.start()
        token = await first.wait_elected(timeout=10)
        written = await first.apply(Change((), (Put("/f/by-leader", b"1"),)))
        assert (await store.get("/f/by-leader")).mod_revision == written  # type: ignore[union-attr]
        missing = Condition(Compare.exists("/f/missing"), lambda _: NotFound("/f/missing"))
        with pytest.raises(NotFound):  # the caller's own condition failed, not the fence
            await first.apply(Change((missing,), (Put("/f/never", b""),)))
        assert first.token == token
        assert await store.get("/f/never") is None
        await second.start()
        with pytest.raises(Fenced):
            await second.apply(Change((), (Put("/f/by-follower", b""),)))
        # A deposed leader (its key deleted behind its back) is fenced and steps down. It
        # stops campaigning first, so that the other node is the one elected next.
        await first.stop(resign=False)
        await store.delete(layout.leader())
        await second.wait_elected(timeout=10)
        first._token = token  # as if it had not noticed yet
        with pytest.raises(Fenced):
            await first.apply(Change((), (Put("/f/stale", b""),)))
        assert first.token is None
        assert await store.get("/f/stale") is None
        assert await store.get("/f/by-follower") is None
        await first.stop()
        await second.stop()


async def test_a_suspended_leader_stops_at_once(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    tokens: list[LeaderToken | None] = []
    async with Session(faulty, ttl=4) as session:
        election = LeaderElection(session, 7)
        election.listen(tokens.append)
        await election.start()
        token = await election.wait_elected(timeout=10)
        fault = faulty.fail("refresh", times=None)
        await session.wait_state(SessionState.SUSPENDED, timeout=10)
        assert election.token is None  # before the lease can expire
        with pytest.raises(Fenced):
            election.fence()
        faulty.faults.remove(fault)
        again = await election.wait_elected(timeout=10)
        assert again == token  # the same lease: it leads again with the same token
        await election.stop()
    assert tokens == [token, None, token, None]


async def test_many_campaign_one_leads(store: MetadataStore) -> None:
    sessions = [await Session(store, ttl=5).start() for _ in range(5)]
    elections = [LeaderElection(session, node) for node, session in enumerate(sessions, 1)]
    for election in elections:
        await election.start()
    await asyncio.wait_for(
        asyncio.wait(
            [asyncio.create_task(e.wait_elected()) for e in elections],
            return_when=asyncio.FIRST_COMPLETED,
        ),
        timeout=10,
    )
    assert sum(election.is_leader for election in elections) == 1
    for election in elections:
        await election.stop()
    for session in sessions:
        await session.close()


async def test_a_leader_on_a_hung_store_stops_before_its_lease_can_expire(
    store: MetadataStore,
) -> None:
    """The store hangs (every refresh unanswered): the leader is demoted at the session's
    suspension, with most of the TTL left — not at the lease's deadline — and leads again
    with the same token once the store answers."""
    faulty = FaultyStore(store)
    loop = asyncio.get_running_loop()
    async with Session(faulty, ttl=6) as session:
        election = LeaderElection(session, 3)
        await election.start()
        token = await election.wait_elected(timeout=10)
        stall = faulty.hang("refresh")
        await election.wait_demoted(timeout=10)
        assert session.deadline - loop.time() >= 3.0  # demoted with the lease alive
        with pytest.raises(Fenced):
            await election.apply(Change((), (Put("/f/late", b""),)))
        faulty.remove(stall)
        assert await election.wait_elected(timeout=10) == token
        await election.stop()
    assert await store.get("/f/late") is None
