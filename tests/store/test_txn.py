"""Conformance: transactions — compares of every kind, mixed operations, all or nothing,
and the size limit."""

from __future__ import annotations

import pytest

from metaplane.store import (
    MAX_TXN_OPS,
    Compare,
    Delete,
    DeletePrefix,
    Get,
    InvalidTxn,
    LeaseNotFound,
    List,
    MetadataStore,
    Put,
    Target,
    TxnTooLarge,
)


async def holds(store: MetadataStore, compare: Compare) -> bool:
    result = await store.txn([compare], [], [])
    return result.succeeded


async def test_compare_exists_and_absent(store: MetadataStore) -> None:
    await store.put("/k", b"v")
    assert await holds(store, Compare.exists("/k"))
    assert not await holds(store, Compare.absent("/k"))
    assert await holds(store, Compare.absent("/missing"))
    assert not await holds(store, Compare.exists("/missing"))


async def test_compare_version(store: MetadataStore) -> None:
    await store.put("/k", b"1")
    await store.put("/k", b"2")
    assert await holds(store, Compare.version("/k", "==", 2))
    assert await holds(store, Compare.version("/k", "!=", 1))
    assert await holds(store, Compare.version("/k", ">", 1))
    assert await holds(store, Compare.version("/k", "<", 3))
    assert not await holds(store, Compare.version("/k", "<", 2))
    assert await holds(store, Compare.version("/missing", "==", 0))


async def test_compare_revisions(store: MetadataStore) -> None:
    created = await store.put("/k", b"1")
    modified = await store.put("/k", b"2")
    assert await holds(store, Compare.create_revision("/k", "==", created))
    assert await holds(store, Compare.mod_revision("/k", "==", modified))
    assert await holds(store, Compare.mod_revision("/k", ">", created))
    assert not await holds(store, Compare.create_revision("/k", "==", modified))
    assert await holds(store, Compare.mod_revision("/missing", "==", 0))


async def test_compare_value(store: MetadataStore) -> None:
    await store.put("/k", b"abc")
    assert await holds(store, Compare.value("/k", "==", b"abc"))
    assert await holds(store, Compare.value("/k", "!=", b"abd"))
    assert await holds(store, Compare.value("/k", "<", b"abd"))
    assert await holds(store, Compare.value("/k", ">", b"ab"))
    # A value compare on a missing key is false whatever the operator (etcd's rule).
    for op in ("==", "!=", "<", ">"):
        assert not await holds(store, Compare.value("/missing", op, b""))  # type: ignore[arg-type]


async def test_mixed_operations_in_one_revision(store: MetadataStore) -> None:
    await store.put("/a/old", b"o")
    await store.put("/a/gone/1", b"g")
    await store.put("/a/gone/2", b"g")
    before = await store.revision()
    result = await store.txn(
        [Compare.exists("/a/old")],
        [
            Put("/a/new", b"n"),
            Get("/a/new"),
            Delete("/a/old"),
            DeletePrefix("/a/gone"),
            List("/a"),
        ],
        [],
    )
    assert result.succeeded
    assert result.revision == before + 1
    new = result.entry(1)
    assert new is not None and new.value == b"n" and new.mod_revision == result.revision
    assert result.count(2) == 1
    assert result.count(3) == 2
    assert result.listing(4).keys() == ["/a/new"]
    assert (await store.list("/a")).keys() == ["/a/new"]


async def test_failure_branch_runs_when_a_compare_fails(store: MetadataStore) -> None:
    await store.put("/k", b"1")
    result = await store.txn(
        [Compare.exists("/k"), Compare.version("/k", "==", 7)],
        [Put("/k", b"success")],
        [Put("/failure", b"f"), Get("/k")],
    )
    assert not result.succeeded
    entry = result.entry(1)
    assert entry is not None and entry.value == b"1"
    assert await store.get("/failure") is not None
    assert (await store.get("/k")) == entry


async def test_all_or_nothing(store: MetadataStore) -> None:
    revision = await store.put("/k", b"1")
    with pytest.raises(LeaseNotFound):
        await store.txn([], [Put("/k", b"2"), Put("/other", b"x", lease=424242)], [])
    entry = await store.get("/k")
    assert entry is not None and entry.value == b"1"
    assert await store.get("/other") is None
    assert await store.revision() == revision


async def test_a_transaction_that_changes_nothing_keeps_the_revision(
    store: MetadataStore,
) -> None:
    revision = await store.put("/k", b"1")
    result = await store.txn([], [Delete("/missing"), Get("/k")], [])
    assert result.succeeded and result.revision == revision
    assert await store.revision() == revision


async def test_size_limit(store: MetadataStore) -> None:
    assert MAX_TXN_OPS == 128  # etcd's default --max-txn-ops, the contract's limit
    ops = [Put(f"/k/{i}", b"") for i in range(MAX_TXN_OPS)]
    result = await store.txn([], ops, [])
    assert result.succeeded
    with pytest.raises(TxnTooLarge):
        await store.txn([], [*ops, Put("/k/one-more", b"")], [])
    with pytest.raises(TxnTooLarge):
        await store.txn([Compare.exists(f"/c/{i}") for i in range(MAX_TXN_OPS + 1)], [], [])
    assert await store.get("/k/one-more") is None


async def test_a_key_written_twice_is_refused(store: MetadataStore) -> None:
    with pytest.raises(InvalidTxn):
        await store.txn([], [Put("/k", b"1"), Put("/k", b"2")], [])
    with pytest.raises(InvalidTxn):
        await store.txn([], [Put("/a/k", b"1"), DeletePrefix("/a")], [])
    assert await store.get("/k") is None


async def test_prefix_compares(store: MetadataStore) -> None:
    await store.put("/ns/t1-part-0", b"")  # a sibling: not under /ns/t1
    assert await holds(store, Compare.empty("/ns/t1"))
    await store.put("/ns/t1/sub", b"")
    assert not await holds(store, Compare.empty("/ns/t1"))
    await store.delete("/ns/t1/sub")
    await store.put("/ns/t1", b"")  # the key itself counts
    assert not await holds(store, Compare.empty("/ns/t1"))
    assert not await holds(store, Compare.empty("/"))


async def test_a_prefix_compare_guards_a_delete(store: MetadataStore) -> None:
    """Delete a namespace only while it has no topics, atomically."""
    await store.put("/namespaces/ns/policy", b"{}")
    await store.put("/namespaces/ns/topics/ns/t", b"null")
    refused = await store.txn(
        [Compare.empty("/namespaces/ns/topics")], [DeletePrefix("/namespaces/ns")], []
    )
    assert not refused.succeeded
    assert await store.get("/namespaces/ns/policy") is not None
    await store.delete("/namespaces/ns/topics/ns/t")
    done = await store.txn(
        [Compare.empty("/namespaces/ns/topics")], [DeletePrefix("/namespaces/ns")], []
    )
    assert done.succeeded
    assert (await store.list("/namespaces")).keys() == []


async def test_list_in_a_transaction_takes_bounds(store: MetadataStore) -> None:
    for i in range(5):
        await store.put(f"/b/{i}", b"")
    result = await store.txn([], [List("/b", start_after="/b/0", limit=2, reverse=True)], [])
    assert result.listing(0).keys() == ["/b/4", "/b/3"]
    assert result.listing(0).more
    with pytest.raises(TxnTooLarge):
        await store.txn([Compare.empty(f"/e/{i}") for i in range(65)], [], [])


def test_a_prefix_compare_is_only_empty() -> None:
    with pytest.raises(InvalidTxn):
        Compare("/p", Target.VERSION, ">", 0, whole_prefix=True)
