"""The registry's keys beyond seed 001's, beside them under `/schemas/…`, and their values:

    /schemas/{subject}/references      {"<version>": [{"name", "subject", "version"}, …]}
    /schemas/{subject}/referenced_by   {"<version>": [{"subject", "version"}, …]}
    /schemas/{subject}/config          {"json_schema_draft": "draft-07"}
    /schemas/_global/config            the same: the settings a new subject starts with

One key of each a subject, whatever its number of versions, so that a write reads and
compares a bounded number of keys. The paths are built from `metaplane.layout`'s own
builders (which check every name); these kinds are not in the layout's table yet (see
docs/layout.md), so this is the one place the registry adds a segment to a path.
"""

from __future__ import annotations

from functools import lru_cache

from msgspec import Struct

from metaplane import layout

REFERENCES = "references"
REFERENCED_BY = "referenced_by"
CONFIG = "config"


@lru_cache(maxsize=4096)
def references(subject: str) -> str:
    """The references of every version of `subject` that has some."""
    return f"{layout.subject_prefix(subject)}/{REFERENCES}"


@lru_cache(maxsize=4096)
def referenced_by(subject: str) -> str:
    """The versions of other subjects that reference each version of `subject`."""
    return f"{layout.subject_prefix(subject)}/{REFERENCED_BY}"


@lru_cache(maxsize=4096)
def subject_config(subject: str) -> str:
    return f"{layout.subject_prefix(subject)}/{CONFIG}"


@lru_cache(maxsize=4096)
def global_config() -> str:
    """Beside `/schemas/_global/next_schema_id` and the default compatibility mode."""
    folder = layout.default_compatibility_mode().rpartition("/")[0]
    return f"{folder}/{CONFIG}"


def version_field(version: int) -> str:
    """A version as the key of a map value: its canonical decimal (checked by the layout)."""
    layout.schema_version("_", version)  # InvalidNumber outside 1 … 2^32 - 1
    return str(version)


class ReferenceEntry(Struct, frozen=True, kw_only=True):
    """One reference of a version, as Confluent's API spells it."""

    name: str
    subject: str
    version: int


class Referrer(Struct, frozen=True, kw_only=True):
    """A version that references a version of this subject."""

    subject: str
    version: int


class RegistryConfig(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Settings of a subject, or of the registry for the subjects created from now on."""

    json_schema_draft: str | None = None


References = dict[str, list[ReferenceEntry]]
ReferencedBy = dict[str, list[Referrer]]
