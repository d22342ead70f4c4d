"""What every command shares: the --store and --output options, the terminal, and turning a
metaplane error into one clear line and a non-zero exit instead of a traceback."""

from __future__ import annotations

import asyncio
import enum
import json
import sys
from collections.abc import Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from metaplane.store import MetadataError

T = TypeVar("T")

DEFAULT_STORE = "sqlite://.metaplane/metaplane.db"

console = Console()
errors = Console(stderr=True)

StoreURL = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="METAPLANE_STORE",
        help="The store: sqlite:///path, etcd://h1:2379,h2:2379 or memory://.",
        show_default=True,
    ),
]


class Output(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


OutputFormat = Annotated[
    Output,
    typer.Option("--output", "-o", help="table for people, json for scripts."),
]


def fail(message: str, code: int = 1) -> NoReturn:
    errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; a metaplane error ends the command with one line."""
    try:
        return asyncio.run(coroutine)
    except MetadataError as error:
        fail(str(error))
    except KeyboardInterrupt:
        errors.print("interrupted")
        raise typer.Exit(130) from None


def print_json(document: object) -> None:
    """JSON on stdout, nothing else: what scripts parse."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
