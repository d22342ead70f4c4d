"""The live event stream of the HTTP API: every change under a prefix as server-sent events,
one event per store revision (the events of one transaction together), its id the revision.
A client that reconnects with `Last-Event-ID` (or `?from_revision=`) misses nothing; when
that history is gone it receives one `compacted` event and must read afresh."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Request, get
from litestar.params import QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from metaplane.admin._operations import entry_document
from metaplane.store import (
    MAX_KEY_BYTES,
    Compacted,
    EventType,
    InvalidRequest,
    MetadataStore,
    Unavailable,
    WatchBatch,
    check_prefix,
)

HEARTBEAT = 15.0
"""Seconds of quiet after which a comment keeps proxies from closing the stream."""


def batch_document(batch: WatchBatch) -> dict[str, Any]:
    events = []
    for event in batch.events:
        entry = entry_document(event.entry, with_value=event.type is EventType.PUT)
        events.append({"type": event.type.value, **entry})
    return {"revision": batch.revision, "events": events}


def start_of(request: Request[Any, Any, Any], from_revision: int | None) -> int | None:
    """Where the stream starts: after `Last-Event-ID`, else at `from_revision`."""
    last = request.headers.get("last-event-id")
    if last is not None:
        if not last.strip().isdigit():
            raise InvalidRequest(f"Last-Event-ID {last!r} is not a revision")
        return int(last) + 1
    return from_revision


async def changes(
    store: MetadataStore, prefix: str, start: int
) -> AsyncIterator[ServerSentEventMessage]:
    yield ServerSentEventMessage(event="ready", data=json.dumps({"from_revision": start}))
    try:
        async with store.watch(prefix, start_revision=start) as watch:
            async for batch in with_heartbeats(watch):
                if batch is None:
                    yield ServerSentEventMessage(comment="keep-alive")
                elif batch.events:
                    data = json.dumps(batch_document(batch))
                    yield ServerSentEventMessage(id=str(batch.revision), event="change", data=data)
    except Compacted as error:
        data = json.dumps({"compact_revision": error.compact_revision, "detail": str(error)})
        yield ServerSentEventMessage(event="compacted", data=data)
    except Unavailable as error:
        # The client reconnects with Last-Event-ID and resumes where it was.
        yield ServerSentEventMessage(event="unavailable", data=json.dumps({"detail": str(error)}))


async def with_heartbeats(
    watch: AsyncIterator[WatchBatch],
) -> AsyncIterator[WatchBatch | None]:
    """The watch's batches, and None after each HEARTBEAT seconds without one. The pending
    read is kept across heartbeats (cancelling it would end the watch)."""
    pending: asyncio.Future[WatchBatch] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(watch))
            done, _ = await asyncio.wait({pending}, timeout=HEARTBEAT)
            if pending in done:
                batch, pending = pending.result(), None
                yield batch
            else:
                yield None
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await pending


@get("/events")
async def events(
    request: Request[Any, Any, Any],
    prefix: Annotated[str, QueryParameter(max_length=MAX_KEY_BYTES)] = "/",
    from_revision: Annotated[int | None, QueryParameter(ge=1)] = None,
) -> ServerSentEvent:
    """Server-sent events: each change under `prefix` (PUT with the entry, DELETE with the
    key), resumable from a revision (`from_revision`, or the `Last-Event-ID` header)."""
    check_prefix(prefix)
    store: MetadataStore = request.app.state.store
    start = start_of(request, from_revision)
    if start is None:
        start = await store.revision() + 1
    return ServerSentEvent(changes(store, prefix, start), headers={"Cache-Control": "no-store"})
