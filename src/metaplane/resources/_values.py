"""The typed value of every key of the layout, as compact JSON laid out as Danube writes it.

msgspec Structs: strict decoding (no coercion), exact field order on encoding, u64-safe ints,
and many times faster than pydantic or dataclasses+json for the LocalCache's decode-once path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum, IntEnum, StrEnum
from functools import cache
from types import MappingProxyType, NoneType
from typing import Annotated, Any, TypeVar, overload

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from metaplane.layout import U32_MAX, U64_MAX, KeyKind, padded_offset, parse_padded_offset
from metaplane.resources._errors import MalformedValue

# Field order in every Struct is the seed's (Danube stores `serde_json::to_value`, whose map
# is sorted, hence the alphabetical examples); where the seed is silent, that sorted order.
# Unknown fields are ignored on decoding (a newer writer's additions must not break a reader)
# and so are dropped by a decode → encode round trip. Optional fields that Danube writes only
# sometimes are UNSET: absent stays absent and null stays null, so documents round-trip.

# msgspec checks bounds only within i64: the u64 ceiling is checked after decoding.
U64 = Annotated[int, Meta(ge=0)]
U32 = Annotated[int, Meta(ge=0, le=U32_MAX)]
Version = Annotated[int, Meta(ge=1, le=U32_MAX)]
Byte = Annotated[int, Meta(ge=0, le=255)]


# Cluster ------------------------------------------------------------------------------------


class BrokerRegistration(Struct, frozen=True, kw_only=True):
    """`/cluster/register/{id}`. Danube leaves `prom_exporter` out when metrics are off."""

    admin_addr: str
    advertised_addr: str
    broker_addr: str
    prom_exporter: str | UnsetType = UNSET


class BrokerMode(StrEnum):
    """The modes metaplane acts on. Seed 001 also allows "custom states for maintenance /
    upgrades": those are kept as plain strings (see BrokerState)."""

    ACTIVE = "active"
    DRAINING = "draining"
    DRAINED = "drained"


BrokerModeName = Annotated[str, Meta(min_length=1, max_length=255)]


class BrokerState(Struct, frozen=True, kw_only=True):
    """`/cluster/brokers/{id}/state`: e.g. {"mode":"active","reason":"boot"}.

    `mode` is a BrokerMode member when it is one of the known modes (decoding turns the
    string into the member, so `mode is BrokerMode.ACTIVE` holds), or an operator's custom
    state as its string ("maintenance"): a broker in a custom state receives no topic and
    keeps the ones it has — only `draining` empties a broker."""

    mode: BrokerModeName
    reason: str

    def __post_init__(self) -> None:
        mode = broker_mode(self.mode)
        if mode is not self.mode:
            msgspec.structs.force_setattr(self, "mode", mode)


_KNOWN_MODES = frozenset(mode.value for mode in BrokerMode)


def broker_mode(mode: str) -> str:
    """`mode` as its BrokerMode member when it names one (so that `is` compares hold), else
    unchanged: a custom state's name."""
    if isinstance(mode, BrokerMode) or mode not in _KNOWN_MODES:
        return mode
    return BrokerMode(mode)


class UnassignedMarker(Struct, frozen=True, kw_only=True):
    """The non-null form of `/cluster/unassigned/{ns}/{topic}`, as Danube's unload writes it.

    Reasons: "unload" (Danube's, a topic move) and "broker_lost" (ours: its broker vanished).
    `to_broker` (ours) names the broker a move is meant for; absent, the ranking chooses.
    """

    reason: str
    from_broker: U64
    to_broker: U64 | UnsetType = UNSET


class ResourceUsage(Struct, frozen=True, kw_only=True):
    """One entry of a load report: Danube's resources are "CPU", "Memory", "DiskIO",
    "NetworkIO" (kept as str: the list grew over releases); usage was an int, now a float."""

    resource: str
    usage: int | float
    """A share in percent: never negative (a negative reading is a malformed report: it
    would make its broker look like the emptiest of all to the leader's ranking)."""

    def __post_init__(self) -> None:
        if self.usage < 0:  # decoded or made: the same rule
            raise MalformedValue("load report", f"{self.resource} usage {self.usage} is negative")


LOAD_REPORT_TOPICS = 1_000
"""The topics a metaplane broker lists in its load report at most: the first in order of
their paths; `topics_len` counts them all. Listed whole, a broker of 100,000 topics wrote
1.3 MB a second (above a value's 1 MiB limit from about 80,000 topics: no report at all),
into every store's history; the assignments under `/cluster/brokers/{id}` are what says
which topics a broker serves."""


class LoadReport(Struct, frozen=True, kw_only=True):
    """`/cluster/load/{id}`, the seed's form (topic paths "/ns/topic" and their count). A
    metaplane broker lists at most `LOAD_REPORT_TOPICS` of them; Danube lists them all."""

    resources_usage: list[ResourceUsage]
    topic_list: list[str]
    topics_len: U64


# Namespaces and topics ----------------------------------------------------------------------


class NamespacePolicy(Struct, frozen=True, kw_only=True):
    """`/namespaces/{ns}/policy` (and the legacy per-topic policy); 0 means unlimited.

    Danube's `Policies` gives every field a serde default (the message size 10 MiB) and has an
    eighth, `max_dispatch_rate`, that the seed omits: kept when present, never added.
    """

    max_consumers_per_subscription: U32 = 0
    max_consumers_per_topic: U32 = 0
    max_dispatch_rate: U32 | UnsetType = UNSET
    max_message_size: U32 = 10 * 1024 * 1024
    max_producers_per_topic: U32 = 0
    max_publish_rate: U32 = 0
    max_subscription_dispatch_rate: U32 = 0
    max_subscriptions_per_topic: U32 = 0


class Delivery(StrEnum):
    """`/topics/{ns}/{topic}/delivery`: Danube's dispatch strategy, a bare JSON string."""

    RELIABLE = "Reliable"
    NON_RELIABLE = "NonReliable"


class ProducerAccessMode(IntEnum):
    SHARED = 0
    EXCLUSIVE = 1


class ProducerRegistration(Struct, frozen=True, kw_only=True):
    """`/topics/{ns}/{topic}/producers/{id}`; `topic_name` is the "/ns/topic" path."""

    access_mode: ProducerAccessMode
    producer_id: U64
    producer_name: str
    status: bool
    topic_name: str


class SubscriptionType(IntEnum):
    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2


class SubscriptionMetadata(Struct, frozen=True, kw_only=True):
    """`/topics/{ns}/{topic}/subscriptions/{sub}`; `consumer_id` is null when none is attached."""

    consumer_id: U64 | None
    consumer_name: str
    subscription_name: str
    subscription_type: SubscriptionType


# Schema registry ----------------------------------------------------------------------------


class SchemaDefinition:
    """Danube's `SchemaDefinition`, a serde enum tagged externally: the unit variants are bare
    strings ("Bytes", "String", "Number"), the others one-key objects ({"Avro": {…}}).

    From danube-broker/src/schema/metadata.rs: Avro(AvroSchema{raw_schema, fingerprint}),
    JsonSchema(JsonSchemaDefinition{raw_schema, fingerprint}) and
    Protobuf(ProtobufDefinition{raw_proto, message_name, fingerprint}).
    """

    __slots__ = ()


class PrimitiveSchema(SchemaDefinition, Enum):
    BYTES = "Bytes"
    STRING = "String"
    NUMBER = "Number"


class AvroSchema(Struct, frozen=True, kw_only=True):
    fingerprint: str
    raw_schema: str


class JsonSchemaDefinition(Struct, frozen=True, kw_only=True):
    fingerprint: str
    raw_schema: str


class ProtobufDefinition(Struct, frozen=True, kw_only=True):
    fingerprint: str
    message_name: str
    raw_proto: str


class Avro(Struct, SchemaDefinition, frozen=True):
    """The Avro variant: {"Avro": {"fingerprint", "raw_schema"}}."""

    schema: AvroSchema = msgspec.field(name="Avro")


class JsonSchema(Struct, SchemaDefinition, frozen=True):
    """The JSON Schema variant: {"JsonSchema": {"fingerprint", "raw_schema"}}."""

    schema: JsonSchemaDefinition = msgspec.field(name="JsonSchema")


class Protobuf(Struct, SchemaDefinition, frozen=True):
    """The Protobuf variant: {"Protobuf": {"fingerprint", "message_name", "raw_proto"}}."""

    schema: ProtobufDefinition = msgspec.field(name="Protobuf")


_SCHEMA_VARIANTS: Mapping[str, type[Avro | JsonSchema | Protobuf]] = MappingProxyType(
    {"Avro": Avro, "JsonSchema": JsonSchema, "Protobuf": Protobuf}
)


class CompatibilityMode(StrEnum):
    """How a new schema version must relate to the earlier ones (Confluent's semantics).

    Backward: consumers on the new schema read data written with the previous one.
    Forward: consumers on the previous schema read data written with the new one.
    Full: both. The transitive forms hold against every earlier version, the plain ones
    against the latest only. Danube has the four plain modes; the transitive forms are ours.
    """

    NONE = "None"
    BACKWARD = "Backward"
    FORWARD = "Forward"
    FULL = "Full"
    BACKWARD_TRANSITIVE = "BackwardTransitive"
    FORWARD_TRANSITIVE = "ForwardTransitive"
    FULL_TRANSITIVE = "FullTransitive"

    @property
    def checks_backward(self) -> bool:
        return self in (self.BACKWARD, self.FULL, self.BACKWARD_TRANSITIVE, self.FULL_TRANSITIVE)

    @property
    def checks_forward(self) -> bool:
        return self in (self.FORWARD, self.FULL, self.FORWARD_TRANSITIVE, self.FULL_TRANSITIVE)

    @property
    def transitive(self) -> bool:
        return self.value.endswith("Transitive")


class SchemaVersion(Struct, frozen=True, kw_only=True):
    """`/schemas/{subject}/versions/{n}`, and each entry of the metadata's `versions`.

    Order of seed section 4.3 (4.2 abbreviates and puts `schema_def` before `is_deprecated`).
    Danube's struct also has `description` (required by its reader: set it, even to "", on
    versions Danube brokers will read) and `deprecation_message` (null when not deprecated).
    """

    created_at: U64
    created_by: str
    version: Version
    fingerprint: str
    is_deprecated: bool
    schema_def: SchemaDefinition
    tags: list[str]
    description: str | UnsetType = UNSET
    deprecation_message: str | UnsetType | None = UNSET


class SchemaMetadata(Struct, frozen=True, kw_only=True):
    """`/schemas/{subject}/metadata`: the subject, its global id and every version."""

    compatibility_mode: CompatibilityMode
    created_at: U64
    created_by: str
    id: U64
    latest_version: U32
    subject: str
    topics_using: list[str]
    updated_at: U64
    versions: list[SchemaVersion]


class SchemaIdIndex(Struct, frozen=True, kw_only=True):
    """`/schemas/_index/by_id/{id}`: the subject a global schema id belongs to."""

    schema_id: U64
    subject: str


# The registry's own keys beside seed 001's: one of each a subject, whatever its number of
# versions; a version is a map key as its canonical decimal ("3").


class SchemaReferenceEntry(Struct, frozen=True, kw_only=True):
    """One reference of a version, as Confluent's API spells it: the `name` the document uses
    for it, and the version of another subject it stands for."""

    name: str
    subject: str
    version: Version


class SchemaReferrer(Struct, frozen=True, kw_only=True):
    """A version of another subject that references a version of this one."""

    subject: str
    version: Version


SchemaReferences = dict[str, list[SchemaReferenceEntry]]
"""`/schemas/{subject}/references`: {"<version>": [reference, …]}, for each version of the
subject that has references (ours)."""

SchemaReferencedBy = dict[str, list[SchemaReferrer]]
"""`/schemas/{subject}/referenced_by`: {"<version>": [referrer, …]}, for each version of the
subject that other versions reference (ours)."""


class SchemaConfig(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`/schemas/{subject}/config`: a subject's settings; `/schemas/_global/config`: those a
    subject created from now on starts with (ours). `json_schema_draft` is the draft a JSON
    Schema document without `$schema` is read as ("draft-07", "2020-12", …); absent: the
    registry's default."""

    json_schema_draft: str | None = None


# Tiered storage -----------------------------------------------------------------------------


class ObjectDescriptor(Struct, frozen=True, kw_only=True):
    """`…/objects/{start:020d}`. Danube skips `offset_index` (pairs of offset and byte
    position) when it has none, and always writes `etag`, null until the upload has one."""

    completed: bool
    created_at: U64
    end_offset: U64
    etag: str | None
    object_id: str
    offset_index: list[tuple[U64, U64]] | UnsetType = UNSET
    size: U64
    start_offset: U64


class CurrentObject(Struct, frozen=True, kw_only=True):
    """`…/objects/cur`: {"start": "<20 digits>"}, the start offset of the current object."""

    start: str

    def __post_init__(self) -> None:
        parse_padded_offset(self.start)

    @classmethod
    def at(cls, offset: int) -> CurrentObject:
        return cls(start=padded_offset(offset))

    @property
    def offset(self) -> int:
        return parse_padded_offset(self.start)


class SealedState(Struct, frozen=True, kw_only=True):
    """`/danube-data/storage/topics/{ns}/{topic}/state`, written by a topic move's source;
    the new owner starts at `last_committed_offset + 1`."""

    sealed: bool
    last_committed_offset: U64
    broker_id: U64
    timestamp: U64


# Danube's legacy values (seeds 000/003) -----------------------------------------------------


class LegacyConsumer(Struct, frozen=True, kw_only=True):
    """`/subscriptions/{sub}/{consumer_id}`. No Danube release we found writes it: the fields
    are those of its `Consumer` struct that serialize, all optional."""

    consumer_id: U64 | UnsetType = UNSET
    consumer_name: str | UnsetType = UNSET
    status: bool | UnsetType = UNSET
    subscription_type: int | UnsetType = UNSET
    topic_name: str | UnsetType = UNSET


class LegacyTopicSchema(Struct, frozen=True, kw_only=True):
    """`/topics/{ns}/{topic}/schema`, Danube's pre-registry `Schema`: `type_schema` is
    "Bytes", "String", "Int64" or {"Json": "<schema>"}; `schema_data` serde's byte array."""

    name: str
    schema_data: list[Byte] | None
    type_schema: str | dict[str, str]


VALUE_TYPES: Mapping[KeyKind, Any] = MappingProxyType(
    {
        KeyKind.CLUSTER_NAME: None,
        KeyKind.BROKER_REGISTRATION: BrokerRegistration,
        KeyKind.BROKER_STATE: BrokerState,
        KeyKind.ASSIGNMENT: None,
        KeyKind.UNASSIGNED: UnassignedMarker | None,
        KeyKind.LOAD_REPORT: LoadReport,
        KeyKind.LEADER: U64,
        KeyKind.LEADER_EPOCH: U64,
        KeyKind.LOCK: U64,
        KeyKind.NAMESPACE_POLICY: NamespacePolicy,
        KeyKind.NAMESPACE_TOPIC: None,
        KeyKind.TOPIC_ROOT: U32,
        KeyKind.TOPIC_DELIVERY: Delivery,
        KeyKind.PRODUCER: ProducerRegistration,
        KeyKind.SUBSCRIPTION: SubscriptionMetadata,
        KeyKind.CURSOR: U64,
        KeyKind.TOPIC_SCHEMA_SUBJECT: str,
        KeyKind.NEXT_SCHEMA_ID: U64,
        KeyKind.DEFAULT_COMPATIBILITY_MODE: CompatibilityMode,
        KeyKind.SCHEMA_METADATA: SchemaMetadata,
        KeyKind.SCHEMA_VERSION: SchemaVersion,
        KeyKind.SCHEMA_BY_ID: SchemaIdIndex,
        KeyKind.SCHEMA_REFERENCES: SchemaReferences,
        KeyKind.SCHEMA_REFERENCED_BY: SchemaReferencedBy,
        KeyKind.SCHEMA_CONFIG: SchemaConfig,
        KeyKind.DEFAULT_SCHEMA_CONFIG: SchemaConfig,
        KeyKind.STORAGE_OBJECT: ObjectDescriptor,
        KeyKind.STORAGE_CUR: CurrentObject,
        KeyKind.STORAGE_STATE: SealedState,
        KeyKind.LEGACY_CLUSTER_NAME: str,
        KeyKind.LEGACY_LOAD_BALANCE: dict[str, list[str]],
        KeyKind.LEGACY_TOPIC_POLICY: NamespacePolicy,
        KeyKind.LEGACY_TOPIC_SCHEMA: LegacyTopicSchema,
        KeyKind.LEGACY_CONSUMER: LegacyConsumer,
    }
)

# Encoding and decoding ----------------------------------------------------------------------

T = TypeVar("T")
_ENCODER = msgspec.json.Encoder()
_LONG_NUMBER = re.compile(rb"\d{20}")


def encode(value: object) -> bytes:
    """`value` as compact JSON, as serde_json writes it; refuses a value it could not decode."""
    value_type = _type_of(value)
    try:
        data = _ENCODER.encode(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise MalformedValue(_describe(value_type), str(error)) from None
    decode(value_type, data)
    return data


@overload
def decode(kind_or_type: type[T], data: bytes) -> T: ...
@overload
def decode(kind_or_type: KeyKind, data: bytes) -> object: ...
def decode(kind_or_type: object, data: bytes) -> object:
    """The value in `data`, of a key kind's value type or of the given type."""
    if isinstance(kind_or_type, KeyKind):
        value_type, what = VALUE_TYPES[kind_or_type], str(kind_or_type)
    else:
        value_type, what = kind_or_type, _describe(kind_or_type)
    try:
        value = _decoder(value_type).decode(data)
    except msgspec.MsgspecError as error:
        reason, cause = str(error), error.__cause__
        if isinstance(cause, MalformedValue):  # a struct's own rule: its reason, at its path
            reason = reason.replace(str(cause), cause.reason, 1)
        raise MalformedValue(what, reason) from None
    if _LONG_NUMBER.search(data):  # only a number of 20 digits or more can pass 2^64 - 1
        _check_u64(what, value, "$")
    return value


def _type_of(value: object) -> Any:
    if type(value) is bool:
        raise MalformedValue("bool", "no key of the layout holds a bare JSON boolean")
    return U64 if type(value) is int else type(value)


def _describe(value_type: object) -> str:
    if value_type in (U64, U32):
        return "u64" if value_type is U64 else "u32"
    return getattr(value_type, "__name__", None) or repr(value_type)


@cache
def _decoder(value_type: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(NoneType if value_type is None else value_type, dec_hook=_hook)


def _hook(value_type: type, obj: object) -> object:
    if value_type is SchemaDefinition:
        return _schema_definition(obj)
    raise NotImplementedError(f"no decoder for {value_type!r}")


def _schema_definition(obj: object) -> SchemaDefinition:
    if isinstance(obj, str):
        try:
            return PrimitiveSchema(obj)
        except ValueError:
            pass
    elif isinstance(obj, dict) and len(obj) == 1 and next(iter(obj)) in _SCHEMA_VARIANTS:
        variant = _SCHEMA_VARIANTS[next(iter(obj))]
        try:
            return msgspec.convert(obj, variant)
        except msgspec.ValidationError as error:
            raise ValueError(f"bad {variant.__name__} schema definition: {error}") from None
    found = f"an object with keys {list(obj)}" if isinstance(obj, dict) else repr(obj)
    raise ValueError(
        f"{found} is no schema definition: expected one of {[m.value for m in PrimitiveSchema]}"
        f" or a one-key object {{{'|'.join(_SCHEMA_VARIANTS)}: {{…}}}}"
    )


def _check_u64(what: str, value: object, path: str) -> None:
    """Refuse any int above the u64 ceiling, anywhere in a decoded value."""
    if type(value) is int and value > U64_MAX:
        reason = f"{value} is above the u64 maximum {U64_MAX} - at `{path}`"
        raise MalformedValue(what, reason)
    if isinstance(value, Struct):
        names = zip(value.__struct_fields__, value.__struct_encode_fields__, strict=True)
        for name, encoded in names:
            _check_u64(what, getattr(value, name), f"{path}.{encoded}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_u64(what, item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_u64(what, item, f"{path}.{key}")
