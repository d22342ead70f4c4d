"""Session: one lease per process, and the states its holder must react to."""

from __future__ import annotations

from metaplane.coordination import Session, SessionState
from metaplane.store import MetadataStore, Put
from metaplane.testing import FaultyStore


async def test_keys_live_with_the_session(store: MetadataStore) -> None:
    async with Session(store, ttl=2) as session:
        assert session.state is SessionState.CONNECTED
        await store.put("/s/ephemeral", b"", lease=session.lease)
    assert await store.get("/s/ephemeral") is None  # closing revokes the lease


async def test_lost_then_reestablished_with_a_new_lease(store: MetadataStore) -> None:
    states: list[SessionState] = []
    async with Session(store, ttl=2) as session:
        session.listen(states.append)
        first = session.lease
        await store.txn([], [Put("/s/k", b"", lease=first.id)], [])
        await store.revoke(first)  # as if it expired on the store's side
        await session.wait_state(SessionState.REESTABLISHED, timeout=10)
        assert session.lease.id != first.id
        assert session.generation == 2
        assert session.alive
    assert states[:2] == [SessionState.LOST, SessionState.REESTABLISHED]


async def test_suspended_while_refreshes_fail_then_connected(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    async with Session(faulty, ttl=3) as session:
        fault = faulty.fail("refresh", times=None)
        await session.wait_state(SessionState.SUSPENDED, timeout=10)
        assert not session.alive
        faulty.faults.remove(fault)
        await session.wait_state(SessionState.CONNECTED, timeout=10)
        assert session.generation == 1  # the same lease survived


async def test_suspension_past_the_ttl_is_lost(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    states: list[SessionState] = []
    async with Session(faulty, ttl=1) as session:
        session.listen(states.append)
        first = session.lease
        fault = faulty.fail("refresh", times=None)
        await session.wait_state(SessionState.LOST, timeout=10)
        faulty.faults.remove(fault)
        await session.wait_alive(timeout=10)
        assert session.lease.id != first.id
        assert session.generation >= 2
    assert states[:3] == [SessionState.SUSPENDED, SessionState.LOST, SessionState.REESTABLISHED]
