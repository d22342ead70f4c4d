"""The ZooKeeper backend's own machinery, on a real server: reads of many znodes in a few
multiRead requests, and the single-request put of a key the store wrote last, which must
never write from what it remembers once that may be stale (a write sent on another
connection than the one it learned the key on; a session lost)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.protocol.states import KazooState

from metaplane.store import Entry, MetadataStore, Put, connect_store
from metaplane.store import _zookeeper as zk
from metaplane.store import _zookeeper_wire as wire

pytestmark = pytest.mark.backends("zk", reason="the ZooKeeper backend's own requests")

KEY = "/topics/default/t1/state"


@pytest.fixture
async def other(store_url: str) -> AsyncIterator[MetadataStore]:
    async with await connect_store(store_url) as opened:
        yield opened


def zookeeper(store: MetadataStore) -> zk.ZooKeeperStore:
    assert isinstance(store, zk.ZooKeeperStore)
    return store


async def test_a_remembered_put_sent_on_another_connection_is_refused(
    store: MetadataStore,
) -> None:
    """The guard of the single-request put: sent on a connection other than the one the
    version was learned on, ZooKeeper refuses it, whatever the znode's version."""
    zstore = zookeeper(store)
    await store.put(KEY, b"1")
    known = zstore._known[KEY]
    data = wire.encode(b"stale", known.offset, known.created)
    path = zstore._path(KEY)
    refused = await zstore._request(wire.GuardedSetData(path, data, known.version, lambda: False))
    assert isinstance(refused.error, BadVersionError)
    assert (await store.get(KEY)) == Entry(KEY, b"1", 1, known.created, known.created, 0)
    accepted = await zstore._request(wire.GuardedSetData(path, data, known.version, lambda: True))
    assert accepted.error is None


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
    await expire(zstore._client)
    while await states.get() != KazooState.LOST:
        pass
    await other.delete(KEY)
    created = await other.put(KEY, b"a")
    await other.put(KEY, b"b")
    while await states.get() != KazooState.CONNECTED:
        pass
    revision = await store.put(KEY, b"3")
    assert await other.get(KEY) == Entry(KEY, b"3", 3, created, revision, 0)


async def expire(client: KazooClient) -> None:
    """Expire `client`'s session as kazoo's own test harness does: another client joins it
    with its id and password and closes it."""
    session_id, password = client.client_id
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    thief = KazooClient(hosts=hosts, client_id=(session_id, password))
    await asyncio.to_thread(thief.start)
    await asyncio.to_thread(thief.stop)
    thief.close()


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
