"""The Protobuf check against protobuf itself: whenever the check says a reader reads a
writer's data, a message encoded with the writer's descriptor and decoded with the reader's
holds every field the writer set, with the same value.

Pairs of messages differ in the ways the rules are about: a field's type (within and across
the language guide's wire groups), singular / optional / repeated, oneof membership (into,
out of and between oneofs), removed fields and enum values. Values include the edges that
truncation and sign reinterpretation change: large and negative numbers, bytes that are not
UTF-8.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import pytest
from google.protobuf import (  # type: ignore[import-untyped, unused-ignore]
    descriptor_pool,
    message_factory,
)
from google.protobuf.descriptor_pb2 import (  # type: ignore[import-untyped, unused-ignore]
    FileDescriptorProto,
)
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaplane.schema import CompatibilityMode, Schema, check, parse_schema
from metaplane.schema._protobuf import _compile

# A few seconds in the suite; METAPLANE_SOUNDNESS_EXAMPLES=2000 (and --timeout 0) searches longer.
EXAMPLES = int(os.environ.get("METAPLANE_SOUNDNESS_EXAMPLES", "120"))

SCALARS = [
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "string", "bytes",
    "double", "float", "fixed32", "sfixed32", "fixed64", "sfixed64",
]  # fmt: skip
TYPES = [*SCALARS, "Kind", "Item"]
NUMBERS = range(1, 6)
ONEOFS = ["first", "second"]


@dataclass(frozen=True)
class FieldSpec:
    number: int
    type: str
    label: str  # "", "optional" or "repeated"
    oneof: str | None

    def render(self) -> str:
        label = f"{self.label} " if self.label else ""
        return f"{label}{self.type} f{self.number} = {self.number};"


@dataclass(frozen=True)
class MessageSpec:
    fields: tuple[FieldSpec, ...]
    kinds: tuple[str, ...] = ("K0", "K1", "K2")

    def render(self) -> str:
        plain = [f.render() for f in self.fields if f.oneof is None]
        groups = [
            f"oneof {name} {{ {' '.join(f.render() for f in self.fields if f.oneof == name)} }}"
            for name in ONEOFS
            if any(f.oneof == name for f in self.fields)
        ]
        kinds = " ".join(f"{kind} = {index};" for index, kind in enumerate(self.kinds))
        return (
            'syntax = "proto3";\npackage t;\n'
            f"message Root {{ {' '.join(plain + groups)} }}\n"
            f"enum Kind {{ {kinds} }}\n"
            "message Item { int32 n = 1; string s = 2; }\n"
        )


def field_specs(number: int) -> st.SearchStrategy[FieldSpec]:
    return st.builds(
        FieldSpec,
        st.just(number),
        st.sampled_from(TYPES),
        st.sampled_from(["", "optional", "repeated"]),
        st.sampled_from([None, None, *ONEOFS]),
    ).map(_legal)


def _legal(spec: FieldSpec) -> FieldSpec:
    # A oneof member has no label; repeated and optional fields stay out of oneofs.
    return replace(spec, label="") if spec.oneof is not None else spec


messages = st.lists(
    st.sampled_from(NUMBERS).flatmap(field_specs),
    min_size=1,
    max_size=5,
    unique_by=lambda f: f.number,
).map(lambda fields: MessageSpec(tuple(sorted(fields, key=lambda f: f.number))))


@st.composite
def changed(draw: st.DrawFn, spec: MessageSpec) -> MessageSpec:
    """The message with a few of its fields changed the way schemas evolve."""
    fields = list(spec.fields)
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(fields) - 1))
        field = fields[index]
        change = draw(st.sampled_from(["type", "label", "oneof", "drop", "add"]))
        if change == "type":
            fields[index] = replace(field, type=draw(st.sampled_from(TYPES)))
        elif change == "label" and field.oneof is None:
            fields[index] = replace(
                field, label=draw(st.sampled_from(["", "optional", "repeated"]))
            )
        elif change == "oneof":
            fields[index] = _legal(replace(field, oneof=draw(st.sampled_from([None, *ONEOFS]))))
        elif change == "drop" and len(fields) > 1:
            fields.pop(index)
        elif change == "add":
            free = [n for n in NUMBERS if n not in {f.number for f in fields}]
            if free:
                fields.append(draw(field_specs(draw(st.sampled_from(free)))))
    kinds = draw(st.sampled_from([spec.kinds, ("K0", "K1"), ("K0", "K1", "K2", "K3")]))
    return MessageSpec(tuple(sorted(fields, key=lambda f: f.number)), kinds)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[MessageSpec, MessageSpec]:
    writer = draw(messages)
    reader = draw(st.one_of(changed(writer), messages))
    return writer, reader


# Values ---------------------------------------------------------------------------------

_EDGES: dict[str, list[Any]] = {
    "int32": [0, 1, -1, 2**31 - 1, -(2**31)],
    "int64": [0, 7, -7, 2**40, -(2**63)],
    "uint32": [0, 3, 2**32 - 1],
    "uint64": [0, 5, 2**64 - 1],
    "sint32": [0, -3, 2**31 - 1],
    "sint64": [0, -(2**40), 2**62],
    "bool": [False, True],
    "string": ["", "a", "é"],
    "bytes": [b"", b"a", b"\xff\xfe"],
    "double": [0.0, 1.5, -2.25],
    "float": [0.0, 0.5],
    "fixed32": [0, 2**32 - 1],
    "sfixed32": [0, -5],
    "fixed64": [0, 2**64 - 1],
    "sfixed64": [0, -5],
    "Kind": [0, 1, 2],
}


def values(field: FieldSpec) -> st.SearchStrategy[Any]:
    if field.type == "Item":
        return st.tuples(st.sampled_from([0, 3, -4]), st.sampled_from(["", "x"]))
    return st.sampled_from(_EDGES[field.type])


@st.composite
def writings(draw: st.DrawFn, spec: MessageSpec) -> dict[int, Any]:
    """Which fields the writer sets, and to what: at most one member of each oneof."""
    chosen: dict[int, Any] = {}
    taken: set[str] = set()
    for field in spec.fields:
        if not draw(st.booleans()) or (field.oneof is not None and field.oneof in taken):
            continue
        if field.oneof is not None:
            taken.add(field.oneof)
        if field.label == "repeated":
            chosen[field.number] = draw(st.lists(values(field), min_size=1, max_size=3))
        else:
            chosen[field.number] = draw(values(field))
    return chosen


def message_class(spec: MessageSpec) -> Any:
    pool = descriptor_pool.DescriptorPool()
    for data in _compile(spec.render()):
        pool.Add(FileDescriptorProto.FromString(data))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Root"))


def encode(spec: MessageSpec, written: dict[int, Any]) -> bytes:
    message = message_class(spec)()
    for field in spec.fields:
        if field.number not in written:
            continue
        value, name = written[field.number], f"f{field.number}"
        items = value if field.label == "repeated" else [value]
        for item in items:
            if field.type == "Item":
                target = (
                    getattr(message, name).add()
                    if field.label == "repeated"
                    else getattr(message, name)
                )
                target.n, target.s = item
            elif field.label == "repeated":
                getattr(message, name).append(item)
            else:
                setattr(message, name, item)
    return bytes(message.SerializeToString())


def normal(value: Any) -> Any:
    """A value as the wire carries it, whatever the type that reads it."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, tuple):
        return (value[0], normal(value[1]))
    if hasattr(value, "n") and hasattr(value, "s"):
        return (value.n, normal(value.s))
    return value


def sent(field: FieldSpec, value: Any) -> list[Any]:
    """What of a field the writer set is on the wire: a proto3 field without presence is
    not sent when it holds its default."""
    if field.label == "repeated":
        return [normal(item) for item in value]
    present = field.label == "optional" or field.oneof is not None or field.type == "Item"
    if not present and normal(value) in (0, b"", 0.0):
        return []
    return [normal(value)]


def read_back(reader: MessageSpec, message: Any, field: FieldSpec) -> list[Any]:
    value = getattr(message, f"f{field.number}")
    if field.label == "repeated":
        return [normal(item) for item in value]
    if field.type == "Item" and not message.HasField(f"f{field.number}"):
        return []
    return [normal(value)]


def assert_sound(writer: MessageSpec, reader: MessageSpec, written: dict[int, Any]) -> bool:
    """If the check lets `reader` read `writer`'s data, it must; returns whether it did."""
    reader_schema = parse_schema("Protobuf", reader.render(), message_name="Root")
    writer_schema: Schema = parse_schema("Protobuf", writer.render(), message_name="Root")
    if not check(reader_schema, [writer_schema], CompatibilityMode.BACKWARD).ok:
        return False
    data = encode(writer, written)
    try:
        decoded = message_class(reader).FromString(data)
    except DecodeError as error:
        raise AssertionError(f"{writer}\n{reader}\n{written}: {error}") from error
    readers = {field.number: field for field in reader.fields}
    for field in writer.fields:
        if field.number not in written or field.number not in readers:
            continue
        expected = sent(field, written[field.number])
        got = read_back(reader, decoded, readers[field.number])
        if not expected and readers[field.number].label != "repeated":
            continue  # nothing was sent: the reader holds its default
        assert got == expected, (writer, reader, written, field.number, got, expected)
    return True


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=pairs(), data=st.data())
def test_a_compatible_verdict_never_loses_or_changes_a_field(
    pair: tuple[MessageSpec, MessageSpec], data: st.DataObject
) -> None:
    writer, reader = pair
    assert_sound(writer, reader, data.draw(writings(writer)))


# The oracle can fail, and it tests what the rules are about.


def spec(*fields: tuple[int, str, str, str | None]) -> MessageSpec:
    return MessageSpec(tuple(FieldSpec(*field) for field in fields))


def test_the_oracle_catches_a_oneof_that_drops_a_field(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = spec((1, "int32", "", None), (2, "string", "", None))
    reader = spec((1, "int32", "", "first"), (2, "string", "", "first"))
    assert not check(
        parse_schema("Protobuf", reader.render(), message_name="Root"),
        [parse_schema("Protobuf", writer.render(), message_name="Root")],
        CompatibilityMode.BACKWARD,
    ).ok
    monkeypatch.setattr(f"{__name__}.check", _always_compatible)
    with pytest.raises(AssertionError):
        assert_sound(writer, reader, {1: 5, 2: "x"})


def test_the_oracle_catches_a_truncated_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.check", _always_compatible)
    with pytest.raises(AssertionError):
        assert_sound(spec((1, "int64", "", None)), spec((1, "int32", "", None)), {1: 2**40})


def _always_compatible(*args: Any, **kwargs: Any) -> Any:
    from metaplane.schema import CompatibilityResult

    return CompatibilityResult(CompatibilityMode.BACKWARD, (1,))


@pytest.mark.parametrize(
    ("writer", "reader", "written"),
    [
        (spec((1, "string", "", None)), spec((1, "string", "repeated", None)), {1: "a"}),
        (spec((1, "Item", "", None)), spec((1, "Item", "repeated", None)), {1: (3, "x")}),
        (spec((1, "int32", "", None)), spec((1, "int32", "", "first")), {1: 7}),
        (spec((1, "int32", "", "first"), (2, "bool", "", "first")),
         spec((1, "int64", "", None), (2, "bool", "", "first")), {1: -7}),
    ],
    ids=["string-made-repeated", "message-made-repeated", "one-field-oneof", "out-of-a-oneof"],
)  # fmt: skip
def test_accepted_changes_read_every_field(
    writer: MessageSpec, reader: MessageSpec, written: dict[int, Any]
) -> None:
    assert assert_sound(writer, reader, written), "the check refused a change the rules accept"
