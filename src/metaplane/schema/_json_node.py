"""A JSON Schema subschema in its context: the draft that gives its keywords their meaning, and
the `referencing` resolver (base URI, dynamic scope) its `$ref`s resolve with, exactly as
jsonschema's validators carry them while they descend. Keyword readers here hide the drafts'
spellings (tuple `items`, `dependencies`, draft-04's boolean exclusive bounds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, cast

import referencing.jsonschema
from jsonschema import FormatChecker  # type: ignore[import-untyped, unused-ignore]
from jsonschema.exceptions import FormatError  # type: ignore[import-untyped, unused-ignore]
from jsonschema.validators import (  # type: ignore[import-untyped, unused-ignore]
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    validator_for,
)
from jsonschema_specifications import REGISTRY as METASCHEMAS  # type: ignore[import-untyped]
from referencing import Registry
from referencing.exceptions import Unresolvable

Schema = Any  # a subschema: a dict or a boolean


class Draft(IntEnum):
    """The drafts whose keywords the checker analyses, in order of publication."""

    DRAFT4 = 4
    DRAFT6 = 6
    DRAFT7 = 7
    DRAFT2019_09 = 2019
    DRAFT2020_12 = 2020

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def validator_class(self) -> Any:
        return _VALIDATORS[self]

    @property
    def specification(self) -> Any:
        return _SPECIFICATIONS[self]

    @property
    def uri(self) -> str:
        return str(self.validator_class.META_SCHEMA["$schema"])

    @classmethod
    def parse(cls, name: str) -> Draft:
        """A draft from its label (`draft-07`, `2020-12`), number or metaschema URI."""
        folded = name.strip().lower().removeprefix("draft").strip("-_ ")
        for draft in cls:
            if folded in (draft.label.removeprefix("draft-"), str(draft.value), draft.uri):
                return draft
            if name.strip().rstrip("#") == draft.uri.rstrip("#"):
                return draft
        raise ValueError(name)

    @classmethod
    def of_validator(cls, validator_class: Any) -> Draft | None:
        return _BY_VALIDATOR.get(validator_class)


_LABELS = {
    Draft.DRAFT4: "draft-04",
    Draft.DRAFT6: "draft-06",
    Draft.DRAFT7: "draft-07",
    Draft.DRAFT2019_09: "2019-09",
    Draft.DRAFT2020_12: "2020-12",
}
_VALIDATORS: Mapping[Draft, Any] = {
    Draft.DRAFT4: Draft4Validator,
    Draft.DRAFT6: Draft6Validator,
    Draft.DRAFT7: Draft7Validator,
    Draft.DRAFT2019_09: Draft201909Validator,
    Draft.DRAFT2020_12: Draft202012Validator,
}
_BY_VALIDATOR = {validator: draft for draft, validator in _VALIDATORS.items()}
_SPECIFICATIONS: Mapping[Draft, Any] = {
    Draft.DRAFT4: referencing.jsonschema.DRAFT4,
    Draft.DRAFT6: referencing.jsonschema.DRAFT6,
    Draft.DRAFT7: referencing.jsonschema.DRAFT7,
    Draft.DRAFT2019_09: referencing.jsonschema.DRAFT201909,
    Draft.DRAFT2020_12: referencing.jsonschema.DRAFT202012,
}

# The keywords whose value is one subschema, a list of them, or a map of them, by draft.
_ONE = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_MANY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_MAP = frozenset(
    {"$defs", "definitions", "dependentSchemas", "dependencies", "patternProperties", "properties"}
)


class ConservativeFormats(FormatChecker):  # type: ignore[misc]
    """A format checker for the reader's side: a string under a format this library cannot
    check counts as rejected, since a reader that checks it might reject it."""

    def check(self, instance: object, format: str) -> None:
        if format not in self.checkers and isinstance(instance, str):
            raise FormatError(f"format {format!r} cannot be checked here")
        super().check(instance, format)


@dataclass(frozen=True)
class Documents:
    """The documents a schema's `$ref`s may reach: its own and its references', in one
    `referencing` registry, with the jsonschema validators to check values against them."""

    registry: Any
    root_validators: dict[tuple[Draft, bool], Any] = field(default_factory=dict, compare=False)
    own: frozenset[int] = frozenset()  # ids of the document's own subschemas, alive with it
    texts: dict[int, str] = field(default_factory=dict, compare=False)
    governing: dict[tuple[int, str, Draft], Any] = field(default_factory=dict, compare=False)

    def text(self, schema: Any) -> str | None:
        """A subschema of the document as canonical JSON text (computed once); None for a
        schema that is not the document's own (made up during a check, or another's)."""
        key = id(schema)
        if key not in self.own:
            return None
        found = self.texts.get(key)
        if found is None:
            found = json.dumps(schema, sort_keys=True, separators=(",", ":"))
            self.texts[key] = found
        return found

    def validator(self, node: Node, *, reader: bool) -> Any:
        """A validator of `node` (jsonschema's), with the reader's conservative formats."""
        key = (node.draft, reader)
        base = self.root_validators.get(key)
        if base is None:
            checker = ConservativeFormats() if reader else None
            base = node.draft.validator_class(True, registry=self.registry, format_checker=checker)
            self.root_validators[key] = base
        return base.evolve(schema=node.schema, _resolver=node.resolver)


@dataclass(frozen=True, eq=False)
class Node:
    """A subschema, its draft and its resolver. Identity is the subschema object itself, its
    base URI and its draft: the same dict reached in two documents is two nodes."""

    schema: Schema
    draft: Draft
    resolver: Any
    documents: Documents

    @property
    def key(self) -> tuple[int, str, Draft]:
        return (id(self.schema), str(self.resolver._base_uri), self.draft)

    @property
    def is_dict(self) -> bool:
        return isinstance(self.schema, dict)

    def get(self, keyword: str, default: Any = None) -> Any:
        return self.schema.get(keyword, default) if isinstance(self.schema, dict) else default

    def has(self, keyword: str) -> bool:
        return isinstance(self.schema, dict) and keyword in self.schema

    def child(self, schema: Schema) -> Node:
        """A subschema of this one: its own `$schema` (a resource root) picks its draft, and
        an `$id` moves the base URI, as jsonschema's `descend` does."""
        if not isinstance(schema, dict):
            return Node(schema, self.draft, self.resolver, self.documents)
        draft = self.draft
        if "$schema" in schema:
            draft = _draft_of(schema, self.draft)
        resolver = self.resolver
        if "$id" in schema or (draft is Draft.DRAFT4 and "id" in schema):
            resource = draft.specification.create_resource(schema)
            resolver = resolver.in_subresource(resource)
        return Node(schema, draft, resolver, self.documents)

    def with_schema(self, schema: Schema) -> Node:
        """Another schema read in this node's context (a synthetic one, made from its parts)."""
        return Node(schema, self.draft, self.resolver, self.documents)

    # -- references -----------------------------------------------------------------------

    def references(self) -> Iterator[tuple[str, str]]:
        """The (keyword, reference) pairs that apply here: `$ref` (alone up to draft 7, where
        it hides its siblings), `$dynamicRef` (2020-12), `$recursiveRef` (2019-09)."""
        if not isinstance(self.schema, dict):
            return
        ref = self.schema.get("$ref")
        if isinstance(ref, str):
            yield "$ref", ref
        if self.draft is Draft.DRAFT2020_12 and isinstance(self.schema.get("$dynamicRef"), str):
            yield "$dynamicRef", self.schema["$dynamicRef"]
        if self.draft is Draft.DRAFT2019_09 and isinstance(self.schema.get("$recursiveRef"), str):
            yield "$recursiveRef", self.schema["$recursiveRef"]

    @property
    def ref_hides_siblings(self) -> bool:
        return self.draft <= Draft.DRAFT7 and isinstance(self.get("$ref"), str)

    def resolve(self, keyword: str, reference: str) -> Node | None:
        """The node a reference points to, or None when it resolves to nothing."""
        try:
            if keyword == "$recursiveRef":
                resolved = referencing.jsonschema.lookup_recursive_ref(self.resolver)
            else:
                resolved = self.resolver.lookup(reference)
        except Unresolvable:
            return None
        contents = resolved.contents
        draft = _draft_of(contents, self.draft) if isinstance(contents, dict) else self.draft
        return Node(contents, draft, resolved.resolver, self.documents)

    # -- keywords, the same whatever the draft -----------------------------------------------

    def keywords(self) -> Mapping[str, Any]:
        """The keywords that apply: only `$ref` where it hides its siblings."""
        if not isinstance(self.schema, dict):
            return {}
        if self.ref_hides_siblings:
            return {"$ref": self.schema["$ref"]}
        return cast(Mapping[str, Any], self.schema)

    def prefix_items(self) -> list[Node]:
        """The schemas of the first items, by position: `prefixItems` (2020-12), or `items`
        as an array (earlier drafts)."""
        keywords = self.keywords()
        if self.draft is Draft.DRAFT2020_12:
            prefix = keywords.get("prefixItems", [])
        else:
            prefix = keywords.get("items", [])
        return [self.child(item) for item in prefix] if isinstance(prefix, list) else []

    def rest_items(self) -> Node | None:
        """The schema of every item after the prefix: `items` (2020-12), `additionalItems`
        after a tuple, or `items` as one schema (earlier drafts); None when unconstrained."""
        keywords = self.keywords()
        if self.draft is Draft.DRAFT2020_12:
            rest = keywords.get("items")
        elif isinstance(keywords.get("items"), list):
            rest = keywords.get("additionalItems")
        else:
            rest = keywords.get("items")
        return None if rest is None else self.child(rest)

    def contains(self) -> tuple[Node, int, int | None] | None:
        """`contains` with its bounds (minContains and maxContains from 2019-09 on)."""
        keywords = self.keywords()
        if "contains" not in keywords or self.draft < Draft.DRAFT6:
            return None
        low, high = 1, None
        if self.draft >= Draft.DRAFT2019_09:
            low = keywords.get("minContains", 1)
            high = keywords.get("maxContains")
        return self.child(keywords["contains"]), low, high

    def dependent_required(self) -> dict[str, list[str]]:
        keywords = self.keywords()
        found: dict[str, list[str]] = {}
        if self.draft <= Draft.DRAFT7:
            for name, value in keywords.get("dependencies", {}).items():
                if isinstance(value, list):
                    found[name] = list(value)
        else:
            found.update(keywords.get("dependentRequired", {}))
        return found

    def dependent_schemas(self) -> dict[str, Node]:
        keywords = self.keywords()
        if self.draft <= Draft.DRAFT7:
            schemas = {
                name: value
                for name, value in keywords.get("dependencies", {}).items()
                if not isinstance(value, list)
            }
        else:
            schemas = dict(keywords.get("dependentSchemas", {}))
        return {name: self.child(value) for name, value in schemas.items()}

    def floor(self) -> tuple[float, bool] | None:
        """The tightest lower bound (value, exclusive)."""
        return _tightest(self._bounds("minimum", "exclusiveMinimum"), lower=True)

    def ceiling(self) -> tuple[float, bool] | None:
        return _tightest(self._bounds("maximum", "exclusiveMaximum"), lower=False)

    def _bounds(self, inclusive: str, exclusive: str) -> list[tuple[float, bool]]:
        keywords = self.keywords()
        flag = keywords.get(exclusive)
        bounds: list[tuple[float, bool]] = []
        if inclusive in keywords:
            # Draft 4 spells an exclusive bound as a boolean beside the inclusive keyword.
            bounds.append((keywords[inclusive], self.draft is Draft.DRAFT4 and flag is True))
        if self.draft > Draft.DRAFT4 and flag is not None and _is_number(flag):
            bounds.append((flag, True))
        return bounds

    def subschemas(self) -> Iterator[tuple[str, Node]]:
        """Every subschema of every keyword that applies, with a JSON pointer step to it."""
        for keyword, value in self.keywords().items():
            if keyword in _MAP and isinstance(value, dict):
                if keyword == "dependencies":
                    value = {k: v for k, v in value.items() if not isinstance(v, list)}
                for name, subschema in value.items():
                    yield f"{keyword}/{_escape(name)}", self.child(subschema)
            elif keyword in _MANY and isinstance(value, list):
                for index, subschema in enumerate(value):
                    yield f"{keyword}/{index}", self.child(subschema)
            elif keyword in _ONE and isinstance(value, dict | bool):
                yield keyword, self.child(value)


def _tightest(bounds: list[tuple[float, bool]], *, lower: bool) -> tuple[float, bool] | None:
    if not bounds:
        return None
    if lower:  # the higher floor; at a tie, the exclusive one
        return max(bounds, key=lambda bound: (bound[0], bound[1]))
    return min(bounds, key=lambda bound: (bound[0], not bound[1]))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _draft_of(schema: dict[str, Any], default: Draft) -> Draft:
    found = validator_for(schema, default=default.validator_class)
    return Draft.of_validator(found) or default


def _ids(schema: Any) -> Iterator[int]:
    """The ids of every dict and list inside a document."""
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            yield id(value)
            pending += value.values()
        elif isinstance(value, list):
            yield id(value)
            pending += value


def root_node(
    root: Schema, draft: Draft, resources: Mapping[str, tuple[Schema, Draft]]
) -> tuple[Node, Documents]:
    """The node of a document's root, with a registry holding it and the documents its
    references name (each under its name, and under its own `$id` if it has one)."""
    registry: Any = Registry()
    for uri, (contents, resource_draft) in resources.items():
        registry = registry.with_resource(
            uri, resource_draft.specification.create_resource(contents)
        )
    root_resource = draft.specification.create_resource(root)
    registry = METASCHEMAS.combine(registry.crawl())
    documents = Documents(registry, own=frozenset(_ids(root)))
    resolver = registry.resolver_with_root(root_resource)
    return Node(root, draft, resolver, documents), documents
