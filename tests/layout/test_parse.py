"""Parsing: each ambiguity of the layout and how it is resolved, and every way a key can fall
outside the layout, each with its typed error and a message that says what is wrong."""

from __future__ import annotations

import re

import pytest
from hypothesis import given

from metaplane import layout
from metaplane.layout import (
    InvalidName,
    InvalidNumber,
    KeyKind,
    LayoutError,
    ReservedName,
    TopicName,
    UnknownKey,
    parse,
)

from .strategies import damaged_keys

# Ambiguities ---------------------------------------------------------------------------------


def test_broker_state_and_assignments_differ_by_depth() -> None:
    assert parse("/cluster/brokers/7/state").kind is KeyKind.BROKER_STATE
    assert parse("/cluster/brokers/7/default/state").kind is KeyKind.ASSIGNMENT
    assert parse("/cluster/brokers/7/default/state").topic == "state"


def test_a_namespace_called_state_is_reserved() -> None:
    # Its assignments would sit under the broker's state key, inside that key's prefix.
    with pytest.raises(ReservedName, match="namespace name 'state'") as caught:
        parse("/cluster/brokers/7/state/t")
    assert caught.value.key == "/cluster/brokers/7/state/t"
    assert "in key '/cluster/brokers/7/state/t'" in str(caught.value)
    with pytest.raises(ReservedName):
        layout.assignment(7, TopicName("state", "t"))


def test_layout_words_under_cluster_are_not_cluster_names() -> None:
    assert parse("/cluster/leader").kind is KeyKind.LEADER
    assert parse("/cluster/leader_epoch").kind is KeyKind.LEADER_EPOCH
    assert parse("/cluster/cluster-name").kind is KeyKind.LEGACY_CLUSTER_NAME
    assert parse("/cluster/load_balance").kind is KeyKind.LEGACY_LOAD_BALANCE
    assert parse("/cluster/leaders").cluster_name == "leaders"


@pytest.mark.parametrize("word", ["register", "brokers", "unassigned", "load"])
def test_cluster_names_that_are_prefixes_of_the_layout_are_reserved(word: str) -> None:
    with pytest.raises(ReservedName, match=f"cluster name '{word}'"):
        parse(f"/cluster/{word}")
    with pytest.raises(ReservedName, match="reserved: '/cluster/"):
        layout.cluster_name(word)


@pytest.mark.parametrize("word", ["leader", "leader_epoch", "load_balance", "cluster-name"])
def test_cluster_names_that_are_keys_of_the_layout_are_reserved(word: str) -> None:
    with pytest.raises(ReservedName, match=f"cluster name '{word}'"):
        layout.cluster_name(word)


def test_registry_keys_and_subjects() -> None:
    assert parse("/schemas/_global/next_schema_id").kind is KeyKind.NEXT_SCHEMA_ID
    assert parse("/schemas/_index/by_id/1").kind is KeyKind.SCHEMA_BY_ID
    assert parse("/schemas/global/metadata").subject == "global"
    for subject in ("_global", "_index"):
        with pytest.raises(ReservedName, match=f"subject name '{subject}'"):
            parse(f"/schemas/{subject}/metadata")
        with pytest.raises(ReservedName):
            parse(f"/schemas/{subject}/versions/1")
        with pytest.raises(ReservedName):
            layout.schema_metadata(subject)


def test_unknown_registry_internal_keys() -> None:
    with pytest.raises(UnknownKey, match="no kind of key under '/schemas' has this shape"):
        parse("/schemas/_global/other")
    with pytest.raises(UnknownKey):
        parse("/schemas/_index/by_name/x")


def test_subscription_and_its_cursor() -> None:
    base = "/topics/default/t/subscriptions/cursor"
    assert parse(base).kind is KeyKind.SUBSCRIPTION
    assert parse(base).subscription == "cursor"
    assert parse(base + "/cursor").kind is KeyKind.CURSOR
    with pytest.raises(UnknownKey):
        parse(base + "/other")


def test_objects_cur_and_objects_offsets() -> None:
    objects = "/danube-data/storage/topics/default/t/objects"
    assert parse(f"{objects}/cur").kind is KeyKind.STORAGE_CUR
    assert parse(f"{objects}/00000000000000000030").offset == 30
    with pytest.raises(InvalidNumber, match="not 20 decimal digits"):
        parse(f"{objects}/30")
    with pytest.raises(InvalidNumber, match="not 20 decimal digits"):
        parse(f"{objects}/CUR")
    with pytest.raises(InvalidNumber, match="out of range"):
        parse(f"{objects}/99999999999999999999")


def test_topic_level_words_are_fine_topic_names() -> None:
    # Depth tells them apart: a topic named "delivery" is /topics/{ns}/delivery.
    assert parse("/topics/default/delivery").kind is KeyKind.TOPIC_ROOT
    assert parse("/topics/default/delivery/delivery").kind is KeyKind.TOPIC_DELIVERY
    assert parse("/danube-data/storage/topics/default/state/state").topic == "state"


def test_the_namespace_of_a_listed_topic_must_be_its_namespace() -> None:
    with pytest.raises(UnknownKey, match="its two namespaces differ"):
        parse("/namespaces/a/topics/b/t")


def test_partitions_parse_as_topics() -> None:
    parsed = parse("/topics/markets/trade-events-part-1")
    assert parsed.kind is KeyKind.TOPIC_ROOT
    assert parsed.topic_name == TopicName("markets", "trade-events").partition(1)


# Keys outside the layout ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        ("", UnknownKey, "absolute path"),
        ("cluster/leader", UnknownKey, "absolute path"),
        ("/cluster//leader", UnknownKey, "empty segment"),
        ("/cluster/leader/", UnknownKey, "empty segment"),
        ("/cluster/leader\n", UnknownKey, "control character"),
        ("/topics/./t", UnknownKey, "segment '.' is not allowed"),
        ("/", UnknownKey, "empty segment"),
        ("/cluster", UnknownKey, "no kind of key under '/cluster' has this shape"),
        ("/foo/bar", UnknownKey, "'/foo' is not a root of the layout"),
        ("/topics/default", UnknownKey, "no kind of key under '/topics'"),
        ("/topics/default/t/producers", UnknownKey, "has this shape"),
        ("/topics/default/t/unknown", UnknownKey, "has this shape"),
        ("/cluster/register/7/extra", UnknownKey, "has this shape"),
        ("/cluster/register/007", InvalidNumber, "broker id '007': not a canonical decimal"),
        ("/cluster/register/-1", InvalidNumber, "not a canonical decimal"),
        ("/cluster/register/18446744073709551616", InvalidNumber, "out of range"),
        ("/cluster/load/abc", InvalidNumber, "broker id 'abc'"),
        ("/topics/default/t/producers/1.5", InvalidNumber, "producer id '1.5'"),
        ("/subscriptions/s/x", InvalidNumber, "consumer id 'x'"),
        ("/schemas/_index/by_id/01", InvalidNumber, "schema id '01'"),
        ("/schemas/s/versions/0", InvalidNumber, "schema version 0: out of range 1.."),
        ("/schemas/s/versions/4294967296", InvalidNumber, "out of range 1..4294967295"),
        ("/topics/a b/t", InvalidName, "namespace name 'a b': only ASCII"),
        ("/topics/default/t\u00e9", InvalidName, "topic name 't\u00e9'"),
        ("/topics/default/a.b", InvalidName, "topic name 'a.b'"),
        (f"/topics/default/{'t' * 256}", InvalidName, "length 256 is not 1 to 255"),
        ("/topics/default/t/subscriptions/s!", InvalidName, "subscription name 's!'"),
        ("/schemas/a b/metadata", InvalidName, "subject name 'a b'"),
        ("/schemas/../metadata", UnknownKey, "segment '..' is not allowed"),
        ("/cluster/my cluster", InvalidName, "cluster name 'my cluster'"),
    ],
)
def test_keys_outside_the_layout(key: str, error: type[LayoutError], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        parse(key)
    assert type(caught.value) is error
    assert caught.value.key == key


@pytest.mark.parametrize("key", [None, 7, b"/cluster/leader", ["/cluster/leader"]])
def test_a_key_is_a_str(key: object) -> None:
    with pytest.raises(UnknownKey, match="a key is a str"):
        parse(key)


def test_field_errors_name_the_key_once() -> None:
    with pytest.raises(InvalidNumber) as caught:
        parse("/cluster/register/x")
    assert str(caught.value).count("in key") == 1
    with pytest.raises(UnknownKey) as unknown:
        parse("/namespaces/a/topics/b/t")
    assert "in key" not in str(unknown.value)


@given(damaged_keys())
def test_parse_refuses_only_with_layout_errors(key: str) -> None:
    refused: LayoutError | None = None
    try:
        parsed = parse(key)
    except LayoutError as error:
        refused = error
    if refused is None:
        assert parsed.key == key
    else:
        assert refused.key == key
        assert str(refused)


@given(damaged_keys())
def test_kind_of_is_parse_s_kind_wherever_parse_takes_the_key(key: str) -> None:
    """The shape-only `kind_of` (what decoding a stored value needs) names the kind `parse`
    names; a key with no kind's shape raises `parse`'s own error."""
    try:
        parsed = parse(key)
    except UnknownKey as error:
        if "shape" in str(error) or "root" in str(error) or "a key is" in str(error):
            with pytest.raises(UnknownKey):
                layout.kind_of(key)
        return
    except LayoutError:
        return  # a field's rule: kind_of does not check fields
    assert layout.kind_of(key) is parsed.kind


@pytest.mark.parametrize("key", ["/cluster/brokers/1/", "//cluster/leader", "cluster/leader", 7])
def test_kind_of_refuses_what_is_no_key(key: object) -> None:
    with pytest.raises(LayoutError):
        layout.kind_of(key)  # type: ignore[arg-type]
