"""Applying a rebalance plan to a live store: each move through the move protocol (the topic's
assignment becomes an unassigned marker {"reason": "unload", "from_broker", "to_broker"}; its
owner seals it; the leader assigns it to the target), written as the cluster's one guarded
move (`metaplane.cluster`'s `move_change`) so that a topic whose assignment changed since the
snapshot, or a target that left or stopped being active, is skipped, never moved on stale
information.

No Spark here: a plan is applied from any machine that reaches the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from metaplane import layout
from metaplane.cluster._moves import move_change, target_of, target_reads
from metaplane.layout import InvalidName, TopicName
from metaplane.pipeline._errors import PlanError
from metaplane.resources import (
    AlreadyUnassigned,
    BrokerNotActive,
    ChangedSinceRead,
    MalformedValue,
    NoBroker,
    NoTopicOwnerInfo,
    OwnershipManager,
    Versioned,
    assignment_of,
)
from metaplane.store import Get, MetadataError, MetadataStore

log = logging.getLogger(__name__)

PLAN_FORMAT = "metaplane-rebalance-plan"
PLAN_FORMAT_VERSION = 1


@dataclass(frozen=True)
class PlannedMove:
    """One move of a plan: `topic` from `source` to `target`, valid only while its assignment
    key is still at `assignment_mod_revision` (the revision the snapshot saw)."""

    topic: TopicName
    source: int
    target: int
    reason: str
    assignment_mod_revision: int


@dataclass(frozen=True)
class RebalancePlan:
    """A `rebalance-plan.json` as `metaplane analyze` writes it, validated."""

    revision: int
    moves: tuple[PlannedMove, ...]


class Status(StrEnum):
    DONE = "done"
    """The move started: the topic waits, with its target, for its owner to seal it."""
    PLANNED = "planned"
    """A dry run found the move still valid."""
    SKIPPED = "skipped"
    """The topic or its target changed since the snapshot: not moved."""
    FAILED = "failed"
    """The store failed the write (unavailable, refused); the topic was not moved."""


@dataclass(frozen=True)
class Outcome:
    move: PlannedMove
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class ApplyResult:
    outcomes: tuple[Outcome, ...]
    executed: bool

    def count(self, status: Status) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status is status)

    def of(self, status: Status) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.status is status]


def read_plan(path: Path) -> RebalancePlan:
    """The plan at `path`; `PlanError` naming what is wrong with a file that is not one."""
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise PlanError(f"{path}: cannot read the plan: {error.strerror or error}") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PlanError(f"{path}: not JSON: {error}") from error
    return parse_plan(document, str(path))


def parse_plan(document: Any, where: str = "the plan") -> RebalancePlan:
    """Validate a plan document (the JSON of `rebalance-plan.json`)."""
    if not isinstance(document, dict) or document.get("format") != PLAN_FORMAT:
        raise PlanError(f"{where}: not a rebalance plan (no format {PLAN_FORMAT!r})")
    if document.get("format_version") != PLAN_FORMAT_VERSION:
        raise PlanError(
            f"{where}: plan format version {document.get('format_version')!r} is not "
            f"{PLAN_FORMAT_VERSION}, the one this metaplane applies"
        )
    snapshot, moves = document.get("snapshot"), document.get("moves")
    revision = snapshot.get("revision") if isinstance(snapshot, dict) else None
    if not isinstance(revision, int) or isinstance(revision, bool) or not isinstance(moves, list):
        raise PlanError(f"{where}: the plan needs snapshot.revision and a list of moves")
    parsed = tuple(_move(item, index, where) for index, item in enumerate(moves))
    topics = [move.topic for move in parsed]
    if len(set(topics)) != len(topics):
        raise PlanError(f"{where}: a topic is moved twice")
    return RebalancePlan(revision, parsed)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _move(item: Any, index: int, where: str) -> PlannedMove:
    what = f"{where}: move {index}"
    if not isinstance(item, dict):
        raise PlanError(f"{what} is not an object")
    try:
        topic = TopicName(item["namespace"], item["name"])
        source, target = _broker(item["from"]), _broker(item["to"])
        mod_revision = item["assignment_mod_revision"]
        reason = str(item.get("reason", "balance"))
    except KeyError as error:
        raise PlanError(f"{what} has no {error.args[0]!r}") from error
    except (InvalidName, TypeError, ValueError) as error:
        raise PlanError(f"{what}: {error}") from error
    if not _is_int(mod_revision) or mod_revision <= 0:
        raise PlanError(f"{what}: assignment_mod_revision must be a positive integer")
    if source == target:
        raise PlanError(f"{what}: moves {topic.path} to the broker it is on")
    return PlannedMove(topic, source, target, reason, mod_revision)


def _broker(value: object) -> int:
    """A broker id as the plan writes it: a decimal string (u64 ids do not fit JSON numbers
    everywhere), or an integer."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"broker id {value!r} is not a decimal string")
    number = int(value)
    if not 0 <= number < 2**64:
        raise ValueError(f"broker id {value!r} is not an unsigned 64-bit integer")
    return number


async def apply_plan(
    store: MetadataStore,
    plan: RebalancePlan,
    *,
    execute: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ApplyResult:
    """Check every move of `plan` against the store; with `execute`, start each one that is
    still valid with one transaction that compares the assignment key's mod_revision (the
    snapshot's), the absence of a marker, and the target's state (read active just before).

    A move whose topic or target changed is SKIPPED with the reason; a store error on one
    move is FAILED and the others go on. Returns every move's outcome, in the plan's order.
    """
    ownership = OwnershipManager(store)
    outcomes: list[Outcome] = []
    for done, move in enumerate(plan.moves, start=1):
        outcomes.append(await _apply_one(store, ownership, move, execute))
        if progress is not None:
            progress(done)
    result = ApplyResult(tuple(outcomes), execute)
    log.info(
        "rebalance plan of revision %d: %d done, %d planned, %d skipped, %d failed",
        plan.revision,
        result.count(Status.DONE),
        result.count(Status.PLANNED),
        result.count(Status.SKIPPED),
        result.count(Status.FAILED),
    )
    return result


async def _apply_one(
    store: MetadataStore, ownership: OwnershipManager, move: PlannedMove, execute: bool
) -> Outcome:
    assignment = layout.assignment(move.source, move.topic)
    marker = layout.unassigned(move.topic)
    try:
        view = await ownership.reader.read(
            Get(assignment), Get(marker), *target_reads(move.target), fresh=True
        )
        found = view.entry(assignment)
        if found is None:
            return Outcome(
                move,
                Status.SKIPPED,
                f"no longer on broker {move.source} since the snapshot (moved or deleted)",
            )
        if found.mod_revision != move.assignment_mod_revision:
            return Outcome(
                move,
                Status.SKIPPED,
                f"assignment changed since the snapshot (mod_revision "
                f"{move.assignment_mod_revision}, now {found.mod_revision})",
            )
        if view.entry(marker) is not None:
            return Outcome(move, Status.SKIPPED, "already waiting for assignment")
        owner = Versioned(
            move.source, found.version, found.mod_revision, found.create_revision, assignment
        )
        # Built in a dry run too: a target that is gone or not active is refused here.
        change = move_change(ownership, move.topic, owner, target_of(view, move.target))
        if not execute:
            return Outcome(move, Status.PLANNED)
        await change.apply(store)
    except (MalformedValue, NoBroker, BrokerNotActive) as error:
        return Outcome(move, Status.SKIPPED, _target_reason(error, move))
    except MetadataError as error:
        if _raced(error):
            return Outcome(move, Status.SKIPPED, f"changed while applying: {error}")
        log.warning("moving %s failed: %s", move.topic.path, error)
        return Outcome(move, Status.FAILED, f"{type(error).__name__}: {error}")
    return Outcome(move, Status.DONE)


def _target_reason(error: MetadataError, move: PlannedMove) -> str:
    """Why the target cannot take the topic, in the plan's words."""
    if isinstance(error, NoBroker):
        return f"target broker {move.target} is no longer registered (or has no state key)"
    if isinstance(error, BrokerNotActive):
        return f"target broker {move.target} is {error.mode}"
    return str(error)


def _raced(error: MetadataError) -> bool:
    """True for the refusals of the move's compares (something changed between the check and
    the write): a skip, not a failure."""
    return isinstance(error, (AlreadyUnassigned, ChangedSinceRead, NoTopicOwnerInfo, NoBroker))


async def wait_placed(
    store: MetadataStore, moves: Sequence[PlannedMove], timeout: float
) -> dict[TopicName, int | None]:
    """Wait until every topic of `moves` is assigned again (to whichever broker the leader
    chose), or `timeout` passes. Returns each topic's owner then (None: still waiting)."""
    owners: dict[TopicName, int | None] = dict.fromkeys(move.topic for move in moves)

    async def look() -> bool:
        for entry in await store.list(layout.brokers_prefix(), keys_only=True):
            found = assignment_of(entry.key)
            if found is not None and found[1] in owners:
                owners[found[1]] = found[0]
        return all(owner is not None for owner in owners.values())

    start = await store.revision()
    try:
        async with asyncio.timeout(timeout):
            async with store.watch(layout.brokers_prefix(), start_revision=start + 1) as watch:
                if await look():
                    return owners
                async for _ in watch:
                    if await look():
                        return owners
    except TimeoutError:
        pass
    return owners


def describe(outcome: Outcome) -> dict[str, Any]:
    """An outcome as JSON (broker ids as strings, as in the plan)."""
    move = outcome.move
    return {
        "topic": move.topic.path,
        "from": str(move.source),
        "to": str(move.target),
        "reason": move.reason,
        "status": str(outcome.status),
        "detail": outcome.detail,
    }


__all__ = [
    "PLAN_FORMAT",
    "PLAN_FORMAT_VERSION",
    "ApplyResult",
    "Outcome",
    "PlannedMove",
    "RebalancePlan",
    "Status",
    "apply_plan",
    "describe",
    "parse_plan",
    "read_plan",
    "wait_placed",
]
