"""What every command shares: the --store, --create and --output options, the terminal, the
default store's one location, and turning an error into one clear line and the documented
exit code instead of a traceback.

Exit codes: 0 done; 1 refused or failed (nothing written); 2 a usage error; 3 a --wait that
gave up (the change itself was made); 130 interrupted.
"""

from __future__ import annotations

import asyncio
import enum
import json
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from metaplane.store import MetadataError

T = TypeVar("T")

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_GAVE_UP = 3
EXIT_INTERRUPTED = 130


def data_home() -> Path:
    """Where metaplane keeps its per-user files: $XDG_DATA_HOME/metaplane, else
    ~/.local/share/metaplane (never the working directory)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "metaplane"


def default_store() -> str:
    """The store a command uses without --store and without $METAPLANE_STORE."""
    return f"sqlite://{data_home() / 'metaplane.db'}"


DEFAULT_STORE = default_store()

# Text is never wrapped: a schema, a key or a value printed is one a script (or a
# copy and paste) can use as it is; tables still fit the terminal.
console = Console(soft_wrap=True)
errors = Console(stderr=True)

StoreURL = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="METAPLANE_STORE",
        help="The store: sqlite:///path, etcd://h1:2379,h2:2379, zk://h1:2181,h2:2181/chroot "
        "or memory:// "
        "(default: $METAPLANE_STORE, else the per-user store).",
        show_default=True,
    ),
]

Create = Annotated[
    bool,
    typer.Option(
        "--create", help="Create the store if its file does not exist (else that is an error)."
    ),
]


class Output(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


OutputFormat = Annotated[
    Output,
    typer.Option("--output", "-o", help="table for people, json for scripts."),
]


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """End the command with one line on stderr. The message is printed as it is: a bracket
    in it (a rule's tag, a chroot) is text, not markup."""
    errors.print("[bold red]error:[/] ", end="", highlight=False)
    errors.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def usage(message: str) -> NoReturn:
    """End the command as a usage error (exit 2): the command line itself is wrong."""
    fail(message, EXIT_USAGE)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; a metaplane error ends the command with one line."""
    try:
        return asyncio.run(coroutine)
    except MetadataError as error:
        fail(str(error))
    except KeyboardInterrupt:
        interrupted()


def interrupted() -> NoReturn:
    errors.print("interrupted")
    raise typer.Exit(EXIT_INTERRUPTED) from None


def said(output: Output, document: object, text: str) -> None:
    """A command's answer: the document as JSON with `-o json`, else one line of text,
    printed as it is (no markup, no highlighting)."""
    if output is Output.JSON:
        print_json(document)
    else:
        console.print(text, highlight=False, markup=False)


def print_json(document: object) -> None:
    """JSON on stdout, nothing else: what scripts parse."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
