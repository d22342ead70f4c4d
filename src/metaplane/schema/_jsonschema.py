"""JSON Schema: documents checked against their own metaschema by jsonschema, fingerprinted
over canonical JSON (sorted keys, no insignificant whitespace), and compared by inclusion.

A document without `$schema` is read as draft-07 (as Confluent reads it), or as the draft its
subject or the registry is configured with. `$ref`s to other documents resolve through the
schema's references (each registered under its reference name), with `referencing`, as
jsonschema's validators resolve them.

A reader's schema is compatible with a writer's when every document valid under the writer
is valid under the reader: Backward asks it of (new, old), Forward of (old, new). The proof
(`_json_inclusion`) reads every keyword of drafts 4 to 2020-12 as the constraint it is; the
rules a conflict may carry:

- `type-narrowed`: the writer allows a kind of value the reader's `type` does not ("integer"
  ⊂ "number"; draft-04's integer excludes 1.0, later drafts' does not).
- `enum-narrowed`: a value of the writer's `enum` / `const` (or null / boolean) the reader
  rejects (checked with jsonschema itself), or a reader with a fixed set over a writer without.
- `property-constrained-in-open-model`, `property-rejected-by-closed-model`,
  `content-model-closed`: properties and patternProperties the reader constrains where the
  writer allows anything, or rejects where the writer allows them; `unevaluatedProperties:
  false` is a closed model over the names the reader surely evaluates.
- `required-added`, `dependency-added` (dependentRequired / array `dependencies`),
  `property-names-narrowed`, `bound-narrowed` (numeric bounds, multipleOf, lengths, item and
  property counts), `unique-items-added`, `contains-narrowed` (contains, minContains,
  maxContains), `pattern-changed`, `format-changed`, `content-changed` (contentEncoding,
  contentMediaType: read as assertions).
- `constraint-added`, `nothing-accepted`: a reader that constrains or rejects where the
  writer accepts anything.
- `no-branch-accepts`, `one-of-overlap`: no branch of the reader's anyOf / oneOf accepts the
  writer's values of some kind, or a oneOf's branches may both match them.
- `not-overlaps`: the writer allows values the reader's `not` excludes.
- `reference-unresolved`, `reference-loop`, `keyword-not-analysed`, `analysis-too-complex`:
  the refusals, where a proof is out of reach; each says which keyword and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from jsonschema import SchemaError  # type: ignore[import-untyped, unused-ignore]
from jsonschema.validators import validator_for  # type: ignore[import-untyped, unused-ignore]

from metaplane.schema._errors import InvalidSchema, UnknownJsonSchemaDraft
from metaplane.schema._format import ParseContext, ParsedDocument, SchemaFormat
from metaplane.schema._json_inclusion import Inclusion
from metaplane.schema._json_node import Documents, Draft, Node, root_node
from metaplane.schema._model import Conflict, Schema, SchemaType

DEFAULT_DRAFT = Draft.DRAFT7
"""What a document without `$schema` is read as, unless configured otherwise."""


@dataclass(frozen=True)
class JsonSchemaModel:
    """The decoded document, the draft it is read as, and its root node (its references'
    documents reachable through the node's resolver)."""

    root: Any
    draft: Draft
    node: Node
    documents: Documents


def parse_draft(name: str | None) -> Draft:
    """The draft a setting names (`draft-07`, `2020-12`, a metaschema URI); None: default."""
    if name is None:
        return DEFAULT_DRAFT
    try:
        return Draft.parse(name)
    except ValueError:
        raise UnknownJsonSchemaDraft(name, [draft.label for draft in Draft]) from None


def parse(document: str, context: ParseContext) -> ParsedDocument[JsonSchemaModel]:
    root = _decode(document)
    draft = _draft(root, parse_draft(context.json_schema_draft))
    try:
        draft.validator_class.check_schema(root)
    except SchemaError as error:
        raise InvalidSchema("JsonSchema", f"{error.message} (at {error.json_path})") from error
    node, documents = root_node(root, draft, _resources(root, draft, context.documents))
    if context.strict:
        _require_resolvable(node)
    canonical = json.dumps(root, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ParsedDocument(canonical.encode(), JsonSchemaModel(root, draft, node, documents))


def reader_conflicts(reader: JsonSchemaModel, writer: JsonSchemaModel) -> list[Conflict]:
    """Why a document valid under `writer` may be invalid under `reader`."""
    try:
        return Inclusion().check([writer.node], reader.node, "")
    except RecursionError:
        detail = "the schemas nest too deeply to compare here"
        return [Conflict("analysis-too-complex", "(root)", detail)]


JSON_SCHEMA = SchemaFormat(parse=parse, reader_conflicts=reader_conflicts)


def _decode(document: str) -> Any:
    try:
        root = json.loads(document, parse_constant=_refuse_constant)
    except ValueError as error:
        raise InvalidSchema("JsonSchema", f"not JSON: {error}") from error
    if not isinstance(root, dict | bool):
        raise InvalidSchema("JsonSchema", "a schema is a JSON object or a boolean")
    return root


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python accepts them unless told otherwise.
    raise ValueError(f"{name} is not a JSON value")


def _draft(root: Any, default: Draft) -> Draft:
    """The draft `$schema` declares, or `default` when it declares none."""
    if not isinstance(root, dict) or "$schema" not in root:
        return default
    try:
        # None as the default tells an unknown $schema apart from a known draft.
        found = validator_for(root, default=None)
    except Exception as error:  # an unhashable $schema, for one
        raise InvalidSchema("JsonSchema", f"unusable $schema: {error}") from error
    if found is None:
        raise InvalidSchema("JsonSchema", f"unknown metaschema {root['$schema']!r}")
    draft = Draft.of_validator(found)
    if draft is None:
        raise InvalidSchema(
            "JsonSchema",
            f"{root['$schema']!r} (draft-03) is not supported: declare draft-04 or later",
        )
    return draft


def _resources(
    root: Any, draft: Draft, documents: Mapping[str, Schema]
) -> dict[str, tuple[Any, Draft]]:
    """The referenced documents, under their reference names (and those names resolved
    against the document's `$id`, as its relative `$ref`s are), each with its own draft
    stated, so that a `$ref` into it reads it as its own subject did."""
    base = root.get("$id", "") if isinstance(root, dict) else ""
    found: dict[str, tuple[Any, Draft]] = {}
    for name, schema in documents.items():
        model = schema.model
        assert isinstance(model, JsonSchemaModel) and schema.type is SchemaType.JSON_SCHEMA
        contents = model.root
        if isinstance(contents, dict) and "$schema" not in contents:
            contents = {**contents, "$schema": model.draft.uri}
        found[name] = (contents, model.draft)
        if isinstance(base, str) and base:
            found[urljoin(base, name)] = (contents, model.draft)
    return found


def _require_resolvable(root: Node) -> None:
    unresolved = sorted(set(_unresolved(root, "#", set())))
    if unresolved:
        shown = ", ".join(f"{reference!r} at {where}" for where, reference in unresolved)
        raise InvalidSchema(
            "JsonSchema",
            f"$ref {shown} resolves to no document: register the document and pass it as a "
            "reference (NAME=SUBJECT:VERSION, with NAME the URI the $ref uses)",
        )


def _unresolved(node: Node, where: str, seen: set[int]) -> Iterator[tuple[str, str]]:
    if not isinstance(node.schema, dict) or id(node.schema) in seen:
        return
    seen.add(id(node.schema))
    for keyword, reference in node.references():
        if node.resolve(keyword, reference) is None:
            yield f"{where}/{keyword}", reference
    for step, child in node.subschemas():
        yield from _unresolved(child, f"{where}/{step}", seen)
