"""Conformance: versioned writes. A failed expectation raises its typed error and writes
nothing."""

from __future__ import annotations

import pytest

from metaplane.store import (
    ABSENT,
    ANY,
    AlreadyExists,
    BadVersion,
    InvalidRequest,
    MetadataStore,
    NotFound,
)


async def assert_unchanged(store: MetadataStore, revision: int, snapshot: list[object]) -> None:
    assert await store.revision() == revision
    assert list(await store.list("/")) == snapshot


async def test_put_returns_revision_and_versions_count_writes(store: MetadataStore) -> None:
    first = await store.put("/k", b"1")
    second = await store.put("/k", b"2")
    assert second > first
    entry = await store.get("/k")
    assert entry is not None
    assert (entry.value, entry.version, entry.create_revision, entry.mod_revision) == (
        b"2",
        2,
        first,
        second,
    )
    assert await store.revision() == second


async def test_put_absent_creates_once(store: MetadataStore) -> None:
    revision = await store.put("/k", b"1", expect=ABSENT)
    before = list(await store.list("/"))
    with pytest.raises(AlreadyExists) as raised:
        await store.put("/k", b"2", expect=ABSENT)
    assert raised.value.key == "/k"
    await assert_unchanged(store, revision, before)


async def test_put_with_version(store: MetadataStore) -> None:
    await store.put("/k", b"1")
    revision = await store.put("/k", b"2", expect=1)
    entry = await store.get("/k")
    assert entry is not None and entry.version == 2
    before = list(await store.list("/"))
    with pytest.raises(BadVersion) as raised:
        await store.put("/k", b"3", expect=1)
    assert (raised.value.expected, raised.value.actual) == (1, 2)
    await assert_unchanged(store, revision, before)


async def test_put_with_version_of_missing_key(store: MetadataStore) -> None:
    revision = await store.put("/other", b"x")
    with pytest.raises(NotFound) as raised:
        await store.put("/k", b"1", expect=3)
    assert raised.value.key == "/k"
    await assert_unchanged(store, revision, list(await store.list("/")))
    assert await store.get("/k") is None


async def test_delete_with_expectations(store: MetadataStore) -> None:
    await store.put("/k", b"1")
    revision = await store.put("/k", b"2")
    before = list(await store.list("/"))
    with pytest.raises(BadVersion):
        await store.delete("/k", expect=1)
    with pytest.raises(AlreadyExists):
        await store.delete("/k", expect=ABSENT)
    await assert_unchanged(store, revision, before)
    deleted_at = await store.delete("/k", expect=2)
    assert deleted_at > revision
    assert await store.get("/k") is None
    with pytest.raises(NotFound):
        await store.delete("/k", expect=2)


async def test_delete_any_of_missing_key_changes_nothing(store: MetadataStore) -> None:
    revision = await store.put("/k", b"1")
    assert await store.delete("/missing", expect=ANY) == revision
    assert await store.revision() == revision


async def test_recreate_resets_version_keeps_revisions_rising(store: MetadataStore) -> None:
    await store.put("/k", b"1")
    await store.put("/k", b"2")
    deleted_at = await store.delete("/k")
    created_at = await store.put("/k", b"3", expect=ABSENT)
    entry = await store.get("/k")
    assert entry is not None
    assert entry.version == 1
    assert entry.create_revision == entry.mod_revision == created_at > deleted_at


@pytest.mark.parametrize("expect", [0, -1, True, "1", 1.0, None])
async def test_bad_expectations_are_refused(store: MetadataStore, expect: object) -> None:
    with pytest.raises(InvalidRequest):
        await store.put("/k", b"1", expect=expect)  # type: ignore[arg-type]
    assert await store.get("/k") is None
