"""Change and Condition on every backend: one transaction, refusals explained by the first
condition that failed, guards in front, and the raw pieces for a caller's own transaction."""

from __future__ import annotations

import asyncio

import pytest

from metaplane.resources import (
    NULL,
    ONCE,
    Change,
    ChangedSinceRead,
    Condition,
    NoTopic,
    RetryPolicy,
    TopicExists,
    Writer,
    unchanged,
)
from metaplane.store import (
    Compare,
    Fenced,
    Get,
    MetadataStore,
    Put,
    TxnResult,
    TxnTooLarge,
    Unavailable,
)
from metaplane.testing import FaultyStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import TOPIC

pytestmark = EVERY_BACKEND

A, B, FENCE = "/c/a", "/c/b", "/cluster/leader"


def create_a() -> Change:
    return Change(
        (
            Condition(Compare.exists(B), lambda _: NoTopic(TOPIC)),
            Condition(Compare.absent(A), lambda _: TopicExists(TOPIC)),
        ),
        (Put(A, NULL),),
    )


def fence(revision: int) -> Condition:
    return Condition(Compare.create_revision(FENCE, "==", revision), lambda _: Fenced("deposed"))


async def test_apply_returns_the_revision(store: MetadataStore) -> None:
    await store.put(B, NULL)
    revision = await create_a().apply(store)
    entry = await store.get(A)
    assert entry is not None and entry.mod_revision == revision == await store.revision()


async def test_the_first_failed_condition_explains(store: MetadataStore) -> None:
    with pytest.raises(NoTopic):
        await create_a().apply(store)
    await store.put(B, NULL)
    await store.put(A, NULL)
    with pytest.raises(TopicExists):
        await create_a().apply(store)


async def test_a_guard_is_checked_first(store: MetadataStore) -> None:
    leader = await store.put(FENCE, b"1")
    guarded = create_a().guarded(fence(leader + 1))
    with pytest.raises(Fenced):
        await guarded.apply(store)
    await store.put(B, NULL)
    assert await create_a().guarded(fence(leader)).apply(store) > leader


async def test_the_raw_pieces_with_a_callers_compare(store: MetadataStore) -> None:
    await store.put(B, NULL)
    leader = await store.put(FENCE, b"1")
    change = create_a()
    result = await store.execute(change.txn(Compare.create_revision(FENCE, "==", leader + 1)))
    assert not result.succeeded
    assert change.refusal(result) is None, "the change's own compares held: the caller's failed"
    assert await store.get(A) is None
    result = await store.execute(change.txn(Compare.create_revision(FENCE, "==", leader)))
    assert result.succeeded


def test_changes_add_up_and_say_whether_they_fit() -> None:
    one = create_a()
    both = one + Change((), (Put("/c/z", NULL),))
    assert both.compares == one.compares
    assert [op.key for op in both.ops] == [A, "/c/z"]
    many = Change((), tuple(Put(f"/c/{i}", NULL) for i in range(129)))
    assert one.fits
    assert not many.fits
    with pytest.raises(TxnTooLarge):
        many.txn()


# -- the runner -----------------------------------------------------------------------------


async def test_a_change_refused_before_the_store_is_sent_again(store: MetadataStore) -> None:
    """One Unavailable before the store saw the change: sent again, applied once."""
    await store.put(B, NULL)
    faulty = FaultyStore(store)
    fault = faulty.fail("txn", A)
    revision = await create_a().apply(faulty)
    assert fault.hits == 1
    entry = await store.get(A)
    assert entry is not None and (entry.version, entry.mod_revision) == (1, revision)


async def test_a_change_whose_answer_was_lost_is_not_written_twice(store: MetadataStore) -> None:
    """The store applied the change and the answer was lost (Unavailable after): the runner
    finds the writes in place, reports success with their revision, and writes nothing more
    — a change without a condition that would refuse a second copy included."""
    faulty = FaultyStore(store)
    faulty.fail("txn", A, after=True)
    before = await store.revision()
    revision = await Change((), (Put(A, b"once"),)).apply(faulty)
    entry = await store.get(A)
    assert entry is not None and entry.version == 1 and entry.mod_revision == revision
    assert await store.revision() == before + 1


async def test_a_refusal_after_a_lost_answer_is_the_earlier_success(store: MetadataStore) -> None:
    """Applied, answer lost, and by the next attempt its own write makes it refused
    (TopicExists): that is the earlier attempt's success, not a failure."""
    await store.put(B, NULL)
    faulty = FaultyStore(store)
    faulty.fail("txn", A, after=True)
    revision = await create_a().apply(faulty)
    entry = await store.get(A)
    assert entry is not None and entry.mod_revision == revision


async def test_a_store_away_longer_than_the_policy_is_unavailable(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    faulty.fail("txn", A, times=None)
    policy = RetryPolicy(unavailable=0.2)
    with pytest.raises(Unavailable):
        await Change((), (Put(A, b"x"),)).apply(faulty, policy)
    assert await store.get(A) is None
    with pytest.raises(Unavailable):
        await Change((), (Put(A, b"x"),)).apply(faulty, ONCE)


async def test_a_condition_known_to_fail_here_stops_the_change_before_it_leaves(
    store: MetadataStore,
) -> None:
    leading = [True]

    def local() -> None:
        if not leading[0]:
            raise Fenced("stopped leading")

    guard = Condition(Compare.absent("/nothing"), lambda _: Fenced("deposed"), local)
    faulty = FaultyStore(store)
    faulty.fail("txn", A)
    change = Change((), (Put(A, b"x"),)).guarded(guard)
    attempt = asyncio.create_task(change.apply(faulty))
    await asyncio.sleep(0)
    leading[0] = False  # demoted while the runner waits to send it again
    with pytest.raises(Fenced):
        await attempt
    assert await store.get(A) is None


async def test_run_reads_again_after_a_lost_race_then_gives_up(store: MetadataStore) -> None:
    await store.put(A, b"0")
    attempts: list[bool] = []

    async def increment(fresh: bool) -> int:
        attempts.append(fresh)
        entry = await store.get(A)
        assert entry is not None
        if len(attempts) == 1:
            await store.put(A, b"other")  # another writer got in between
        change = Change((unchanged(A, entry.mod_revision),), (Put(A, entry.value + b"+"),))
        return await change.apply(store)

    await Writer(store).run(increment)
    assert attempts == [False, True]
    entry = await store.get(A)
    assert entry is not None and entry.value == b"other+"

    async def always_late(fresh: bool) -> int:
        raise ChangedSinceRead(A, 1, 2)

    with pytest.raises(ChangedSinceRead):
        await Writer(store, RetryPolicy(conflicts=3)).run(always_late)


async def test_a_refusal_sent_back_carries_what_its_failure_branch_read(
    store: MetadataStore,
) -> None:
    """`send` returns a refused change's transaction instead of raising: the typed error it
    stands for, and every key the conditions compare and the change's `reads` as they were
    at the refusal, so that a caller decides again without reading again."""
    await store.put(A, b"read")
    entry = await store.get(A)
    assert entry is not None
    await store.put(A, b"written since")
    await store.put(B, b"beside")
    change = Change((unchanged(A, entry.mod_revision),), (Put(A, b"mine"),), (Get(B), Get("/c/z")))
    revisions = await store.revision()
    refused = await Writer(store).send(change)
    assert isinstance(refused, TxnResult) and not refused.succeeded
    assert isinstance(change.refusal(refused), ChangedSinceRead)
    seen = change.seen(refused)
    now, beside = seen[A], seen[B]
    assert set(seen) == {A, B, "/c/z"} and seen["/c/z"] is None
    assert now is not None and now.value == b"written since"
    assert beside is not None and beside.value == b"beside"
    assert await store.revision() == revisions, "nothing written"
    assert (change + Change(reads=(Get("/c/y"),))).reads == (Get(B), Get("/c/z"), Get("/c/y"))
    assert change.guarded(fence(1)).reads == change.reads
    done = Change((unchanged(A, now.mod_revision),), (Put(A, b"mine"),), change.reads)
    assert await Writer(store).send(done) == await store.revision()
