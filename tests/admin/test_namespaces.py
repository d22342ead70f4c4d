"""`metaplane namespaces create | list | policy | delete` on sqlite, etcd, zk: policies from
options and files, a change with a version compare, and a delete refused while topics remain."""

from __future__ import annotations

import json
from pathlib import Path

from metaplane.layout import TopicName
from metaplane.resources import NamespaceManager, NamespacePolicy, encode
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, add_topic

pytestmark = BACKENDS_WITH_URL

DEFAULTS = json.loads(encode(NamespacePolicy()))


def stored_policy(cli: Cli, namespace: str) -> NamespacePolicy:
    found = cli.do(lambda store: NamespaceManager(store).policy(namespace))
    policy: NamespacePolicy = found.value
    return policy


def test_create_with_limits_from_options_and_a_file(cli: Cli, tmp_path: Path) -> None:
    created = cli("namespaces", "create", "default", "--max-producers-per-topic", "3")
    assert "created namespace default at revision" in created.stdout
    assert stored_policy(cli, "default") == NamespacePolicy(max_producers_per_topic=3)
    policy_file = tmp_path / "policy.json"
    policy_file.write_text('{"max_publish_rate": 100, "max_message_size": 1024}')
    document = cli.json(
        "namespaces", "create", "billing", "--policy-file", str(policy_file),
        "--max-message-size", "2048",
    )  # fmt: skip
    assert document["policy"]["max_message_size"] == 2048
    assert stored_policy(cli, "billing") == NamespacePolicy(
        max_publish_rate=100, max_message_size=2048
    )


def test_create_refusals(cli: Cli, tmp_path: Path) -> None:
    cli("namespaces", "create", "default")
    assert cli.error("namespaces", "create", "default") == (
        "error: namespace 'default' already exists"
    )
    assert "invalid namespace name 'no way'" in cli.error("namespaces", "create", "no way")
    broken = tmp_path / "broken.json"
    broken.write_text('{"max_publish_rate": ')
    error = cli.error("namespaces", "create", "billing", "--policy-file", str(broken))
    assert error.startswith(f"error: {broken}: malformed NamespacePolicy value")
    negative = tmp_path / "negative.json"
    negative.write_text('{"max_publish_rate": -1}')
    assert "malformed" in cli.error("namespaces", "create", "x", "--policy-file", str(negative))
    assert "cannot read" in cli.error(
        "namespaces", "create", "x", "--policy-file", str(tmp_path / "missing.json")
    )
    assert cli.json("namespaces", "list") == [
        {"namespace": "default", "topics": 0, "policy": DEFAULTS}
    ]


def test_list_counts_the_topics_of_each_namespace(cli: Cli) -> None:
    cli("namespaces", "create", "empty")
    cli.do(lambda store: add_topic(store, TopicName("default", "orders")))
    cli.do(lambda store: add_topic(store, TopicName("default", "logs")))
    listed = cli.json("namespaces", "list")
    assert [(row["namespace"], row["topics"]) for row in listed] == [("default", 2), ("empty", 0)]
    table = cli("namespaces", "list").stdout
    assert "2 namespace(s)" in table and "message_size=10485760" in table
    cli("kv", "put", "/namespaces/empty/policy", "[]", "--raw")
    assert cli.error("namespaces", "list").startswith(
        "error: /namespaces/empty/policy: malformed NamespacePolicy value"
    )


def test_policy_shows_and_changes_fields_over_a_version(cli: Cli) -> None:
    cli("namespaces", "create", "default")
    shown = cli.json("namespaces", "policy", "default")
    assert (shown["version"], shown["revision"], shown["policy"]) == (1, None, DEFAULTS)
    assert "policy version 1" in cli("namespaces", "policy", "default").stdout
    changed = cli.json(
        "namespaces", "policy", "default", "--set", "max_publish_rate=50",
        "--set", "max-consumers-per-topic=4", "--expect", "1",
    )  # fmt: skip
    assert changed["version"] == 2 and changed["revision"] > 0
    assert stored_policy(cli, "default") == NamespacePolicy(
        max_publish_rate=50, max_consumers_per_topic=4
    )
    stale = cli.error(
        "namespaces", "policy", "default", "--set", "max_publish_rate=1", "--expect", "1"
    )
    assert stale == "error: /namespaces/default/policy: expected version 1, found 2"
    assert stored_policy(cli, "default").max_publish_rate == 50


def test_policy_refusals(cli: Cli) -> None:
    cli("namespaces", "create", "default")
    assert "no such field" in cli.error(
        "namespaces", "policy", "default", "--set", "speed=1", code=2
    )
    assert "whole number" in cli.error(
        "namespaces", "policy", "default", "--set", "max_publish_rate=fast", code=2
    )
    assert cli.error("namespaces", "policy", "nope") == "error: namespace 'nope' does not exist"


def test_delete_is_refused_while_topics_remain(cli: Cli) -> None:
    cli.do(lambda store: add_topic(store, TopicName("default", "orders")))
    cli("namespaces", "create", "empty")
    assert cli.error("namespaces", "delete", "default", "-y") == (
        "error: namespace 'default' still has topics; delete them first"
    )
    cli("namespaces", "delete", "empty", input="n\n", code=1)
    assert cli.json("namespaces", "delete", "empty", "-y")["revision"] > 0
    assert [row["namespace"] for row in cli.json("namespaces", "list")] == ["default"]
    assert "does not exist" in cli.error("namespaces", "delete", "empty", "-y")
