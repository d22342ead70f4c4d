"""The `metaplane` command's entry point. The application is imported inside `main`, and
Click's own handling of Ctrl-C (an "Aborted!" and exit 1) is replaced, so that a Ctrl-C at any
moment — even while Python is still importing the commands — ends with "interrupted" and exit
code 130, never a traceback. A "no" to a confirmation stays exit 1."""

from __future__ import annotations

import sys
from typing import Any

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        sys.exit(_run())
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)


def _run() -> int:
    import click

    from metaplane.admin._app import app

    try:
        code = app(standalone_mode=False)
    except click.exceptions.Abort as abort:
        if isinstance(abort.__cause__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        sys.stderr.write("Aborted!\n")
        return 1
    except click.ClickException as error:
        error.show()
        return error.exit_code
    return code if isinstance(code, int) else 0


def __getattr__(name: str) -> Any:
    """`app` (the Typer application), imported when first asked for."""
    if name == "app":
        from metaplane.admin._app import app

        return app
    raise AttributeError(name)
