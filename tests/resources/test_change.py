"""Change and Condition on every backend: one transaction, refusals explained by the first
condition that failed, guards in front, and the raw pieces for a caller's own transaction."""

from __future__ import annotations

import pytest

from metaplane.resources import NULL, Change, Condition, NoTopic, TopicExists
from metaplane.store import (
    Compare,
    Fenced,
    MetadataStore,
    Put,
    TxnTooLarge,
)

from .samples import TOPIC

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
