"""What a writer's schema guarantees, as facts: a `Piece` is a conjunction of subschemas its
values satisfy (positives) and do not satisfy (negatives), with no applicator left to split.

A writer's schema becomes a disjunction of pieces: `allOf` adds facts, `anyOf` / `oneOf` /
`if` split into one piece a branch (a oneOf branch also excludes its siblings; `if` gives
"if and then" and "not if, and else"), `$ref` adds its target, `not` adds a negative. Every
step keeps what the writer may produce or enlarges it (a disjunction too large to split is
dropped, an unresolvable reference counts as `true`), so that a proof over the pieces holds
for the writer. The aggregate views (`kinds`, `floor`, `required`, …) read every positive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

from metaplane.schema._json_node import Draft, Node

MAX_PIECES = 64
"""Pieces one writer's schema splits into at most; beyond, a disjunction is not split (its
facts are dropped: the writer is taken to allow more, never less)."""


class Kind(Enum):
    """A partition of JSON values: every value has exactly one kind."""

    NULL = "null"
    BOOLEAN = "boolean"
    OBJECT = "object"
    ARRAY = "array"
    STRING = "string"
    INTEGER = "integer"  # a number written without a fraction: 3
    INTEGRAL_FLOAT = "integral float"  # a number with a zero fraction: 3.0
    FRACTION = "fraction"  # any other number: 3.5


ALL_KINDS = frozenset(Kind)
NUMERIC = frozenset({Kind.INTEGER, Kind.INTEGRAL_FLOAT, Kind.FRACTION})
INTEGRAL = frozenset({Kind.INTEGER, Kind.INTEGRAL_FLOAT})


def kinds_of_type(name: str, draft: Draft) -> frozenset[Kind]:
    if name == "number":
        return NUMERIC
    if name == "integer":
        # Draft 4's integer is an integer as written; later drafts accept 1.0 too.
        return frozenset({Kind.INTEGER}) if draft is Draft.DRAFT4 else INTEGRAL
    for kind in (Kind.NULL, Kind.BOOLEAN, Kind.OBJECT, Kind.ARRAY, Kind.STRING):
        if kind.value == name:
            return frozenset({kind})
    return frozenset()  # "any" (draft 3) is refused before analysis


def kind_of_value(value: object) -> Kind:
    if value is None:
        return Kind.NULL
    if isinstance(value, bool):
        return Kind.BOOLEAN
    if isinstance(value, int):
        return Kind.INTEGER
    if isinstance(value, float):
        return Kind.INTEGRAL_FLOAT if value.is_integer() else Kind.FRACTION
    if isinstance(value, str):
        return Kind.STRING
    if isinstance(value, list):
        return Kind.ARRAY
    return Kind.OBJECT


def declared_kinds(node: Node) -> frozenset[Kind]:
    """The kinds a node's `type` (and `enum` / `const`) allow."""
    keywords = node.keywords()
    kinds = ALL_KINDS
    declared = keywords.get("type")
    if isinstance(declared, str):
        kinds = kinds_of_type(declared, node.draft)
    elif isinstance(declared, list):
        kinds = frozenset().union(*(kinds_of_type(name, node.draft) for name in declared))
    values = enumerated(node)
    if values is not None:
        kinds &= frozenset(kind_of_value(value) for value in values)
    return kinds


def enumerated(node: Node) -> list[Any] | None:
    keywords = node.keywords()
    if "const" in keywords and node.draft >= Draft.DRAFT6:
        return [keywords["const"]]
    if "enum" in keywords:
        return list(keywords["enum"])
    return None


@dataclass(frozen=True)
class Governing:
    """How one fact constrains an object's properties: listed names, patterns, the rest."""

    properties: dict[str, Node]
    patterns: list[tuple[str, Node]]
    additional: Node | None

    def schemas_for(self, name: str) -> list[Node]:
        """The subschemas this fact applies to property `name` (none: unconstrained)."""
        found = [self.properties[name]] if name in self.properties else []
        matched = [schema for pattern, schema in self.patterns if pattern_matches(pattern, name)]
        found += matched
        if not found and self.additional is not None:
            found.append(self.additional)
        return found


def governing_of(node: Node) -> Governing | None:
    """How `node` constrains an object's properties (None: it does not), computed once for
    each subschema of a parsed document."""
    documents = node.documents
    cached = id(node.schema) in documents.own
    if cached and node.key in documents.governing:
        known: Governing | None = documents.governing[node.key]
        return known
    keywords = node.keywords()
    properties = {name: node.child(s) for name, s in keywords.get("properties", {}).items()}
    patterns = [(p, node.child(s)) for p, s in keywords.get("patternProperties", {}).items()]
    extra = keywords.get("additionalProperties")
    additional = None if extra is None else node.child(extra)
    found = None
    if properties or patterns or additional is not None:
        found = Governing(properties, patterns, additional)
    if cached:
        documents.governing[node.key] = found
    return found


@dataclass(frozen=True, eq=False)
class Piece:
    """A conjunction: the writer's values in this piece satisfy every positive and no negative.

    Positives are kept whole; their applicators (allOf, anyOf, …) were split into further
    facts when the piece was made and are ignored by the views below.
    """

    positives: tuple[Node, ...]
    negatives: tuple[Node, ...] = ()
    synthetic: tuple[Any, ...] = field(default=(), repr=False)  # keeps made-up schemas alive
    only: frozenset[Kind] = ALL_KINDS  # the kinds of value this piece is narrowed to

    @cached_property
    def key(self) -> tuple[Any, ...]:
        return (
            tuple(sorted(node.key for node in self.positives)),
            tuple(sorted(node.key for node in self.negatives)),
            self.only,
        )

    def restricted(self, kinds: frozenset[Kind]) -> Piece:
        """The piece's values of these kinds only."""
        return Piece(self.positives, self.negatives, self.synthetic, self.only & kinds)

    def facts(self) -> Iterator[tuple[Node, dict[str, Any]]]:
        for node in self.positives:
            keywords = node.keywords()
            if isinstance(keywords, dict):
                yield node, keywords

    # -- kinds and values --------------------------------------------------------------------

    @cached_property
    def kinds(self) -> frozenset[Kind]:
        kinds = self.only
        for node in self.positives:
            kinds &= declared_kinds(node)
        return kinds

    @cached_property
    def finite_values(self) -> list[Any] | None:
        """Every value the piece allows, when they are few and known: an enum or const, or
        kinds that are all null and boolean. None otherwise."""
        candidates: list[Any] | None = None
        for node in self.positives:
            values = enumerated(node)
            if values is not None:
                candidates = values
                break
        if candidates is None and self.kinds <= {Kind.NULL, Kind.BOOLEAN}:
            candidates = [None, True, False]
        if candidates is None:
            return None
        return [value for value in _unique(candidates) if self.allows(value)]

    def allows(self, value: object) -> bool:
        """Whether the piece may hold `value` (formats are not checked on this side)."""
        if kind_of_value(value) not in self.kinds:
            return False
        for node in self.positives:
            if not node.documents.validator(node, reader=False).is_valid(value):
                return False
        # A value is ruled out by a negative only if it surely matches it.
        return not any(
            node.documents.validator(node, reader=True).is_valid(value) for node in self.negatives
        )

    # -- numbers -------------------------------------------------------------------------

    @cached_property
    def floor(self) -> tuple[float, bool] | None:
        bounds = [b for b in (node.floor() for node in self.positives) if b is not None]
        return max(bounds, key=lambda b: (b[0], b[1]), default=None)

    @cached_property
    def ceiling(self) -> tuple[float, bool] | None:
        bounds = [b for b in (node.ceiling() for node in self.positives) if b is not None]
        return min(bounds, key=lambda b: (b[0], not b[1]), default=None)

    @cached_property
    def multiples(self) -> list[float]:
        return [keywords["multipleOf"] for _, keywords in self.facts() if "multipleOf" in keywords]

    # -- strings -------------------------------------------------------------------------

    @cached_property
    def min_length(self) -> int:
        return max((k["minLength"] for _, k in self.facts() if "minLength" in k), default=0)

    @cached_property
    def max_length(self) -> int | None:
        return min((k["maxLength"] for _, k in self.facts() if "maxLength" in k), default=None)

    @cached_property
    def patterns(self) -> set[str]:
        return {k["pattern"] for _, k in self.facts() if "pattern" in k}

    @cached_property
    def formats(self) -> set[str]:
        return {k["format"] for _, k in self.facts() if "format" in k}

    # -- arrays --------------------------------------------------------------------------

    @cached_property
    def prefix_length(self) -> int:
        return max((len(node.prefix_items()) for node in self.positives), default=0)

    def items_at(self, index: int) -> list[Node]:
        """The subschemas every item at `index` satisfies (index past every prefix: the rest)."""
        found: list[Node] = []
        for node in self.positives:
            prefix = node.prefix_items()
            if index < len(prefix):
                found.append(prefix[index])
            else:
                rest = node.rest_items()
                if rest is not None:
                    found.append(rest)
        return found

    @cached_property
    def contains(self) -> list[tuple[Node, int, int | None]]:
        return [found for found in (node.contains() for node in self.positives) if found]

    @cached_property
    def min_items(self) -> int:
        floors = [k["minItems"] for _, k in self.facts() if "minItems" in k]
        floors += [low for _, low, _ in self.contains]
        return max(floors, default=0)

    @cached_property
    def max_items(self) -> int | None:
        return min((k["maxItems"] for _, k in self.facts() if "maxItems" in k), default=None)

    @cached_property
    def unique_items(self) -> bool:
        return any(k.get("uniqueItems") is True for _, k in self.facts())

    # -- objects ---------------------------------------------------------------------------

    @cached_property
    def governing(self) -> list[Governing]:
        found = [governing_of(node) for node in self.positives]
        return [rule for rule in found if rule is not None]

    def property_schemas(self, name: str) -> list[Node]:
        """What every value of property `name` satisfies, by every fact."""
        return [schema for rule in self.governing for schema in rule.schemas_for(name)]

    @cached_property
    def listed_names(self) -> set[str]:
        return {name for rule in self.governing for name in rule.properties}

    @cached_property
    def required(self) -> set[str]:
        """Required names, with those that `dependentRequired` makes required in turn."""
        required = {name for _, k in self.facts() for name in k.get("required", ())}
        dependent: dict[str, set[str]] = {}
        for node in self.positives:
            for name, names in node.dependent_required().items():
                dependent.setdefault(name, set()).update(names)
        pending = list(required)
        while pending:
            for name in dependent.get(pending.pop(), ()):
                if name not in required:
                    required.add(name)
                    pending.append(name)
        return required

    @cached_property
    def min_properties(self) -> int:
        floors: list[int] = [k["minProperties"] for _, k in self.facts() if "minProperties" in k]
        return max([*floors, len(self.required)])

    @cached_property
    def max_properties(self) -> int | None:
        ceilings = [k["maxProperties"] for _, k in self.facts() if "maxProperties" in k]
        return min(ceilings, default=None)

    @cached_property
    def closed(self) -> bool:
        """No name outside a fact's listed names can appear."""
        return any(
            not rule.patterns and rule.additional is not None and rule.additional.schema is False
            for rule in self.governing
        )

    @cached_property
    def property_names(self) -> list[Node]:
        return [
            node.child(keywords["propertyNames"])
            for node, keywords in self.facts()
            if "propertyNames" in keywords and node.draft >= Draft.DRAFT6
        ]


def integer_floor(bound: tuple[float, bool]) -> float:
    value, exclusive = bound
    return math.floor(value) + 1 if exclusive and float(value).is_integer() else math.ceil(value)


def integer_ceiling(bound: tuple[float, bool]) -> float:
    value, exclusive = bound
    return math.ceil(value) - 1 if exclusive and float(value).is_integer() else math.floor(value)


def pattern_matches(pattern: str, name: str) -> bool:
    """As jsonschema matches patternProperties: `re.search`."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def _unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if not any(_same_value(value, other) for other in seen):
            seen.append(value)
    return seen


def _same_value(one: Any, other: Any) -> bool:
    return type(one) is type(other) and one == other


# Expansion ---------------------------------------------------------------------------------


@dataclass
class _State:
    pending: list[Node]
    positives: list[Node] = field(default_factory=list)
    negatives: list[Node] = field(default_factory=list)
    seen: set[tuple[int, str, Draft]] = field(default_factory=set)
    synthetic: list[Any] = field(default_factory=list)
    closing: list[Node] = field(default_factory=list)  # unevaluated* not yet made facts

    def copy(self) -> _State:
        return _State(
            list(self.pending),
            list(self.positives),
            list(self.negatives),
            set(self.seen),
            list(self.synthetic),
            list(self.closing),
        )

    def holds(self, node: Node) -> bool | None:
        """What this piece says of a subschema: a fact of it, excluded by it, or neither."""
        if any(node.key == fact.key for fact in self.positives):
            return True
        if any(node.key == fact.key for fact in self.negatives):
            return False
        return None


def expand(positives: Iterable[Node], negatives: Iterable[Node] = ()) -> list[Piece]:
    """The pieces whose union is the conjunction of `positives` and no `negatives`."""
    done: list[Piece] = []
    states = [_State(list(positives), negatives=list(negatives))]
    while states:
        state = states.pop()
        if _run(state, states, len(done)):
            done.append(_settled(state))
    return done


def _run(state: _State, states: list[_State], done: int) -> bool:
    """Expand a state's facts; False when it is found empty (a `false` fact)."""
    while True:
        while state.pending:
            node = state.pending.pop()
            if node.schema is False:
                return False
            if isinstance(node.schema, dict) and node.key not in state.seen:
                _take(node, state, states, done)
        _add_triggered(state)
        if not state.pending:
            _add_unevaluated(state)
            return True


def _take(node: Node, state: _State, states: list[_State], done: int) -> None:
    """A fact into the piece: its references, parts and negation as further facts, its
    disjunctions as further pieces (the first branch in this one)."""
    state.seen.add(node.key)
    state.positives.append(node)
    _add_references(node, state)
    if node.ref_hides_siblings:
        return
    keywords = node.keywords()
    state.pending += [node.child(part) for part in keywords.get("allOf", ())]
    if "not" in keywords:
        state.negatives.append(node.child(keywords["not"]))
    if node.draft >= Draft.DRAFT2019_09 and keywords.keys() & _UNEVALUATED:
        state.closing.append(node)
    for branches in _disjunctions(node):
        if len(states) + done + len(branches) <= MAX_PIECES:
            for extra in branches[1:]:
                split = state.copy()
                _apply(split, extra)
                states.append(split)
            _apply(state, branches[0])


def _apply(state: _State, branch: tuple[list[Node], list[Node]]) -> None:
    positives, negatives = branch
    state.pending += positives
    state.negatives += negatives


def _disjunctions(node: Node) -> list[list[tuple[list[Node], list[Node]]]]:
    """Each disjunctive keyword of a node as its branches (positives, negatives)."""
    keywords = node.keywords()
    found: list[list[tuple[list[Node], list[Node]]]] = []
    if "anyOf" in keywords:
        found.append([([node.child(branch)], []) for branch in keywords["anyOf"]])
    if "oneOf" in keywords:
        branches = [node.child(branch) for branch in keywords["oneOf"]]
        found.append(
            [
                ([branch], [other for other in branches if other is not branch])
                for branch in branches
            ]
        )
    if "if" in keywords and node.draft >= Draft.DRAFT7:
        condition = node.child(keywords["if"])
        then = [node.child(keywords["then"])] if "then" in keywords else []
        otherwise = [node.child(keywords["else"])] if "else" in keywords else []
        found.append([([condition, *then], []), (otherwise, [condition])])
    return found


def _add_references(node: Node, state: _State) -> None:
    for keyword, reference in node.references():
        target = node.resolve(keyword, reference)
        if target is not None:  # unresolvable: taken as `true` (the writer allows more)
            state.pending.append(target)


def _add_triggered(state: _State) -> None:
    """dependentSchemas (and draft 7's schema dependencies) of names the piece requires, when
    its values are all objects: `required` and dependentSchemas say nothing of the others."""
    piece = Piece(tuple(state.positives))
    if not piece.kinds <= {Kind.OBJECT}:
        return
    for node in state.positives:
        for name, schema in node.dependent_schemas().items():
            if name in piece.required and schema.key not in state.seen:
                state.pending.append(schema)


_UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})


def _add_unevaluated(state: _State) -> None:
    """A writer's unevaluatedProperties / unevaluatedItems as plain facts over the names and
    positions no part of the node could evaluate in this piece (an over-estimate of the
    evaluated ones, so that the fact constrains less than the keyword does)."""
    while state.closing:
        node = state.closing.pop()
        keywords = node.keywords()
        if "unevaluatedProperties" in keywords:
            evaluated = evaluated_properties(
                node, writer=True, holds=state.holds, keep=state.synthetic
            )
            if evaluated is not None:
                made = closed_properties(evaluated, keywords["unevaluatedProperties"])
                state.synthetic.append(made)
                state.positives.append(node.with_schema(made))
        if "unevaluatedItems" in keywords:
            length = evaluated_items(node, writer=True, holds=state.holds, keep=state.synthetic)
            if length is not None:
                made = closed_items(node.draft, length, keywords["unevaluatedItems"])
                state.synthetic.append(made)
                state.positives.append(node.with_schema(made))


def _settled(state: _State) -> Piece:
    return Piece(tuple(state.positives), tuple(state.negatives), tuple(state.synthetic))


# Evaluation, for unevaluatedProperties and unevaluatedItems --------------------------------


@dataclass(frozen=True)
class Evaluated:
    """Names a schema evaluates: listed ones and those matching patterns."""

    names: frozenset[str]
    patterns: frozenset[str]


Holds = Callable[[Node], bool | None]
"""For a reader: whether a subschema surely holds (True) or surely fails (False) for the
writer's values at hand, or may do either (None)."""


def _unknown(node: Node) -> bool | None:
    return None


def evaluated_properties(
    node: Node, *, writer: bool, holds: Holds = _unknown, keep: list[Any] | None = None
) -> Evaluated | None:
    """The property names `node` and its in-place subschemas evaluate; None: every name.

    For a writer, every name any part may evaluate (an over-estimate); for a reader, only
    names that are evaluated whenever the node holds (an under-estimate): of a conditional
    part (anyOf, oneOf, if / then / else, dependentSchemas), what `holds` proves holds counts,
    and of the rest, what all the outcomes that may hold evaluate.
    """
    return _Evaluation(writer, holds, [] if keep is None else keep).names(
        node, frozenset(), nested=False
    )


def evaluated_items(
    node: Node, *, writer: bool, holds: Holds = _unknown, keep: list[Any] | None = None
) -> int | None:
    """How many leading items `node` evaluates; None: all of them (writer: may; reader: must)."""
    evaluation = _Evaluation(writer, holds, [] if keep is None else keep)
    return evaluation.items(node, frozenset(), nested=False)


_Visiting = frozenset[tuple[int, str, Draft]]


@dataclass(frozen=True)
class _Evaluation:
    """What unevaluatedProperties and unevaluatedItems leave out, estimated from above (a
    writer's) or from below (a reader's)."""

    writer: bool
    holds: Holds
    keep: list[Any]  # made-up schemas `holds` sees: alive while their ids key its memo

    def names(self, node: Node, visiting: _Visiting, *, nested: bool) -> Evaluated | None:
        if not isinstance(node.schema, dict) or node.key in visiting:
            return Evaluated(frozenset(), frozenset())
        visiting = visiting | {node.key}
        keywords = node.keywords()
        if "additionalProperties" in keywords or (nested and "unevaluatedProperties" in keywords):
            return None
        listed = frozenset(keywords.get("properties", {}))
        parts: list[Evaluated | None] = [
            Evaluated(listed, frozenset(keywords.get("patternProperties", {})))
        ]
        for group in self._in_place(node):
            found = [self.names(part, visiting, nested=True) for part in group.sure]
            maybe = [self.names(part, visiting, nested=True) for part in group.maybe]
            parts += found + (maybe if self.writer else [_common(maybe)] if maybe else [])
        if self.writer and any(self._unresolved(node)):
            return None
        return _union(parts)

    def items(self, node: Node, visiting: _Visiting, *, nested: bool) -> int | None:
        if not isinstance(node.schema, dict) or node.key in visiting:
            return 0
        visiting = visiting | {node.key}
        keywords = node.keywords()
        if node.rest_items() is not None or (nested and "unevaluatedItems" in keywords):
            return None
        if self.writer and "contains" in keywords:
            return None  # contains evaluates the items it matches, wherever they are
        lengths: list[int | None] = [len(node.prefix_items())]
        for group in self._in_place(node):
            lengths += [self.items(part, visiting, nested=True) for part in group.sure]
            maybe = [self.items(part, visiting, nested=True) for part in group.maybe]
            if maybe:
                lengths.append(_longest(maybe) if self.writer else _shortest(maybe))
        if self.writer and any(self._unresolved(node)):
            return None
        return _longest(lengths)

    def _unresolved(self, node: Node) -> Iterator[bool]:
        for keyword, reference in node.references():
            yield node.resolve(keyword, reference) is None

    def _in_place(self, node: Node) -> Iterator[_Group]:
        """The in-place subschemas: those that hold whenever the node does (`sure`), and
        groups of which some hold (`maybe`: the outcomes that may hold)."""
        keywords = node.keywords()
        resolved = [node.resolve(k, r) for k, r in node.references()]
        yield _Group([target for target in resolved if target is not None], [])
        yield _Group([node.child(part) for part in keywords.get("allOf", ())], [])
        for keyword in ("anyOf", "oneOf"):
            branches = [node.child(branch) for branch in keywords.get(keyword, ())]
            if branches:
                yield self._split(branches)
        if "if" in keywords and node.draft >= Draft.DRAFT7:
            yield self._condition(node, keywords)
        for name, schema in node.dependent_schemas().items():
            condition = {"required": [name]}
            self.keep.append(condition)
            yield (
                _Group([], [schema])
                if self.writer
                else self._split([schema], node.with_schema(condition))
            )

    def _split(self, branches: list[Node], condition: Node | None = None) -> _Group:
        """Branches of which some hold (or, with a condition, all hold if it does): those
        proved to hold are sure; those proved to fail are dropped."""
        if condition is not None:
            verdict = self.holds(condition)
            if verdict is None:
                return _Group([], branches if self.writer else [])
            return _Group(branches if verdict else [], [])
        verdicts = [self.holds(branch) for branch in branches]
        sure = [b for b, verdict in zip(branches, verdicts, strict=True) if verdict is True]
        maybe = [b for b, verdict in zip(branches, verdicts, strict=True) if verdict is None]
        if self.writer:
            return _Group(sure, maybe)
        return _Group(sure, [] if sure else maybe)

    def _condition(self, node: Node, keywords: Mapping[str, Any]) -> _Group:
        condition = node.child(keywords["if"])
        satisfied = node.with_schema({"allOf": [keywords["if"], keywords.get("then", True)]})
        otherwise = node.child(keywords.get("else", True))
        verdict = self.holds(condition)
        if verdict is None:
            return _Group([], [satisfied, otherwise])
        return _Group([satisfied if verdict else otherwise], [])


@dataclass(frozen=True)
class _Group:
    sure: list[Node]
    maybe: list[Node]


def _union(parts: list[Evaluated | None]) -> Evaluated | None:
    known = [part for part in parts if part is not None]
    if len(known) < len(parts):
        return None
    return Evaluated(
        frozenset().union(*(p.names for p in known)),
        frozenset().union(*(p.patterns for p in known)),
    )


def _common(parts: list[Evaluated | None]) -> Evaluated | None:
    """What every outcome evaluates (an outcome that evaluates every name adds no limit)."""
    known = [part for part in parts if part is not None]
    if not known:
        return None
    return Evaluated(
        frozenset.intersection(*(p.names for p in known)),
        frozenset.intersection(*(p.patterns for p in known)),
    )


def _longest(lengths: list[int | None]) -> int | None:
    known = [n for n in lengths if n is not None]
    return None if len(known) < len(lengths) else max(known, default=0)


def _shortest(lengths: list[int | None]) -> int | None:
    known = [n for n in lengths if n is not None]
    return min(known) if known else None


def closed_properties(evaluated: Evaluated, rest: Any) -> dict[str, Any]:
    """unevaluatedProperties as a plain schema: `rest` for the names outside `evaluated`."""
    return {
        "properties": {name: True for name in sorted(evaluated.names)},
        "patternProperties": {pattern: True for pattern in sorted(evaluated.patterns)},
        "additionalProperties": rest,
    }


def closed_items(draft: Draft, length: int, rest: Any) -> dict[str, Any]:
    """unevaluatedItems as a plain schema: `rest` for the items after the first `length`."""
    if draft is Draft.DRAFT2020_12:
        return {"prefixItems": [True] * length, "items": rest}
    return {"items": [True] * length, "additionalItems": rest}
