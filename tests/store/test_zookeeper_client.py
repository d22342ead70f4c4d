"""The ZooKeeper backend's own machinery, on a real server: reads of many znodes in a few
multiRead requests, and the single-request put of a key the store wrote last, which must
never write from what it remembers once that may be stale (a key removed and made again
since; a session lost), and compares that a key made again cannot fool."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import GetData
from kazoo.protocol.states import KazooState

from metaplane.store import (
    Compare,
    Entry,
    Get,
    MetadataStore,
    Put,
    TxnResult,
    Unavailable,
    connect_store,
)
from metaplane.store import _zookeeper as zk
from metaplane.store import _zookeeper_watch as zkw
from metaplane.store import _zookeeper_wire as wire
from metaplane.testing import expire_session

pytestmark = pytest.mark.backends("zk", reason="the ZooKeeper backend's own requests")

KEY = "/topics/default/t1/state"


@pytest.fixture
async def other(store_url: str) -> AsyncIterator[MetadataStore]:
    async with await connect_store(store_url) as opened:
        yield opened


def zookeeper(store: MetadataStore) -> zk.ZooKeeperStore:
    assert isinstance(store, zk.ZooKeeperStore)
    return store


async def test_a_changed_key_is_forgotten(store: MetadataStore, other: MetadataStore) -> None:
    """Another client's write is notified: the store no longer writes from memory."""
    zstore = zookeeper(store)
    await store.put(KEY, b"1")
    assert KEY in zstore._known
    revision = await other.put(KEY, b"2")
    synced = await zstore._sync()  # notified before the sync's reply: handled by now
    assert synced >= revision
    assert KEY not in zstore._known


async def test_the_keys_remembered_are_bounded(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound the older half is forgotten; a key forgotten is written as a
    transaction, as exactly."""
    monkeypatch.setattr(zk, "_KNOWN", 8)
    zstore = zookeeper(store)
    keys = [f"/k/{i:02d}" for i in range(20)]
    for key in keys:
        await store.put(key, b"1")
    assert len(zstore._known) <= 8
    assert keys[-1] in zstore._known and keys[0] not in zstore._known
    for key in keys:
        revision = await store.put(key, b"2")
        found = await store.get(key)
        assert found is not None and (found.version, found.mod_revision) == (2, revision)


async def test_put_after_the_session_was_lost(store: MetadataStore, other: MetadataStore) -> None:
    """The store's session expires while another client deletes the key and writes it back
    to the data version this store last saw: the put after that is a write of that key."""
    zstore = zookeeper(store)
    await store.put(KEY, b"1")
    await store.put(KEY, b"2")
    states: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    zstore._client.add_listener(lambda state: loop.call_soon_threadsafe(states.put_nowait, state))
    await expire_session(zstore._client)
    while await states.get() != KazooState.LOST:
        pass
    await other.delete(KEY)
    created = await other.put(KEY, b"a")
    await other.put(KEY, b"b")
    while await states.get() != KazooState.CONNECTED:
        pass
    revision = await store.put(KEY, b"3")
    assert await other.get(KEY) == Entry(KEY, b"3", 3, created, revision, 0)


async def test_listing_many_keys_in_many_multireads(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Levels wider than a multiRead, read several requests at once, values large and
    small: the listing is every key, once, at one revision."""
    monkeypatch.setattr(zk, "_BATCH", 7)
    monkeypatch.setattr(zk, "_IN_FLIGHT", 3)
    big = b"v" * 700_000
    keys = {f"/n{i % 3}/t{i:03d}/{leaf}": b"%d" % i for i in range(60) for leaf in ("a", "b")}
    keys.update({f"/n1/t{i:03d}": big for i in range(0, 60, 20)})
    keys["/n2"] = b"a parent that is a key"
    for start in range(0, len(keys), 50):
        batch = list(keys.items())[start : start + 50]
        await store.txn([], [Put(key, value) for key, value in batch], [])
    listing = await store.list("/")
    assert {entry.key: entry.value for entry in listing} == keys
    assert [entry.key for entry in listing] == sorted(keys)
    assert listing.revision >= max(entry.mod_revision for entry in listing)
    under = await store.list("/n1", start_after="/n1/t030", limit=5)
    after = sorted(key for key in keys if key.startswith("/n1/") and key > "/n1/t030")
    assert [entry.key for entry in under] == after[:5]


async def test_a_multiread_reports_each_missing_znode(store: MetadataStore) -> None:
    zstore = zookeeper(store)
    await store.put("/a/b", b"1")
    reads = [
        (wire.GET_DATA, zstore._path("/a/b")),
        (wire.GET_DATA, zstore._path("/a/missing")),
        (wire.GET_CHILDREN, zstore._path("/a")),
        (wire.GET_CHILDREN, zstore._path("/missing")),
    ]
    data, missing, children, no_children = await zstore._read_many(reads)
    assert wire.decode("/a/b", *data) is not None
    assert isinstance(missing, NoNodeError) and isinstance(no_children, NoNodeError)
    assert children == ["b"]


@pytest.mark.parametrize("late", [0.0, 0.02])
async def test_a_plain_put_after_a_leased_one_leaves_no_lease(
    store: MetadataStore, other: MetadataStore, monkeypatch: pytest.MonkeyPatch, late: float
) -> None:
    """A leased put runs on the lease's own session, whose reply and the store's
    notifications of it come in no common order: the plain put after it must not write
    from what the store remembered of the key before (it would land on the lease's new
    znode and leave the key on the lease). With the store's notifications `late` (its
    server lagging), every round hit that window before the fix."""
    zstore = zookeeper(store)
    connection = zstore._client._connection
    original = connection._read_watch_event

    def lagging(buffer: bytes, offset: int) -> object:
        time.sleep(late)  # injected latency in kazoo's connection thread
        return original(buffer, offset)

    monkeypatch.setattr(connection, "_read_watch_event", lagging)
    lease = await store.grant(30)
    keys = [f"/lease-aba/k{i}" for i in range(20)]
    for key in keys:
        await store.put(key, b"plain")
        await store.put(key, b"leased", lease=lease.id)
        revision = await store.put(key, b"plain again")
        found = await other.get(key)
        assert found is not None and (found.lease, found.version) == (0, 3), found
        assert found.mod_revision == revision
    await store.revoke(lease.id)
    assert all([await other.get(key) is not None for key in keys])


async def test_a_znode_no_key_names_holds_up_nothing(store: MetadataStore) -> None:
    """Another client makes a znode under the chroot whose name no key has (`%ffffff`): its
    notification is dropped, and a reply queued behind it is handled at once; a put, which
    first handles what is queued, goes on."""
    zstore = zookeeper(store)
    await store.put(KEY, b"1")
    raw = KazooClient(hosts=",".join(zstore._options.hosts))
    await asyncio.to_thread(raw.start)
    bad = [zstore._root + "/%ffffff", zstore._root + "/%fffffe"]
    try:
        # The loop is held until the notification, then a reply, wait in the store's inbox
        # behind each other (the window made, not waited for by chance).
        raw.create(bad[0], b"")
        hold_loop_until(lambda: len(zstore._inbox._items) >= 1)
        reply = wire.call(zstore._client, zstore._inbox, GetData(zstore._path(KEY), None))
        hold_loop_until(lambda: len(zstore._inbox._items) >= 2)
        async with asyncio.timeout(3):  # the store's timeout is 10 s: a stall would show
            assert (await reply).error is None
        raw.create(bad[1], b"")
        hold_loop_until(lambda: len(zstore._inbox._items) >= 1)
        async with asyncio.timeout(3):
            await store.put(KEY, b"2")
        assert (await other_view(store, KEY)) == b"2"
    finally:
        for path in bad:
            with contextlib.suppress(NoNodeError):
                raw.delete(path)
        await asyncio.to_thread(raw.stop)
        raw.close()


def hold_loop_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Block the event loop's thread until `condition` holds (kazoo's thread fills the
    store's inbox meanwhile); polled with a deadline, since nothing can be awaited here."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the inbox never filled"
        time.sleep(0.001)


async def other_view(store: MetadataStore, key: str) -> bytes | None:
    found = await store.get(key)
    return None if found is None else found.value


async def test_an_absence_down_to_the_top_segment_is_pinned(
    store: MetadataStore, other: MetadataStore
) -> None:
    """A read-only transaction that finds a key missing with every segment above it: its
    revision is one at which the key really was absent (the chroot's pzxid says since
    when), not the last this store saw, when the key still existed."""
    await store.put("/x", b"x")
    await store.put("/a/b/c", b"c")
    seen = (await store.txn([], [Get("/x"), Get("/a/b/c")], [])).revision
    deleted = await other.delete("/a/b/c")  # and /a/b and /a with it
    assert deleted is not None and deleted > seen
    result = await store.txn(
        [Compare.exists("/x"), Compare.absent("/a/b/c")], [Get("/x"), Get("/a/b/c")], []
    )
    assert result.succeeded and result.results[1] is None
    assert result.revision >= deleted


async def test_a_key_deleted_before_a_watch_from_now_first_read_is_a_delete(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch from now registers for notifications, then reads its prefixes to learn the
    keys: a key that existed when it started and is deleted before that read comes as a
    DELETE, not lost (a consumer that holds it would hold it for ever). Driven: the first
    read waits until the delete has committed."""
    await store.put("/w/kept", b"1")
    await store.put("/w/gone", b"1")
    gate = asyncio.Event()
    snapshot = zkw.Follower._store_snapshot

    async def held(self: zkw.Follower, *args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await snapshot(self, *args, **kwargs)

    monkeypatch.setattr(zkw.Follower, "_store_snapshot", held)
    watch = store.watch("/w")  # from now: registered, its first read held
    try:
        deleted = await store.delete("/w/gone")
        gate.set()
        events: list[tuple[str, str]] = []
        async with asyncio.timeout(10):
            while ("DELETE", "/w/gone") not in events:
                watch.request_progress()
                batch = await anext(watch)
                assert batch.events or batch.revision >= deleted  # a progress batch at most
                events.extend((e.type.name, e.key) for e in batch.events)
                if not batch.events:
                    break
        assert events == [("DELETE", "/w/gone")]
    finally:
        await watch.aclose()


async def held_at_its_multi(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch, compare: Compare
) -> tuple[asyncio.Task[TxnResult], asyncio.Event]:
    """A fenced transaction (`compare`, then a put of /fence/write) started and held
    between its reads and its multi: its task, and the event that lets the multi go."""
    zstore = zookeeper(store)
    gate, reached = asyncio.Event(), asyncio.Event()
    commit = zstore._commit

    async def held(*args: Any, **kwargs: Any) -> int:
        if not gate.is_set():
            reached.set()
            await gate.wait()
        return await commit(*args, **kwargs)

    monkeypatch.setattr(zstore, "_commit", held)
    fenced = asyncio.create_task(store.txn([compare], [Put("/fence/write", b"fenced")], []))
    async with asyncio.timeout(10):
        await reached.wait()
    return fenced, gate


async def deleted_and_put(store: MetadataStore, key: str) -> None:
    await store.delete(key)
    await store.put(key, b"b1")


async def deleted_swept_and_put(store: MetadataStore, key: str) -> None:
    await store.delete(key)
    await zookeeper(store)._sweep_pending()  # its znode removed, as it is soon after anyway
    await store.put(key, b"b1")


async def deleted_found_empty_and_put(store: MetadataStore, key: str) -> None:
    await store.delete(key)
    parent = key.rsplit("/", 1)[0]
    assert (await store.txn([Compare.empty(parent)], [], [])).succeeded  # removes its znode
    await store.put(key, b"b1")


async def leased_and_put_again(store: MetadataStore, key: str) -> None:
    lease = await store.grant(30)
    await store.put(key, b"b1", lease=lease.id)  # the znode made again, ephemeral
    await store.put(key, b"b1")  # and again, plain: at data version 0, as it was read
    await store.revoke(lease.id)


@pytest.mark.parametrize(
    ("made_again", "compare"),
    [
        (deleted_and_put, "create_revision"),
        (deleted_swept_and_put, "create_revision"),
        (deleted_found_empty_and_put, "create_revision"),
        (leased_and_put_again, "mod_revision"),
    ],
)
async def test_a_compare_is_not_fooled_by_a_key_made_again(
    store: MetadataStore,
    other: MetadataStore,
    monkeypatch: pytest.MonkeyPatch,
    made_again: Callable[[MetadataStore, str], Any],
    compare: str,
) -> None:
    """ABA: a transaction compares a key's create_revision (a broker's fence on its
    assignment) or mod_revision; between its read and its multi another client makes the
    key again, so that its znode may be back at the data version read (one never set since,
    as the new one is). The compare must not pass on the new key. Driven: the first multi
    waits until the key has been made again."""
    written = await store.put("/fence/owner", b"b1")
    compared = getattr(Compare, compare)("/fence/owner", "==", written)
    fenced, gate = await held_at_its_multi(store, monkeypatch, compared)
    await made_again(other, "/fence/owner")
    again = await other.get("/fence/owner")
    assert again is not None and getattr(again, compare) > written
    gate.set()
    result = await fenced
    assert not result.succeeded
    assert await other.get("/fence/write") is None


async def test_a_compare_on_a_leased_key_is_not_fooled_by_a_new_lease(
    store: MetadataStore, other: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ABA on a leased key: read while another client's lease holds it; that lease ends
    (ZooKeeper removes the znode, uncounted) and a new lease makes the key again, at data
    version 0 as it was read. The compare on its create_revision must not pass."""
    first = await other.grant(30)
    written = await other.put("/fence/leader", b"b1", lease=first.id)
    compared = Compare.create_revision("/fence/leader", "==", written)
    fenced, gate = await held_at_its_multi(store, monkeypatch, compared)
    await other.revoke(first.id)
    second = await other.grant(30)
    again = await other.put("/fence/leader", b"b1", lease=second.id)
    assert again > written
    gate.set()
    result = await fenced
    assert not result.succeeded
    assert await other.get("/fence/write") is None


async def test_a_remembered_put_is_not_fooled_by_a_key_made_again(
    store: MetadataStore, other: MetadataStore
) -> None:
    """ABA of the single-request put: the key this store remembers is deleted and written
    back to the same data version by another client, and the put goes out before this
    store has heard of it (a process paused between its look at memory and its send). It
    must not land as a write of the old key (its create_revision and version)."""
    zstore = zookeeper(store)
    await store.put(KEY, b"1")
    await store.put(KEY, b"2")
    known = zstore._known[KEY]
    await other.delete(KEY)
    await zookeeper(other)._sweep_pending()  # its znode removed, as it is soon after anyway
    created = await other.put(KEY, b"a")
    written = await other.put(KEY, b"b")
    assert await zstore._set(Put(KEY, b"stale"), known) == 0
    assert await other.get(KEY) == Entry(KEY, b"b", 2, created, written, 0)


async def test_a_deleted_keys_znode_and_parents_are_removed(
    store: MetadataStore, other: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete leaves the key's znode keyless (its data version goes on, so checks of it
    stay exact); soon after, the store removes it with the parents only it needed, in a
    multi counted as a removal, which the other store's next write from memory checks."""
    monkeypatch.setattr(zk, "_SWEEP_DELAY", 0.2)
    zstore, zother = zookeeper(store), zookeeper(other)
    await store.put("/gone/a/b", b"1")
    await store.put("/gone/kept", b"1")
    await other.put(KEY, b"1")
    known = zother._known[KEY]
    deleted = await store.delete("/gone/a/b")
    assert deleted is not None
    assert await store.get("/gone/a/b") is None
    assert (await store.list("/gone")).keys() == ["/gone/kept"]
    deadline = time.monotonic() + 10
    while await zstore._exists(zstore._path("/gone/a")) is not None:
        assert time.monotonic() < deadline, "the deleted key's parent was never removed"
        await asyncio.sleep(0.05)
    assert await zstore._exists(zstore._path("/gone")) is not None
    assert (await store.list("/gone")).keys() == ["/gone/kept"]
    # The removal counted: a write from memory with the count before it is refused.
    zother._removals = None  # (as if its notification had not come yet)
    assert await zother._set(Put(KEY, b"2"), known) == 0
    revision = await other.put(KEY, b"2")
    found = await store.get(KEY)
    assert found is not None and (found.value, found.version, found.mod_revision) == (
        b"2",
        2,
        revision,
    )


async def test_a_store_closing_removes_what_its_deletes_left(
    store_url: str, other: MetadataStore
) -> None:
    """A store closed right after a delete (before its sweep is due) removes the key's
    znode and the parents only it needed as it closes."""
    async with await connect_store(store_url) as closing:
        await closing.put("/closing/a/b", b"1")
        assert await closing.delete("/closing/a/b") is not None
    zother = zookeeper(other)
    assert await zother._exists(zother._path("/closing")) is None


async def test_many_deleted_keys_are_swept_in_few_multis(store: MetadataStore) -> None:
    """300 keys deleted at once (more than a transaction's 128 operations): their znodes
    and their parent are all removed, each sweep a multi of many."""
    zstore = zookeeper(store)
    keys = [f"/many/{i:03d}" for i in range(300)]
    for start in range(0, len(keys), 100):
        await store.txn([], [Put(key, b"1") for key in keys[start : start + 100]], [])
    before = (await zstore._chroot()).version
    await asyncio.gather(*(store.delete(key) for key in keys))
    assert (await store.list("/many")).keys() == []
    await zstore._sweep_pending()
    assert not zstore._tombstones
    assert await zstore._exists(zstore._path("/many")) is None
    assert (await zstore._chroot()).version - before == 1  # one multi removed them all


async def test_a_sweep_that_fails_keeps_its_keys_for_the_next(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transient error at the sweep's multi (the store away for a moment): the sweep
    raises, its keys stay pending, and the next sweep removes their znodes."""
    zstore = zookeeper(store)
    await store.put("/swept/a", b"1")
    await store.delete("/swept/a")
    commit = zstore._commit
    failures = iter([Unavailable("injected: the store away for a moment")])

    async def once(*args: Any, **kwargs: Any) -> int:
        if (error := next(failures, None)) is not None:
            raise error
        return await commit(*args, **kwargs)

    monkeypatch.setattr(zstore, "_commit", once)
    with pytest.raises(Unavailable, match="injected"):
        await zstore._sweep_pending()
    assert list(zstore._tombstones) == ["/swept/a"]
    assert await zstore._exists(zstore._path("/swept/a")) is not None
    await zstore._sweep_pending()
    assert not zstore._tombstones
    assert await zstore._exists(zstore._path("/swept")) is None
