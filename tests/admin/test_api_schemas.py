"""The registry's refusals through the HTTP API: each typed error has its status (a version
still referenced, a subject still bound and a topic bound elsewhere are conflicts, 409; a
compatibility changed since its ETag was read is 412), and nothing is written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from metaplane.admin._errors import http_status
from metaplane.layout import TopicName
from metaplane.schema import (
    RegistryConflict,
    SchemaReferenced,
    SchemaRegistry,
    SubjectInUse,
    TopicAlreadyBound,
)
from metaplane.store import BadVersion
from tests.admin.api import Api, running
from tests.admin.test_api import problem_of

SUBJECTS = "/admin/v2/schemas/subjects"
TOPIC = "/admin/v2/topics/default/orders"
MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    "message Order { common.Money total = 1; }\n"
)
RECORD = json.dumps({"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]})


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with running(tmp_path) as found:
        yield found


def test_the_registry_s_refusals_map_to_their_statuses() -> None:
    assert http_status(SchemaReferenced("money", 1, ["orders version 1"])) == 409
    assert http_status(SubjectInUse("money", ["/default/orders"])) == 409
    assert http_status(TopicAlreadyBound("/k", "/default/orders", "a", "b")) == 409
    assert http_status(RegistryConflict("register money", 100)) == 409
    assert http_status(BadVersion("/schemas/money/metadata", 1, 2)) == 412


async def test_a_referenced_version_is_a_conflict_and_stays(api: Api) -> None:
    registry = SchemaRegistry(api.store)
    await registry.register("money", "proto", MONEY)
    await registry.register("orders", "proto", ORDER, references=["common/money.proto=money:1"])
    before = await api.revision()
    for path in (f"{SUBJECTS}/money", f"{SUBJECTS}/money?version=1"):
        refused = problem_of(await api.client.delete(path), 409)
        assert refused["title"] == "SchemaReferenced"
        assert "referenced by orders version 1" in str(refused["detail"])
    assert await api.revision() == before
    assert (await api.client.delete(f"{SUBJECTS}/orders")).status_code == 200
    assert (await api.client.delete(f"{SUBJECTS}/money")).status_code == 200


async def test_a_topic_bound_elsewhere_is_a_conflict_unless_replaced(api: Api) -> None:
    assert (await api.client.put("/admin/v2/namespaces/default")).status_code == 201
    assert (await api.client.put(TOPIC)).status_code == 201
    for subject in ("orders-value", "other"):
        registered = await api.client.post(
            f"{SUBJECTS}/{subject}/versions", json={"schema": RECORD}
        )
        assert registered.status_code == 200, registered.text
    bound = await api.client.put(f"{TOPIC}/schema", json={"subject": "orders-value"})
    assert bound.json()["previous"] is None
    before = await api.revision()
    refused = problem_of(await api.client.put(f"{TOPIC}/schema", json={"subject": "other"}), 409)
    assert refused["title"] == "TopicAlreadyBound"
    assert await api.revision() == before
    assert await SchemaRegistry(api.store).topic_subject(TopicName("default", "orders")) == (
        "orders-value"
    )
    deleting = problem_of(await api.client.delete(f"{SUBJECTS}/orders-value"), 409)
    assert deleting["title"] == "SubjectInUse"


async def test_a_compatibility_changed_since_its_etag_is_412_and_unchanged(api: Api) -> None:
    await api.client.post(f"{SUBJECTS}/orders/versions", json={"schema": RECORD})
    path = f"{SUBJECTS}/orders/compatibility"
    tag = (await api.client.get(path)).headers["etag"]
    await SchemaRegistry(api.store).set_mode("orders", "Full")  # another writer came first
    before = await api.revision()
    stale = await api.client.put(path, json={"mode": "None"}, headers={"If-Match": tag})
    assert problem_of(stale, 412)["title"] == "BadVersion"
    assert await api.revision() == before
    assert (await api.client.get(path)).json()["compatibility_mode"] == "Full"
    fresh = (await api.client.get(path)).headers["etag"]
    changed = await api.client.put(path, json={"mode": "None"}, headers={"If-Match": fresh})
    assert changed.json()["compatibility_mode"] == "None"
