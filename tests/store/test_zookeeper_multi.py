"""The ZooKeeper backend's bound on a transaction's multi: a prefix delete (or any
transaction) that expands past it is refused with `TxnTooLarge` before anything is sent, and
writes nothing; under it, it deletes as before. Sent anyway, ZooKeeper would drop the
connection (the request is above its jute.maxbuffer), and every retry the same: etcd and
sqlite delete any number of keys in one transaction, so the bound is ZooKeeper's alone."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from kazoo.protocol.serialization import (
    CheckVersion,
    Create,
    SetData,
    Transaction,
)
from kazoo.protocol.serialization import Delete as DeleteNode
from kazoo.security import OPEN_ACL_UNSAFE

from metaplane.store import (
    Compare,
    Delete,
    DeletePrefix,
    MetadataStore,
    Put,
    TxnTooLarge,
    Unavailable,
    open_store,
)
from metaplane.store import _zookeeper as zk
from metaplane.store._keys import MAX_VALUE_BYTES
from metaplane.testing.zookeeper import JUTE_MAXBUFFER

pytestmark = pytest.mark.backends(
    "zk", reason="a ZooKeeper multi's size: etcd and sqlite delete any number of keys at once"
)

TREES = {"/big/a": 150, "/big/b": 150}
"""Under /big: 300 keys and three parents, 303 znode deletes for `delete_prefix("/big")`, in
a multi of 305 operations with the check and the count of the chroot's removals."""


async def fill(store: MetadataStore, keys: list[str]) -> dict[str, bytes]:
    for start in range(0, len(keys), 100):
        await store.txn([], [Put(key, key.encode()) for key in keys[start : start + 100]], [])
    return {key: key.encode() for key in keys}


async def unchanged(store: MetadataStore, prefix: str, keys: dict[str, bytes]) -> None:
    listing = await store.list(prefix)
    assert {entry.key: entry.value for entry in listing} == keys


async def test_a_prefix_delete_past_the_operations_bound_writes_nothing(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zk, "_MULTI_OPS", 200)
    keys = await fill(store, [f"{tree}/{i:03d}" for tree, n in TREES.items() for i in range(n)])
    before = await store.revision()
    with pytest.raises(TxnTooLarge, match="305 znode operations") as refused:
        await store.delete_prefix("/big")
    message = str(refused.value)
    assert "at most 200 operations" in message and "smaller prefixes" in message
    # Deletes of keys and of a prefix that expand past the bound together.
    deletes = [Delete(f"/big/a/{i:03d}") for i in range(100)]
    with pytest.raises(TxnTooLarge, match="at most 200 operations"):
        await store.txn([Compare.exists("/big/a/000")], [*deletes, DeletePrefix("/big/b")], [])
    assert await store.revision() == before
    await unchanged(store, "/big", keys)
    # Under the bound, a prefix delete works as before: 150 keys and their parent.
    assert await store.delete_prefix("/big/a") == 150
    await unchanged(store, "/big", {k: v for k, v in keys.items() if k.startswith("/big/b/")})
    assert await store.delete_prefix("/big") == 150
    assert (await store.list("/big")).keys() == []


async def test_a_prefix_delete_past_the_bytes_bound_writes_nothing(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "n" * 100
    keys = await fill(store, [f"/long/{name}-{i:03d}" for i in range(150)])
    monkeypatch.setattr(zk, "_MULTI_BYTES", 12_345)
    before = await store.revision()
    with pytest.raises(TxnTooLarge, match="at most 10,000 operations and 12,345 bytes"):
        await store.delete_prefix("/long")
    assert await store.revision() == before
    await unchanged(store, "/long", keys)
    assert await store.delete_prefix("/long/" + name + "-000") == 1
    assert len((await store.list("/long")).keys()) == 149


DEEP = "/deep/" + "/".join(["s" * 49] * 70)
"""A key path of 3,505 bytes: 1,250 keys under it are about 4.5 MB of znode deletes, above
the test server's jute.maxbuffer (4 MiB), cheap to write."""


async def test_the_default_bound_refuses_what_the_server_would_drop(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = await fill(store, [f"{DEEP}/{i:04d}" for i in range(1_250)])
    with pytest.raises(TxnTooLarge, match="at most 10,000 operations and 900,000 bytes"):
        await store.delete_prefix("/deep")
    await unchanged(store, "/deep", keys)
    # Without the bound, the multi goes out and the server drops the connection: a
    # transient-looking error for a request that would fail every time.
    monkeypatch.setattr(zk, "_MULTI_BYTES", 2 * JUTE_MAXBUFFER)
    monkeypatch.setattr(zk, "_MULTI_OPS", 2 * len(keys))
    assert isinstance(store, zk.ZooKeeperStore)
    store._options = dataclasses.replace(store._options, max_request=2 * JUTE_MAXBUFFER)
    with pytest.raises(Unavailable):
        await store.delete_prefix("/deep")
    for _ in range(100):  # the store connects again
        try:
            await unchanged(store, "/deep", keys)
            break
        except Unavailable:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("the store did not connect again within 10 s")


def test_the_zk_multi_size_is_kazoos_encoding() -> None:
    """`_multi_size` is the request kazoo sends (length, header, the multi) less the data
    written: paths of other than ASCII characters counted in UTF-8."""
    ops = [
        CheckVersion("/r/a", 3),
        Create("/r/b", b"", OPEN_ACL_UNSAFE, 0),
        DeleteNode("/r/b", 0),
        Create("/r/\u00e9t\u00e9/\U0001f600", b"value" * 9, OPEN_ACL_UNSAFE, 1),
        SetData("/r/c", b"x" * 1000, 4),
        DeleteNode("/r/" + "d" * 300, -1),
    ]
    data = sum(len(op.data) for op in ops if isinstance(op, Create | SetData))
    assert zk._multi_size(ops) == 4 + 8 + len(Transaction(ops).serialize()) - data


async def test_a_transaction_of_large_values_past_the_request_bound_writes_nothing(
    store: MetadataStore,
) -> None:
    """Each value is within the contract's 1 MiB, their sum is not within the servers'
    jute.maxbuffer (4 MiB here, the URL's max_request by default): refused before it is
    sent, nothing written; three of them commit. Sent anyway (the bound raised past the
    server's), the server drops the connection, as it would at every retry."""
    big = b"v" * MAX_VALUE_BYTES
    four = [Put(f"/large/{i}", big) for i in range(4)]
    with pytest.raises(TxnTooLarge, match=f"at most {JUTE_MAXBUFFER:,}"):
        await store.txn([], four, [])
    assert len(await store.list("/large")) == 0
    result = await store.txn([], four[:3], [])
    assert result.succeeded
    assert [entry.key for entry in await store.list("/large", keys_only=True)] == [
        "/large/0",
        "/large/1",
        "/large/2",
    ]
    zstore = store
    assert isinstance(zstore, zk.ZooKeeperStore)
    zstore._options = dataclasses.replace(zstore._options, max_request=2 * JUTE_MAXBUFFER)
    with pytest.raises(Unavailable):
        await store.txn([], [Put("/large/3", big), *four[:3]], [])
    for _ in range(100):  # the store connects again
        try:
            assert len(await store.list("/large", keys_only=True)) == 3
            break
        except Unavailable:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("the store did not connect again within 10 s")


async def test_max_request_is_an_option_of_the_url(store_url: str) -> None:
    """A smaller jute.maxbuffer named in the URL bounds the transaction by it."""
    async with open_store(f"{store_url}?max_request=1048575") as small:
        with pytest.raises(TxnTooLarge, match="at most 1,048,575"):
            await small.put("/large/one", b"v" * MAX_VALUE_BYTES)
        assert await small.get("/large/one") is None
