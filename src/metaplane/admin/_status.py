"""`metaplane status`: the cluster in one screen — the leader and its epoch, the brokers with
state, load and liveness, the topics waiting for assignment, and whether the store answers."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from metaplane.admin._brokers import brokers_table
from metaplane.admin._console import (
    DEFAULT_STORE,
    EXIT_FAILED,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
)
from metaplane.admin._runner import execute

SHOWN = 20
"""Waiting topics listed one by one in the table output (all of them in JSON)."""


def status(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """The leader, its epoch, the brokers, the topics waiting for assignment and the store's
    health. Exit 1 when the store does not answer."""
    document = execute(store, lambda ops: ops.status())
    if output is Output.JSON:
        print_json(document)
    else:
        show(document)
    if not document["store"]["healthy"]:
        raise typer.Exit(EXIT_FAILED)


def show(document: dict[str, Any]) -> None:
    health = document["store"]
    if health["healthy"]:
        console.print(
            f"store: answers in {health['latency_ms']} ms, revision {health['revision']}",
            highlight=False,
        )
    else:
        console.print(f"store: [red]does not answer[/]: {escape(str(health['error']))}")
    live, total = document["live_brokers"], len(document["brokers"])
    console.print(f"brokers: {live} live of {total}", highlight=False)
    console.print(brokers_table(document))
    waiting = document["unassigned"]
    if not waiting:
        console.print("unassigned topics: none")
        return
    table = Table("topic", "reason", "from", "to", title=f"{len(waiting)} unassigned topic(s)")
    for row in waiting[:SHOWN]:
        table.add_row(
            escape(row["topic"]),
            escape(str(row["reason"] or "new")),
            str(row["from_broker"] or "—"),
            str(row["to_broker"] or "—"),
        )
    if len(waiting) > SHOWN:
        table.caption = f"{len(waiting) - SHOWN} more (-o json lists them all)"
    console.print(table)
