"""The ZooKeeper backend on a real 3-member ensemble: the member a client talks to is killed
(SIGKILL) or hangs (SIGSTOP), with a quorum left. Writes go on within the session timeout,
no acknowledged write is lost, and a session (a lease) outlives its TTL on the other
members: never lost, the same lease, its key still there.

The client under test is either the store's own connection (its requests) or the lease's
(its refreshes): each is a ZooKeeper session of its own, possibly on different members.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from metaplane.coordination import Session, SessionState
from metaplane.store import MetadataStore, Unavailable, connect_store
from metaplane.testing import ZooKeeperEnsemble, ZooKeeperMember

pytestmark = [
    pytest.mark.backends("zk", reason="fail-over between the members of a ZooKeeper ensemble"),
    pytest.mark.slow,
]

TTL = 6
"""The lease's TTL, its session's timeout (the test servers' tick is 500 ms: 1 to 10 s)."""
SESSION_TIMEOUT = 6
"""The store's own session."""
REQUEST_TIMEOUT = 2


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-ensemble")) as running:
        yield running


@pytest.fixture
def whole(ensemble: ZooKeeperEnsemble) -> Iterator[ZooKeeperEnsemble]:
    """The module's ensemble with every member serving; whatever a test killed or paused is
    continued or started again afterwards."""
    yield ensemble
    for member in ensemble.members:
        ensemble.resume(member)
        if not member.running:
            member.start()
    ensemble.wait_serving()


@dataclass
class Writes:
    """A writer's record: every key whose put was acknowledged, and when the first one
    after a fault was."""

    acknowledged: list[str] = field(default_factory=list)
    fault_at: float | None = None
    resumed_after: float | None = None

    async def write_until(self, store: MetadataStore, done: float) -> None:
        """Put new keys, one after the other, until `done` (monotonic). A put that raised
        `Unavailable` may or may not have applied: the same key is written again."""
        index = len(self.acknowledged)
        while time.monotonic() < done:
            key = f"/acked/{index:06d}"
            try:
                await store.put(key, b"v")
            except Unavailable:
                continue
            self.acknowledged.append(key)
            index += 1
            if self.fault_at is not None and self.resumed_after is None:
                self.resumed_after = time.monotonic() - self.fault_at


@dataclass
class Clients:
    """The ZooKeeper sessions of one store and of one lease of it, found by what appeared
    on the members as each was opened."""

    store: set[int]
    lease: set[int]

    def member(self, ensemble: ZooKeeperEnsemble, which: str) -> ZooKeeperMember:
        sessions = ensemble.sessions()
        (session,) = self.store if which == "store" else self.lease
        return sessions[session]


async def open_clients(
    ensemble: ZooKeeperEnsemble,
) -> tuple[MetadataStore, Session, Clients]:
    before = set(ensemble.sessions())
    url = (
        f"{ensemble.url}/ensemble-test?timeout={REQUEST_TIMEOUT}&session_timeout={SESSION_TIMEOUT}"
    )
    store = await connect_store(url)
    await store.delete_prefix("/acked")
    with_store = set(ensemble.sessions())
    session = await Session(store, ttl=TTL).start()
    lease = set(ensemble.sessions()) - with_store
    return store, session, Clients(with_store - before, lease)


async def faulted(
    ensemble: ZooKeeperEnsemble, fault: str, which: str
) -> tuple[Writes, Session, list[SessionState], ZooKeeperMember, int, MetadataStore]:
    """Write, break the member `which` client talks to (`fault`: kill or pause), and write
    on until past the lease's TTL since; return what was written and seen."""
    store, session, clients = await open_clients(ensemble)
    states: list[SessionState] = []
    session.listen(states.append)
    lease = session.lease.id
    await store.put("/owned/by-session", b"", lease=lease)
    writes = Writes()
    await writes.write_until(store, time.monotonic() + 1)
    victim = clients.member(ensemble, which)
    if fault == "kill":
        ensemble.kill(victim)
    else:
        ensemble.pause(victim)
    writes.fault_at = time.monotonic()
    # Past the TTL since the fault: a lease whose refreshes went nowhere would be gone.
    await writes.write_until(store, writes.fault_at + TTL + 3)
    return writes, session, states, victim, lease, store


async def check_nothing_lost(
    ensemble: ZooKeeperEnsemble,
    victim: ZooKeeperMember,
    writes: Writes,
    session: Session,
    states: list[SessionState],
    lease: int,
    store: MetadataStore,
) -> None:
    try:
        assert writes.resumed_after is not None, "no write acknowledged after the fault"
        assert writes.resumed_after <= SESSION_TIMEOUT
        assert session.alive and session.lease.id == lease
        assert SessionState.LOST not in states and SessionState.REESTABLISHED not in states
        owned = await store.get("/owned/by-session")
        assert owned is not None and owned.lease == lease
    finally:
        await session.close()
        await store.aclose()
    survivors = ",".join(m.hosts for m in ensemble.members if m is not victim)
    async with await connect_store(f"zk://{survivors}/ensemble-test") as check:
        kept = (await check.list("/acked", keys_only=True)).keys()
    assert set(writes.acknowledged) <= set(kept)
    assert len(writes.acknowledged) > 10


@pytest.mark.timeout(90)
@pytest.mark.parametrize("which", ["store", "lease"])
async def test_the_member_a_client_talks_to_is_killed(
    whole: ZooKeeperEnsemble, which: str, backend: str
) -> None:
    writes, session, states, victim, lease, store = await faulted(whole, "kill", which)
    await check_nothing_lost(whole, victim, writes, session, states, lease, store)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("which", ["store", "lease"])
async def test_the_member_a_client_talks_to_hangs(
    whole: ZooKeeperEnsemble, which: str, backend: str
) -> None:
    writes, session, states, victim, lease, store = await faulted(whole, "pause", which)
    await check_nothing_lost(whole, victim, writes, session, states, lease, store)
    whole.resume(victim)
    await asyncio.to_thread(whole.wait_serving)
    # It serves again: polled, since a member that led before its pause goes through an
    # election (mode "") as it rejoins, even after a look at the ensemble found it serving.
    await asyncio.to_thread(serves_again, victim)


def serves_again(member: ZooKeeperMember, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while member.mode() not in ("leader", "follower"):
        assert time.monotonic() < deadline, f"member {member.server_id} does not serve again"
        time.sleep(0.1)
