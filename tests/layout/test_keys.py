"""Every key of seed 001 (and the legacy ones of seeds 000/003) built exactly, parsed back,
and the prefixes components watch; build → parse → build for every kind."""

from __future__ import annotations

import pytest
from hypothesis import given

from metaplane import layout
from metaplane.layout import KeyKind, TopicName, parse

from .strategies import BUILDERS, Fields, build, keys

RELIABLE = TopicName("default", "reliable_topic")
TRADES = TopicName("markets", "trade-events")

# The topic fields of the seeds' examples.
R = {"namespace": "default", "topic": "reliable_topic"}
M = {"namespace": "markets", "topic": "trade-events"}
BROKER = 625722408599041316
OWNER = 13308604176970018988
STORAGE = "/danube-data/storage/topics/default/reliable_topic"

# (key as seed 001 writes it, its kind, its fields)
SEED_001 = [
    ("/cluster/MY_CLUSTER", KeyKind.CLUSTER_NAME, {"cluster_name": "MY_CLUSTER"}),
    (f"/cluster/register/{BROKER}", KeyKind.BROKER_REGISTRATION, {"broker_id": BROKER}),
    (f"/cluster/brokers/{BROKER}/state", KeyKind.BROKER_STATE, {"broker_id": BROKER}),
    (
        "/cluster/brokers/13308604176970018988/default/reliable_topic",
        KeyKind.ASSIGNMENT,
        {"broker_id": OWNER, **R},
    ),
    ("/cluster/unassigned/default/reliable_topic", KeyKind.UNASSIGNED, R),
    ("/cluster/load/13308604176970018988", KeyKind.LOAD_REPORT, {"broker_id": OWNER}),
    ("/cluster/leader", KeyKind.LEADER, {}),
    ("/namespaces/default/policy", KeyKind.NAMESPACE_POLICY, {"namespace": "default"}),
    ("/namespaces/default/topics/default/reliable_topic", KeyKind.NAMESPACE_TOPIC, R),
    ("/topics/default/reliable_topic", KeyKind.TOPIC_ROOT, R),
    ("/topics/default/reliable_topic/delivery", KeyKind.TOPIC_DELIVERY, R),
    (
        "/topics/default/reliable_topic/producers/13940288943180594845",
        KeyKind.PRODUCER,
        {**R, "producer_id": 13940288943180594845},
    ),
    (
        "/topics/default/reliable_topic/subscriptions/subs_reliable",
        KeyKind.SUBSCRIPTION,
        {**R, "subscription": "subs_reliable"},
    ),
    (
        "/topics/default/reliable_topic/subscriptions/subs_reliable/cursor",
        KeyKind.CURSOR,
        {**R, "subscription": "subs_reliable"},
    ),
    ("/schemas/_global/next_schema_id", KeyKind.NEXT_SCHEMA_ID, {}),
    ("/schemas/product-catalog/metadata", KeyKind.SCHEMA_METADATA, {"subject": "product-catalog"}),
    (
        "/schemas/product-catalog/versions/1",
        KeyKind.SCHEMA_VERSION,
        {"subject": "product-catalog", "version": 1},
    ),
    ("/schemas/_index/by_id/1", KeyKind.SCHEMA_BY_ID, {"schema_id": 1}),
    (f"{STORAGE}/objects/00000000000000000000", KeyKind.STORAGE_OBJECT, {**R, "offset": 0}),
    (f"{STORAGE}/objects/00000000000000000030", KeyKind.STORAGE_OBJECT, {**R, "offset": 30}),
    (f"{STORAGE}/objects/cur", KeyKind.STORAGE_CUR, R),
    (f"{STORAGE}/state", KeyKind.STORAGE_STATE, R),
    ("/topics/default/my_topic", KeyKind.TOPIC_ROOT, {"namespace": "default", "topic": "my_topic"}),
]

# Beyond seed 001: Danube's binding of a topic to its schema subject (its source writes it),
# and ours.
BEYOND_SEED = [
    ("/topics/default/reliable_topic/schema_subject", KeyKind.TOPIC_SCHEMA_SUBJECT, R),
    ("/schemas/_global/compatibility_mode", KeyKind.DEFAULT_COMPATIBILITY_MODE, {}),
    ("/schemas/orders.v1/references", KeyKind.SCHEMA_REFERENCES, {"subject": "orders.v1"}),
    ("/schemas/money/referenced_by", KeyKind.SCHEMA_REFERENCED_BY, {"subject": "money"}),
    ("/schemas/events/config", KeyKind.SCHEMA_CONFIG, {"subject": "events"}),
    ("/schemas/_global/config", KeyKind.DEFAULT_SCHEMA_CONFIG, {}),
    ("/cluster/leader_epoch", KeyKind.LEADER_EPOCH, {}),
    (
        "/cluster/locks/rebalance/13940288943180594845",
        KeyKind.LOCK,
        {"lock_name": "rebalance", "holder": 13940288943180594845},
    ),
]

# Seeds 000 and 003 (Danube's older "Resources mapping").
LEGACY = [
    ("/cluster/cluster-name", KeyKind.LEGACY_CLUSTER_NAME, {}),
    ("/cluster/load_balance", KeyKind.LEGACY_LOAD_BALANCE, {}),
    (
        "/cluster/brokers/1122334455/markets/trade-events",
        KeyKind.ASSIGNMENT,
        {"broker_id": 1122334455, **M},
    ),
    ("/namespaces/markets/policy", KeyKind.NAMESPACE_POLICY, {"namespace": "markets"}),
    ("/namespaces/markets/topics/markets/trade-events", KeyKind.NAMESPACE_TOPIC, M),
    ("/topics/markets/trade-events/policy", KeyKind.LEGACY_TOPIC_POLICY, M),
    ("/topics/markets/trade-events/schema", KeyKind.LEGACY_TOPIC_SCHEMA, M),
    (
        "/topics/markets/trade-events/producers/1122334455",
        KeyKind.PRODUCER,
        {**M, "producer_id": 1122334455},
    ),
    (
        "/topics/markets/trade-events/subscriptions/my_subscription",
        KeyKind.SUBSCRIPTION,
        {**M, "subscription": "my_subscription"},
    ),
    (
        "/topics/markets/trade-events-part-1/policy",
        KeyKind.LEGACY_TOPIC_POLICY,
        {"namespace": "markets", "topic": "trade-events-part-1"},
    ),
    (
        "/subscriptions/my_subscription/23232323",
        KeyKind.LEGACY_CONSUMER,
        {"subscription": "my_subscription", "consumer_id": 23232323},
    ),
]


@pytest.mark.parametrize(("key", "kind", "fields"), SEED_001 + BEYOND_SEED + LEGACY)
def test_seed_keys_parse_and_build_back(key: str, kind: KeyKind, fields: Fields) -> None:
    parsed = parse(key)
    assert parsed.kind is kind
    assert layout.kind_of(key) is kind
    assert parsed.fields() == fields
    assert parsed.key == key
    assert build(kind, fields) == key


def test_every_kind_is_covered_by_the_seed_examples() -> None:
    covered = {kind for _, kind, _ in SEED_001 + BEYOND_SEED + LEGACY}
    assert covered == set(KeyKind)
    assert layout.leader_epoch() == "/cluster/leader_epoch"


def test_the_registry_s_own_keys_do_not_clash_with_subjects_or_topic_keys() -> None:
    # `_global` is no subject, so its compatibility mode is not a subject's metadata …
    with pytest.raises(layout.ReservedName):
        layout.schema_metadata("_global")
    assert parse("/schemas/compatibility_mode/metadata").subject == "compatibility_mode"
    # … nor are its global settings a subject's (the key with more literal segments wins) …
    assert parse(layout.default_schema_config()).kind is KeyKind.DEFAULT_SCHEMA_CONFIG
    for builder in (layout.schema_config, layout.schema_references, layout.schema_referenced_by):
        with pytest.raises(layout.ReservedName):
            builder("_global")
        assert parse(builder("config")).subject == "config"
        assert builder("orders").startswith(layout.subject_prefix("orders") + "/")
    # … and a binding sits beside the topic's other keys, not under a subscription.
    binding = layout.topic_schema_subject(RELIABLE)
    assert binding.startswith(layout.topic_root(RELIABLE) + "/")
    assert parse(binding).topic_name == RELIABLE


def test_legacy_kinds() -> None:
    legacy = {kind for kind in KeyKind if kind.legacy}
    assert {kind for _, kind, _ in LEGACY if kind.legacy} == legacy
    assert not any(kind.legacy for _, kind, _ in SEED_001 + BEYOND_SEED)


def test_topic_name_of_a_parsed_key() -> None:
    assert parse(layout.cursor(RELIABLE, "s")).topic_name == RELIABLE
    assert parse(layout.leader()).topic_name is None
    assert parse(layout.legacy_topic_policy(TRADES.partition(1))).topic_name == TRADES.partition(1)


@given(keys())
def test_build_parse_build(case: tuple[KeyKind, Fields, str]) -> None:
    kind, fields, key = case
    parsed = parse(key)
    assert parsed.kind is kind
    assert layout.kind_of(key) is kind
    assert parsed.fields() == fields
    assert build(kind, parsed.fields()) == key
    assert parsed.key == key


@given(keys())
def test_every_key_is_a_valid_store_key_within_4_kib(case: tuple[KeyKind, Fields, str]) -> None:
    key = case[2]
    assert layout.parse(key)  # parse checks the store's key rules first
    assert len(key.encode()) <= 4096


def test_the_longest_keys_fit_in_4_kib() -> None:
    topic = TopicName("n" * 255, "t" * 255)
    longest = [
        layout.namespace_topic(topic),
        layout.storage_object(topic, layout.U64_MAX),
        layout.cursor(topic, "s" * 255),
        layout.assignment(layout.U64_MAX, topic),
    ]
    assert all(parse(key).key == key for key in longest)
    assert max(len(key) for key in longest) < 1024


def test_builders_cover_every_kind() -> None:
    assert set(BUILDERS) == set(KeyKind)


# Prefixes -----------------------------------------------------------------------------------


def test_prefixes_the_seed_watches_and_lists() -> None:
    # "Common Patterns" and "Debugging Tips" of seed 001 (the trailing '/' is the store's
    # segment-aware prefix rule, not part of our prefix).
    assert layout.broker_prefix(13308604176970018988) == "/cluster/brokers/13308604176970018988"
    assert layout.unassigned_prefix() == "/cluster/unassigned"
    assert layout.schemas_prefix() == "/schemas"
    assert layout.brokers_prefix() == "/cluster/brokers"
    objects = layout.storage_objects_prefix(TopicName("default", "my_topic"))
    assert objects == "/danube-data/storage/topics/default/my_topic/objects"
    assert layout.schema_versions_prefix("product-catalog") == "/schemas/product-catalog/versions"


def test_every_prefix() -> None:
    assert layout.cluster_prefix() == "/cluster"
    assert layout.registrations_prefix() == "/cluster/register"
    assert layout.load_reports_prefix() == "/cluster/load"
    assert layout.namespaces_prefix() == "/namespaces"
    assert layout.namespace_prefix("default") == "/namespaces/default"
    assert layout.namespace_topics_prefix("default") == "/namespaces/default/topics"
    assert layout.topics_prefix() == "/topics"
    assert layout.topics_prefix("default") == "/topics/default"
    assert layout.producers_prefix(RELIABLE) == "/topics/default/reliable_topic/producers"
    assert layout.subscriptions_prefix(RELIABLE) == "/topics/default/reliable_topic/subscriptions"
    assert layout.subject_prefix("product-catalog") == "/schemas/product-catalog"
    assert layout.schema_index_prefix() == "/schemas/_index/by_id"
    assert layout.storage_prefix() == "/danube-data/storage/topics"
    storage = "/danube-data/storage/topics/default/reliable_topic"
    assert layout.storage_topic_prefix(RELIABLE) == storage
    assert layout.legacy_subscriptions_prefix() == "/subscriptions"
    assert layout.legacy_subscription_prefix("my_subscription") == "/subscriptions/my_subscription"


@given(keys())
def test_a_topic_root_is_the_prefix_of_all_the_topic_s_keys(
    case: tuple[KeyKind, Fields, str],
) -> None:
    _, fields, key = case
    if key.startswith("/topics/"):
        root = layout.topic_root(TopicName(fields["namespace"], fields["topic"]))
        assert key == root or key.startswith(root + "/")


def test_prefix_arguments_are_checked() -> None:
    with pytest.raises(layout.InvalidNumber):
        layout.broker_prefix(-1)
    with pytest.raises(layout.ReservedName):
        layout.subject_prefix("_index")
    with pytest.raises(layout.InvalidName):
        layout.topics_prefix("a/b")


def test_builders_take_a_topic_name_not_a_path() -> None:
    with pytest.raises(TypeError, match="a topic is a TopicName, not str"):
        layout.topic_root("/default/t")  # type: ignore[arg-type]
