"""Compatibility modes over the formats' rules: which earlier versions a new schema is checked
against, in which direction, and the verdict with every reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from metaplane.resources import CompatibilityMode
from metaplane.schema._model import (
    CompatibilityResult,
    Conflict,
    Direction,
    Incompatibility,
    Schema,
    parse_mode,
)
from metaplane.schema._parse import format_of


def check(
    new: Schema,
    previous: Sequence[Schema] | Mapping[int, Schema],
    mode: CompatibilityMode | str,
) -> CompatibilityResult:
    """Whether `new` may follow `previous` under `mode`.

    `previous` holds the earlier versions, oldest first (numbered from 1), or maps version
    numbers to them. Plain modes check the latest version, transitive ones every version.
    Raises UnknownCompatibilityMode for a mode name that is none of the modes.
    """
    mode = parse_mode(mode)
    versions = _numbered(previous)
    if mode is CompatibilityMode.NONE or not versions:
        return CompatibilityResult(mode, ())
    checked = versions if mode.transitive else versions[-1:]
    found: list[Incompatibility] = []
    for version, old in checked:
        found += _against(new, version, old, mode)
    return CompatibilityResult(mode, tuple(v for v, _ in checked), tuple(found))


def _numbered(previous: Sequence[Schema] | Mapping[int, Schema]) -> list[tuple[int, Schema]]:
    if isinstance(previous, Mapping):
        return sorted(previous.items())
    return list(enumerate(previous, start=1))


def _against(
    new: Schema, version: int, old: Schema, mode: CompatibilityMode
) -> list[Incompatibility]:
    if new.type is not old.type:
        detail = f"version {version} is {old.type.value}, the new schema {new.type.value}"
        return _tagged("evolution", version, [Conflict("schema-type-changed", "", detail)])
    rules = format_of(new.type)
    found: list[Incompatibility] = []
    if mode.checks_backward:
        found += _tagged("backward", version, rules.reader_conflicts(new.model, old.model))
    if mode.checks_forward:
        found += _tagged("forward", version, rules.reader_conflicts(old.model, new.model))
    return found + _tagged("evolution", version, rules.evolution_conflicts(old.model, new.model))


def _tagged(direction: Direction, version: int, conflicts: list[Conflict]) -> list[Incompatibility]:
    return [Incompatibility(direction, version, c.rule, c.location, c.detail) for c in conflicts]
