"""The `metaplane` command's entry point. The application is imported inside `main`, so that
a Ctrl-C at any moment — even while Python is still importing the commands — ends with exit
code 130 and no traceback (Typer turns one during a command into 130 as well)."""

from __future__ import annotations

import sys
from typing import Any

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from metaplane.admin._app import app

        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)


def __getattr__(name: str) -> Any:
    """`app` (the Typer application), imported when first asked for."""
    if name == "app":
        from metaplane.admin._app import app

        return app
    raise AttributeError(name)
