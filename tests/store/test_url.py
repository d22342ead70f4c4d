"""open_store(url): the backend by scheme, and clear errors for URLs that name none."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaplane.store import (
    InvalidStoreURL,
    MemoryStore,
    SqliteStore,
    connect_store,
    open_store,
)


async def test_memory_and_sqlite(tmp_path: Path) -> None:
    async with open_store("memory://") as store:
        assert isinstance(store, MemoryStore)
    url = f"sqlite://{tmp_path / 'nested' / 'metaplane.db'}?synchronous=normal&history=10"
    async with open_store(url) as store:
        assert isinstance(store, SqliteStore)
        await store.put("/k", b"v")
    assert (tmp_path / "nested" / "metaplane.db").exists()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/just/a/path",
        "redis://localhost",
        "zk://127.0.0.1:2181",
        "zk:///chroot",
        "zookeeper://127.0.0.1:2181/chroot?colour=blue",
        "zk://127.0.0.1:2181/chroot?max_request=lots",
        "zk://127.0.0.1:2181/chroot?max_request=100",
        "zk://127.0.0.1:2181/chroot?max_request=2147483648",
        "memory://?colour=blue",
        "sqlite://",
        "sqlite:///tmp/x.db?synchronous=sometimes",
        "sqlite:///tmp/x.db?history=many",
        "sqlite:///tmp/x.db?history=1&history=2",
    ],
)
async def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidStoreURL):
        await connect_store(url)
