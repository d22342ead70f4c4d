"""Conformance: prefix operations respect segment boundaries; listings page and read the
past."""

from __future__ import annotations

import random

import pytest

from metaplane.store import Compacted, InvalidRequest, MetadataStore, in_prefix
from metaplane.store._keys import covering
from tests.store import zk_subsets

SIBLINGS = [
    "/default/t1",
    "/default/t1/delivery",
    "/default/t1/subscriptions/s1",
    "/default/t1-part-0",
    "/default/t1.x",
    "/default/t10",
    "/default/t10/delivery",
    "/default/t2",
]


async def fill(store: MetadataStore, keys: list[str]) -> None:
    for key in keys:
        await store.put(key, key.encode())


async def test_list_respects_segments(store: MetadataStore) -> None:
    await fill(store, SIBLINGS)
    listing = await store.list("/default/t1")
    assert listing.keys() == [
        "/default/t1",
        "/default/t1/delivery",
        "/default/t1/subscriptions/s1",
    ]
    assert [entry.value for entry in listing] == [entry.key.encode() for entry in listing]
    assert (await store.list("/default/t10")).keys() == ["/default/t10", "/default/t10/delivery"]
    assert (await store.list("/default/t")).keys() == []
    assert (await store.list("/")).keys() == sorted(SIBLINGS)


async def test_list_keys_only(store: MetadataStore) -> None:
    await fill(store, SIBLINGS)
    listing = await store.list("/default/t1", keys_only=True)
    assert listing.keys() == ["/default/t1", "/default/t1/delivery", "/default/t1/subscriptions/s1"]
    assert all(entry.value == b"" and entry.version == 1 for entry in listing)


async def test_children(store: MetadataStore) -> None:
    await fill(store, SIBLINGS)
    assert await store.children("/default") == ["t1", "t1-part-0", "t1.x", "t10", "t2"]
    assert await store.children("/default/t1") == ["delivery", "subscriptions"]
    assert await store.children("/") == ["default"]
    assert await store.children("/nothing") == []


async def test_delete_prefix_respects_segments(store: MetadataStore) -> None:
    await fill(store, SIBLINGS)
    assert await store.delete_prefix("/default/t1") == 3
    assert (await store.list("/")).keys() == [
        "/default/t1-part-0",
        "/default/t1.x",
        "/default/t10",
        "/default/t10/delivery",
        "/default/t2",
    ]


async def test_delete_prefix_is_one_revision(store: MetadataStore) -> None:
    await fill(store, SIBLINGS)
    before = await store.revision()
    await store.delete_prefix("/default")
    assert await store.revision() == before + 1
    assert (await store.list("/")).keys() == []


async def test_paging(store: MetadataStore) -> None:
    keys = ["/p"] + [f"/p/{i:03d}" for i in range(25)]
    await fill(store, keys)
    await store.put("/p-sibling", b"x")
    seen: list[str] = []
    after: str | None = None
    while True:
        page = await store.list("/p", limit=7, start_after=after)
        seen.extend(page.keys())
        assert len(page) <= 7
        if not page.more:
            break
        after = page.keys()[-1]
    assert seen == keys


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_list_reads_the_past(store: MetadataStore) -> None:
    first = await store.put("/h/a", b"1")
    await store.put("/h/b", b"1")
    middle = await store.put("/h/a", b"2")
    await store.delete("/h/b")
    await store.put("/h/c", b"1")
    await store.put("/h-sibling", b"x")
    at_first = await store.list("/h", revision=first)
    assert at_first.revision == first
    assert [(e.key, e.value) for e in at_first] == [("/h/a", b"1")]
    at_middle = await store.list("/h", revision=middle)
    assert [(e.key, e.value, e.version) for e in at_middle] == [
        ("/h/a", b"2", 2),
        ("/h/b", b"1", 1),
    ]
    assert (await store.list("/h")).keys() == ["/h/a", "/h/c"]


async def test_reading_a_compacted_revision(store: MetadataStore) -> None:
    first = await store.put("/k", b"1")
    await store.put("/k", b"2")
    latest = await store.put("/k", b"3")
    await store.compact(latest)
    with pytest.raises(Compacted) as raised:
        await store.list("/", revision=first)
    assert raised.value.compact_revision == latest
    assert (await store.list("/", revision=latest)).keys() == ["/k"]


async def test_reading_the_future_is_refused(store: MetadataStore) -> None:
    revision = await store.put("/k", b"1")
    with pytest.raises(InvalidRequest):
        await store.list("/", revision=revision + 100)


async def test_floor_lookup(store: MetadataStore) -> None:
    """The last key before a bound: how a storage object holding an offset is found."""
    objects = "/s/t/objects"
    for start in (0, 30, 90):
        await store.put(f"{objects}/{start:020d}", str(start).encode())
    await store.put(f"{objects}/cur", b"90")
    await store.put("/s/t/objects-sibling/99999999999999999999", b"x")

    async def floor(offset: int) -> str | None:
        listing = await store.list(
            objects, end_before=f"{objects}/{offset + 1:020d}", reverse=True, limit=1
        )
        return listing[0].value.decode() if listing else None

    assert [await floor(offset) for offset in (0, 29, 30, 89, 90, 10**12)] == [
        "0",
        "0",
        "30",
        "30",
        "90",
        "90",
    ]
    assert await floor(-1) is None


async def test_reverse_paging_and_bounds(store: MetadataStore) -> None:
    keys = ["/r"] + [f"/r/{i:02d}" for i in range(10)]
    await fill(store, keys)
    await store.put("/r-sibling", b"x")
    seen: list[str] = []
    before: str | None = None
    while True:
        page = await store.list("/r", reverse=True, limit=3, end_before=before)
        seen.extend(page.keys())
        if not page.more:
            break
        before = page.keys()[-1]
    assert seen == list(reversed(keys))
    window = await store.list("/r", start_after="/r/02", end_before="/r/06")
    assert window.keys() == ["/r/03", "/r/04", "/r/05"]
    assert (await store.list("/r", end_before="/r/00")).keys() == ["/r"]
    assert (await store.list("/r", start_after="/r")).keys() == keys[1:]


def test_covering_keeps_the_prefixes_no_other_one_covers() -> None:
    """`covering` (a cache's and a scan's prefixes) against its definition, on random sets
    of prefixes whose segments extend each other as strings too (`/a`, `/a-b`)."""
    rng = random.Random(5)
    for _ in range(5_000):
        prefixes = [
            "/" + "/".join(rng.choice(["a", "b", "a-b", "a.b"]) for _ in range(rng.randrange(4)))
            for _ in range(rng.randrange(8))
        ]
        wanted = set(prefixes)
        expected = sorted(p for p in wanted if not any(q != p and in_prefix(p, q) for q in wanted))
        assert list(covering(prefixes)) == expected, prefixes
