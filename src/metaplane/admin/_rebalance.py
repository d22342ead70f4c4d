"""`metaplane rebalance apply PLAN`: the moves of a `rebalance-plan.json` (written by
`metaplane analyze`) checked against the live store, and with --execute started through the
move protocol; a topic changed since the snapshot is skipped and reported."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    errors,
    fail,
    print_json,
    run,
)
from metaplane.admin._progress import progress_bar, spinner
from metaplane.admin._runner import check_store
from metaplane.admin._snapshot import guarded
from metaplane.store import open_store

if TYPE_CHECKING:
    from metaplane.layout import TopicName
    from metaplane.pipeline import ApplyResult, RebalancePlan

rebalance_app = typer.Typer(help="Apply a rebalance plan of `metaplane analyze`.")

SHOWN = 20
"""Moves listed one by one in the table output (all of them in JSON)."""


@rebalance_app.command("apply")
def apply(
    plan_file: Annotated[
        Path, typer.Argument(metavar="PLAN", help="A rebalance-plan.json of metaplane analyze.")
    ],
    store: StoreURL = DEFAULT_STORE,
    execute: Annotated[
        bool, typer.Option("--execute", help="Start the moves (without it: a dry run).")
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="With --execute: seconds to wait for the moved topics to be assigned again "
            "(0: do not wait).",
        ),
    ] = 60.0,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Check each move of PLAN against the store; with --execute, start it: the topic's
    assignment becomes a move marker (compared against the snapshot's revision of it), its
    owner seals it, the leader assigns it to the planned broker."""
    from metaplane.pipeline import Status, apply_plan, read_plan, wait_placed

    plan = guarded(lambda: read_plan(plan_file))
    # A plan moves topics of a cluster that exists: a mistyped path never makes an empty store.
    guarded(lambda: check_store(store, create=False))

    async def go() -> tuple[ApplyResult, dict[TopicName, int | None] | None]:
        async with open_store(store) as opened:
            what = "moving" if execute else "checking"
            with progress_bar(f"{what} {len(plan.moves)} topics", len(plan.moves)) as step:
                result = await apply_plan(opened, plan, execute=execute, progress=step)
            started = [outcome.move for outcome in result.of(Status.DONE)]
            if not execute or not started or wait == 0:
                return result, None
            with spinner(f"waiting for {len(started)} topics to be assigned again"):
                return result, await wait_placed(opened, started, wait)

    result, placed = run(go())
    _show(plan, result, placed, store, output)
    if result.count(Status.FAILED):
        raise typer.Exit(1)
    if placed is not None and any(owner is None for owner in placed.values()):
        waiting = sum(owner is None for owner in placed.values())
        fail(
            f"{waiting} moved topic(s) not assigned after {wait:g} s; the leader assigns each "
            "once its owner has sealed it",
            code=3,
        )


def _show(
    plan: RebalancePlan,
    result: ApplyResult,
    placed: dict[TopicName, int | None] | None,
    store: str,
    output: Output,
) -> None:
    from metaplane.pipeline import Status, describe

    if output is Output.JSON:
        moves = [describe(outcome) for outcome in result.outcomes]
        if placed is not None:
            for move, outcome in zip(moves, result.outcomes, strict=True):
                owner = placed.get(outcome.move.topic)
                move["placed_on"] = None if owner is None else str(owner)
        print_json(
            {
                "dry_run": not result.executed,
                "snapshot_revision": plan.revision,
                "counts": {str(status): result.count(status) for status in Status},
                "moves": moves,
            }
        )
        return
    title = f"plan of revision {plan.revision}"
    table = Table("topic", "from", "to", "status", "detail", title=title)
    colours = {Status.DONE: "green", Status.PLANNED: "cyan", Status.SKIPPED: "yellow"}
    fine = (Status.DONE, Status.PLANNED)  # the skipped and failed come first
    listed = sorted(result.outcomes, key=lambda outcome: outcome.status in fine)
    for outcome in listed[:SHOWN]:
        planned, colour = outcome.move, colours.get(outcome.status, "red")
        detail = outcome.detail
        if placed is not None and outcome.status is Status.DONE:
            owner = placed.get(planned.topic)
            detail = "still waiting" if owner is None else f"assigned to {owner}"
        table.add_row(planned.topic.path, str(planned.source), str(planned.target),
                      f"[{colour}]{outcome.status}[/]", detail)  # fmt: skip
    if len(listed) > SHOWN:
        table.caption = f"{len(listed) - SHOWN} more moves not shown (-o json lists them all)"
    if plan.moves:
        console.print(table)
    counts = ", ".join(f"{result.count(s)} {s}" for s in Status if result.count(s))
    console.print(f"{len(plan.moves)} moves: {counts or 'nothing to do'}", highlight=False)
    if not result.executed:
        errors.print(f"dry run: nothing written to {store}; run again with --execute")
