"""The one write path above the store. A change to the metadata is a value: its conditions
(compares, each with the typed error it stands for — a leader's or an owner's fence is one
more condition) and its writes, run as one transaction. Managers build changes; one runner
(`Writer`) applies them with a retry policy: it backs off and sends a change again while the
store is unavailable, gives up with the typed error of the condition that failed, and
re-reads (builds the change again) after a lost race.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

from metaplane.resources._errors import ChangedSinceRead
from metaplane.store import (
    MAX_TXN_OPS,
    BadVersion,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Expect,
    Get,
    List,
    Listing,
    MetadataError,
    MetadataStore,
    Operation,
    Put,
    Txn,
    TxnResult,
    TxnTooLarge,
    Unavailable,
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
    """A compare of a change and the typed error it raises when it does not hold.

    `local`, when given, is checked before each attempt to send the change: it raises when
    the condition is known here to fail already (a leader whose session is suspended stops
    acting at once, even though its fence would still hold at the store)."""

    compare: Compare
    refusal: Refusal
    local: Callable[[], None] | None = field(default=None, compare=False)

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
    `reads`: keys the failure branch reads as well as those the conditions compare, so that a
    caller that decides again after a refusal finds them in it (`seen`), at the refusal's
    revision, without reading again.
    """

    conditions: tuple[Condition, ...] = ()
    ops: tuple[Write, ...] = ()
    reads: tuple[Get, ...] = ()

    @property
    def compares(self) -> tuple[Compare, ...]:
        return tuple(condition.compare for condition in self.conditions)

    @staticmethod
    def join(changes: Iterable[Change]) -> Change:
        """One change of all of `changes`, in their order: built once (adding change to
        change copies the sum so far each time)."""
        parts = list(changes)
        return Change(
            tuple(condition for part in parts for condition in part.conditions),
            tuple(op for part in parts for op in part.ops),
            tuple(read for part in parts for read in part.reads),
        )

    def __add__(self, other: Change) -> Change:
        return Change(
            self.conditions + other.conditions, self.ops + other.ops, self.reads + other.reads
        )

    def guarded(self, *conditions: Condition) -> Change:
        """This change, refused unless `conditions` hold as well (a fence, a lease, …)."""
        return Change(conditions + self.conditions, self.ops, self.reads)

    def txn(self, *compares: Compare) -> Txn:
        """The transaction, with the caller's `compares` after the change's own; its failure
        branch reads each key the change compares, for `refusal` to explain, then `reads`."""
        checks = tuple(condition.check for condition in self.conditions)
        return Txn(self.compares + compares, self.ops, checks + self.reads)

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

    def seen(self, result: TxnResult) -> dict[str, Entry | None]:
        """What the failure branch of `result`, a failed run of `txn(...)`, read of each key:
        those the conditions compare (but for prefix compares) and `reads` (None: missing)."""
        found: dict[str, Entry | None] = {}
        for index, condition in enumerate(self.conditions):
            if not condition.compare.whole_prefix:
                found[condition.compare.key] = result.entry(index)
        for index, read in enumerate(self.reads, start=len(self.conditions)):
            found[read.key] = result.entry(index)
        return found

    async def apply(self, store: MetadataStore, policy: RetryPolicy | None = None) -> int:
        """Run the change through the one runner (`Writer`): its revision, or the error it
        was refused with."""
        return await Writer(store, policy).apply(self)

    def check_local(self) -> None:
        """Raise what a condition known to fail here already stands for (see `Condition`)."""
        for condition in self.conditions:
            if condition.local is not None:
                condition.local()

    def confirming_reads(self) -> list[Get | List]:
        """The reads that tell whether this change's writes are in place."""
        reads: list[Get | List] = []
        for op in self.ops:
            if isinstance(op, DeletePrefix):
                reads.append(List(op.prefix, keys_only=True, limit=1))
            else:
                reads.append(Get(op.key))
        return reads

    def in_place(self, results: Iterable[object]) -> bool:
        """True when `results` (of `confirming_reads`) show every write of the change done:
        each put key holds the value (and lease) written, each deleted key is gone."""
        for op, result in zip(self.ops, results, strict=True):
            if isinstance(op, Put):
                if not isinstance(result, Entry) or (result.value, result.lease) != (
                    op.value,
                    op.lease,
                ):
                    return False
            elif isinstance(op, Delete):
                if result is not None:
                    return False
            elif not isinstance(result, Listing) or len(result) > 0:
                return False
        return True


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


# The runner -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the runner retries.

    `conflicts`: how many times a change is built again from fresh reads after a lost race
    (`ChangedSinceRead`: a key it read was written since) before that error is raised.
    `unavailable`: for how many seconds a change is sent again, backing off, while the store
    is `Unavailable`, before that error is raised (0: never sent again).
    """

    conflicts: int = 5
    unavailable: float = 15.0
    first_backoff: float = 0.02
    max_backoff: float = 1.0

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt `attempt` + 1 (the first retry goes at once)."""
        if attempt <= 0:
            return 0.0
        ceiling = min(self.max_backoff, self.first_backoff * 2.0**attempt)
        return random.uniform(0.5, 1.0) * ceiling


DEFAULT_POLICY = RetryPolicy()
ONCE = RetryPolicy(conflicts=1, unavailable=0.0)
"""Send once and report what happened: for a caller that retries on its own terms."""


class Writer:
    """The one runner of changes: every write above the store goes through `apply` (one
    change; `send` returns its refusal instead of raising it) or `run` (read, decide and
    write, again after a lost race).

    A change sent while the store was unavailable may have been applied without its sender
    hearing of it. Before sending it again (and when a later attempt is refused) the writer
    reads the keys the change writes: if they hold what it wrote, the earlier attempt
    applied, and that is success — so that a transient error never turns a done write into
    a failure, nor makes one twice.
    """

    def __init__(self, store: MetadataStore, policy: RetryPolicy | None = None) -> None:
        self.store = store
        self.policy = policy or DEFAULT_POLICY

    async def apply(self, change: Change) -> int:
        """Apply `change`: its revision, or the typed error of the condition that failed."""
        outcome = await self.send(change)
        if isinstance(outcome, int):
            return outcome
        refused = change.refusal(outcome)
        if refused is None:  # every compare held when the failure branch read them
            raise AssertionError(f"a transaction failed with all its compares holding: {change}")
        raise refused

    async def send(self, change: Change) -> int | TxnResult:
        """Apply `change` as `apply` does, but return a refusal rather than raise it: the
        revision, or the failed transaction — `change.refusal(result)` is the error it stands
        for, `change.seen(result)` what its failure branch read — for a caller that decides
        again from that read, in the same round trip."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.policy.unavailable
        uncertain = False
        attempt = 0
        while True:
            change.check_local()
            if uncertain:
                # The last attempt may have applied: sent again, it would write twice.
                done = await self._applied_before(change)
                if done is not None:
                    return done
            try:
                result = await self.store.execute(change.txn())
            except Unavailable as error:
                uncertain = uncertain or bool(change.ops)
                if loop.time() >= deadline:
                    raise
                attempt += 1
                delay = min(self.policy.backoff(attempt), max(deadline - loop.time(), 0.0))
                log.info("%s; sending the change again in %.2f s", error, delay)
                await asyncio.sleep(delay)
                continue
            if result.succeeded:
                return result.revision
            if uncertain:
                done = await self._applied_before(change)
                if done is not None:
                    return done
            return result

    async def run(self, attempt: Callable[[bool], Awaitable[T]], what: str = "write") -> T:
        """`await attempt(fresh)` — which reads, decides and applies a change — again while
        it is refused with `ChangedSinceRead`, up to the policy's `conflicts` times; `fresh`
        asks the retries to read from the store rather than a cache."""
        for number in range(self.policy.conflicts):
            try:
                return await attempt(number > 0)
            except ChangedSinceRead as error:
                if number + 1 >= self.policy.conflicts:
                    raise
                log.info("%s: %s; reading again", what, error)
                await asyncio.sleep(self.policy.backoff(number))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _applied_before(self, change: Change) -> int | None:
        """The revision at which an earlier attempt of `change` applied, or None."""
        reads = change.confirming_reads()
        results: list[object] = []
        revision = 0
        for start in range(0, len(reads), MAX_TXN_OPS // 2):
            chunk: list[Operation] = list(reads[start : start + MAX_TXN_OPS // 2])
            try:
                read = await self.store.txn((), chunk, ())
            except MetadataError:
                return None
            results.extend(read.results)
            revision = max(revision, read.revision)
        if not change.in_place(results):
            return None
        written = [r.mod_revision for r in results if isinstance(r, Entry)]
        log.info("an earlier attempt of a change applied (its outcome was unknown)")
        return max(written) if written else revision
