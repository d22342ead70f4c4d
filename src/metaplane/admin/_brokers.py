"""`metaplane brokers …`: the brokers as the store sees them — registration, state, owned
topics, load report, and who leads at which epoch — and draining one, and back.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from metaplane.admin._cluster_ops import Brokers, read_brokers
from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
)
from metaplane.admin._operations import Operations
from metaplane.admin._progress import poll, progress_bar
from metaplane.admin._runner import execute
from metaplane.resources import BrokerMode, ClusterManager, OwnershipManager, Reader
from metaplane.store import MetadataStore

brokers_app = typer.Typer(
    name="brokers",
    help="The brokers of the cluster: list them with their load, drain one, undrain it.",
    no_args_is_help=True,
)

BrokerId = Annotated[int, typer.Argument(min=0, help="The broker's id (unsigned 64-bit).")]
Reason = Annotated[str, typer.Option(help="Why; kept in the broker's state.")]
Expect = Annotated[
    int | None,
    typer.Option("--expect", min=1, help="Change it only if its state is still at this version."),
]
Timeout = Annotated[float, typer.Option(min=0, help="How long --wait waits (s).")]


async def brokers_of(store: MetadataStore) -> Brokers:
    """Every broker as one read of /cluster shows it (for the live tables)."""
    return await read_brokers(Reader(store))


# list ---------------------------------------------------------------------------------------


@brokers_app.command("list")
def list_brokers(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every broker: addresses, state, topics, load; the leader and its epoch."""
    document = execute(store, Operations.list_brokers)
    if output is Output.JSON:
        print_json(document)
    else:
        console.print(brokers_table(document))


def brokers_table(document: dict[str, Any]) -> Table:
    leader = document["leader"]
    who = "no leader" if leader is None else f"★ leader {leader['broker_id']}"
    epoch = "" if leader is None else f" (epoch {leader['epoch']})"
    table = Table(title=f"{len(document['brokers'])} broker(s), {who}{epoch}")
    table.add_column("broker", no_wrap=True)
    table.add_column("live")
    table.add_column("state", overflow="fold")
    table.add_column("address", no_wrap=True)
    table.add_column("topics", justify="right")
    table.add_column("load report")
    for broker in document["brokers"]:
        table.add_row(*broker_cells(broker))
    return table


def broker_cells(broker: dict[str, Any]) -> list[str]:
    """One row: where clients connect (every address is in the JSON) and the load report."""
    state, load, addresses = broker["state"], broker["load"], broker["addresses"] or {}
    return [
        f"{broker['broker_id']}{' [bold yellow]★[/]' if broker['leader'] else ''}",
        "yes" if broker["live"] else "[red]no[/]",
        "—" if state is None else escape(f"{state['mode']}: {state['reason']}"),
        escape(addresses.get("broker_addr", "—")),
        str(broker["topics_owned"]),
        "—" if load is None else f"cpu {load['cpu']} mem {load['memory']} topics {load['topics']}",
    ]


# drain, undrain -----------------------------------------------------------------------------


@brokers_app.command()
def drain(
    broker_id: BrokerId,
    reason: Reason = "operator",
    expect: Expect = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until the leader has moved every topic away.")
    ] = False,
    timeout: Timeout = 300.0,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Set a broker's state to draining: the leader then moves its topics away.

    Once none is left the leader marks it drained (--wait shows it happen). A broker
    without a state key is unknown: refused. `brokers undrain` takes it back."""

    async def draining(ops: Operations) -> dict[str, Any]:
        document = await ops.drain(broker_id, reason, expect)
        if wait:
            await wait_drained(ops.store, broker_id, timeout)
        return document

    document = execute(store, draining)
    if output is Output.JSON:
        print_json(document)
    elif document["revision"] is None:
        console.print(f"broker {broker_id} is already {document['was']}: nothing written")
    else:
        done = " and drained" if wait else ""
        console.print(f"broker {broker_id} set to draining{done} (revision {document['revision']})")


@brokers_app.command()
def undrain(
    broker_id: BrokerId,
    reason: Reason = "operator",
    expect: Expect = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Set a draining or drained broker active again: the leader places topics on it again.

    A broker in another state (active, or a custom one such as maintenance) is refused."""
    document = execute(store, lambda ops: ops.undrain(broker_id, reason, expect))
    if output is Output.JSON:
        print_json(document)
    elif document["revision"] is None:
        console.print(f"broker {broker_id} is already active: nothing written")
    else:
        console.print(
            f"broker {broker_id} set to active (was {document['was']}; "
            f"revision {document['revision']})"
        )


async def wait_drained(store: MetadataStore, broker_id: int, timeout: float) -> None:
    """Show the broker's topics going away until the leader marks it drained."""
    cluster = ClusterManager(store)
    total = await owned(store, broker_id)

    with progress_bar(f"draining broker {broker_id}", total) as moved:

        async def drained() -> bool | None:
            moved(total - await owned(store, broker_id))
            state = await cluster.state(broker_id)
            return True if state.value.mode is BrokerMode.DRAINED else None

        await poll(drained, what=f"broker {broker_id} to be drained", timeout=timeout)


async def owned(store: MetadataStore, broker_id: int) -> int:
    """How many topics are assigned to the broker now."""
    return len(await OwnershipManager(store).assignments(broker_id))
