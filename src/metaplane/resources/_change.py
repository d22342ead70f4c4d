"""A change to the metadata as a value: its conditions (compares, each with the typed error
it stands for) and its writes, run as one transaction. Managers build changes; the layers
above may add conditions of their own (a leader's fence) and run them as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from metaplane.resources._errors import ChangedSinceRead
from metaplane.store import (
    BadVersion,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Expect,
    Get,
    List,
    MetadataError,
    MetadataStore,
    Put,
    Txn,
    TxnResult,
    TxnTooLarge,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Write: TypeAlias = Put | Delete | DeletePrefix
NULL = b"null"
"""The value of a marker key: the cluster name, an assignment, a namespace's topic entry."""

Refusal: TypeAlias = Callable[[Entry | None], MetadataError]
"""The error a failed compare stands for, given what its key holds now (None: missing)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A compare of a change and the typed error it raises when it does not hold."""

    compare: Compare
    refusal: Refusal

    @property
    def check(self) -> Get | List:
        """The read that tells, in a failed transaction, whether this compare held."""
        if self.compare.whole_prefix:
            return List(self.compare.key, keys_only=True, limit=1)
        return Get(self.compare.key)


@dataclass(frozen=True, slots=True)
class Change:
    """Conditions and writes, all or nothing at one revision.

    `compares` and `ops` are the raw pieces for a caller that builds its own transaction;
    `guarded(...)` adds conditions in front (checked, and explained, first); `apply` runs it
    and returns the revision, or raises the error of the first condition that failed.
    """

    conditions: tuple[Condition, ...] = ()
    ops: tuple[Write, ...] = ()

    @property
    def compares(self) -> tuple[Compare, ...]:
        return tuple(condition.compare for condition in self.conditions)

    def __add__(self, other: Change) -> Change:
        return Change(self.conditions + other.conditions, self.ops + other.ops)

    def guarded(self, *conditions: Condition) -> Change:
        """This change, refused unless `conditions` hold as well (a fence, a lease, …)."""
        return Change(conditions + self.conditions, self.ops)

    def txn(self, *compares: Compare) -> Txn:
        """The transaction, with the caller's `compares` after the change's own; its failure
        branch reads each key the change compares, for `refusal` to explain."""
        checks = tuple(condition.check for condition in self.conditions)
        return Txn(self.compares + compares, self.ops, checks)

    @property
    def fits(self) -> bool:
        """True if the change fits in one transaction (128 operations a branch)."""
        try:
            self.txn()
        except TxnTooLarge:
            return False
        return True

    def refusal(self, result: TxnResult) -> MetadataError | None:
        """The error of the first condition that failed in `result`, a failed run of
        `txn(...)`; None if every one held (so one of the caller's compares failed)."""
        for index, condition in enumerate(self.conditions):
            entry = _checked_entry(result, index)
            if not condition.compare.holds(entry):
                return condition.refusal(entry)
        return None

    async def apply(self, store: MetadataStore) -> int:
        """Run the change; return its revision or raise the error it was refused with."""
        result = await store.execute(self.txn())
        if result.succeeded:
            return result.revision
        error = self.refusal(result)
        if error is None:  # every compare held when the failure branch read them
            raise AssertionError(f"a transaction failed with all its compares holding: {self}")
        raise error


def _checked_entry(result: TxnResult, index: int) -> Entry | None:
    outcome = result.results[index]
    if outcome is None or isinstance(outcome, Entry):
        return outcome
    listing = result.listing(index)  # a prefix compare: the first key under it, if any
    return listing[0] if listing else None


# Conditions ---------------------------------------------------------------------------------


def key_exists(key: str, otherwise: Callable[[], MetadataError]) -> Condition:
    """`key` exists; else `otherwise()`."""
    return Condition(Compare.exists(key), lambda _: otherwise())


def key_absent(key: str, otherwise: Callable[[], MetadataError]) -> Condition:
    """`key` does not exist; else `otherwise()`."""
    return Condition(Compare.absent(key), lambda _: otherwise())


def prefix_empty(prefix: str, otherwise: Callable[[], MetadataError]) -> Condition:
    """Nothing under `prefix`, nor the key itself; else `otherwise()`."""
    return Condition(Compare.empty(prefix), lambda _: otherwise())


def at_version(key: str, version: int, missing: Callable[[], MetadataError]) -> Condition:
    """`key` is at `version`; else `BadVersion`, or `missing()` when it does not exist."""

    def refusal(entry: Entry | None) -> MetadataError:
        return missing() if entry is None else BadVersion(key, version, entry.version)

    return Condition(Compare.version(key, "==", version), refusal)


def expecting(
    key: str,
    expect: int | Expect,
    *,
    missing: Callable[[], MetadataError],
    taken: Callable[[], MetadataError],
) -> tuple[Condition, ...]:
    """The conditions of a write that expects ANY, ABSENT (else `taken()`) or a version
    (else `BadVersion`, or `missing()`) of `key`."""
    if expect is Expect.ANY:
        return ()
    if expect is Expect.ABSENT:
        return (key_absent(key, taken),)
    return (at_version(key, expect, missing),)


def unchanged(
    key: str, mod_revision: int, missing: Callable[[], MetadataError] | None = None
) -> Condition:
    """`key` is as it was read: at `mod_revision` (0: it was absent, and still is). Else
    `ChangedSinceRead`, or `missing()` (if given) when a key read as present is gone."""

    def refusal(now: Entry | None) -> MetadataError:
        if now is None and missing is not None:
            return missing()
        return ChangedSinceRead(key, mod_revision, 0 if now is None else now.mod_revision)

    return Condition(Compare.mod_revision(key, "==", mod_revision), refusal)


def mod_revision_of(entry: Entry | None) -> int:
    """What `unchanged` expects of a key read as `entry` (None: absent)."""
    return 0 if entry is None else entry.mod_revision


async def rereading(operation: Callable[[bool], Awaitable[T]], attempts: int = 3) -> T:
    """`await operation(fresh)`, again while it is refused with `ChangedSinceRead` (a race
    with another writer, or a late cache); `fresh` asks the retries to read from the store."""
    for attempt in range(attempts - 1):
        try:
            return await operation(attempt > 0)
        except ChangedSinceRead as error:
            log.info("%s; reading again", error)
    return await operation(True)
