"""Conformance: a scan reads every key of its prefixes once, in key order, at one revision,
in pages of the size asked for, whatever writes meanwhile; and says when that revision is
gone. On etcd, no request walks more of the keyspace than it returns, give or take a split."""

from __future__ import annotations

import bisect
import itertools
from typing import Any

import pytest

from metaplane.store import (
    Compacted,
    Entry,
    EtcdStore,
    InvalidRequest,
    MetadataStore,
    Put,
    in_prefix,
)
from metaplane.store import _etcd_scan as etcd_scan
from metaplane.store._etcd_scan import end_of, pieces
from tests.store import zk_subsets


async def fill(store: MetadataStore, keys: list[str]) -> int:
    revision = 0
    for start in range(0, len(keys), 100):
        ops = [Put(key, key.encode()) for key in keys[start : start + 100]]
        revision = (await store.txn([], ops, [])).revision
    return revision


def layout_keys(topics: int) -> list[str]:
    """Keys shaped like the layout's: several namespaces, a few keys a topic."""
    keys = []
    for i in range(topics):
        topic = f"/topics/ns-{i % 3}/topic-{i:05d}"
        keys += [topic, f"{topic}/delivery", f"{topic}/subscriptions/s-0"]
        keys.append(f"/danube-data/storage/topics/ns-{i % 3}/topic-{i:05d}/objects/cur")
    return [*keys, "/cluster/leader", "/topics/ns-1/topic-00001-part-0"]


async def scanned(store: MetadataStore, prefixes: Any, **options: Any) -> list[Any]:
    pages = []
    async with store.scan(prefixes, **options) as scan:
        async for page in scan:
            pages.append(page)
    return pages


async def test_pages_hold_every_key_once_in_key_order(store: MetadataStore) -> None:
    keys = layout_keys(300)
    await fill(store, keys)
    expected = (await store.list("/")).entries
    pages = await scanned(store, "/", page=97)
    assert all(len(page) <= 97 for page in pages)
    assert [page.more for page in pages] == [True] * (len(pages) - 1) + [False]
    assert len({page.revision for page in pages}) == 1
    assert tuple(entry for page in pages for entry in page) == expected


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_a_pinned_revision_ignores_writes_between_pages(store: MetadataStore) -> None:
    keys = layout_keys(200)
    pinned = await fill(store, keys)
    expected = (await store.list("/topics", revision=pinned)).entries
    await store.delete("/topics/ns-0/topic-00000/delivery")  # changed after the pin, too
    await store.put("/topics/ns-0/topic-00003", b"changed")
    got: list[Entry] = []
    async with store.scan("/topics", revision=pinned, page=50) as scan:
        async for page in scan:
            got.extend(page)
            await store.put(f"/topics/ns-2/new-{len(got)}", b"during the scan")
            await store.delete(page[-1].key)
    assert tuple(got) == expected
    assert scan.revision == pinned


async def test_several_prefixes_read_each_key_once(store: MetadataStore) -> None:
    await fill(store, layout_keys(50))
    prefixes = ["/topics/ns-1", "/topics/ns-1/topic-00001", "/cluster", "/topics/ns-1/topic-0000"]
    got = [entry for page in await scanned(store, prefixes, page=7) for entry in page]
    everything = (await store.list("/")).entries
    wanted = ["/topics/ns-1", "/cluster"]
    assert got == [e for e in everything if any(in_prefix(e.key, p) for p in wanted)]


async def test_prefixes_respect_segments(store: MetadataStore) -> None:
    for key in ["/s/t1", "/s/t1/a", "/s/t10", "/s/t1-part-0", "/s/t1.x", "/s/t0"]:
        await store.put(key, b"")
    got = [e.key for page in await scanned(store, "/s/t1") for e in page]
    assert got == ["/s/t1", "/s/t1/a"]


STRING_PREFIXES = ["/a", "/a-b", "/a.c"]
"""Prefixes each of which is a string prefix of the next: `-` and `.` sort before `/`, so
`/a`'s children come after `/a-b` and `/a.c` and all their keys."""
STRING_PREFIX_KEYS = ["/a", "/a/x", "/a/y/z", "/a-b", "/a-b/y", "/a.c/q", "/a0", "/a-"]


async def test_prefixes_that_extend_each_other_as_strings_stay_in_key_order(
    store: MetadataStore,
) -> None:
    await fill(store, STRING_PREFIX_KEYS)
    got = [e.key for page in await scanned(store, STRING_PREFIXES, page=2) for e in page]
    assert got == ["/a", "/a-b", "/a-b/y", "/a.c/q", "/a/x", "/a/y/z"]


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_a_pinned_scan_of_such_prefixes_rewinds_each_key_once(store: MetadataStore) -> None:
    pinned = await fill(store, STRING_PREFIX_KEYS)
    await store.put("/a/x", b"changed")
    await store.delete("/a-b")
    await store.put("/a-b/new", b"made after the pin")
    await store.put("/a.c/a", b"made after the pin")
    got = [
        (e.key, e.value)
        for page in await scanned(store, STRING_PREFIXES, revision=pinned, page=2)
        for e in page
    ]
    expected = ["/a", "/a-b", "/a-b/y", "/a.c/q", "/a/x", "/a/y/z"]
    assert got == [(key, key.encode()) for key in expected]


async def test_keys_only_drops_values(store: MetadataStore) -> None:
    await fill(store, layout_keys(20))
    pages = await scanned(store, "/topics", keys_only=True, page=9)
    entries = [entry for page in pages for entry in page]
    assert entries and all(entry.value == b"" for entry in entries)
    assert [e.key for e in entries] == (await store.list("/topics", keys_only=True)).keys()


async def test_an_empty_prefix_says_its_revision(store: MetadataStore) -> None:
    revision = await store.put("/elsewhere", b"")
    pages = await scanned(store, "/nothing")
    assert [(page.entries, page.revision, page.more) for page in pages] == [((), revision, False)]


async def test_a_compacted_or_future_revision_is_refused(store: MetadataStore) -> None:
    first = await store.put("/c/a", b"1")
    last = await store.put("/c/a", b"2")
    await store.compact(last)
    with pytest.raises(Compacted) as raised:
        await scanned(store, "/c", revision=first)
    assert raised.value.compact_revision == last
    with pytest.raises(InvalidRequest):
        await scanned(store, "/c", revision=last + 10)


async def test_a_scan_finishes_or_raises_compacted_when_its_revision_goes(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compacted under a running scan: etcd raises on the next read it still has to make
    (reads of 400 keys here); sqlite and memory read one snapshot and finish it. Never a
    page of another revision."""
    monkeypatch.setattr(etcd_scan, "READ_UNIT", 400)
    pinned = await fill(store, layout_keys(1000))
    expected = (await store.list("/", revision=pinned)).entries
    got: list[Any] = []
    try:
        async with store.scan("/", revision=pinned, page=400) as scan:
            async for page in scan:
                if not got:
                    await store.put("/moved/on", b"")
                    await store.compact(await store.put("/moved/on", b"again"))
                assert page.revision == pinned
                got.extend(page)
    except Compacted:
        assert isinstance(store, EtcdStore)
        return
    assert not isinstance(store, EtcdStore)
    assert tuple(got) == expected


def test_pieces_partition_a_range_in_key_order() -> None:
    keys = sorted(key.encode() for key in layout_keys(500))
    low, high = b"/", b"0"
    for first in (keys[0], keys[37], keys[-1], b"/topics/ns-1/topic-00001"):
        start = max(low, first)
        cut = pieces(start, high, first)
        assert cut[0][0] == start and cut[-1][1] == high
        assert all(a[1] == b[0] for a, b in itertools.pairwise(cut)), "not contiguous"
        assert all(a < b for a, b in cut)
        counts = [bisect.bisect_left(keys, b) - bisect.bisect_left(keys, a) for a, b in cut]
        assert sum(counts) == len(keys) - bisect.bisect_left(keys, start)
    assert end_of(b"/a\xff") == b"/b"


@pytest.mark.backends("etcd", reason="etcd walks its whole index over every range it reads")
async def test_etcd_requests_walk_little_more_than_they_return(store: MetadataStore) -> None:
    """Every range a scan sends is bounded: a read returns at most a page's worth of keys
    of its range (never the rest of the prefix, as a page by limit would), and the counting
    walks, added up, stay within a few times the prefix."""
    assert isinstance(store, EtcdStore)
    keys = layout_keys(1500)
    await fill(store, keys)
    ordered = sorted(key.encode() for key in keys)
    walked: list[tuple[int, int]] = []  # (keys in the range, keys returned)
    call = store.call

    async def spying(service: str, method: str, request: Any, **options: Any) -> Any:
        response = await call(service, method, request, **options)
        if method == "Txn":
            for op, part in zip(request.success, response.responses, strict=True):
                low, high = op.request_range.key, op.request_range.range_end
                inside = bisect.bisect_left(ordered, high) - bisect.bisect_left(ordered, low)
                walked.append((inside, len(part.response_range.kvs)))
        return response

    store.call = spying  # type: ignore[method-assign]
    page = 500
    got = [e.key.encode() for p in await scanned(store, "/", page=page) for e in p]
    assert got == ordered
    reads = [inside for inside, returned in walked if returned > 1]
    assert max(reads) <= 10_000  # the read unit: a page never walks the rest of the prefix
    assert sum(inside for inside, _ in walked) <= 8 * len(ordered)
