"""`metaplane brokers …`: the brokers as the store sees them — registration, state, owned
topics, load report, and who leads at which epoch — and draining one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from metaplane import layout
from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
    run,
)
from metaplane.admin._progress import poll, progress_bar
from metaplane.layout import KeyKind, LayoutError
from metaplane.resources import (
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    ClusterManager,
    LoadReport,
    MalformedValue,
    OwnershipManager,
    decode,
)
from metaplane.store import Entry, InvalidValue, MetadataStore, open_store

brokers_app = typer.Typer(
    name="brokers",
    help="The brokers of the cluster: list them with their load, drain one.",
    no_args_is_help=True,
)

BrokerId = Annotated[int, typer.Argument(min=0, help="The broker's id (unsigned 64-bit).")]


@dataclass
class Broker:
    """One broker as the keys under /cluster tell it; a broker that is not registered (not
    live) may still have a state, assignments and a load report."""

    broker_id: int
    registration: BrokerRegistration | None = None
    state: BrokerState | None = None
    topics: int = 0
    load: LoadReport | None = None


@dataclass
class Brokers:
    """Every broker and the leadership, read at one revision."""

    revision: int
    brokers: dict[int, Broker] = field(default_factory=dict)
    leader: int | None = None
    epoch: int = 0

    def broker(self, broker_id: int) -> Broker:
        return self.brokers.setdefault(broker_id, Broker(broker_id))


# list ---------------------------------------------------------------------------------------


async def read_brokers(store: MetadataStore) -> Brokers:
    """Registrations, states, assignments, load reports and the leader: one read of
    /cluster, so that they agree with each other."""
    listing = await store.list(layout.cluster_prefix())
    found = Brokers(listing.revision)
    for entry in listing:
        try:
            take(found, entry)
        except MalformedValue as error:  # name the key, for the operator to fix it
            raise InvalidValue(f"{entry.key}: {error}") from None
    return found


def take(found: Brokers, entry: Entry) -> None:
    """Add what `entry` says to `found`; keys outside the layout say nothing."""
    try:
        key = layout.parse(entry.key)
    except LayoutError:
        return
    if key.kind is KeyKind.LEADER:
        found.leader = decode(int, entry.value)
    elif key.kind is KeyKind.LEADER_EPOCH:
        found.epoch = decode(int, entry.value)
    elif key.broker_id is None:
        return
    elif key.kind is KeyKind.BROKER_REGISTRATION:
        found.broker(key.broker_id).registration = decode(BrokerRegistration, entry.value)
    elif key.kind is KeyKind.BROKER_STATE:
        found.broker(key.broker_id).state = decode(BrokerState, entry.value)
    elif key.kind is KeyKind.ASSIGNMENT:
        found.broker(key.broker_id).topics += 1
    elif key.kind is KeyKind.LOAD_REPORT:
        found.broker(key.broker_id).load = decode(LoadReport, entry.value)


def usage(report: LoadReport, resource: str) -> int | float | None:
    """The usage of one resource ("CPU", "Memory", …) in a load report, if it has it."""
    for item in report.resources_usage:
        if item.resource.lower() == resource.lower():
            return item.usage
    return None


def broker_json(broker: Broker, leader: int | None) -> dict[str, Any]:
    """One broker for scripts; ids are JSON numbers, all 64 bits of them."""
    registration = broker.registration
    state, load = broker.state, broker.load
    return {
        "broker_id": broker.broker_id,
        "live": registration is not None,
        "leader": broker.broker_id == leader,
        "addresses": None if registration is None else msgspec.to_builtins(registration),
        "state": None if state is None else {"mode": str(state.mode), "reason": state.reason},
        "topics_owned": broker.topics,
        "load": None
        if load is None
        else {
            "cpu": usage(load, "CPU"),
            "memory": usage(load, "Memory"),
            "topics": load.topics_len,
        },
    }


def brokers_json(found: Brokers) -> dict[str, Any]:
    leader = None if found.leader is None else {"broker_id": found.leader, "epoch": found.epoch}
    return {
        "revision": found.revision,
        "leader": leader,
        "brokers": [broker_json(found.brokers[i], found.leader) for i in sorted(found.brokers)],
    }


@brokers_app.command("list")
def list_brokers(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every broker: addresses, state, topics, load; the leader and its epoch."""

    async def go() -> Brokers:
        async with open_store(store) as opened:
            return await read_brokers(opened)

    document = brokers_json(run(go()))
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


# drain --------------------------------------------------------------------------------------


@brokers_app.command()
def drain(
    broker_id: BrokerId,
    reason: Annotated[str, typer.Option(help="Why; kept in the broker's state.")] = "operator",
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until the leader has moved every topic away.")
    ] = False,
    timeout: Annotated[float, typer.Option(min=0, help="How long --wait waits (s).")] = 300.0,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Set a broker's state to draining: the leader then moves its topics away.

    Once none is left the leader marks it drained (--wait shows it happen). A broker
    without a state key is unknown: refused."""

    async def go() -> tuple[BrokerState, int | None]:
        async with open_store(store) as opened:
            before, revision = await set_draining(ClusterManager(opened), broker_id, reason)
            if wait:
                await wait_drained(opened, broker_id, timeout)
        return before, revision

    before, revision = run(go())
    if output is Output.JSON:
        print_json({"broker_id": broker_id, "was": str(before.mode), "revision": revision})
    elif revision is None:
        console.print(f"broker {broker_id} is already {before.mode}: nothing written")
    else:
        done = " and drained" if wait else ""
        console.print(f"broker {broker_id} set to draining{done} (revision {revision})")


async def set_draining(
    cluster: ClusterManager, broker_id: int, reason: str
) -> tuple[BrokerState, int | None]:
    """Write `draining` over the state as read (`NoBroker` if it has none); nothing if the
    broker is draining or drained already. A broker in a custom state (maintenance) can be
    drained too. The state before, and the revision written."""
    state = await cluster.state(broker_id)
    if state.value.mode in (BrokerMode.DRAINING, BrokerMode.DRAINED):
        return state.value, None
    draining = BrokerState(mode=BrokerMode.DRAINING, reason=reason)
    return state.value, await cluster.set_state(broker_id, draining, state.version)


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
