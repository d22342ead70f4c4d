"""The API's live event stream (server-sent events, resumable from a revision), and a cursor
reset through the broker that serves the topic: the broker's pending acknowledgement never
overwrites it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from metaplane import layout
from metaplane.cluster import Node, NodeSettings
from metaplane.cluster._node import registration
from metaplane.layout import TopicName
from metaplane.resources import (
    NamespaceManager,
    OwnershipManager,
    SubscriptionManager,
    TopicManager,
    decode,
)
from metaplane.store import MemoryStore, SqliteStore
from metaplane.testing import port_free
from tests.admin.api import Api, running
from tests.resources.samples import subscription

TOPIC = TopicName("default", "orders")


async def messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The server-sent events of a streamed response, as {"event", "id", "data"}."""
    block: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if block:
                yield block
            block = {}
            continue
        field, _, value = line.partition(":")
        if field:
            block[field] = value.removeprefix(" ")


async def changes(api: Api, count: int, **params: Any) -> list[dict[str, Any]]:
    """The first `count` change events of a new stream."""
    headers = {}
    if "last_event_id" in params:
        headers["Last-Event-ID"] = str(params.pop("last_event_id"))
    found = []
    async with (
        asyncio.timeout(20),
        api.client.stream("GET", "/admin/v2/events", params=params, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for message in messages(response):
            if message.get("event") == "change":
                found.append(message)
                if len(found) == count:
                    return found
    raise AssertionError("the stream ended")


async def test_a_stream_of_changes_resumes_from_a_revision(tmp_path: Path) -> None:
    async with running(tmp_path) as api:
        start = await api.revision() + 1
        await NamespaceManager(api.store).create("default")
        created = await TopicManager(api.store).create(TOPIC)
        await api.store.put("/elsewhere/x", b"1")
        seen = await changes(api, 1, prefix="/topics", from_revision=start)
        # Only the prefix's changes (the namespace came before), one event per revision (a
        # transaction's keys together), its id the revision.
        assert [int(message["id"]) for message in seen] == [created]
        first = json.loads(seen[0]["data"])
        assert first["revision"] == created
        assert {event["key"] for event in first["events"]} == {
            layout.topic_root(TOPIC),
            layout.topic_delivery(TOPIC),
        }
        # Resumed after the first event: the next one, nothing before it.
        later = await SubscriptionManager(api.store).create(TOPIC, subscription("billing"))
        resumed = await changes(api, 1, prefix="/topics", last_event_id=created)
        assert int(resumed[0]["id"]) == later
        deleted = await TopicManager(api.store).delete(TOPIC)
        after = await changes(api, 1, prefix="/topics", from_revision=later + 1)
        assert json.loads(after[0]["data"])["events"][0]["type"] == "DELETE"
        assert int(after[0]["id"]) == deleted
        refused = await api.client.get("/admin/v2/events", params={"prefix": "no/slash"})
        assert refused.status_code == 400


async def test_a_compacted_history_says_so(tmp_path: Path) -> None:
    store = MemoryStore()
    async with running(tmp_path, store=store) as api:
        first = await store.put("/topics/a", b"1")
        await store.put("/topics/a", b"2")
        await store.compact(await store.revision())
        async with (
            asyncio.timeout(20),
            api.client.stream(
                "GET", "/admin/v2/events", params={"prefix": "/topics", "from_revision": first}
            ) as response,
        ):
            events = [message async for message in messages(response)]
        assert [message["event"] for message in events] == ["ready", "compacted"]
        assert json.loads(events[1]["data"])["compact_revision"] >= first


def free_index() -> int:
    """A node index whose registered admin and metrics ports are both free."""
    for index in range(400, 900, 7):
        addresses = registration(1, index)
        ports = [
            int(addresses.admin_addr.rsplit(":", 1)[1]),
            int(str(addresses.prom_exporter).rsplit(":", 1)[1]),
        ]
        if all(port_free(port) for port in ports):
            return index
    raise AssertionError("no free ports for a broker's endpoints")


async def owner_of(store: SqliteStore, topic: TopicName) -> int:
    """The broker the leader assigned `topic` to (polled: the test has no event for it)."""
    async with asyncio.timeout(30):
        while True:
            assigned = await OwnershipManager(store).assignments(1)
            if topic in assigned:
                return 1
            await asyncio.sleep(0.05)


async def test_a_reset_goes_through_the_owning_broker(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "store.db")
    await NamespaceManager(store).create("default")
    await TopicManager(store).create(TOPIC)
    await SubscriptionManager(store).create(TOPIC, subscription("billing"))
    node = Node(store, NodeSettings(1, free_index(), session_ttl=3, endpoints=True))
    await node.start()
    try:
        await owner_of(store, TOPIC)
        await node.broker.caught_up(await store.revision(), timeout=30)
        node.broker.ack(TOPIC, "billing", 100)  # pending: batched, not yet written
        assert node.broker.cursors.pending_count == 1
        async with running(tmp_path, store=await SqliteStore.open(tmp_path / "store.db")) as api:
            path = "/admin/v2/topics/default/orders/subscriptions/billing"
            reset = await api.client.post(f"{path}/reset", json={"offset": 7})
            assert reset.status_code == 200, reset.text
            assert reset.json()["through_broker"] == 1
            exporter = registration(1, node.settings.index).prom_exporter
            metrics = await api.client.get(f"http://{exporter}/metrics")
            assert "metaplane_broker_topics_owned 1.0" in metrics.text
            cache = node.broker.cache
            assert cache is not None and cache.covers(layout.topic_root(TOPIC))
            assert f"metaplane_cache_keys {float(len(cache))}" in metrics.text
            assert f"metaplane_cache_prefixes {float(len(cache.prefixes))}" in metrics.text
    finally:
        await node.stop()  # flushes every pending cursor: the dropped ack is not among them
    entry = await store.get(layout.cursor(TOPIC, "billing"))
    assert entry is not None and decode(int, entry.value) == 7
    await store.aclose()
