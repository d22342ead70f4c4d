"""The naming rules: which names, ids, versions and offsets may stand in a key, the typed errors
for the others, and topic names with their partitions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaplane import layout
from metaplane.layout import (
    InvalidName,
    InvalidNumber,
    LayoutError,
    ReservedName,
    TopicName,
    UnknownKey,
)
from metaplane.store import InvalidKey, InvalidRequest, MetadataError

from .strategies import NAME_ALPHABET, RESERVED, SUBJECT_ALPHABET, names

CHECKS: dict[str, Callable[[object], str]] = {
    "cluster_name": layout.check_cluster_name,
    "namespace": layout.check_namespace,
    "topic": layout.check_topic,
    "subscription": layout.check_subscription,
    "subject": layout.check_subject,
}


def test_layout_errors_are_store_key_errors() -> None:
    for error in (InvalidName, ReservedName, InvalidNumber, UnknownKey):
        assert issubclass(error, LayoutError)
    assert issubclass(ReservedName, InvalidName)
    assert issubclass(LayoutError, InvalidKey)
    assert issubclass(LayoutError, InvalidRequest)
    assert issubclass(LayoutError, MetadataError)
    assert issubclass(LayoutError, ValueError)


@pytest.mark.parametrize("field", sorted(CHECKS))
@given(data=st.data())
def test_valid_names_are_accepted(field: str, data: st.DataObject) -> None:
    name = data.draw(names(field))
    assert CHECKS[field](name) == name


@pytest.mark.parametrize("field", sorted(CHECKS))
def test_names_at_the_length_limits(field: str) -> None:
    assert CHECKS[field]("a") == "a"
    assert CHECKS[field]("a" * 255) == "a" * 255
    with pytest.raises(InvalidName, match="length 256 is not 1 to 255"):
        CHECKS[field]("a" * 256)
    with pytest.raises(InvalidName, match="length 0 is not 1 to 255"):
        CHECKS[field]("")


def _has_foreign_char(alphabet: str) -> st.SearchStrategy[str]:
    foreign = st.characters(exclude_characters=alphabet)
    return st.tuples(st.text(alphabet, max_size=5), foreign, st.text(alphabet, max_size=5)).map(
        "".join
    )


# A builder that takes each kind of name, and a key that holds it.
BUILDERS: dict[str, Callable[[str], str]] = {
    "cluster_name": layout.cluster_name,
    "namespace": layout.namespace_policy,
    "topic": lambda name: layout.topic_root(TopicName("default", name)),
    "subscription": lambda name: layout.cursor(TopicName("default", "t"), name),
    "subject": layout.schema_metadata,
}
KEYS: dict[str, str] = {
    "cluster_name": "/cluster/{}",
    "namespace": "/namespaces/{}/policy",
    "topic": "/topics/default/{}",
    "subscription": "/topics/default/t/subscriptions/{}/cursor",
    "subject": "/schemas/{}/metadata",
}


@pytest.mark.parametrize("field", sorted(CHECKS))
@given(data=st.data())
def test_names_with_other_characters_are_refused(field: str, data: st.DataObject) -> None:
    alphabet = SUBJECT_ALPHABET if field == "subject" else NAME_ALPHABET
    name = data.draw(_has_foreign_char(alphabet))
    with pytest.raises(InvalidName, match="only ASCII") as caught:
        CHECKS[field](name)
    assert caught.value.name == name
    with pytest.raises(InvalidName, match="only ASCII"):
        BUILDERS[field](name)
    if "/" not in name:  # with a '/', the text may well be another valid key
        with pytest.raises(LayoutError):
            layout.parse(KEYS[field].format(name))


@pytest.mark.parametrize("field", sorted(CHECKS))
@given(data=st.data())
def test_valid_names_build_keys_that_parse_back(field: str, data: st.DataObject) -> None:
    name = data.draw(names(field))
    key = BUILDERS[field](name)
    assert key == KEYS[field].format(name)
    assert getattr(layout.parse(key), field) == name


@pytest.mark.parametrize(
    ("field", "word"), [(field, word) for field, words in RESERVED.items() for word in words]
)
def test_reserved_names_are_refused_with_the_reason(field: str, word: str) -> None:
    with pytest.raises(ReservedName, match="reserved: ") as caught:
        CHECKS[field](word)
    assert caught.value.name == word


@pytest.mark.parametrize("name", ["Default", "a.b", "ns-1", "_x", "-", "états"])
def test_namespace_characters(name: str) -> None:
    if name in ("a.b", "états"):
        with pytest.raises(InvalidName, match=r"only ASCII \[A-Za-z0-9_-\]"):
            layout.check_namespace(name)
    else:
        assert layout.check_namespace(name) == name


def test_subjects_may_hold_dots_unlike_other_names() -> None:
    assert layout.check_subject("com.acme.Order-value") == "com.acme.Order-value"
    with pytest.raises(InvalidName):
        layout.check_topic("com.acme.Order")


def test_reserved_words_are_case_sensitive_names() -> None:
    assert layout.check_namespace("State") == "State"
    assert layout.check_cluster_name("Leader") == "Leader"
    assert layout.check_subject("_Global") == "_Global"


@pytest.mark.parametrize("value", [None, 7, b"ns", ["ns"]])
def test_a_name_is_a_str(value: object) -> None:
    with pytest.raises(InvalidName, match="a name is a str"):
        layout.check_namespace(value)


# Numbers ------------------------------------------------------------------------------------


@given(st.integers(0, layout.U64_MAX))
def test_padded_offsets_round_trip_and_sort_like_numbers(offset: int) -> None:
    text = layout.padded_offset(offset)
    assert len(text) == 20
    assert layout.parse_padded_offset(text) == offset
    assert (text < layout.padded_offset(layout.U64_MAX)) == (offset < layout.U64_MAX)


def test_padded_offsets_of_the_seed() -> None:
    assert layout.padded_offset(0) == "00000000000000000000"
    assert layout.padded_offset(30) == "00000000000000000030"


@pytest.mark.parametrize("offset", [-1, 2**64, True, 1.0, "30"])
def test_offsets_are_u64(offset: object) -> None:
    with pytest.raises(InvalidNumber, match="offset"):
        layout.padded_offset(offset)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("30", "not 20 decimal digits"),
        ("0000000000000000000030", "not 20 decimal digits"),
        ("0000000000000000003a", "not 20 decimal digits"),
        ("99999999999999999999", "out of range 0..18446744073709551615"),
        ("18446744073709551616", "out of range"),
    ],
)
def test_bad_padded_offsets(text: str, reason: str) -> None:
    with pytest.raises(InvalidNumber, match=reason):
        layout.parse_padded_offset(text)


@pytest.mark.parametrize(
    ("broker_id", "reason"),
    [
        (-1, "out of range 0..18446744073709551615"),
        (2**64, "out of range"),
        (True, "is an int, not bool"),
        ("7", "is an int, not str"),
        (7.0, "is an int, not float"),
    ],
)
def test_broker_ids_are_u64(broker_id: object, reason: str) -> None:
    with pytest.raises(InvalidNumber, match=reason) as caught:
        layout.broker_registration(broker_id)  # type: ignore[arg-type]
    assert caught.value.what == "broker id"


def test_ids_above_2_63_are_ordinary() -> None:
    key = layout.producer(TopicName("default", "t"), 13940288943180594845)
    assert key == "/topics/default/t/producers/13940288943180594845"
    assert layout.broker_state(layout.U64_MAX) == f"/cluster/brokers/{layout.U64_MAX}/state"


@pytest.mark.parametrize("version", [0, -1, 2**32])
def test_schema_versions_run_from_1_to_u32(version: int) -> None:
    with pytest.raises(InvalidNumber, match="schema version"):
        layout.schema_version("s", version)


# Topic names and partitions -----------------------------------------------------------------


def test_topic_name_path_and_parse() -> None:
    topic = TopicName("default", "reliable_topic")
    assert topic.path == "/default/reliable_topic"
    assert str(topic) == "/default/reliable_topic"
    assert TopicName.parse("/default/reliable_topic") == topic


@given(names("namespace"), names("topic"))
def test_topic_name_round_trips_through_its_path(namespace: str, topic: str) -> None:
    name = TopicName(namespace, topic)
    assert TopicName.parse(name.path) == name


@pytest.mark.parametrize(
    "path", ["default/t", "/default", "/default/t/x", "//t", "/default/", "", "/a b/t"]
)
def test_bad_topic_paths(path: str) -> None:
    with pytest.raises(InvalidName):
        TopicName.parse(path)


def test_topic_name_validates_its_parts() -> None:
    with pytest.raises(ReservedName, match="namespace name 'state'"):
        TopicName("state", "t")
    with pytest.raises(InvalidName, match="topic name 'a/b'"):
        TopicName("default", "a/b")


def test_partitions_are_topics_named_part_i() -> None:
    topic = TopicName("markets", "trade-events")
    assert topic.partition(1) == TopicName("markets", "trade-events-part-1")
    assert [p.topic for p in topic.partitions(3)] == [
        "trade-events-part-0",
        "trade-events-part-1",
        "trade-events-part-2",
    ]
    assert topic.partitions(0) == ()
    part = TopicName("markets", "trade-events-part-1")
    assert part.partition_index == 1
    assert part.partitioned_topic == topic
    assert topic.partition_index is None
    assert topic.partitioned_topic is None


@pytest.mark.parametrize("name", ["t-part-", "t-part-01", "-part-1", "t-part-x", "t-part--1"])
def test_names_that_only_look_like_partitions(name: str) -> None:
    topic = TopicName("ns", name)
    assert topic.partition_index is None
    assert topic.partitioned_topic is None


def test_partition_of_a_partition_splits_at_the_last_suffix() -> None:
    topic = TopicName("ns", "t-part-1-part-2")
    assert topic.partition_index == 2
    assert topic.partitioned_topic == TopicName("ns", "t-part-1")


def test_bad_partitions() -> None:
    topic = TopicName("ns", "t")
    with pytest.raises(InvalidNumber, match="partition index"):
        topic.partition(-1)
    with pytest.raises(InvalidNumber, match="partition count"):
        topic.partitions(-1)
    with pytest.raises(InvalidName, match="length 256"):
        TopicName("ns", "t" * 249).partition(1)


def test_topic_names_sort_by_namespace_then_topic() -> None:
    names_ = [TopicName("b", "a"), TopicName("a", "z"), TopicName("a", "b")]
    assert sorted(names_) == [TopicName("a", "b"), TopicName("a", "z"), TopicName("b", "a")]
