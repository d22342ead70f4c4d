"""Typed values: every JSON example of seed 001 decodes and encodes back to the same document
(same JSON, same key order, same bytes as serde_json's compact form); u64 ids survive; bad
input gives one typed error that says what is wrong."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaplane.layout import U64_MAX, InvalidNumber, KeyKind
from metaplane.resources import (
    U64,
    VALUE_TYPES,
    Avro,
    AvroSchema,
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    CompatibilityMode,
    CurrentObject,
    Delivery,
    JsonSchema,
    JsonSchemaDefinition,
    LoadReport,
    MalformedValue,
    NamespacePolicy,
    ObjectDescriptor,
    PrimitiveSchema,
    ProducerAccessMode,
    ProducerRegistration,
    Protobuf,
    ProtobufDefinition,
    ResourceUsage,
    SchemaConfig,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaReferenceEntry,
    SchemaReferrer,
    SchemaVersion,
    SealedState,
    SubscriptionMetadata,
    SubscriptionType,
    UnassignedMarker,
    decode,
    encode,
)
from metaplane.store import InvalidRequest, InvalidValue, MetadataError

# Seed 001's examples, as the seed prints them. Where the seed abbreviates (`{...}`, a version
# without its required fields) the gap is filled in and said so.
SEED_VALUES: list[tuple[str, KeyKind, str]] = [
    ("1.1 cluster name", KeyKind.CLUSTER_NAME, "null"),
    (
        "1.2 broker registration",
        KeyKind.BROKER_REGISTRATION,
        """{
  "admin_addr": "http://0.0.0.0:50051",
  "advertised_addr": "0.0.0.0:6650",
  "broker_addr": "http://0.0.0.0:6650",
  "prom_exporter": "0.0.0.0:9040"
}""",
    ),
    ("1.3 broker state", KeyKind.BROKER_STATE, '{\n  "mode": "active",\n  "reason": "boot"\n}'),
    ("1.4 assignment", KeyKind.ASSIGNMENT, "null"),
    ("1.5 unassigned (new topic)", KeyKind.UNASSIGNED, "null"),
    (
        "1.5 unassigned (unload)",
        KeyKind.UNASSIGNED,
        '{\n  "reason": "unload",\n  "from_broker": 12549595323552083708\n}',
    ),
    (
        "1.6 load report",
        KeyKind.LOAD_REPORT,
        """{
  "resources_usage": [
    {"resource": "CPU", "usage": 30},
    {"resource": "Memory", "usage": 30}
  ],
  "topic_list": ["/default/reliable_topic"],
  "topics_len": 1
}""",
    ),
    ("1.7 leader", KeyKind.LEADER, "625722408599041316"),
    (
        "2.1 namespace policy",
        KeyKind.NAMESPACE_POLICY,
        """{
  "max_consumers_per_subscription": 0,
  "max_consumers_per_topic": 0,
  "max_message_size": 10485760,
  "max_producers_per_topic": 0,
  "max_publish_rate": 0,
  "max_subscription_dispatch_rate": 0,
  "max_subscriptions_per_topic": 0
}""",
    ),
    ("2.2 topic registry", KeyKind.NAMESPACE_TOPIC, "null"),
    ("3.1 topic root", KeyKind.TOPIC_ROOT, "0"),
    ("3.2 delivery", KeyKind.TOPIC_DELIVERY, '"Reliable"'),
    (
        "3.3 producer",
        KeyKind.PRODUCER,
        """{
  "access_mode": 0,
  "producer_id": 13940288943180594845,
  "producer_name": "prod_json_reliable",
  "status": true,
  "topic_name": "/default/reliable_topic"
}""",
    ),
    (
        "3.4 subscription",
        KeyKind.SUBSCRIPTION,
        """{
  "consumer_id": null,
  "consumer_name": "cons_reliable",
  "subscription_name": "subs_reliable",
  "subscription_type": 0
}""",
    ),
    ("3.5 cursor", KeyKind.CURSOR, "13"),
    ("4.1 next schema id", KeyKind.NEXT_SCHEMA_ID, "2"),
    # 4.2 abbreviates: `{"Avro": {...}}` is filled with 4.3's body; the first version is in
    # 4.3's field order (4.2 swaps schema_def and is_deprecated); the second version lacks
    # created_by, is_deprecated and tags, which Danube's SchemaVersion requires: filled in.
    (
        "4.2 schema metadata",
        KeyKind.SCHEMA_METADATA,
        """{
  "compatibility_mode": "Backward",
  "created_at": 1768728611,
  "created_by": "danube-client",
  "id": 1,
  "latest_version": 2,
  "subject": "product-catalog",
  "topics_using": [],
  "updated_at": 1768728613,
  "versions": [
    {
      "created_at": 1768728611,
      "created_by": "danube-client",
      "version": 1,
      "fingerprint": "sha256:270e3390...",
      "is_deprecated": false,
      "schema_def": {"Avro": {"fingerprint": "sha256:270e3390...", "raw_schema": "{}"}},
      "tags": []
    },
    {
      "created_at": 1768728613,
      "created_by": "danube-client",
      "version": 2,
      "fingerprint": "sha256:d6c3da89...",
      "is_deprecated": false,
      "schema_def": {"Avro": {"fingerprint": "sha256:d6c3da89...", "raw_schema": "{}"}},
      "tags": []
    }
  ]
}""",
    ),
    (
        "4.3 schema version",
        KeyKind.SCHEMA_VERSION,
        r"""{
  "created_at": 1768728611,
  "created_by": "danube-client",
  "version": 1,
  "fingerprint": "sha256:270e3390980bc143...",
  "is_deprecated": false,
  "schema_def": {
    "Avro": {
      "fingerprint": "sha256:270e3390...",
      "raw_schema": "{\n  \"type\": \"record\",\n  \"name\": \"Product\",\n  ..."
    }
  },
  "tags": []
}""",
    ),
    (
        "4.4 schema id index",
        KeyKind.SCHEMA_BY_ID,
        '{\n  "schema_id": 1,\n  "subject": "product-catalog"\n}',
    ),
    (
        "5.1 object descriptor",
        KeyKind.STORAGE_OBJECT,
        """{
  "completed": true,
  "created_at": 1768728599,
  "end_offset": 29,
  "etag": null,
  "object_id": "data-0-29.dnb1",
  "offset_index": [[0, 0]],
  "size": 7164,
  "start_offset": 0
}""",
    ),
    ("5.2 current object", KeyKind.STORAGE_CUR, '{\n  "start": "00000000000000000030"\n}'),
    (
        "5.3 sealed state",
        KeyKind.STORAGE_STATE,
        """{
  "sealed": true,
  "last_committed_offset": 21,
  "broker_id": 10285063371164059634,
  "timestamp": 1768625254
}""",
    ),
]  # fmt: skip


def compact(text: str) -> bytes:
    """The document as serde_json writes it: no spaces, same key order, UTF-8."""
    parsed = json.loads(text)
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()


def ordered(data: bytes) -> Any:
    """The parsed JSON with every object as its list of (key, value) pairs, so that key order
    takes part in comparisons."""
    return json.loads(data, object_pairs_hook=list)


@pytest.mark.parametrize(("section", "kind", "text"), SEED_VALUES, ids=[s[0] for s in SEED_VALUES])
def test_seed_values_decode_and_encode_back(section: str, kind: KeyKind, text: str) -> None:
    document = compact(text)
    value = decode(kind, document)
    encoded = encode(value)
    assert ordered(encoded) == ordered(document)
    assert encoded == document


def test_every_kind_of_seed_001_has_an_example() -> None:
    covered = {kind for _, kind, _ in SEED_VALUES}
    beyond_seed = {
        KeyKind.LEADER_EPOCH,
        KeyKind.TOPIC_SCHEMA_SUBJECT,
        KeyKind.DEFAULT_COMPATIBILITY_MODE,
        KeyKind.LOCK,
        KeyKind.SCHEMA_REFERENCES,
        KeyKind.SCHEMA_REFERENCED_BY,
        KeyKind.SCHEMA_CONFIG,
        KeyKind.DEFAULT_SCHEMA_CONFIG,
    }
    seed_kinds = {kind for kind in KeyKind if not kind.legacy} - beyond_seed
    assert covered == seed_kinds


def test_seed_values_hold_what_the_seed_says() -> None:
    examples = {section: decode(kind, compact(text)) for section, kind, text in SEED_VALUES}
    producer = examples["3.3 producer"]
    assert isinstance(producer, ProducerRegistration)
    assert producer.producer_id == 13940288943180594845
    assert producer.access_mode is ProducerAccessMode.SHARED
    subscription = examples["3.4 subscription"]
    assert isinstance(subscription, SubscriptionMetadata)
    assert subscription.consumer_id is None
    assert subscription.subscription_type is SubscriptionType.EXCLUSIVE
    assert examples["1.3 broker state"] == BrokerState(mode=BrokerMode.ACTIVE, reason="boot")
    assert examples["1.5 unassigned (unload)"] == UnassignedMarker(
        reason="unload", from_broker=12549595323552083708
    )
    assert examples["1.5 unassigned (new topic)"] is None
    assert examples["3.2 delivery"] is Delivery.RELIABLE
    assert examples["5.2 current object"] == CurrentObject.at(30)
    sealed = examples["5.3 sealed state"]
    assert isinstance(sealed, SealedState)
    assert sealed.broker_id == 10285063371164059634
    descriptor = examples["5.1 object descriptor"]
    assert isinstance(descriptor, ObjectDescriptor)
    assert descriptor.offset_index == [(0, 0)]
    version = examples["4.3 schema version"]
    assert isinstance(version, SchemaVersion)
    assert isinstance(version.schema_def, Avro)
    assert version.schema_def.schema.raw_schema.startswith('{\n  "type": "record"')
    metadata = examples["4.2 schema metadata"]
    assert isinstance(metadata, SchemaMetadata)
    assert metadata.compatibility_mode is CompatibilityMode.BACKWARD
    assert [v.version for v in metadata.versions] == [1, 2]


def test_every_kind_has_a_value_type() -> None:
    assert set(VALUE_TYPES) == set(KeyKind)


# Values the seed does not show -----------------------------------------------------------------

# Kinds outside seed 001, and the shapes Danube's own source writes that the seed leaves out.
POLICY = json.loads(SEED_VALUES[8][2])
VERSION = {
    "created_at": 1,
    "created_by": "u",
    "version": 1,
    "fingerprint": "f",
    "is_deprecated": False,
    "schema_def": "Bytes",
    "tags": [],
}
METADATA = {
    "compatibility_mode": "FullTransitive",
    "created_at": 1,
    "created_by": "u",
    "id": U64_MAX,
    "latest_version": 1,
    "subject": "s",
    "topics_using": ["/a/b"],
    "updated_at": 2,
    "versions": [VERSION],
}
MORE_VALUES: list[tuple[str, KeyKind, Any]] = [
    ("leader epoch", KeyKind.LEADER_EPOCH, 7),
    ("partitioned topic root", KeyKind.TOPIC_ROOT, 3),
    ("non-reliable delivery", KeyKind.TOPIC_DELIVERY, "NonReliable"),
    ("legacy cluster name", KeyKind.LEGACY_CLUSTER_NAME, "MY_CLUSTER"),
    (
        "legacy load balance",
        KeyKind.LEGACY_LOAD_BALANCE,
        {"1122334455": ["/markets/trade-events", "/markets/trade-events-part-1"]},
    ),
    ("legacy topic policy", KeyKind.LEGACY_TOPIC_POLICY, {**POLICY, "max_producers_per_topic": 5}),
    (
        "legacy topic schema (json)",
        KeyKind.LEGACY_TOPIC_SCHEMA,
        {"name": "s", "schema_data": [123, 125], "type_schema": {"Json": "{}"}},
    ),
    (
        "legacy topic schema (string)",
        KeyKind.LEGACY_TOPIC_SCHEMA,
        {"name": "s", "schema_data": None, "type_schema": "String"},
    ),
    (
        "legacy consumer",
        KeyKind.LEGACY_CONSUMER,
        {
            "consumer_id": 23232323,
            "consumer_name": "c",
            "status": True,
            "subscription_type": 1,
            "topic_name": "/markets/trade-events",
        },
    ),
    ("legacy consumer (empty)", KeyKind.LEGACY_CONSUMER, {}),
    (
        "registration without metrics",
        KeyKind.BROKER_REGISTRATION,
        {"admin_addr": "http://a:50051", "advertised_addr": "a:6650", "broker_addr": "http://a"},
    ),
    ("draining broker", KeyKind.BROKER_STATE, {"mode": "draining", "reason": "maintenance"}),
    ("drained broker", KeyKind.BROKER_STATE, {"mode": "drained", "reason": "shutdown"}),
    (
        "lost broker's topic",
        KeyKind.UNASSIGNED,
        {"reason": "broker_lost", "from_broker": U64_MAX},
    ),
    (
        "float load",
        KeyKind.LOAD_REPORT,
        {
            "resources_usage": [
                {"resource": "CPU", "usage": 30.5},
                {"resource": "DiskIO", "usage": 0.0},
            ],
            "topic_list": [],
            "topics_len": 0,
        },
    ),
    (
        "danube's 8-field policy",
        KeyKind.NAMESPACE_POLICY,
        dict(sorted({**POLICY, "max_dispatch_rate": 0}.items())),
    ),
    (
        "subscription with a consumer",
        KeyKind.SUBSCRIPTION,
        {
            "consumer_id": 13940288943180594845,
            "consumer_name": "c",
            "subscription_name": "s",
            "subscription_type": 2,
        },
    ),
    (
        "exclusive producer",
        KeyKind.PRODUCER,
        {
            "access_mode": 1,
            "producer_id": 0,
            "producer_name": "p",
            "status": False,
            "topic_name": "/a/b",
        },
    ),
    (
        "descriptor without index",
        KeyKind.STORAGE_OBJECT,
        {
            "completed": False,
            "created_at": 1,
            "end_offset": U64_MAX,
            "etag": "abc",
            "object_id": "o",
            "size": 0,
            "start_offset": U64_MAX,
        },
    ),
    (
        "version as danube writes it",
        KeyKind.SCHEMA_VERSION,
        {**VERSION, "version": 2**32 - 1, "description": "", "deprecation_message": None},
    ),
    (
        "deprecated version",
        KeyKind.SCHEMA_VERSION,
        {**VERSION, "is_deprecated": True, "deprecation_message": "use v4"},
    ),
    (
        "json schema",
        KeyKind.SCHEMA_VERSION,
        {
            **VERSION,
            "schema_def": {"JsonSchema": {"fingerprint": "f", "raw_schema": '{"type":"object"}'}},
        },
    ),
    (
        "protobuf",
        KeyKind.SCHEMA_VERSION,
        {
            **VERSION,
            "schema_def": {
                "Protobuf": {
                    "fingerprint": "f",
                    "message_name": "Order",
                    "raw_proto": 'syntax = "proto3";',
                }
            },
        },
    ),
    ("string schema", KeyKind.SCHEMA_VERSION, {**VERSION, "schema_def": "String"}),
    ("number schema", KeyKind.SCHEMA_VERSION, {**VERSION, "schema_def": "Number"}),
    ("transitive mode", KeyKind.SCHEMA_METADATA, METADATA),
    # Danube's binding of a topic to a subject: a bare JSON string.
    ("topic schema subject", KeyKind.TOPIC_SCHEMA_SUBJECT, "product-catalog"),
    ("default compatibility mode", KeyKind.DEFAULT_COMPATIBILITY_MODE, "FullTransitive"),
    # The registry's references and settings, as it writes them.
    (
        "schema references",
        KeyKind.SCHEMA_REFERENCES,
        {"1": [{"name": "common/money.proto", "subject": "money", "version": 2}], "3": []},
    ),
    (
        "schema referenced by",
        KeyKind.SCHEMA_REFERENCED_BY,
        {"2": [{"subject": "orders", "version": 1}, {"subject": "refunds", "version": 4294967295}]},
    ),
    ("schema config", KeyKind.SCHEMA_CONFIG, {"json_schema_draft": "2020-12"}),
    ("schema config (no setting)", KeyKind.SCHEMA_CONFIG, {}),
    ("default schema config", KeyKind.DEFAULT_SCHEMA_CONFIG, {"json_schema_draft": "draft-07"}),
    ("unicode text", KeyKind.BROKER_STATE, {"mode": "active", "reason": 'démarrage "à chaud"\n'}),
]


def serde(document: Any) -> bytes:
    """`document` as serde_json's compact form."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(("name", "kind", "document"), MORE_VALUES, ids=[v[0] for v in MORE_VALUES])
def test_more_values_round_trip_byte_for_byte(name: str, kind: KeyKind, document: Any) -> None:
    data = serde(document)
    assert encode(decode(kind, data)) == data


def test_schema_definitions_are_serde_s_external_tagging() -> None:
    assert encode(PrimitiveSchema.BYTES) == b'"Bytes"'
    avro = Avro(AvroSchema(fingerprint="f", raw_schema="r"))
    assert encode(avro) == b'{"Avro":{"fingerprint":"f","raw_schema":"r"}}'
    json_schema = JsonSchema(JsonSchemaDefinition(fingerprint="f", raw_schema="{}"))
    assert encode(json_schema) == b'{"JsonSchema":{"fingerprint":"f","raw_schema":"{}"}}'
    protobuf = Protobuf(ProtobufDefinition(fingerprint="f", message_name="M", raw_proto="p"))
    expected = b'{"Protobuf":{"fingerprint":"f","message_name":"M","raw_proto":"p"}}'
    assert encode(protobuf) == expected


def test_optional_fields_absent_stay_absent_and_null_stays_null() -> None:
    registration = BrokerRegistration(admin_addr="a", advertised_addr="b", broker_addr="c")
    assert b"prom_exporter" not in encode(registration)
    document = {**VERSION, "description": "", "deprecation_message": None}
    version = decode(SchemaVersion, serde(document))
    assert version.deprecation_message is None
    assert version.description == ""
    assert b'"deprecation_message":null' in encode(version)


def test_policy_fields_default_as_in_danube() -> None:
    policy = decode(KeyKind.NAMESPACE_POLICY, b'{"max_producers_per_topic":3}')
    assert policy == NamespacePolicy(max_producers_per_topic=3)
    assert isinstance(policy, NamespacePolicy)
    assert policy.max_message_size == 10 * 1024 * 1024
    assert b"max_dispatch_rate" not in encode(policy)
    assert encode(NamespacePolicy()) == compact(SEED_VALUES[8][2])


def test_unknown_fields_are_ignored_and_not_written_back() -> None:
    # Forward compatibility: a newer writer's extra field must not break this reader.
    data = b'{"mode":"active","since":17,"reason":"boot","extra":{"a":[1]}}'
    state = decode(KeyKind.BROKER_STATE, data)
    assert state == BrokerState(mode=BrokerMode.ACTIVE, reason="boot")
    assert encode(state) == b'{"mode":"active","reason":"boot"}'


def test_decode_by_type() -> None:
    assert decode(BrokerState, b'{"mode":"drained","reason":"x"}').mode is BrokerMode.DRAINED
    assert decode(SchemaIdIndex, b'{"schema_id":5,"subject":"s"}') == SchemaIdIndex(
        schema_id=5, subject="s"
    )
    assert decode(str, b'"MY_CLUSTER"') == "MY_CLUSTER"


def test_a_custom_broker_state_is_kept_and_known_modes_are_members() -> None:
    """Seed 001 allows "custom states for maintenance/upgrades": kept as their string."""
    custom = decode(KeyKind.BROKER_STATE, b'{"mode":"maintenance","reason":"kernel"}')
    assert isinstance(custom, BrokerState)
    assert custom.mode == "maintenance" and not isinstance(custom.mode, BrokerMode)
    assert encode(custom) == b'{"mode":"maintenance","reason":"kernel"}'
    for mode in BrokerMode:
        known = decode(BrokerState, b'{"mode":"%s","reason":"x"}' % mode.value.encode())
        assert known.mode is mode
        assert BrokerState(mode=mode.value, reason="x").mode is mode  # built from a string too


def test_current_object_is_the_padded_start() -> None:
    assert CurrentObject.at(30).start == "00000000000000000030"
    assert CurrentObject(start="00000000000000000030").offset == 30
    assert encode(CurrentObject.at(U64_MAX)) == b'{"start":"18446744073709551615"}'
    with pytest.raises(InvalidNumber, match="not 20 decimal digits"):
        CurrentObject(start="30")


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (KeyKind.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s","version":0}]}'),
        (KeyKind.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s"}]}'),
        (KeyKind.SCHEMA_REFERENCES, b'{"1":{"name":"n","subject":"s","version":1}}'),
        (KeyKind.SCHEMA_REFERENCED_BY, b'{"1":[{"subject":"s","version":4294967296}]}'),
        (KeyKind.SCHEMA_REFERENCED_BY, b'[{"subject":"s","version":1}]'),
        (KeyKind.SCHEMA_CONFIG, b'{"json_schema_draft":7}'),
        (KeyKind.DEFAULT_SCHEMA_CONFIG, b'"draft-07"'),
    ],
)
def test_the_registry_s_own_values_are_refused_malformed(kind: KeyKind, data: bytes) -> None:
    with pytest.raises(MalformedValue, match=str(kind)):
        decode(kind, data)


def test_the_registry_s_own_values_decode_to_their_types() -> None:
    data = b'{"1":[{"name":"n","subject":"s","version":2}]}'
    references = decode(KeyKind.SCHEMA_REFERENCES, data)
    assert references == {"1": [SchemaReferenceEntry(name="n", subject="s", version=2)]}
    referrers = decode(KeyKind.SCHEMA_REFERENCED_BY, b'{"2":[{"subject":"o","version":1}]}')
    assert referrers == {"2": [SchemaReferrer(subject="o", version=1)]}
    assert decode(KeyKind.DEFAULT_SCHEMA_CONFIG, b"{}") == SchemaConfig()
    assert encode(SchemaConfig()) == b"{}"
    assert encode(SchemaConfig(json_schema_draft="2020-12")) == b'{"json_schema_draft":"2020-12"}'


def test_values_are_immutable() -> None:
    state = BrokerState(mode=BrokerMode.ACTIVE, reason="boot")
    with pytest.raises(AttributeError):
        state.reason = "other"  # type: ignore[misc]


# u64 ids ---------------------------------------------------------------------------------------

u64s = st.one_of(
    st.integers(0, U64_MAX),
    st.sampled_from([2**63 - 1, 2**63, 13940288943180594845, U64_MAX]),
)


@given(u64s)
def test_u64_ids_survive_decode_and_encode(number: int) -> None:
    documents = {
        KeyKind.LEADER: f"{number}",
        KeyKind.CURSOR: f"{number}",
        KeyKind.UNASSIGNED: f'{{"reason":"unload","from_broker":{number}}}',
        KeyKind.PRODUCER: f'{{"access_mode":0,"producer_id":{number},"producer_name":"p",'
        f'"status":true,"topic_name":"/a/b"}}',
        KeyKind.STORAGE_STATE: f'{{"sealed":true,"last_committed_offset":{number},'
        f'"broker_id":{number},"timestamp":{number}}}',
        KeyKind.SCHEMA_BY_ID: f'{{"schema_id":{number},"subject":"s"}}',
    }
    for kind, document in documents.items():
        data = document.encode()
        assert encode(decode(kind, data)) == data
        assert str(number).encode() in data


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=U64_MAX + 1)))
def test_ids_outside_u64_are_refused(number: int) -> None:
    for kind, document in {
        KeyKind.LEADER: f"{number}",
        KeyKind.STORAGE_STATE: f'{{"sealed":true,"last_committed_offset":1,'
        f'"broker_id":{number},"timestamp":1}}',
        KeyKind.STORAGE_OBJECT: f'{{"completed":true,"created_at":1,"end_offset":2,"etag":null,'
        f'"object_id":"o","offset_index":[[0,0],[1,{number}]],"size":3,"start_offset":0}}',
    }.items():
        with pytest.raises(MalformedValue, match=r">= 0|above the u64 maximum"):
            decode(kind, document.encode())


def test_an_id_above_u64_names_where_it_is() -> None:
    data = (
        b'{"completed":true,"created_at":1,"end_offset":2,"etag":null,"object_id":"o",'
        b'"offset_index":[[0,0],[1,18446744073709551616]],"size":3,"start_offset":0}'
    )
    with pytest.raises(MalformedValue, match=r"at `\$\.offset_index\[1\]\[1\]`"):
        decode(KeyKind.STORAGE_OBJECT, data)


values = st.one_of(
    st.builds(SealedState, sealed=st.booleans(), last_committed_offset=u64s, broker_id=u64s,
              timestamp=u64s),
    st.builds(UnassignedMarker, reason=st.text(), from_broker=u64s),
    st.builds(ProducerRegistration, access_mode=st.sampled_from(ProducerAccessMode),
              producer_id=u64s, producer_name=st.text(), status=st.booleans(),
              topic_name=st.text()),
    st.builds(SubscriptionMetadata, consumer_id=st.none() | u64s, consumer_name=st.text(),
              subscription_name=st.text(), subscription_type=st.sampled_from(SubscriptionType)),
    st.builds(ObjectDescriptor, completed=st.booleans(), created_at=u64s, end_offset=u64s,
              etag=st.none() | st.text(), object_id=st.text(),
              offset_index=st.lists(st.tuples(u64s, u64s)), size=u64s, start_offset=u64s),
    st.builds(LoadReport, resources_usage=st.lists(st.builds(
                  ResourceUsage, resource=st.text(),
                  usage=st.integers(0, 2**53) | st.floats(0, 1e9, allow_nan=False))),
              topic_list=st.lists(st.text()), topics_len=u64s),
    st.builds(CurrentObject.at, u64s),
    st.builds(SchemaIdIndex, schema_id=u64s, subject=st.text()),
)  # fmt: skip


@given(values)
def test_values_round_trip(value: msgspec.Struct) -> None:
    assert decode(type(value), encode(value)) == value


# Errors ------------------------------------------------------------------------------------------


def test_malformed_value_is_the_store_s_invalid_value() -> None:
    assert issubclass(MalformedValue, InvalidValue)
    assert issubclass(MalformedValue, InvalidRequest)
    assert issubclass(MalformedValue, MetadataError)


SUBSCRIPTION = json.loads(SEED_VALUES[13][2])
PRODUCER = json.loads(SEED_VALUES[12][2])
BAD_VALUES: list[tuple[KeyKind, bytes | Any, str]] = [
    (KeyKind.BROKER_STATE, b'{"mode":"active","reason":', "truncated"),
    (KeyKind.BROKER_STATE, b"not json", "malformed"),
    (KeyKind.BROKER_STATE, b"\xff", "malformed"),
    (KeyKind.BROKER_STATE, b'{"mode":"active","reason":"x"} x', "trailing characters"),
    (KeyKind.BROKER_STATE, {"mode": "", "reason": "x"}, "Expected `str` of length >= 1"),
    (KeyKind.BROKER_STATE, {"mode": 3, "reason": "x"}, "Expected `str`, got `int`"),
    (KeyKind.BROKER_STATE, {"mode": "active"}, "missing required field `reason`"),
    (KeyKind.BROKER_STATE, {"mode": "active", "reason": 7}, "Expected `str`, got `int`"),
    (KeyKind.BROKER_STATE, None, "Expected `object`, got `null`"),
    (KeyKind.CLUSTER_NAME, {}, "Expected `null`, got `object`"),
    (KeyKind.LEADER, -1, "Expected `int` >= 0"),
    (KeyKind.LEADER, U64_MAX + 1, "above the u64 maximum"),
    (KeyKind.LEADER, "625722408599041316", "Expected `int`, got `str`"),
    (KeyKind.LEADER, 1.5, "Expected `int`, got `float`"),
    (KeyKind.CURSOR, True, "Expected `int`, got `bool`"),
    (KeyKind.TOPIC_ROOT, 2**32, "<= 4294967295"),
    (KeyKind.TOPIC_DELIVERY, "reliable", "Invalid enum value 'reliable'"),
    (KeyKind.DEFAULT_COMPATIBILITY_MODE, "backward", "Invalid enum value 'backward'"),
    (KeyKind.TOPIC_SCHEMA_SUBJECT, 1, "Expected `str`, got `int`"),
    (KeyKind.SUBSCRIPTION, {**SUBSCRIPTION, "subscription_type": 3}, "Invalid enum value 3"),
    (KeyKind.PRODUCER, {**PRODUCER, "producer_id": -5}, "at `$.producer_id`"),
    (KeyKind.UNASSIGNED, {"reason": "unload"}, "missing required field `from_broker`"),
    (KeyKind.UNASSIGNED, "unload", "Expected `object | null`, got `str`"),
    (KeyKind.STORAGE_CUR, {"start": "30"}, "invalid offset '30': not 20 decimal digits"),
    (KeyKind.STORAGE_CUR, {"start": 30}, "Expected `str`, got `int`"),
    (KeyKind.SCHEMA_VERSION, {**VERSION, "version": 0}, ">= 1"),
    (KeyKind.SCHEMA_VERSION, {**VERSION, "schema_def": "Avro"}, "'Avro' is no schema definition"),
    (
        KeyKind.SCHEMA_VERSION,
        {**VERSION, "schema_def": {"Avro": {}, "Bytes": {}}},
        "an object with keys ['Avro', 'Bytes'] is no schema definition",
    ),
    (
        KeyKind.SCHEMA_VERSION,
        {**VERSION, "schema_def": {"Avro": {"fingerprint": "f"}}},
        "bad Avro schema definition: Object missing required field `raw_schema`",
    ),
    (
        KeyKind.SCHEMA_METADATA,
        {**METADATA, "compatibility_mode": "backward"},
        "Invalid enum value 'backward'",
    ),
    (
        KeyKind.LEGACY_TOPIC_SCHEMA,
        {"name": "s", "schema_data": [256], "type_schema": "Bytes"},
        "<= 255",
    ),
]


@pytest.mark.parametrize(("kind", "document", "message"), BAD_VALUES)
def test_bad_values_raise_malformed_value(kind: KeyKind, document: Any, message: str) -> None:
    data = document if isinstance(document, bytes) else serde(document)
    with pytest.raises(MalformedValue) as caught:
        decode(kind, data)
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"malformed {kind} value: ")
    assert caught.value.what == str(kind)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (BrokerState(mode="", reason="x"), "BrokerState value: Expected `str` of length >= 1"),
        (
            SealedState(sealed=True, last_committed_offset=-1, broker_id=1, timestamp=1),
            ">= 0 - at `$.last_committed_offset`",
        ),
        (UnassignedMarker(reason="unload", from_broker=2**64), "above the u64 maximum"),
        (-1, "malformed u64 value: Expected `int` >= 0"),
        (2**64, "malformed u64 value: 18446744073709551616 is above the u64 maximum"),
        (True, "no key of the layout holds a bare JSON boolean"),
        (object(), "Encoding objects of type object is unsupported"),
        ({"a": object()}, "unsupported"),
    ],
)  # fmt: skip
def test_encode_refuses_what_decode_would_refuse(value: object, message: str) -> None:
    with pytest.raises(MalformedValue) as caught:
        encode(value)
    assert message in str(caught.value)


def test_bare_values_encode_as_json_scalars() -> None:
    assert encode(None) == b"null"
    assert encode(13) == b"13"
    assert encode(13940288943180594845) == b"13940288943180594845"
    assert encode(Delivery.NON_RELIABLE) == b'"NonReliable"'
    assert encode("MY_CLUSTER") == b'"MY_CLUSTER"'
    assert decode(KeyKind.CURSOR, encode(13)) == 13
    assert decode(U64, b"7") == 7


def test_a_negative_resource_usage_is_malformed_made_or_decoded() -> None:
    with pytest.raises(MalformedValue):
        ResourceUsage(resource="CPU", usage=-1)
    with pytest.raises(MalformedValue):
        decode(
            KeyKind.LOAD_REPORT,
            b'{"resources_usage":[{"resource":"CPU","usage":-0.5}],"topic_list":[],"topics_len":0}',
        )
    assert ResourceUsage(resource="CPU", usage=0).usage == 0
