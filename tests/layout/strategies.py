"""Hypothesis strategies for the layout: valid field values, the key of every kind built by
its public builder, and keys damaged one segment at a time."""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from metaplane import layout
from metaplane.layout import U32_MAX, U64_MAX, KeyKind, TopicName

NAME_ALPHABET = string.ascii_letters + string.digits + "_-"
SUBJECT_ALPHABET = NAME_ALPHABET + "."

# The reserved words, written down here as the specification (not read from the code).
RESERVED: Mapping[str, frozenset[str]] = {
    "cluster_name": frozenset(
        {
            "register",
            "brokers",
            "unassigned",
            "load",
            "leader",
            "leader_epoch",
            "load_balance",
            "cluster-name",
            "locks",
        }
    ),
    "namespace": frozenset({"state"}),
    "topic": frozenset(),
    "subscription": frozenset(),
    "subject": frozenset({"_global", "_index", ".", ".."}),
    "lock_name": frozenset(),
}

Fields = dict[str, Any]


def names(field: str) -> st.SearchStrategy[str]:
    """Valid names for a name field."""
    alphabet = SUBJECT_ALPHABET if field == "subject" else NAME_ALPHABET
    text = st.text(alphabet, min_size=1, max_size=layout.MAX_NAME_LENGTH)
    return text.filter(lambda name: name not in RESERVED[field])


def numbers(low: int, high: int) -> st.SearchStrategy[int]:
    """Ints in [low, high], with the edges and the region above 2^63 drawn often."""
    edges = [n for n in (low, high, 2**63 - 1, 2**63, 13940288943180594845) if low <= n <= high]
    return st.one_of(st.integers(low, high), st.sampled_from(edges))


u64s = numbers(0, U64_MAX)
FIELD_VALUES: Mapping[str, st.SearchStrategy[Any]] = {
    **{field: names(field) for field in RESERVED},
    "broker_id": u64s,
    "producer_id": u64s,
    "consumer_id": u64s,
    "schema_id": u64s,
    "holder": u64s,
    "version": numbers(1, U32_MAX),
    "offset": u64s,
}
topic_names = st.builds(TopicName, names("namespace"), names("topic"))


def _topic(fields: Fields) -> TopicName:
    return TopicName(fields["namespace"], fields["topic"])


_TOPIC = ("namespace", "topic")
# kind -> (the fields its key holds, how its public builder makes it from them)
BUILDERS: Mapping[KeyKind, tuple[tuple[str, ...], Callable[[Fields], str]]] = {
    KeyKind.CLUSTER_NAME: (("cluster_name",), lambda f: layout.cluster_name(f["cluster_name"])),
    KeyKind.BROKER_REGISTRATION: (
        ("broker_id",),
        lambda f: layout.broker_registration(f["broker_id"]),
    ),
    KeyKind.BROKER_STATE: (("broker_id",), lambda f: layout.broker_state(f["broker_id"])),
    KeyKind.ASSIGNMENT: (
        ("broker_id", *_TOPIC),
        lambda f: layout.assignment(f["broker_id"], _topic(f)),
    ),
    KeyKind.UNASSIGNED: (_TOPIC, lambda f: layout.unassigned(_topic(f))),
    KeyKind.LOAD_REPORT: (("broker_id",), lambda f: layout.load_report(f["broker_id"])),
    KeyKind.LEADER: ((), lambda f: layout.leader()),
    KeyKind.LEADER_EPOCH: ((), lambda f: layout.leader_epoch()),
    KeyKind.LOCK: (
        ("lock_name", "holder"),
        lambda f: layout.lock(f["lock_name"], f["holder"]),
    ),
    KeyKind.NAMESPACE_POLICY: (("namespace",), lambda f: layout.namespace_policy(f["namespace"])),
    KeyKind.NAMESPACE_TOPIC: (_TOPIC, lambda f: layout.namespace_topic(_topic(f))),
    KeyKind.TOPIC_ROOT: (_TOPIC, lambda f: layout.topic_root(_topic(f))),
    KeyKind.TOPIC_DELIVERY: (_TOPIC, lambda f: layout.topic_delivery(_topic(f))),
    KeyKind.PRODUCER: (
        (*_TOPIC, "producer_id"),
        lambda f: layout.producer(_topic(f), f["producer_id"]),
    ),
    KeyKind.SUBSCRIPTION: (
        (*_TOPIC, "subscription"),
        lambda f: layout.subscription(_topic(f), f["subscription"]),
    ),
    KeyKind.CURSOR: (
        (*_TOPIC, "subscription"),
        lambda f: layout.cursor(_topic(f), f["subscription"]),
    ),
    KeyKind.TOPIC_SCHEMA_SUBJECT: (_TOPIC, lambda f: layout.topic_schema_subject(_topic(f))),
    KeyKind.NEXT_SCHEMA_ID: ((), lambda f: layout.next_schema_id()),
    KeyKind.DEFAULT_COMPATIBILITY_MODE: ((), lambda f: layout.default_compatibility_mode()),
    KeyKind.SCHEMA_METADATA: (("subject",), lambda f: layout.schema_metadata(f["subject"])),
    KeyKind.SCHEMA_VERSION: (
        ("subject", "version"),
        lambda f: layout.schema_version(f["subject"], f["version"]),
    ),
    KeyKind.SCHEMA_BY_ID: (("schema_id",), lambda f: layout.schema_by_id(f["schema_id"])),
    KeyKind.SCHEMA_REFERENCES: (("subject",), lambda f: layout.schema_references(f["subject"])),
    KeyKind.SCHEMA_REFERENCED_BY: (
        ("subject",),
        lambda f: layout.schema_referenced_by(f["subject"]),
    ),
    KeyKind.SCHEMA_CONFIG: (("subject",), lambda f: layout.schema_config(f["subject"])),
    KeyKind.DEFAULT_SCHEMA_CONFIG: ((), lambda f: layout.default_schema_config()),
    KeyKind.STORAGE_OBJECT: (
        (*_TOPIC, "offset"),
        lambda f: layout.storage_object(_topic(f), f["offset"]),
    ),
    KeyKind.STORAGE_CUR: (_TOPIC, lambda f: layout.storage_cur(_topic(f))),
    KeyKind.STORAGE_STATE: (_TOPIC, lambda f: layout.storage_state(_topic(f))),
    KeyKind.LEGACY_CLUSTER_NAME: ((), lambda f: layout.legacy_cluster_name()),
    KeyKind.LEGACY_LOAD_BALANCE: ((), lambda f: layout.legacy_load_balance()),
    KeyKind.LEGACY_TOPIC_POLICY: (_TOPIC, lambda f: layout.legacy_topic_policy(_topic(f))),
    KeyKind.LEGACY_TOPIC_SCHEMA: (_TOPIC, lambda f: layout.legacy_topic_schema(_topic(f))),
    KeyKind.LEGACY_CONSUMER: (
        ("subscription", "consumer_id"),
        lambda f: layout.legacy_consumer(f["subscription"], f["consumer_id"]),
    ),
}


def build(kind: KeyKind, fields: Fields) -> str:
    """The key of `kind` for `fields`, made by the kind's public builder."""
    return BUILDERS[kind][1](fields)


def fields_of(kind: KeyKind) -> st.SearchStrategy[Fields]:
    """Valid field values for a key of `kind`."""
    return st.fixed_dictionaries({name: FIELD_VALUES[name] for name in BUILDERS[kind][0]})


def keys() -> st.SearchStrategy[tuple[KeyKind, Fields, str]]:
    """A valid key of any kind, with its kind and fields."""
    return st.sampled_from(list(KeyKind)).flatmap(
        lambda kind: fields_of(kind).map(lambda fields: (kind, fields, build(kind, fields)))
    )


# Segments that sit at the edges of the rules: words of the layout, reserved names, numbers
# just in and out of range or not canonical, and characters the rules refuse.
TRICKY_SEGMENTS = [
    *sorted(set().union(*RESERVED.values())),
    *("cur", "cursor", "objects", "versions", "by_id", "metadata", "policy", "schema"),
    *("schema_subject", "compatibility_mode", "next_schema_id"),
    *("references", "referenced_by", "config"),
    *("topics", "producers", "subscriptions", "delivery", "storage", "danube-data"),
    *("0", "00", "007", "-1", "+1", "1e3", "1.0", " 1", "4294967295", "4294967296"),
    *(str(U64_MAX), str(U64_MAX + 1), f"{0:020d}", f"{30:020d}", f"{U64_MAX:020d}"),
    *("99999999999999999999", f"{30:019d}", f"{30:021d}", "x" * 255, "x" * 256),
    *("", "a b", "é", "x\u2028", "x\n", "a.b", "-", "_"),
]
segments = st.one_of(
    st.sampled_from(TRICKY_SEGMENTS),
    st.text(SUBJECT_ALPHABET + "/ é\u2028", max_size=24),
    st.integers(0, 2**70).map(str),
)


@st.composite
def damaged_keys(draw: st.DrawFn) -> str:
    """A valid key with one segment replaced, dropped or added."""
    _, _, key = draw(keys())
    parts = key.split("/")[1:]
    index = draw(st.integers(0, len(parts)))
    how = draw(st.sampled_from(["replace", "drop", "add"]))
    if how == "add" or index == len(parts):
        parts.insert(index, draw(segments))
    elif how == "drop":
        del parts[index]
    else:
        parts[index] = draw(segments)
    return "/" + "/".join(parts)
