"""What a command shows while it waits on the cluster or reads a large prefix: Rich progress on
stderr (stdout stays for results), and polling with a deadline that ends in one clear line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from metaplane.admin._console import errors, fail
from metaplane.store import Compacted, MetadataStore, Unavailable

T = TypeVar("T")

_KEYS = TextColumn("{task.completed:,} keys")

POLL_INTERVAL = 0.2
"""Seconds between two reads of a condition being waited for."""


def _ignore(done: int) -> None:
    pass


@contextmanager
def progress_bar(what: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar of `total` steps (None: a count of keys); the callable sets how many
    are done. Nothing at all when stderr is no terminal: logs and pipes get no spinners."""
    if not errors.is_terminal:
        yield _ignore
        return
    counts = (BarColumn(), MofNCompleteColumn()) if total is not None else (_KEYS,)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        *counts,
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    ) as progress:
        task = progress.add_task(what, total=total)
        yield lambda done: progress.update(task, completed=done)


def counting(what: str) -> AbstractContextManager[Callable[[int], None]]:
    """A count of keys read so far, for a read of unknown size."""
    return progress_bar(what, None)


@contextmanager
def spinner(what: str) -> Iterator[None]:
    """A spinner while a step of unknown length runs (on a terminal only)."""
    if not errors.is_terminal:
        yield
        return
    with errors.status(what):
        yield


async def poll(check: Callable[[], Awaitable[T | None]], *, what: str, timeout: float) -> T:
    """Await `check()` every POLL_INTERVAL until it returns something, and return that; after
    `timeout` seconds, end the command with one line naming `what` it waited for. A store that
    is unavailable for a while is waited out within the same deadline."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (found := await _unless_unavailable(check)) is None:
        if asyncio.get_running_loop().time() >= deadline:
            fail(f"gave up after {timeout:g} s waiting for {what}", code=3)
        await asyncio.sleep(POLL_INTERVAL)
    return found


async def _unless_unavailable(check: Callable[[], Awaitable[T | None]]) -> T | None:
    try:
        return await check()
    except Unavailable:
        return None


async def until(
    store: MetadataStore,
    prefix: str,
    check: Callable[[], Awaitable[T | None]],
    *,
    what: str,
    timeout: float,
) -> T:
    """Await `check()` now and at each change under `prefix` until it returns something;
    after `timeout` seconds, end the command with one line naming `what` it waited for. A store
    that is unavailable for a while (the watch breaks, a check fails) is waited out within the
    same deadline: the watch starts again and the check is made again."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    return await _until_found(store, prefix, check)
                except (Unavailable, Compacted):
                    await asyncio.sleep(POLL_INTERVAL)
    except TimeoutError:
        fail(f"gave up after {timeout:g} s waiting for {what}", code=3)


async def _until_found(
    store: MetadataStore, prefix: str, check: Callable[[], Awaitable[T | None]]
) -> T:
    start = await store.revision() + 1
    async with store.watch(prefix, start_revision=start) as watch:
        found = await check()
        while found is None:
            await anext(watch)
            found = await check()
        return found
