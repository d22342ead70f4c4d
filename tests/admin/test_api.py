"""`metaplane serve`'s HTTP admin API, on a real server: the resources and the operations
behind them, versions as ETags (If-Match, If-None-Match, 412), problem details with the
error tree's statuses, and no traceback ever."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from metaplane import layout
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.layout import TopicName
from metaplane.resources import (
    ClusterManager,
    OwnershipManager,
    StorageManager,
    SubscriptionManager,
    encode,
)
from metaplane.store import MemoryStore, Unavailable
from metaplane.testing import FaultyStore
from tests.admin.api import Api, running
from tests.admin.runner import add_broker
from tests.resources.samples import ACTIVE, BROKER, DRAINING, descriptor, subscription

TOPIC = "/admin/v2/topics/default/orders"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with running(tmp_path) as found:
        yield found


def problem_of(response: httpx.Response, status: int) -> dict[str, object]:
    """The problem details of a refused request: its status, JSON, never a traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text
    document: dict[str, object] = response.json()
    assert document["status"] == status and document["detail"]
    return document


async def a_topic(api: Api) -> None:
    assert (await api.client.put("/admin/v2/namespaces/default")).status_code == 201
    assert (await api.client.put(TOPIC)).status_code == 201


async def test_openapi_describes_every_resource(api: Api) -> None:
    document = (await api.client.get("/admin/v2/openapi.json")).json()
    paths = set(document["paths"])
    for path in (
        "/admin/v2/status",
        "/admin/v2/brokers/{broker_id}/undrain",
        "/admin/v2/namespaces/{namespace}/policy",
        "/admin/v2/topics/{namespace}/{topic}",
        "/admin/v2/topics/{namespace}/{topic}/subscriptions/{subscription}/reset",
        "/admin/v2/topics/{namespace}/{topic}/subscriptions/{subscription}/skip",
        "/admin/v2/schemas/subjects/{subject}/compatibility",
        "/admin/v2/schemas/ids/{schema_id}",
        "/admin/v2/keys",
        "/admin/v2/events",
    ):
        assert path in paths, path


async def test_a_topic_through_its_life(api: Api) -> None:
    await a_topic(api)
    described = await api.client.get(TOPIC)
    assert described.status_code == 200
    document = described.json()
    assert described.headers["etag"] == document["etag"]
    assert (document["owner"], document["waiting"]["reason"]) == (None, None)
    listed = (await api.client.get("/admin/v2/topics", params={"namespace": "default"})).json()
    assert [row["topic"] for row in listed] == ["/default/orders"]
    problem_of(await api.client.put(TOPIC), 409)  # TopicExists
    problem_of(await api.client.get("/admin/v2/topics/default/nope"), 404)
    problem_of(await api.client.put("/admin/v2/topics/nowhere/t"), 404)  # NoNamespace
    assert (await api.client.delete(TOPIC)).json()["topic"] == "/default/orders"
    problem_of(await api.client.get(TOPIC), 404)


async def test_a_topic_etag_guards_a_delete_and_a_move(api: Api) -> None:
    await a_topic(api)
    await add_broker(api.store, BROKER)
    await OwnershipManager(api.store).assign(TopicName("default", "orders"), BROKER)
    seen = (await api.client.get(TOPIC)).headers["etag"]
    sub = f"{TOPIC}/subscriptions/billing"
    assert (await api.client.put(sub)).status_code == 201  # the topic changed since `seen`
    before = await api.revision()
    stale = await api.client.post(f"{TOPIC}/unload", headers={"If-Match": seen})
    problem_of(stale, 412)
    problem_of(await api.client.delete(TOPIC, headers={"If-Match": seen}), 412)
    assert await api.revision() == before  # nothing written
    # Refused while it has subscriptions, whatever the ETag.
    fresh = (await api.client.get(TOPIC)).headers["etag"]
    assert fresh != seen
    problem_of(await api.client.delete(TOPIC, headers={"If-Match": fresh}), 409)
    moved = await api.client.post(f"{TOPIC}/unload", headers={"If-Match": fresh})
    assert moved.status_code == 200, moved.text
    marker = (await api.client.get(TOPIC)).json()["waiting"]
    assert marker == {"reason": "unload", "from_broker": BROKER, "to_broker": None}
    latest = (await api.client.get(TOPIC)).headers["etag"]
    forced = await api.client.delete(TOPIC, params={"force": "true"}, headers={"If-Match": latest})
    assert forced.status_code == 200, forced.text
    assert (
        await api.store.get(layout.subscription(TopicName("default", "orders"), "billing")) is None
    )


async def test_one_key_resources_carry_their_version(api: Api) -> None:
    created = await api.client.put(
        "/admin/v2/namespaces/billing",
        json={"max_producers_per_topic": 5},
        headers={"If-None-Match": "*"},
    )
    assert created.status_code == 201 and created.headers["etag"] == '"1"'
    problem_of(await api.client.put("/admin/v2/namespaces/billing"), 409)
    policy = await api.client.get("/admin/v2/namespaces/billing/policy")
    assert policy.headers["etag"] == '"1"'
    assert policy.json()["policy"]["max_producers_per_topic"] == 5
    changed = await api.client.put(
        "/admin/v2/namespaces/billing/policy",
        json={"max_publish_rate": 100},
        headers={"If-Match": '"1"'},
    )
    assert changed.status_code == 200 and changed.headers["etag"] == '"2"'
    assert changed.json()["policy"]["max_producers_per_topic"] == 0  # PUT replaces the policy
    before = await api.revision()
    stale = await api.client.put(
        "/admin/v2/namespaces/billing/policy", json={}, headers={"If-Match": '"1"'}
    )
    problem_of(stale, 412)
    problem_of(
        await api.client.delete("/admin/v2/namespaces/billing", headers={"If-Match": "1"}), 412
    )
    problem_of(
        await api.client.put(
            "/admin/v2/namespaces/billing/policy", json={}, headers={"If-Match": "x"}
        ),
        412,
    )
    assert await api.revision() == before
    deleted = await api.client.delete("/admin/v2/namespaces/billing", headers={"If-Match": '"2"'})
    assert deleted.status_code == 200


async def test_drain_and_undrain_a_broker_over_its_state_version(api: Api) -> None:
    await add_broker(api.store, BROKER)
    state = await api.client.get(f"/admin/v2/brokers/{BROKER}/state")
    assert state.headers["etag"] == '"1"' and state.json()["mode"] == "active"
    drained = await api.client.post(
        f"/admin/v2/brokers/{BROKER}/drain", json={"reason": "kernel"}, headers={"If-Match": '"1"'}
    )
    assert drained.json()["was"] == "active"
    problem_of(
        await api.client.post(f"/admin/v2/brokers/{BROKER}/undrain", headers={"If-Match": '"1"'}),
        412,
    )
    undrained = await api.client.post(f"/admin/v2/brokers/{BROKER}/undrain")
    assert undrained.json()["was"] == "draining"
    assert (await ClusterManager(api.store).state(BROKER)).value == ACTIVE.__class__(
        mode=ACTIVE.mode, reason="operator"
    )
    problem_of(await api.client.post("/admin/v2/brokers/9/drain"), 404)


async def test_subscriptions_reset_and_skip_while_no_broker_serves_the_topic(api: Api) -> None:
    await a_topic(api)
    sub = f"{TOPIC}/subscriptions/billing"
    created = await api.client.put(sub, json={"type": "shared"}, headers={"If-None-Match": "*"})
    assert created.status_code == 201
    problem_of(await api.client.put(sub), 409)
    problem_of(await api.client.put(f"{TOPIC}/subscriptions/x", json={"type": "sometimes"}), 400)
    reset = await api.client.post(f"{sub}/reset", json={"offset": 41})
    assert reset.json() | {"revision": 0} == {
        "topic": "/default/orders", "subscription": "billing", "cursor": 41,
        "revision": 0, "through_broker": None,
    }  # fmt: skip
    skipped = await api.client.post(f"{sub}/skip", json={"count": 9})
    assert skipped.json()["cursor"] == 50
    read = await api.client.get(sub)
    assert (read.json()["cursor"], read.json()["type"], read.headers["etag"]) == (
        50,
        "shared",
        '"1"',
    )
    problem_of(await api.client.delete(sub, headers={"If-Match": '"2"'}), 412)
    assert (await api.client.delete(sub, headers={"If-Match": '"1"'})).status_code == 200
    problem_of(await api.client.post(f"{sub}/reset", json={"offset": 1}), 404)


async def test_describe_shows_backlog_and_the_bound_schema(api: Api) -> None:
    await a_topic(api)
    topic = TopicName("default", "orders")
    await SubscriptionManager(api.store).create(topic, subscription("billing"))
    await SubscriptionManager(api.store).write_cursor(topic, "billing", 9)
    await StorageManager(api.store).add_object(topic, descriptor(0, 29))
    schema = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]}
    registered = await api.client.post(
        "/admin/v2/schemas/subjects/orders-value/versions", json={"schema": json.dumps(schema)}
    )
    assert registered.json()["created"] is True
    bound = await api.client.put(f"{TOPIC}/schema", json={"subject": "orders-value"})
    assert bound.status_code == 200, bound.text
    described = (await api.client.get(TOPIC)).json()
    assert described["schema_subject"] == "orders-value"
    assert described["subscriptions"][0]["backlog"] == 20 and described["backlog"] == 20
    # A binding is never moved silently to another subject.
    await api.client.post(
        "/admin/v2/schemas/subjects/other/versions", json={"schema": json.dumps(schema)}
    )
    problem_of(await api.client.put(f"{TOPIC}/schema", json={"subject": "other"}), 409)
    replaced = await api.client.put(f"{TOPIC}/schema", json={"subject": "other", "replace": True})
    assert replaced.json()["previous"] == "orders-value"


async def test_schemas_subjects_versions_ids_and_modes(api: Api) -> None:
    v1 = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]}
    breaking = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "int"}]}
    path = "/admin/v2/schemas/subjects/orders"
    await api.client.post(f"{path}/versions", json={"schema": json.dumps(v1)})
    assert (await api.client.get(f"{path}/versions/latest")).json()["version"] == 1
    assert (await api.client.get("/admin/v2/schemas/ids/1")).json()["subject"] == "orders"
    check = await api.client.post(f"{path}/check", json={"schema": json.dumps(breaking)})
    assert check.json()["compatible"] is False and check.json()["reasons"]
    refused = problem_of(
        await api.client.post(f"{path}/versions", json={"schema": json.dumps(breaking)}), 409
    )
    assert refused["title"] == "IncompatibleSchema"
    problem_of(await api.client.post(f"{path}/versions", json={"schema": "{"}), 400)
    mode = await api.client.get(f"{path}/compatibility")
    tag = mode.headers["etag"]
    problem_of(
        await api.client.put(
            f"{path}/compatibility", json={"mode": "None"}, headers={"If-Match": '"99"'}
        ),
        412,
    )
    changed = await api.client.put(
        f"{path}/compatibility", json={"mode": "None"}, headers={"If-Match": tag}
    )
    assert changed.json()["compatibility_mode"] == "None"
    problem_of(await api.client.put(f"{path}/compatibility", json={"mode": "Sideways"}), 400)
    problem_of(await api.client.get("/admin/v2/schemas/subjects/nope"), 404)


async def test_raw_keys_are_read_only(api: Api) -> None:
    await a_topic(api)
    page = (await api.client.get("/admin/v2/keys", params={"prefix": "/topics", "limit": 1})).json()
    assert page["more"] is True and len(page["keys"]) == 1
    one = await api.client.get("/admin/v2/key", params={"key": "/topics/default/orders"})
    assert one.json()["value"] == "0" and one.headers["etag"] == '"1"'
    problem_of(await api.client.get("/admin/v2/key", params={"key": "no/slash"}), 400)
    problem_of(await api.client.get("/admin/v2/key", params={"key": "/nothing"}), 404)
    assert (await api.client.put("/admin/v2/key", params={"key": "/x"})).status_code == 405


async def test_an_unavailable_store_is_503(tmp_path: Path) -> None:
    faulty = FaultyStore(MemoryStore())
    async with running(tmp_path, store=faulty) as api:
        faulty.fail("get", "/")
        refused = problem_of(await api.client.get("/admin/v2/key", params={"key": "/x"}), 503)
        assert refused["title"] == "Unavailable"


async def test_the_server_rides_out_a_store_that_fails_as_it_starts(tmp_path: Path) -> None:
    """The store does not answer the cache's load three times in a row (a store hung or
    failing over while the server starts): the start tries again and serves what the store
    holds. A store that stays away past the start's patience fails it with its error."""
    faulty = FaultyStore(MemoryStore())
    await faulty.put("/x", b"1")
    failing = faulty.fail("list", "/", times=3)
    server = AdminServer(faulty, ServerSettings(port=0))
    await server.start(patience=30)
    try:
        assert failing.times == 0
        async with httpx.AsyncClient(base_url=server.url.rstrip("/"), timeout=30) as client:
            found = await client.get("/admin/v2/key", params={"key": "/x"})
        assert found.status_code == 200, found.text
        assert server.cache.get("/x") is not None
    finally:
        await server.stop()
    faulty.fail("list", "/", times=None)
    refused = AdminServer(faulty, ServerSettings(port=0))
    with pytest.raises(Unavailable, match="injected fault"):
        await refused.start(patience=1.0)
    await refused.stop()


async def test_the_status_and_the_cluster_metrics(api: Api) -> None:
    await a_topic(api)
    await add_broker(api.store, BROKER)
    await add_broker(api.store, 7, DRAINING)
    await api.store.put(layout.leader(), encode(BROKER))
    await api.store.put(layout.leader_epoch(), encode(3))
    status = (await api.client.get("/admin/v2/status")).json()
    assert status["leader"] == {"broker_id": BROKER, "epoch": 3}
    assert status["live_brokers"] == 2 and status["store"]["healthy"] is True
    assert [row["topic"] for row in status["unassigned"]] == ["/default/orders"]
    metrics = (await api.client.get("/metrics")).text
    for line in (
        "metaplane_leader_epoch 3.0",
        "metaplane_brokers_live 2.0",
        "metaplane_unassigned_topics 1.0",
    ):
        assert line in metrics, line


async def test_the_last_analysis_is_shown_and_exported(tmp_path: Path) -> None:
    async with running(tmp_path) as bare:
        problem_of(await bare.client.get("/admin/v2/analysis"), 404)
        assert (await bare.client.get("/admin/v2/overview")).json()["analysis"] is None
    folder = tmp_path / "analysis"
    folder.mkdir()
    summary = {
        "snapshot": {"revision": 77},
        "audit": {"findings": 3, "severities": {"error": 1, "warning": 2}},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "report.html").write_text("<!DOCTYPE html><title>report</title>")
    async with running(tmp_path, store=MemoryStore(), analysis=folder) as api:
        assert (await api.client.get("/admin/v2/analysis")).json() == summary
        assert (await api.client.get("/admin/v2/overview")).json()["analysis"] == summary
        report = await api.client.get("/admin/v2/analysis/report.html")
        assert report.text.startswith("<!DOCTYPE html>")
        metrics = (await api.client.get("/metrics")).text
        assert 'metaplane_audit_findings{severity="error"} 1.0' in metrics
        assert 'metaplane_audit_findings{severity="warning"} 2.0' in metrics
        assert "metaplane_analysis_revision 77.0" in metrics


async def test_a_move_under_if_match_goes_through_the_one_guarded_move(api: Api) -> None:
    await a_topic(api)
    await add_broker(api.store, BROKER)
    await add_broker(api.store, 7)
    await add_broker(api.store, 8, DRAINING)
    await OwnershipManager(api.store).assign(TopicName("default", "orders"), BROKER)
    tag = (await api.client.get(TOPIC)).headers["etag"]
    before = await api.revision()
    refused = await api.client.post(
        f"{TOPIC}/move", json={"to_broker": 8}, headers={"If-Match": tag}
    )
    assert problem_of(refused, 409)["title"] == "BrokerNotActive"
    problem_of(
        await api.client.post(f"{TOPIC}/move", json={"to_broker": 9}, headers={"If-Match": tag}),
        404,
    )
    assert await api.revision() == before
    moved = await api.client.post(f"{TOPIC}/move", json={"to_broker": 7}, headers={"If-Match": tag})
    assert moved.status_code == 200, moved.text
    waiting = (await api.client.get(TOPIC)).json()["waiting"]
    assert waiting == {"reason": "unload", "from_broker": BROKER, "to_broker": 7}


FROZEN_CACHE = """
import asyncio, gc
from metaplane.admin._heap import freeze_heap
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.store import MemoryStore, Put

async def main():
    async with MemoryStore() as store:
        for first in range(0, 2000, 100):
            await store.txn((), [Put(f"/app/k{i}", b"1") for i in range(first, first + 100)])
        server = AdminServer(store, ServerSettings(port=0))
        await server.start()
        cached = server.cache.list("/app")
        frozen = freeze_heap()
        tracked = {id(o) for o in gc.get_objects()}
        print(len(cached), frozen, sum(id(entry) in tracked for entry in cached))
        await server.stop()

asyncio.run(main())
"""


def test_the_servers_cache_is_left_out_of_later_collections() -> None:
    """What `serve` and `standalone` do once the cache is loaded: the cache's objects leave
    the collector's generations (a full collection would walk them all, and the request it
    falls on wait for it). In a process of its own: freezing is for the whole heap."""
    done = subprocess.run(
        [sys.executable, "-c", FROZEN_CACHE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    cached, frozen, still_tracked = map(int, done.stdout.split())
    assert cached == 2000 and frozen > cached
    assert still_tracked == 0
