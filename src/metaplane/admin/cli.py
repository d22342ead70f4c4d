"""The `metaplane` command: one Typer application, each group of commands in a module of
its own."""

from __future__ import annotations

import typer

from metaplane import __version__
from metaplane.admin import _schemas, _tour
from metaplane.admin._console import console

app = typer.Typer(
    name="metaplane",
    help="The metadata and coordination plane of a pub/sub cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("demo")(_tour.demo)
app.add_typer(_schemas.app, name="schemas")


@app.command()
def version() -> None:
    """Print metaplane's version."""
    console.print(__version__)


def main() -> None:
    app()
