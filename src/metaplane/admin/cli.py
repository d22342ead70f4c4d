"""The `metaplane` command: one Typer application, each group of commands in a module of
its own."""

from __future__ import annotations

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
    _snapshot,
    _standalone,
    _topics,
    _tour,
)
from metaplane.admin._console import console

app = typer.Typer(
    name="metaplane",
    help="The metadata and coordination plane of a pub/sub cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("demo")(_demo.demo)
app.command("tour")(_tour.demo)
app.command("standalone")(_standalone.standalone)
app.add_typer(_snapshot.snapshot_app, name="snapshot")
app.command("analyze")(_analyze.analyze)
app.add_typer(_kafka_import.import_app, name="import")
app.add_typer(_rebalance.rebalance_app, name="rebalance")
app.add_typer(_schemas.app, name="schemas")
app.add_typer(_kv.kv_app, name="kv")
app.add_typer(_brokers.brokers_app, name="brokers")
app.add_typer(_namespaces.namespaces_app, name="namespaces")
app.add_typer(_topics.topics_app, name="topics")


@app.command()
def version() -> None:
    """Print metaplane's version."""
    console.print(__version__)


def main() -> None:
    app()
