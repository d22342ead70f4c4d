"""Parsing a key back into its kind and fields, with a typed error for a key outside the layout.

A key is matched by shape first (segment count, literal segments; the template with the most
literal segments wins, so `/cluster/leader` is the leader key, not a cluster named "leader"),
then each field is checked by the same rules the builders apply.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metaplane.layout._errors import LayoutError, UnknownKey
from metaplane.layout._names import TopicName
from metaplane.layout._table import TEMPLATES, FieldValue, KeyKind, Template
from metaplane.store import InvalidKey, check_key


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A key's kind and the fields its path holds (the others are None).

    Field names are those of the patterns' groups; `offset` is the number, not its padding.
    """

    kind: KeyKind
    cluster_name: str | None = None
    broker_id: int | None = None
    namespace: str | None = None
    topic: str | None = None
    subscription: str | None = None
    producer_id: int | None = None
    consumer_id: int | None = None
    subject: str | None = None
    version: int | None = None
    schema_id: int | None = None
    lock_name: str | None = None
    holder: int | None = None
    offset: int | None = None

    @property
    def topic_name(self) -> TopicName | None:
        """The topic the key belongs to, if it names one."""
        if self.namespace is None or self.topic is None:
            return None
        return TopicName(self.namespace, self.topic)

    def fields(self) -> dict[str, FieldValue]:
        """The fields the key holds, by name."""
        values = {name: getattr(self, name) for name in _FIELD_NAMES}
        return {name: value for name, value in values.items() if value is not None}

    @property
    def key(self) -> str:
        """The key itself, built back from its kind and fields."""
        return TEMPLATES[self.kind].render(self.fields())


_FIELD_NAMES = tuple(name for name in ParsedKey.__dataclass_fields__ if name != "kind")


def _by_shape() -> Mapping[tuple[int, str], Sequence[Template]]:
    shapes: defaultdict[tuple[int, str], list[Template]] = defaultdict(list)
    for template in TEMPLATES.values():
        root = template.segments[0]
        if isinstance(root, str):  # every template starts with a literal root
            shapes[len(template.segments), root].append(template)
    for candidates in shapes.values():
        candidates.sort(key=lambda template: -template.literal_count)
    return shapes


_SHAPES = _by_shape()
_ROOTS = sorted({root for _, root in _SHAPES})

_LITERALS: Mapping[tuple[int, str], Sequence[tuple[tuple[tuple[int, str], ...], KeyKind]]] = {
    shape: [
        (
            tuple(
                (index, segment)
                for index, segment in enumerate(template.segments)
                if isinstance(segment, str) and index > 0
            ),
            template.kind,
        )
        for template in candidates
    ]
    for shape, candidates in _SHAPES.items()
}
"""For each shape, the literal segments (after the root) that tell its templates apart."""


def kind_of(key: str) -> KeyKind:
    """The kind of a key, by its shape alone: what decoding a stored value needs, at a
    fraction of `parse`'s cost (the fields are not checked). A key outside the layout raises
    `parse`'s own error."""
    if type(key) is str and key[:1] == "/":
        parts = key[1:].split("/")
        shape = () if "" in parts else _LITERALS.get((len(parts), parts[0]), ())
        for literals, kind in shape:
            for index, literal in literals:
                if parts[index] != literal:
                    break
            else:
                return kind
    return parse(key).kind  # raises the reason


def parse(key: object) -> ParsedKey:
    """The kind and fields of `key`; raises a `LayoutError` for a key outside the layout."""
    checked, parts = _segments(key)
    template = _template_for(checked, parts)
    try:
        values = template.bind(checked, parts)
    except LayoutError as error:
        raise error.in_key(checked) from None
    return _parsed(template.kind, values)


def _segments(key: object) -> tuple[str, list[str]]:
    try:
        checked = check_key(key)
    except InvalidKey as error:
        raise UnknownKey(key, error.reason) from None
    return checked, checked[1:].split("/")


def _template_for(key: str, parts: Sequence[str]) -> Template:
    if parts[0] not in _ROOTS:
        roots = ", ".join(f"/{root}" for root in _ROOTS)
        raise UnknownKey(key, f"'/{parts[0]}' is not a root of the layout ({roots})")
    for template in _SHAPES.get((len(parts), parts[0]), ()):
        if template.fits(parts):
            return template
    raise UnknownKey(key, f"no kind of key under '/{parts[0]}' has this shape")


def _parsed(kind: KeyKind, values: Mapping[str, FieldValue]) -> ParsedKey:
    names = {name: value for name, value in values.items() if isinstance(value, str)}
    numbers = {name: value for name, value in values.items() if isinstance(value, int)}
    return ParsedKey(
        kind,
        cluster_name=names.get("cluster_name"),
        broker_id=numbers.get("broker_id"),
        namespace=names.get("namespace"),
        topic=names.get("topic"),
        subscription=names.get("subscription"),
        producer_id=numbers.get("producer_id"),
        consumer_id=numbers.get("consumer_id"),
        subject=names.get("subject"),
        version=numbers.get("version"),
        schema_id=numbers.get("schema_id"),
        lock_name=names.get("lock_name"),
        holder=numbers.get("holder"),
        offset=numbers.get("offset"),
    )
