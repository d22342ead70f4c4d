"""The proof that every value a writer's schema allows is valid under a reader's schema.

The writer's schema is split into pieces (`_json_piece`); each piece must pass every keyword
the reader applies. Applicators are analysed by what they mean: a reader's `allOf` part by
part; `anyOf` and `oneOf` by finding a branch for each kind of value (and, for oneOf, proving
the other branches disjoint from it); `not` by proving the writer disjoint from it; `if` by
proving `then` for the writer's values that match the condition and `else` for the others;
`dependentSchemas` for the objects that hold the property; `unevaluated*` over the names and
positions the reader surely leaves unevaluated. Where a proof is out of reach the answer is a
conflict that says which keyword and why: the check never accepts what it cannot prove.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from metaplane.schema._json_node import Documents, Draft, Node
from metaplane.schema._json_piece import (
    ALL_KINDS,
    INTEGRAL,
    NUMERIC,
    Governing,
    Kind,
    Piece,
    closed_items,
    closed_properties,
    enumerated,
    evaluated_items,
    evaluated_properties,
    expand,
    governing_of,
    integer_ceiling,
    integer_floor,
    kind_of_value,
    kinds_of_type,
    pattern_matches,
)
from metaplane.schema._model import Conflict

MAX_STEPS = 20_000
"""Sub-proofs one check may attempt; past it, the check refuses with `analysis-too-complex`."""

MAX_DEPTH = 48

_CONTENT = ("contentEncoding", "contentMediaType", "contentSchema")
_ANNOTATION_ONLY = frozenset({"then", "else", "minContains", "maxContains", *_CONTENT})
_REFERENCE_MARKERS = ('"$ref"', '"$dynamicRef"', '"$recursiveRef"')
_UNIVERSAL_PATTERNS = frozenset({"", ".*", "^.*", ".*$", "(?:)", "[\\s\\S]*", "^[\\s\\S]*$"})


def constraints(draft: Draft) -> frozenset[str]:
    """The keywords that restrict values in `draft`: what jsonschema validates, plus the
    content keywords and the parts of `if` and `contains`, read as assertions here."""
    return frozenset(draft.validator_class.VALIDATORS) | _ANNOTATION_ONLY


_CONSTRAINTS = {draft: constraints(draft) for draft in Draft}


def accepts_all(node: Node) -> bool:
    schema = node.schema
    if schema is True:
        return True
    if not isinstance(schema, dict):
        return False
    constraining = _CONSTRAINTS[node.draft]
    return not any(keyword in constraining for keyword in schema)


def _conflict(rule: str, path: str, detail: str) -> Conflict:
    return Conflict(rule, path or "(root)", detail)


class Inclusion:
    """One check of a writer's schema against a reader's; it remembers what it proved."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}
        self._memo: dict[tuple[Any, ...], list[Conflict]] = {}
        self._empty: dict[tuple[Any, ...], bool] = {}
        self._pieces: dict[tuple[Any, ...], list[Piece]] = {}
        self._longest: dict[tuple[Any, ...], int | None] = {}
        self._stack: list[tuple[Any, ...]] = []
        self._paths: dict[tuple[Any, ...], str] = {}
        self._tainted_below = 1 << 30
        self._steps = 0
        self._keep: list[Any] = []  # made-up schemas, kept alive while ids key the memo

    # -- entry points -------------------------------------------------------------------------

    def check(
        self, writer: Sequence[Node], reader: Node, path: str, negatives: Sequence[Node] = ()
    ) -> list[Conflict]:
        """Why a value satisfying every node of `writer` (and none of `negatives`) may be
        rejected by `reader`: no conflict means it never is."""
        if accepts_all(reader):
            return []
        if not negatives and any(self._same(node, reader) for node in writer):
            return []
        conflicts: list[Conflict] = []
        for piece in self.pieces(writer, negatives):
            conflicts += self.included(piece, reader, path)
        return _unique(conflicts)

    def pieces(self, writer: Sequence[Node], negatives: Sequence[Node] = ()) -> list[Piece]:
        key = (tuple(node.key for node in writer), tuple(node.key for node in negatives))
        found = self._pieces.get(key)
        if found is None:
            found = expand(writer, negatives)
            self._pieces[key] = found
        return found

    def included(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        if accepts_all(reader) or any(self._same(node, reader) for node in piece.positives):
            return []
        key = (piece.key, reader.key)
        if key in self._memo:
            return [_moved(conflict, path) for conflict in self._memo[key]]
        if key in self._paths:
            return self._assume(key, path)
        self._steps += 1
        if self._steps > MAX_STEPS or len(self._stack) > MAX_DEPTH:
            detail = "the schemas are too large or too deeply nested to compare here"
            return [_conflict("analysis-too-complex", path, detail)]
        self._stack.append(key)
        self._paths[key] = path
        try:
            found = self._included(piece, reader, path)
        finally:
            self._stack.pop()
            del self._paths[key]
        depth = len(self._stack)
        if found or self._tainted_below >= depth:
            self._memo[key] = [_relative(conflict, path) for conflict in found]
        if self._tainted_below >= depth:
            self._tainted_below = 1 << 30
        return found

    def _assume(self, key: tuple[Any, ...], path: str) -> list[Conflict]:
        """A proof that reached itself again: by coinduction it holds, if the loop went down
        into the value (a recursive schema); a loop in place validates nothing."""
        if self._paths[key] == path:
            detail = "a reference loops back to itself without descending into the value"
            return [_conflict("reference-loop", path, detail)]
        self._tainted_below = min(self._tainted_below, self._stack.index(key))
        return []

    # -- the reader's keywords ----------------------------------------------------------------

    def _included(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        values = piece.finite_values
        if values is not None:
            return self._values(values, reader, path)
        conflicts = self._keywords(piece, reader, path)
        # An empty piece is included in anything; proving it costs, so only when it matters.
        if conflicts and self.empty(piece):
            return []
        return conflicts

    def _keywords(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        if reader.schema is False:
            return [_conflict("nothing-accepted", path, "the reader accepts no value here")]
        conflicts = self._references(piece, reader, path)
        if reader.ref_hides_siblings:
            return conflicts
        keywords = reader.keywords()
        for part in keywords.get("allOf", ()):
            conflicts += self.included(piece, reader.child(part), path)
        for keyword in ("anyOf", "oneOf"):
            if keyword in keywords:
                conflicts += self._branches(piece, reader, keyword, path)
        if "not" in keywords:
            conflicts += self._not(piece, reader.child(keywords["not"]), path)
        if "if" in keywords and reader.draft >= Draft.DRAFT7:
            conflicts += self._condition(piece, reader, path)
        conflicts += self._unevaluated(piece, reader, path)
        return conflicts + self._assertions(piece, reader, path)

    def _references(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        conflicts: list[Conflict] = []
        for keyword, reference in reader.references():
            target = reader.resolve(keyword, reference)
            if target is None:
                detail = (
                    f"the reader's {keyword} {reference!r} resolves to no schema: "
                    "register the document it names and pass it as a reference"
                )
                conflicts.append(_conflict("reference-unresolved", f"{path}/{keyword}", detail))
            else:
                conflicts += self.included(piece, target, path)
        return conflicts

    def _values(self, values: list[Any], reader: Node, path: str) -> list[Conflict]:
        """A writer with few values: each is checked with the reader's own validator."""
        validator = reader.documents.validator(reader, reader=True)
        rejected = [value for value in values if not validator.is_valid(value)]
        allowed = _declared_type(reader)
        lost = frozenset(kind_of_value(value) for value in rejected) - allowed
        conflicts = _types(Piece((), only=lost), reader, path) if lost else []
        return conflicts + [
            _conflict("enum-narrowed", path, f"the writer allows {value!r}, the reader rejects it")
            for value in rejected
            if kind_of_value(value) in allowed
        ]

    def _branches(self, piece: Piece, reader: Node, keyword: str, path: str) -> list[Conflict]:
        branches = [reader.child(branch) for branch in reader.keywords()[keyword]]
        exclusive = keyword == "oneOf"
        if self._branch_for(piece, branches, exclusive) is not None:
            return []
        conflicts: list[Conflict] = []
        for part in self._by_kind(piece):
            chosen = self._branch_for(part, branches, exclusive)
            if chosen is None:
                conflicts.append(self._no_branch(part, branches, keyword, exclusive, path))
        return conflicts

    def _branch_for(self, piece: Piece, branches: list[Node], exclusive: bool) -> int | None:
        for index, branch in enumerate(branches):
            if self.included(piece, branch, ""):
                continue
            if not exclusive or all(
                self.disjoint(piece, other) for other in branches if other is not branch
            ):
                return index
        return None

    def _no_branch(
        self, piece: Piece, branches: list[Node], keyword: str, exclusive: bool, path: str
    ) -> Conflict:
        kinds = describe_kinds(piece.kinds)
        accepting = [i for i, branch in enumerate(branches) if not self.included(piece, branch, "")]
        if exclusive and accepting:
            detail = (
                f"the writer's {kinds} values may match more than one branch of the reader's "
                f"oneOf (branch {accepting[0]} and another), which then rejects them"
            )
            return _conflict("one-of-overlap", f"{path}/oneOf", detail)
        detail = f"no branch of the reader's {keyword} accepts all the writer's {kinds} values"
        return _conflict("no-branch-accepts", path, detail)

    def _by_kind(self, piece: Piece) -> list[Piece]:
        """The piece split by kind of value (numbers kept together, then apart)."""
        groups = [frozenset({kind}) for kind in piece.kinds if kind not in NUMERIC]
        numbers = piece.kinds & NUMERIC
        if numbers:
            groups.append(numbers)
        parts = [piece.restricted(group) for group in groups]
        return parts

    def _not(self, piece: Piece, excluded: Node, path: str) -> list[Conflict]:
        if self.disjoint(piece, excluded):
            return []
        detail = "the writer allows values the reader's `not` excludes"
        return [_conflict("not-overlaps", f"{path}/not", detail)]

    def _condition(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        condition = reader.child(keywords["if"])
        conflicts: list[Conflict] = []
        if "then" in keywords:
            then = reader.child(keywords["then"])
            for part in self.extended(piece, [condition]):
                conflicts += self.included(part, then, f"{path}/then")
        if "else" in keywords:
            otherwise = reader.child(keywords["else"])
            for part in self.extended(piece, [], [condition]):
                conflicts += self.included(part, otherwise, f"{path}/else")
        return conflicts

    def _unevaluated(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        if reader.draft < Draft.DRAFT2019_09:
            return []
        keywords = reader.keywords()
        conflicts: list[Conflict] = []

        def holds(node: Node) -> bool | None:
            if not self.included(piece, node, ""):
                return True
            return False if self.disjoint(piece, node) else None

        if "unevaluatedProperties" in keywords and Kind.OBJECT in piece.kinds:
            evaluated = evaluated_properties(reader, writer=False, holds=holds, keep=self._keep)
            if evaluated is not None:
                made = closed_properties(evaluated, keywords["unevaluatedProperties"])
                found = self._objects(piece, self._made(reader, made), path)
                conflicts += _relabelled(
                    found, {"additionalProperties": "unevaluatedProperties"}, path
                )
        if "unevaluatedItems" in keywords and Kind.ARRAY in piece.kinds:
            length = evaluated_items(reader, writer=False, holds=holds, keep=self._keep)
            if length is not None:
                made = closed_items(reader.draft, length, keywords["unevaluatedItems"])
                found = self._arrays(piece, self._made(reader, made), path)
                renamed = {"items": "unevaluatedItems", "additionalItems": "unevaluatedItems"}
                conflicts += _relabelled(found, renamed, path)
        return conflicts

    def _made(self, context: Node, schema: Any) -> Node:
        self._keep.append(schema)
        return context.with_schema(schema)

    # -- assertions by kind of value ------------------------------------------------------------

    def _assertions(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        conflicts = _types(piece, reader, path)
        if enumerated(reader) is not None:
            detail = "the reader accepts a fixed set of values, the writer does not restrict them"
            conflicts.append(_conflict("enum-narrowed", path, detail))
        kinds = piece.kinds & _declared_type(reader)
        if kinds & NUMERIC:
            conflicts += _numbers(piece.restricted(kinds & NUMERIC), reader, path)
        if Kind.STRING in kinds:
            conflicts += self._strings(piece, reader, path)
        if Kind.ARRAY in kinds:
            conflicts += self._arrays(piece, reader, path)
        if Kind.OBJECT in kinds:
            conflicts += self._objects(piece, reader, path)
            conflicts += self._dependencies(piece, reader, path)
        unknown = sorted(
            keyword
            for keyword in keywords
            if keyword in _CONSTRAINTS[reader.draft] and keyword not in _HANDLED
        )
        for keyword in unknown:  # a keyword this module does not know: refuse, and say so
            detail = f"the reader's {keyword!r} is not analysed by this registry"
            conflicts.append(_conflict("keyword-not-analysed", f"{path}/{keyword}", detail))
        return conflicts

    def _strings(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        conflicts = _length_bounds(piece, keywords, path)
        pattern = keywords.get("pattern")
        if pattern is not None and not _pattern_implied(pattern, piece):
            given = sorted(piece.patterns) or None
            detail = (
                f"the reader's pattern is {pattern!r}, the writer's {given!r}: a pattern is "
                "proved only by the same pattern (regular-expression inclusion is not decided)"
            )
            conflicts.append(_conflict("pattern-changed", f"{path}/pattern", detail))
        format_name = keywords.get("format")
        if format_name is not None and not _format_implied(format_name, piece.formats):
            given_formats = sorted(piece.formats) or None
            detail = f"the reader's format is {format_name!r}, the writer's {given_formats!r}"
            conflicts.append(_conflict("format-changed", f"{path}/format", detail))
        return conflicts + self._content(piece, reader, path)

    def _content(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        conflicts: list[Conflict] = []
        for keyword in ("contentEncoding", "contentMediaType"):
            if keyword in keywords and reader.draft >= Draft.DRAFT7:
                given = {k.get(keyword) for _, k in piece.facts()}
                if keywords[keyword] not in given:
                    detail = f"the reader's {keyword} is {keywords[keyword]!r}, the writer's is not"
                    conflicts.append(_conflict("content-changed", f"{path}/{keyword}", detail))
        if "contentSchema" in keywords and reader.draft >= Draft.DRAFT2019_09:
            inner = reader.child(keywords["contentSchema"])
            given_schemas = [
                n.child(k["contentSchema"]) for n, k in piece.facts() if "contentSchema" in k
            ]
            conflicts += self.check(given_schemas, inner, f"{path}/contentSchema")
        return conflicts

    # -- arrays ---------------------------------------------------------------------------------

    def _arrays(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        prefix, rest = reader.prefix_items(), reader.rest_items()
        positions = max(piece.prefix_length, len(prefix))
        conflicts: list[Conflict] = []
        for index in range(positions + 1):
            if piece.max_items is not None and index >= piece.max_items:
                break
            target = prefix[index] if index < len(prefix) else rest
            if target is None:
                continue
            location = _item_location(reader, path, index, index < len(prefix))
            found = self._item(piece.items_at(index), target, location)
            if found and self._reachable(piece, index):
                conflicts += found
        if "minItems" in keywords and keywords["minItems"] > piece.min_items:
            detail = (
                f"the reader's minItems is {keywords['minItems']}, the writer's {piece.min_items}"
            )
            conflicts.append(_conflict("bound-narrowed", f"{path}/minItems", detail))
        if "maxItems" in keywords and not _at_most(piece.max_items, keywords["maxItems"]):
            longest = self.longest_array(piece)
            if not _at_most(longest, keywords["maxItems"]):
                detail = f"the reader's maxItems is {keywords['maxItems']}, the writer's {longest}"
                conflicts.append(_conflict("bound-narrowed", f"{path}/maxItems", detail))
        unique = keywords.get("uniqueItems") is True
        if unique and not piece.unique_items and not _at_most(self.longest_array(piece), 1):
            detail = "the reader requires unique items, the writer does not"
            conflicts.append(_conflict("unique-items-added", f"{path}/uniqueItems", detail))
        return conflicts + self._contains(piece, reader, path)

    def _reachable(self, piece: Piece, index: int) -> bool:
        """Whether an array of the piece may have an item at `index`."""
        longest = self.longest_array(piece)
        return longest is None or index < longest

    def _item(self, writer: list[Node], reader: Node, location: str) -> list[Conflict]:
        if not writer and not accepts_all(reader) and reader.schema is not False:
            detail = "the writer accepts any value here"
            return [_conflict("constraint-added", location, detail)]
        return self.check(writer, reader, location)

    def longest_array(self, piece: Piece) -> int | None:
        """The most items an array of the piece may hold (None: no limit)."""
        if piece.key in self._longest:
            return self._longest[piece.key]
        self._longest[piece.key] = piece.max_items  # while proving: the declared bound
        found = self._longest_array(piece)
        self._longest[piece.key] = found
        return found

    def _longest_array(self, piece: Piece) -> int | None:
        longest = piece.max_items
        for index in range(piece.prefix_length + 1):
            if longest is not None and index >= longest:
                break
            if self.nodes_empty(piece.items_at(index)):
                return index
        return longest

    def _contains(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        found = reader.contains()
        if found is None:
            return []
        longest = self.longest_array(piece)
        wanted, low, high = found
        conflicts: list[Conflict] = []
        if low > 0:
            guaranteed = self._guaranteed(piece, wanted)
            if guaranteed < low:
                detail = (
                    f"the reader requires {low} item(s) matching its contains, "
                    f"the writer guarantees {guaranteed}"
                )
                conflicts.append(_conflict("contains-narrowed", f"{path}/contains", detail))
        if high is not None and not self._at_most(piece, wanted, high, longest):
            detail = f"the reader allows at most {high} item(s) matching its contains"
            conflicts.append(_conflict("contains-narrowed", f"{path}/maxContains", detail))
        return conflicts

    def _guaranteed(self, piece: Piece, wanted: Node) -> int:
        """How many items of every array of the piece surely match `wanted`."""
        best = max(
            (low for given, low, _ in piece.contains if not self.check([given], wanted, "")),
            default=0,
        )
        counted = 0
        for index in range(min(piece.min_items, piece.prefix_length + 1)):
            if not self.check(piece.items_at(index), wanted, ""):
                # Past the prefix, one schema holds for every further item.
                counted += 1 if index < piece.prefix_length else piece.min_items - index
        return max(best, counted)

    def _at_most(self, piece: Piece, wanted: Node, high: int, longest: int | None) -> bool:
        if longest is not None and longest <= high:
            return True
        for given, _, given_high in piece.contains:
            if (
                given_high is not None
                and given_high <= high
                and not self.check([wanted], given, "")
            ):
                return True
        if longest is None:
            return False
        possible = 0
        for index in range(min(longest, piece.prefix_length + 1)):
            if not self.disjoint_nodes(piece.items_at(index), wanted):
                possible += 1 if index < piece.prefix_length else longest - index
        return possible <= high

    # -- objects ----------------------------------------------------------------------------

    def _objects(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        rules = governing_of(reader) or _NO_RULES
        conflicts: list[Conflict] = []
        for name in sorted(piece.listed_names | set(rules.properties)):
            conflicts += self._property(piece, rules, name, f"{path}/properties/{name}")
        reader_patterns = frozenset(pattern for pattern, _ in rules.patterns)
        for pattern, schema in rules.patterns:
            region = _Region(pattern, reader_patterns)
            location = f"{path}/patternProperties/{pattern}"
            conflicts += self._unlisted(piece, schema, location, region)
        extra = rules.additional
        if extra is not None and not accepts_all(extra) and not _any_universal(rules.patterns):
            region = _Region(None, reader_patterns)
            location = f"{path}/additionalProperties"
            conflicts += self._unlisted(piece, extra, location, region)
        conflicts += self._required(piece, keywords, path)
        conflicts += self._property_count(piece, keywords, path)
        return conflicts + self._property_names(piece, reader, path)

    def _property(self, piece: Piece, rules: Governing, name: str, path: str) -> list[Conflict]:
        given = piece.property_schemas(name)
        wanted_all = rules.schemas_for(name)
        if len(given) == 1 and len(wanted_all) == 1 and self._same(given[0], wanted_all[0]):
            return []  # the common case: the property did not change
        conflicts: list[Conflict] = []
        for wanted in wanted_all:
            if accepts_all(wanted):
                continue
            if not given and name in rules.properties:
                detail = (
                    f"the writer's open content model allows {name!r} with any value; "
                    "the reader constrains it"
                )
                conflicts.append(_conflict("property-constrained-in-open-model", path, detail))
            elif wanted.schema is False and name not in rules.properties:
                detail = f"the writer allows {name!r}; the reader's closed content model rejects it"
                conflicts.append(_conflict("property-rejected-by-closed-model", path, detail))
            else:
                conflicts += self.check(given, wanted, path)
        if conflicts and given and self.nodes_empty(given):
            return []  # the writer never holds this property
        return conflicts

    def _unlisted(
        self,
        piece: Piece,
        wanted: Node,
        path: str,
        region: _Region,
    ) -> list[Conflict]:
        """Prove that every name outside both sides' listed ones, in a region of names (those
        matching a reader's pattern, or those the reader leaves to additionalProperties),
        holds a value `wanted` accepts: some fact of the writer must settle it alone."""
        attempts: list[list[Conflict]] = []
        closed, subject = wanted.schema is False, region.subject
        for rule in piece.governing:
            conflicts: list[Conflict] = []
            for pattern, schema in rule.patterns:
                if not region.overlaps(pattern):
                    continue
                if closed:
                    detail = (
                        f"the writer allows properties matching {pattern!r}; "
                        "the reader's closed content model rejects them"
                    )
                    found = _conflict("property-rejected-by-closed-model", path, detail)
                    conflicts += [] if self.nodes_empty([schema]) else [found]
                else:
                    conflicts += self.check([schema], wanted, path)
            if not any(region.covered_by(pattern) for pattern, _ in rule.patterns):
                rest = [] if rule.additional is None else [rule.additional]
                conflicts += self._item(rest, wanted, path) if rest else [_open(subject, path)]
            if not conflicts:
                return []
            attempts.append(conflicts)
        if not attempts:
            if closed:
                detail = (
                    "the writer allows properties it does not list; "
                    "the reader's closed content model rejects them"
                )
                return [_conflict("content-model-closed", path, detail)]
            return [_open(subject, path)]
        if closed and all(
            any(c.rule == "property-constrained-in-open-model" for c in a) for a in attempts
        ):
            detail = (
                "the writer allows properties it does not list; "
                "the reader's closed content model rejects them"
            )
            return [_conflict("content-model-closed", path, detail)]
        return min(attempts, key=len)

    def _required(self, piece: Piece, keywords: Any, path: str) -> list[Conflict]:
        missing = sorted(set(keywords.get("required", ())) - piece.required)
        return [
            _conflict(
                "required-added",
                f"{path}/properties/{name}",
                f"the reader requires {name!r}, the writer does not",
            )
            for name in missing
        ]

    def _property_count(self, piece: Piece, keywords: Any, path: str) -> list[Conflict]:
        conflicts: list[Conflict] = []
        if "minProperties" in keywords and keywords["minProperties"] > piece.min_properties:
            detail = (
                f"the reader's minProperties is {keywords['minProperties']}, "
                f"the writer's {piece.min_properties}"
            )
            conflicts.append(_conflict("bound-narrowed", f"{path}/minProperties", detail))
        if "maxProperties" in keywords:
            most = self.most_properties(piece)
            if most is None or most > keywords["maxProperties"]:
                limit = keywords["maxProperties"]
                detail = f"the reader's maxProperties is {limit}, the writer's {most}"
                conflicts.append(_conflict("bound-narrowed", f"{path}/maxProperties", detail))
        return conflicts

    def most_properties(self, piece: Piece) -> int | None:
        most = piece.max_properties
        for rule in piece.governing:
            if rule.patterns or rule.additional is None or rule.additional.schema is not False:
                continue
            possible = sum(
                1 for name in rule.properties if not self.nodes_empty(piece.property_schemas(name))
            )
            most = possible if most is None else min(most, possible)
        return most

    def _property_names(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        keywords = reader.keywords()
        if "propertyNames" not in keywords or reader.draft < Draft.DRAFT6:
            return []
        wanted = reader.child(keywords["propertyNames"])
        location = f"{path}/propertyNames"
        validator = reader.documents.validator(wanted, reader=True)
        conflicts = [
            _conflict("property-names-narrowed", location, f"the reader rejects the name {name!r}")
            for name in sorted(piece.listed_names)
            if not validator.is_valid(name) and not self.nodes_empty(piece.property_schemas(name))
        ]
        if piece.closed:
            return conflicts
        strings = self._made(wanted, {"type": "string"})
        names = [strings, *piece.property_names]
        regions = _name_regions(piece)
        if regions is None:
            inner = self.check(names, wanted, location)
        else:
            inner = []
            for pattern in regions:
                matching = self._made(wanted, {"type": "string", "pattern": pattern})
                inner += self.check([*names, matching], wanted, location)
        if inner:
            detail = "the writer allows property names the reader's propertyNames rejects"
            conflicts.append(_conflict("property-names-narrowed", location, detail))
        return conflicts

    def _dependencies(self, piece: Piece, reader: Node, path: str) -> list[Conflict]:
        conflicts: list[Conflict] = []
        keyword = "dependencies" if reader.draft <= Draft.DRAFT7 else "dependentRequired"
        for name, needed in reader.dependent_required().items():
            holding = Piece(
                (*piece.positives, self._made(reader, {"required": [name]})), piece.negatives
            )
            missing = sorted(set(needed) - holding.required)
            if missing and not self.nodes_empty(piece.property_schemas(name)):
                detail = (
                    f"the reader requires {', '.join(map(repr, missing))} whenever {name!r} is "
                    "present, the writer does not"
                )
                conflicts.append(_conflict("dependency-added", f"{path}/{keyword}/{name}", detail))
        keyword = "dependencies" if reader.draft <= Draft.DRAFT7 else "dependentSchemas"
        for name, schema in reader.dependent_schemas().items():
            if accepts_all(schema):
                continue
            present = self._made(reader, {"type": "object", "required": [name]})
            found = [
                conflict
                for part in self.extended(piece, [present])
                for conflict in self.included(part, schema, f"{path}/{keyword}/{name}")
            ]
            if found and not self.nodes_empty(piece.property_schemas(name)):
                conflicts += found
        return conflicts

    # -- emptiness and disjointness -----------------------------------------------------------

    def extended(
        self, piece: Piece, nodes: Iterable[Node], negatives: Iterable[Node] = ()
    ) -> list[Piece]:
        """The piece with more facts (split where they split), and the dependentSchemas of
        its facts that the names they now require trigger."""
        extra = list(negatives)
        found = []
        for more in self.pieces(list(nodes)):
            combined = Piece(
                (*piece.positives, *more.positives),
                (*piece.negatives, *more.negatives, *extra),
                (*piece.synthetic, *more.synthetic),
                piece.only,
            )
            triggered = _triggered(combined)
            found += self.extended(combined, triggered) if triggered else [combined]
        return found

    def disjoint(self, piece: Piece, other: Node) -> bool:
        """No value of the piece satisfies `other`."""
        return all(self.empty(part) for part in self.extended(piece, [other]))

    def disjoint_nodes(self, nodes: Sequence[Node], other: Node) -> bool:
        return all(self.disjoint(piece, other) for piece in self.pieces(nodes))

    def nodes_empty(self, nodes: Sequence[Node]) -> bool:
        """No value satisfies every node (`false` among them, or a contradiction)."""
        if not nodes:
            return False
        return all(self.empty(piece) for piece in self.pieces(nodes))

    def empty(self, piece: Piece) -> bool:
        """Whether the piece is provably empty (False: not proved, or not empty)."""
        key = piece.key
        known = self._empty.get(key)
        if known is not None:
            return known
        self._empty[key] = False  # while proving: a loop proves nothing
        found = self._prove_empty(piece)
        self._empty[key] = found
        return found

    def _prove_empty(self, piece: Piece) -> bool:
        if not piece.kinds:
            return True
        values = piece.finite_values
        if values is not None:
            return not values
        for negative in piece.negatives:
            rest = tuple(node for node in piece.negatives if node is not negative)
            reduced = Piece(piece.positives, rest, piece.synthetic, piece.only)
            if len(self._stack) < MAX_DEPTH and not self.included(reduced, negative, ""):
                return True
        return all(self._kind_empty(piece, kind) for kind in piece.kinds)

    def _kind_empty(self, piece: Piece, kind: Kind) -> bool:
        if kind in NUMERIC:
            return _numbers_empty(piece, kind)
        if kind is Kind.STRING:
            return piece.max_length is not None and piece.min_length > piece.max_length
        if kind is Kind.ARRAY:
            longest = self.longest_array(piece)
            return longest is not None and piece.min_items > longest
        if kind is Kind.OBJECT:
            if any(self.nodes_empty(piece.property_schemas(name)) for name in piece.required):
                return True
            most = self.most_properties(piece)
            return most is not None and piece.min_properties > most
        return False

    # -- identical subschemas -------------------------------------------------------------------

    def _same(self, writer: Node, reader: Node) -> bool:
        """Identical text in the same draft, with no reference whose target could differ."""
        if writer.draft is not reader.draft:
            return False
        if writer.schema is reader.schema and writer.resolver is reader.resolver:
            return True
        text = self._text(writer.schema, writer.documents)
        if text != self._text(reader.schema, reader.documents):
            return False
        return not any(marker in text for marker in _REFERENCE_MARKERS)

    def _text(self, schema: Any, documents: Documents) -> str:
        if isinstance(schema, bool):
            return "true" if schema else "false"
        known = documents.text(schema)
        if known is not None:
            return known
        text = self._texts.get(id(schema))
        if text is None:
            text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
            self._texts[id(schema)] = text
            self._keep.append(schema)
        return text


_HANDLED = frozenset(
    {
        "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if", "then",
        "else", "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format",
        "contentEncoding", "contentMediaType", "contentSchema", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
        "maxContains", "unevaluatedItems", "properties", "patternProperties",
        "additionalProperties", "required", "minProperties", "maxProperties", "propertyNames",
        "dependencies", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
    }
)  # fmt: skip


def _at_most(count: int | None, limit: int) -> bool:
    return count is not None and count <= limit


def _triggered(piece: Piece) -> list[Node]:
    """dependentSchemas of the piece's facts whose property the piece requires, not yet in,
    when its values are all objects (`required` says nothing of the others)."""
    if not piece.kinds <= {Kind.OBJECT}:
        return []
    present = {node.key for node in piece.positives}
    return [
        schema
        for node in piece.positives
        for name, schema in node.dependent_schemas().items()
        if name in piece.required and schema.key not in present and schema.schema is not True
    ]


def _relative(conflict: Conflict, path: str) -> Conflict:
    """A conflict found at `path`, with its location relative to it (for the memo)."""
    location = "" if conflict.location == "(root)" else conflict.location
    if path and location.startswith(path):
        location = location[len(path) :]
    return Conflict(conflict.rule, location, conflict.detail)


def _moved(conflict: Conflict, path: str) -> Conflict:
    """A remembered conflict at the path where the same proof is needed again."""
    return Conflict(conflict.rule, (path + conflict.location) or "(root)", conflict.detail)


def _relabelled(conflicts: list[Conflict], renamed: dict[str, str], path: str) -> list[Conflict]:
    """Conflicts found against a made-up schema, at the keyword the reader really has."""
    relabelled = []
    for conflict in conflicts:
        location = conflict.location
        for old, new in renamed.items():
            prefix = f"{path}/{old}"
            if location == prefix or location.startswith(prefix + "/"):
                location = f"{path}/{new}{location[len(prefix) :]}"
                break
        relabelled.append(Conflict(conflict.rule, location, conflict.detail))
    return relabelled


def _unique(conflicts: list[Conflict]) -> list[Conflict]:
    return list(dict.fromkeys(conflicts))


def _open(subject: str, path: str) -> Conflict:
    detail = (
        f"the writer's open content model allows {subject} with any value; "
        "the reader constrains them"
    )
    return _conflict("property-constrained-in-open-model", path, detail)


_NO_RULES = Governing({}, [], None)


@dataclass(frozen=True)
class _Region:
    """Property names neither side lists: those matching a reader's `pattern`, or (None)
    those matching none of the reader's patterns, left to its additionalProperties."""

    pattern: str | None
    reader_patterns: frozenset[str]

    @property
    def subject(self) -> str:
        if self.pattern is None:
            return "names the reader does not list"
        return f"names matching {self.pattern!r}"

    def overlaps(self, pattern: str) -> bool:
        """Whether names matching a writer's `pattern` may fall in the region."""
        if self.pattern is not None:
            return _may_overlap(self.pattern, pattern)
        return pattern not in self.reader_patterns

    def covered_by(self, pattern: str) -> bool:
        """Whether every name of the region matches a writer's `pattern`."""
        return pattern in _UNIVERSAL_PATTERNS or pattern == self.pattern


def _any_universal(patterns: list[tuple[str, Node]]) -> bool:
    return any(pattern in _UNIVERSAL_PATTERNS for pattern, _ in patterns)


def _name_regions(piece: Piece) -> list[str] | None:
    """Patterns every unlisted name of the piece matches one of, when a fact allows no other
    name (None: any name may appear)."""
    for rule in piece.governing:
        if rule.additional is not None and rule.additional.schema is False:
            return [pattern for pattern, _ in rule.patterns]
    return None


def _literal_prefix(pattern: str) -> str | None:
    """The literal text an anchored pattern's matches start with (None: not anchored)."""
    if not pattern.startswith("^"):
        return None
    prefix: list[str] = []
    for index, char in enumerate(pattern[1:], start=1):
        if not (char.isalnum() or char in "_-:@ "):
            if char in "*?{" and prefix:
                prefix.pop()  # the last literal may repeat zero times
            break
        following = pattern[index + 1 : index + 2]
        if following in ("*", "?", "{"):
            break
        prefix.append(char)
    return "".join(prefix)


def _may_overlap(one: str, other: str) -> bool:
    """False only when no name can match both patterns (anchored, diverging literals)."""
    first, second = _literal_prefix(one), _literal_prefix(other)
    if first is None or second is None:
        return True
    return first.startswith(second) or second.startswith(first)


# Formats whose strings all have a wider format too, by their RFCs' grammars: every URI is a
# URI reference and an IRI, every IRI and URI reference an IRI reference, every RFC 5321
# address an RFC 6531 one. (Not hostname in idn-hostname: "xn--zz" is a hostname, no A-label.)
_WIDER_FORMATS = {
    "uri": frozenset({"uri-reference", "iri", "iri-reference"}),
    "uri-reference": frozenset({"iri-reference"}),
    "iri": frozenset({"iri-reference"}),
    "email": frozenset({"idn-email"}),
}


def _format_implied(wanted: str, given: set[str]) -> bool:
    return any(name == wanted or wanted in _WIDER_FORMATS.get(name, ()) for name in given)


def _pattern_implied(pattern: str, piece: Piece) -> bool:
    if pattern in piece.patterns or pattern in _UNIVERSAL_PATTERNS:
        return True
    if piece.max_length == 0:
        return pattern_matches(pattern, "")
    return False


def _item_location(reader: Node, path: str, index: int, in_prefix: bool) -> str:
    if not in_prefix:
        if reader.draft is not Draft.DRAFT2020_12 and isinstance(
            reader.keywords().get("items"), list
        ):
            return f"{path}/additionalItems"
        return f"{path}/items"
    keyword = "prefixItems" if reader.draft is Draft.DRAFT2020_12 else "items"
    return f"{path}/{keyword}/{index}"


def _declared_type(node: Node) -> frozenset[Kind]:
    declared = node.keywords().get("type")
    if declared is None:
        return ALL_KINDS
    names = [declared] if isinstance(declared, str) else declared
    return frozenset().union(*(kinds_of_type(name, node.draft) for name in names))


def describe_kinds(kinds: frozenset[Kind]) -> str:
    names = []
    for kind in (Kind.NULL, Kind.BOOLEAN, Kind.OBJECT, Kind.ARRAY, Kind.STRING):
        if kind in kinds:
            names.append(kind.value)
    if kinds >= NUMERIC:
        names.append("number")
    elif Kind.INTEGER in kinds and Kind.INTEGRAL_FLOAT in kinds:
        names.append("integer")
    else:
        if Kind.INTEGER in kinds:
            names.append("integer (as written: 1)")
        if Kind.INTEGRAL_FLOAT in kinds:
            names.append("integer written with a fraction (1.0)")
        if Kind.FRACTION in kinds:
            names.append("non-integer number")
    return ", ".join(names)


def _types(piece: Piece, reader: Node, path: str) -> list[Conflict]:
    allowed = _declared_type(reader)
    lost = piece.kinds - allowed
    if not lost:
        return []
    declared = reader.keywords().get("type", [])
    shown = ", ".join(sorted([declared] if isinstance(declared, str) else declared))
    if piece.kinds == ALL_KINDS:
        detail = f"the writer allows every type, the reader only {shown}"
    else:
        detail = f"the writer allows {describe_kinds(lost)}, the reader only {shown}"
    return [_conflict("type-narrowed", f"{path}/type", detail)]


def _length_bounds(piece: Piece, keywords: Any, path: str) -> list[Conflict]:
    conflicts = []
    if "minLength" in keywords and keywords["minLength"] > piece.min_length:
        detail = (
            f"the reader's minLength is {keywords['minLength']}, the writer's {piece.min_length}"
        )
        conflicts.append(_conflict("bound-narrowed", f"{path}/minLength", detail))
    if "maxLength" in keywords:
        given = piece.max_length
        if given is None or given > keywords["maxLength"]:
            detail = f"the reader's maxLength is {keywords['maxLength']}, the writer's {given}"
            conflicts.append(_conflict("bound-narrowed", f"{path}/maxLength", detail))
    return conflicts


# Numbers ----------------------------------------------------------------------------------


def _numbers(piece: Piece, reader: Node, path: str) -> list[Conflict]:
    integral = piece.kinds <= INTEGRAL
    conflicts = []
    for side, limit, given, lower in (
        ("minimum", reader.floor(), piece.floor, True),
        ("maximum", reader.ceiling(), piece.ceiling, False),
    ):
        if limit is not None and not _within(given, limit, lower, integral):
            detail = f"the reader's {side} is {_show(limit)}, the writer's {_show(given)}"
            conflicts.append(_conflict("bound-narrowed", f"{path}/{side}", detail))
    step = reader.keywords().get("multipleOf")
    if step is not None and not _multiple_proved(step, piece.multiples, integral):
        shown = piece.multiples[0] if piece.multiples else None
        detail = f"the reader's multipleOf is {step}, the writer's {shown}"
        conflicts.append(_conflict("bound-narrowed", f"{path}/multipleOf", detail))
    return conflicts


def _within(
    given: tuple[float, bool] | None, limit: tuple[float, bool], lower: bool, integral: bool
) -> bool:
    if given is None:
        return False
    if integral:
        if lower:
            return integer_floor(given) >= integer_floor(limit)
        return integer_ceiling(given) <= integer_ceiling(limit)
    if given[0] != limit[0]:
        return given[0] > limit[0] if lower else given[0] < limit[0]
    return given[1] or not limit[1]


def _show(bound: tuple[float, bool] | None) -> str:
    if bound is None:
        return "absent"
    return f"{bound[0]} (exclusive)" if bound[1] else str(bound[0])


def _multiple_proved(step: float, multiples: list[float], integral: bool) -> bool:
    if any(_divides(step, given) for given in multiples):
        return True
    return integral and _divides_every_integer(step)


def _divides(step: float, given: float) -> bool:
    """Every multiple of `given` passes jsonschema's multipleOf `step`. Floating point decides
    there (0.3 is not a multiple of 0.1 to it), so only exact cases count: the same step, or
    integral steps where one divides the other."""
    if step == given:
        return True
    if not (float(step).is_integer() and float(given).is_integer()):
        return False
    return Fraction(given) % Fraction(step) == 0


def _divides_every_integer(step: float) -> bool:
    """Every integer is a multiple of `step`: 1, or 1/2^k (exact in binary floating point)."""
    fraction = Fraction(step)
    return fraction.numerator == 1 and (fraction.denominator & (fraction.denominator - 1)) == 0


def _numbers_empty(piece: Piece, kind: Kind) -> bool:
    if kind is Kind.FRACTION and any(float(m).is_integer() for m in piece.multiples):
        return True  # a multiple of an integer has no fraction
    floor, ceiling = piece.floor, piece.ceiling
    if floor is None or ceiling is None:
        return False
    if floor[0] > ceiling[0] or (floor[0] == ceiling[0] and (floor[1] or ceiling[1])):
        return True
    if kind in INTEGRAL:
        return integer_floor(floor) > integer_ceiling(ceiling)
    return floor[0] == ceiling[0] and float(floor[0]).is_integer()
