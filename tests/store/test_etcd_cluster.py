"""The etcd backend on a real 3-member cluster: when the member the client talks to is
killed, writes continue on the others and no acknowledged write is lost."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metaplane.store import EtcdStore, Unavailable, connect_store
from metaplane.testing import EtcdCluster

pytestmark = pytest.mark.backends("etcd", reason="fail-over between etcd members")


async def test_member_killed_writes_continue(tmp_path: Path, backend: str) -> None:
    with EtcdCluster(tmp_path) as cluster:
        store = await connect_store(cluster.url + "?timeout=5")
        assert isinstance(store, EtcdStore)
        acknowledged: list[str] = []
        killed_at: float | None = None
        resumed_after: float | None = None
        async with store:
            index = 0
            while len(acknowledged) < 200:
                key = f"/acked/{index:06d}"
                try:
                    await store.put(key, b"v")
                except Unavailable:
                    continue  # the outcome is unknown: write the same key again
                acknowledged.append(key)
                index += 1
                if killed_at is not None and resumed_after is None:
                    resumed_after = time.monotonic() - killed_at
                if len(acknowledged) == 100:
                    victim = cluster.members[cluster.endpoints.index(store.active_endpoint)]
                    victim.kill()
                    killed_at = time.monotonic()
            assert store.active_endpoint != victim.endpoint
        assert resumed_after is not None and resumed_after <= 5.0
        survivors = ",".join(m.endpoint for m in cluster.members if m is not victim)
        async with await connect_store(f"etcd://{survivors}") as check:
            kept = (await check.list("/acked", keys_only=True)).keys()
        assert set(acknowledged) <= set(kept)


async def test_first_endpoint_down_at_connect(tmp_path: Path, backend: str) -> None:
    with EtcdCluster(tmp_path) as cluster:
        cluster.members[0].kill()
        async with await connect_store(cluster.url + "?timeout=5") as store:
            revision = await store.put("/k", b"v")
            assert revision > 0
            assert isinstance(store, EtcdStore)
            assert store.active_endpoint != cluster.members[0].endpoint
