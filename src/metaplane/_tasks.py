"""Stopping a background task without losing a cancellation meant for the one stopping it."""

from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel `task` and wait for it to end.

    `with suppress(CancelledError): await task` would also swallow a cancellation of the
    caller that arrives during the wait, and the caller would run on as if never cancelled.
    """
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
    except Exception:  # the task failed before it saw the cancellation: it is over either way
        pass
