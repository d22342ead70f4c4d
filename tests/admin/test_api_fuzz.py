"""Fuzzed request bodies on every write of the HTTP API: each body that is not of its
endpoint's type (any JSON, or bytes that are no JSON at all) is refused with a 4xx problem,
and the store's revision shows that nothing was written."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from metaplane.admin import _api
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.layout import TopicName
from metaplane.resources import NamespaceManager, SubscriptionManager, TopicManager
from metaplane.store import SqliteStore
from tests.resources.samples import subscription

TOPIC = "/admin/v2/topics/default/orders"
WRITES: list[tuple[str, str, type[Any]]] = [
    ("POST", "/admin/v2/brokers/1/drain", _api.ReasonBody),
    ("PUT", "/admin/v2/namespaces/fuzzed", _api.PolicyBody),
    ("PUT", "/admin/v2/namespaces/default/policy", _api.PolicyBody),
    ("PUT", "/admin/v2/topics/default/fuzzed", _api.TopicBody),
    ("POST", f"{TOPIC}/move", _api.MoveBody),
    ("PUT", f"{TOPIC}/subscriptions/fuzzed", _api.SubscriptionBody),
    ("POST", f"{TOPIC}/subscriptions/billing/reset", _api.ResetBody),
    ("POST", f"{TOPIC}/subscriptions/billing/skip", _api.SkipBody),
    ("POST", "/admin/v2/schemas/subjects/fuzzed/versions", _api.SchemaBody),
    ("POST", "/admin/v2/schemas/subjects/fuzzed/check", _api.CheckBody),
    ("PUT", "/admin/v2/schemas/subjects/fuzzed/compatibility", _api.ModeBody),
    ("PUT", f"{TOPIC}/schema", _api.BindBody),
]

FIELDS = [
    "reason", "partitions", "delivery", "offset", "count", "schema", "schema_type", "mode",
    "subject", "type", "to_broker", "tags", "max_publish_rate", "replace",
]  # fmt: skip
"""Field names of the bodies, so that fuzzed objects often come close to valid ones."""

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "reason",
                    "partitions",
                    "delivery",
                    "offset",
                    "count",
                    "schema",
                    "schema_type",
                    "mode",
                    "subject",
                    "type",
                    "to_broker",
                    "tags",
                    "max_publish_rate",
                    "replace",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)


def valid(body: object, kind: type[Any]) -> bool:
    """Whether `body` is of the endpoint's type (then it is no fuzz: it may be written)."""
    try:
        msgspec.convert(body, kind | None, strict=True)
    except msgspec.ValidationError:
        return False
    return True


class Background:
    """An admin server running in a thread of its own, for a synchronous test."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    async def start(self) -> None:
        self.store = await SqliteStore.open(self.folder / "store.db")
        await NamespaceManager(self.store).create("default")
        topic = TopicName("default", "orders")
        await TopicManager(self.store).create(topic)
        await SubscriptionManager(self.store).create(topic, subscription("billing"))
        self.server = AdminServer(self.store, ServerSettings(port=0))
        await self.server.start()
        self.url = self.server.url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, timeout=30)

    async def stop(self) -> None:
        self.client.close()
        await self.server.stop()
        await self.store.aclose()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Background]:
    background = Background(tmp_path_factory.mktemp("fuzz"))
    background.thread.start()
    background.run(background.start())
    yield background
    background.run(background.stop())
    background.loop.call_soon_threadsafe(background.loop.stop)
    background.thread.join(timeout=10)
    background.loop.close()


def revision(client: httpx.Client) -> int:
    found: int = client.get("/admin/v2/keys", params={"limit": 1}).json()["revision"]
    return found


def refused_without_writing(client: httpx.Client, method: str, path: str, content: bytes) -> None:
    before = revision(client)
    response = client.request(
        method, path, content=content, headers={"content-type": "application/json"}
    )
    assert 400 <= response.status_code < 500, (path, content, response.text)
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text
    assert revision(client) == before, (path, content)


@pytest.mark.parametrize(("method", "path", "kind"), WRITES, ids=[w[1] for w in WRITES])
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=JSON)
def test_a_fuzzed_json_body_is_refused_and_writes_nothing(
    server: Background, method: str, path: str, kind: type[Any], body: object
) -> None:
    if valid(body, kind):
        return  # a body of the endpoint's type: no fuzz (hypothesis rarely makes one)
    refused_without_writing(server.client, method, path, json.dumps(body).encode())


@pytest.mark.parametrize(("method", "path", "kind"), WRITES, ids=[w[1] for w in WRITES])
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.binary(min_size=1, max_size=64))
@example(content=b'"\x80"')  # JSON in form, a string with a byte that is not UTF-8: was a 500
@example(content=b'{"reason": "\xff\xfe"}')
def test_a_body_that_is_no_json_is_refused_and_writes_nothing(
    server: Background, method: str, path: str, kind: type[Any], content: bytes
) -> None:
    try:
        json.loads(content)
        return  # valid JSON is the other test's
    except ValueError:
        pass
    refused_without_writing(server.client, method, path, content)


@pytest.mark.parametrize(("method", "path", "kind"), WRITES, ids=[w[1] for w in WRITES])
def test_a_json_body_that_is_not_utf8_is_a_bad_request(
    server: Background, method: str, path: str, kind: type[Any]
) -> None:
    before = revision(server.client)
    response = server.client.request(
        method, path, content=b'{"x": "caf\xe9"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert "not UTF-8" in response.json()["detail"]
    assert revision(server.client) == before
