"""The `metaplane` command: one Typer application, each group of commands in a module of
its own."""

from __future__ import annotations

from typing import Annotated

import typer

from metaplane import __version__
from metaplane.admin import (
    _analyze,
    _brokers,
    _demo,
    _kafka_import,
    _kv,
    _namespaces,
    _rebalance,
    _schemas,
    _serve,
    _snapshot,
    _standalone,
    _status,
    _subscriptions,
    _topics,
    _tour,
)
from metaplane.admin._console import console

HELP = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="metaplane",
    help="The metadata and coordination plane of a pub/sub cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings=HELP,
)


def show_version(value: bool) -> None:
    if value:
        console.print(__version__)
        raise typer.Exit()


@app.callback()
def metaplane(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """The metadata and coordination plane of a pub/sub cluster."""


app.command("status")(_status.status)
app.command("serve")(_serve.serve)
app.command("standalone")(_standalone.standalone)
app.command("demo")(_demo.demo)
app.command("tour")(_tour.demo)
app.add_typer(_brokers.brokers_app, name="brokers")
app.add_typer(_namespaces.namespaces_app, name="namespaces")
app.add_typer(_topics.topics_app, name="topics")
app.add_typer(_subscriptions.subscriptions_app, name="subscriptions")
app.add_typer(_schemas.app, name="schemas")
app.add_typer(_kv.kv_app, name="kv")
app.add_typer(_snapshot.snapshot_app, name="snapshot")
app.command("analyze")(_analyze.analyze)
app.add_typer(_rebalance.rebalance_app, name="rebalance")
app.add_typer(_kafka_import.import_app, name="import")


@app.command()
def version() -> None:
    """Print metaplane's version."""
    console.print(__version__)
