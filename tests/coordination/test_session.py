"""Session: one lease per process, and the states its holder must react to."""

from __future__ import annotations

import asyncio

from metaplane.coordination import Session, SessionState
from metaplane.store import MetadataStore, Put
from metaplane.store._lease import refresh_deadline
from metaplane.testing import FaultyStore
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND


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


async def test_a_hung_store_suspends_the_session_well_before_its_lease_can_expire(
    store: MetadataStore,
) -> None:
    """Refreshes that never answer (a hung store, not a dead one): SUSPENDED at the first
    missed deadline, with most of the TTL left; CONNECTED again, the same lease, once the
    store answers before the lease expired."""
    faulty = FaultyStore(store)
    loop = asyncio.get_running_loop()
    async with Session(faulty, ttl=6) as session:
        first = session.lease
        stall = faulty.hang("refresh")
        hung_at = loop.time()
        await session.wait_state(SessionState.SUSPENDED, timeout=10)
        suspended_after = loop.time() - hung_at
        # One refresh interval (TTL/6) and one refresh deadline (TTL/6), at most.
        assert suspended_after <= 2 * refresh_deadline(6) + 0.5, suspended_after
        assert session.deadline - loop.time() >= 6 - 2 * refresh_deadline(6) - 0.5
        faulty.remove(stall)
        await session.wait_state(SessionState.CONNECTED, timeout=10)
        assert (session.lease, session.generation) == (first, 1)


async def test_a_slow_store_suspends_then_recovers_the_same_lease(store: MetadataStore) -> None:
    """Refreshes answering later than their deadline count as missed; once they are quick
    again the session is connected, with the lease it had."""
    faulty = FaultyStore(store)
    async with Session(faulty, ttl=6) as session:
        slow = faulty.delay("refresh", seconds=refresh_deadline(6) + 0.5)
        await session.wait_state(SessionState.SUSPENDED, timeout=10)
        faulty.remove(slow)
        await session.wait_state(SessionState.CONNECTED, timeout=10)
        assert session.generation == 1
