"""The one runner of commands: it checks the store URL, opens the store, hands the command's
operation the `Operations` on it, closes everything, and turns what went wrong into one line
and the documented exit code. A command says only what it asks and how it shows the answer:

    document = execute(store, lambda ops: ops.describe_topic(name))
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote

from metaplane.admin._console import fail, interrupted
from metaplane.admin._errors import MissingStore
from metaplane.admin._operations import Operations
from metaplane.store import MetadataError, open_store

T = TypeVar("T")

Work = Callable[[Operations], Awaitable[T]]


def sqlite_path(url: str) -> Path | None:
    """The file a sqlite:// URL names (None for another scheme)."""
    scheme, sep, rest = url.partition("://")
    if scheme != "sqlite" or not sep:
        return None
    location = unquote(rest.partition("?")[0])
    return Path(location) if location else None


def check_store(url: str, create: bool) -> None:
    """A sqlite store whose file does not exist is `MissingStore` unless `create`: a typo
    in a path never makes a second, empty store. With `create`, its folder is made."""
    path = sqlite_path(url)
    if path is None or path.exists():
        return
    if not create:
        raise MissingStore(str(path))
    path.parent.mkdir(parents=True, exist_ok=True)


async def on_store(url: str, work: Work[T]) -> T:
    async with open_store(url) as store:
        operations = Operations(store)
        try:
            return await work(operations)
        finally:
            await operations.aclose()


def execute(url: str, work: Work[T], *, create: bool = False) -> T:
    """Run `work` on the store `url` names: its result, or the command ends with one line
    (exit 1; 3 for a --wait that gave up, 130 for Ctrl-C)."""
    try:
        check_store(url, create)
        return asyncio.run(on_store(url, work))
    except MetadataError as error:
        fail(str(error))
    except KeyboardInterrupt:
        interrupted()
