"""The layout's table: every kind of key and its path template, the one source of all paths.

Builders render these templates, `parse` matches them and the pipeline's patterns are
generated from them; this is the only module that joins key segments into a path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from metaplane.layout._errors import UnknownKey
from metaplane.layout._names import (
    NAME_RULES,
    U32_MAX,
    U64_MAX,
    check_number,
    padded_offset,
    parse_decimal,
    parse_padded_offset,
)

FieldValue = str | int


class KeyKind(StrEnum):
    """Every kind of key of the layout: seed 001, Danube's topic-to-subject binding, ours
    (the leader epoch, locks, the registry's default compatibility mode, its references and
    settings), and Danube's legacy keys."""

    CLUSTER_NAME = "cluster_name"
    BROKER_REGISTRATION = "broker_registration"
    BROKER_STATE = "broker_state"
    ASSIGNMENT = "assignment"
    UNASSIGNED = "unassigned"
    LOAD_REPORT = "load_report"
    LEADER = "leader"
    LEADER_EPOCH = "leader_epoch"
    LOCK = "lock"
    NAMESPACE_POLICY = "namespace_policy"
    NAMESPACE_TOPIC = "namespace_topic"
    TOPIC_ROOT = "topic_root"
    TOPIC_DELIVERY = "topic_delivery"
    PRODUCER = "producer"
    SUBSCRIPTION = "subscription"
    CURSOR = "cursor"
    TOPIC_SCHEMA_SUBJECT = "topic_schema_subject"
    NEXT_SCHEMA_ID = "next_schema_id"
    DEFAULT_COMPATIBILITY_MODE = "default_compatibility_mode"
    SCHEMA_METADATA = "schema_metadata"
    SCHEMA_VERSION = "schema_version"
    SCHEMA_BY_ID = "schema_by_id"
    SCHEMA_REFERENCES = "schema_references"
    SCHEMA_REFERENCED_BY = "schema_referenced_by"
    SCHEMA_CONFIG = "schema_config"
    DEFAULT_SCHEMA_CONFIG = "default_schema_config"
    STORAGE_OBJECT = "storage_object"
    STORAGE_CUR = "storage_cur"
    STORAGE_STATE = "storage_state"
    LEGACY_CLUSTER_NAME = "legacy_cluster_name"
    LEGACY_LOAD_BALANCE = "legacy_load_balance"
    LEGACY_TOPIC_POLICY = "legacy_topic_policy"
    LEGACY_TOPIC_SCHEMA = "legacy_topic_schema"
    LEGACY_CONSUMER = "legacy_consumer"

    @property
    def legacy(self) -> bool:
        """True for the keys of Danube's older layout (seeds 000/003): read, never written."""
        return self.name.startswith("LEGACY_")


_TOPIC = "{namespace}/{topic}"
_STORAGE = f"/danube-data/storage/topics/{_TOPIC}"
_SUBSCRIPTION = f"/topics/{_TOPIC}/subscriptions/{{subscription}}"
_PATHS: Mapping[KeyKind, str] = {
    KeyKind.CLUSTER_NAME: "/cluster/{cluster_name}",
    KeyKind.BROKER_REGISTRATION: "/cluster/register/{broker_id}",
    KeyKind.BROKER_STATE: "/cluster/brokers/{broker_id}/state",
    KeyKind.ASSIGNMENT: f"/cluster/brokers/{{broker_id}}/{_TOPIC}",
    KeyKind.UNASSIGNED: f"/cluster/unassigned/{_TOPIC}",
    KeyKind.LOAD_REPORT: "/cluster/load/{broker_id}",
    KeyKind.LEADER: "/cluster/leader",
    KeyKind.LEADER_EPOCH: "/cluster/leader_epoch",
    KeyKind.LOCK: "/cluster/locks/{lock_name}/{holder}",
    KeyKind.NAMESPACE_POLICY: "/namespaces/{namespace}/policy",
    KeyKind.NAMESPACE_TOPIC: f"/namespaces/{{namespace}}/topics/{_TOPIC}",
    KeyKind.TOPIC_ROOT: f"/topics/{_TOPIC}",
    KeyKind.TOPIC_DELIVERY: f"/topics/{_TOPIC}/delivery",
    KeyKind.PRODUCER: f"/topics/{_TOPIC}/producers/{{producer_id}}",
    KeyKind.SUBSCRIPTION: _SUBSCRIPTION,
    KeyKind.CURSOR: f"{_SUBSCRIPTION}/cursor",
    KeyKind.TOPIC_SCHEMA_SUBJECT: f"/topics/{_TOPIC}/schema_subject",
    KeyKind.NEXT_SCHEMA_ID: "/schemas/_global/next_schema_id",
    KeyKind.DEFAULT_COMPATIBILITY_MODE: "/schemas/_global/compatibility_mode",
    KeyKind.SCHEMA_METADATA: "/schemas/{subject}/metadata",
    KeyKind.SCHEMA_VERSION: "/schemas/{subject}/versions/{version}",
    KeyKind.SCHEMA_BY_ID: "/schemas/_index/by_id/{schema_id}",
    KeyKind.SCHEMA_REFERENCES: "/schemas/{subject}/references",
    KeyKind.SCHEMA_REFERENCED_BY: "/schemas/{subject}/referenced_by",
    KeyKind.SCHEMA_CONFIG: "/schemas/{subject}/config",
    KeyKind.DEFAULT_SCHEMA_CONFIG: "/schemas/_global/config",
    KeyKind.STORAGE_OBJECT: f"{_STORAGE}/objects/{{offset}}",
    KeyKind.STORAGE_CUR: f"{_STORAGE}/objects/cur",
    KeyKind.STORAGE_STATE: f"{_STORAGE}/state",
    KeyKind.LEGACY_CLUSTER_NAME: "/cluster/cluster-name",
    KeyKind.LEGACY_LOAD_BALANCE: "/cluster/load_balance",
    KeyKind.LEGACY_TOPIC_POLICY: f"/topics/{_TOPIC}/policy",
    KeyKind.LEGACY_TOPIC_SCHEMA: f"/topics/{_TOPIC}/schema",
    KeyKind.LEGACY_CONSUMER: "/subscriptions/{subscription}/{consumer_id}",
}


@dataclass(frozen=True)
class Field:
    """A variable segment: how its text becomes a value (`parse`) and back (`render`)."""

    name: str
    parse: Callable[[str], FieldValue]
    render: Callable[[object], str]


def _name_field(name: str) -> Field:
    check = NAME_RULES[name].check
    return Field(name, check, check)


def _number_field(name: str, what: str, low: int = 0, high: int = U64_MAX) -> Field:
    return Field(
        name,
        lambda text: parse_decimal(what, text, low, high),
        lambda value: str(check_number(what, value, low, high)),
    )


FIELDS: Mapping[str, Field] = MappingProxyType(
    {
        **{name: _name_field(name) for name in NAME_RULES},
        "broker_id": _number_field("broker_id", "broker id"),
        "producer_id": _number_field("producer_id", "producer id"),
        "consumer_id": _number_field("consumer_id", "consumer id"),
        "schema_id": _number_field("schema_id", "schema id"),
        "holder": _number_field("holder", "lock holder"),
        "version": _number_field("version", "schema version", 1, U32_MAX),
        "offset": Field(
            "offset",
            parse_padded_offset,
            lambda value: padded_offset(check_number("offset", value)),
        ),
    }
)

Segment = str | Field


@dataclass(frozen=True)
class Template:
    """The path of one kind of key: literal segments and fields."""

    kind: KeyKind
    segments: tuple[Segment, ...]

    @classmethod
    def compile(cls, kind: KeyKind, path: str) -> Template:
        return cls(kind, tuple(_segment(text) for text in path[1:].split("/")))

    @property
    def literal_count(self) -> int:
        return sum(isinstance(segment, str) for segment in self.segments)

    def render(self, values: Mapping[str, object], drop: int = 0) -> str:
        """The key for `values`; with `drop`, the prefix without its last `drop` segments."""
        shown = self.segments[: len(self.segments) - drop] if drop else self.segments
        return "/" + "/".join(
            [
                segment if isinstance(segment, str) else segment.render(values[segment.name])
                for segment in shown
            ]
        )

    def fits(self, parts: Sequence[str]) -> bool:
        """True if `parts` has this template's length and literal segments."""
        if len(parts) != len(self.segments):
            return False
        return all(
            part == segment
            for part, segment in zip(parts, self.segments, strict=True)
            if isinstance(segment, str)
        )

    def bind(self, key: str, parts: Sequence[str]) -> dict[str, FieldValue]:
        """The field values of a key that `fits`; raises if a field's text is invalid."""
        values: dict[str, FieldValue] = {}
        for part, segment in zip(parts, self.segments, strict=True):
            if isinstance(segment, Field):
                value = segment.parse(part)
                if values.setdefault(segment.name, value) != value:
                    raise UnknownKey(key, f"its two {segment.name}s differ")
        return values


def _segment(text: str) -> Segment:
    if text.startswith("{"):
        return FIELDS[text[1:-1]]
    return text


def _render(segment: Segment, values: Mapping[str, object]) -> str:
    if isinstance(segment, str):
        return segment
    return segment.render(values[segment.name])


TEMPLATES: Mapping[KeyKind, Template] = MappingProxyType(
    {kind: Template.compile(kind, path) for kind, path in _PATHS.items()}
)


def render(kind: KeyKind, /, **values: object) -> str:
    """The key of `kind` for the given field values, each checked against its rule."""
    return TEMPLATES[kind].render(values)


def render_prefix(kind: KeyKind, drop: int, /, **values: object) -> str:
    """The prefix of `kind`'s keys without their last `drop` segments."""
    return TEMPLATES[kind].render(values, drop)
