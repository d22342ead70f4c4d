"""The admin server run in the test's process on a sqlite store of its own, on a free port,
and an HTTP client for it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from metaplane.admin._auth import Tokens
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.store import MetadataStore, SqliteStore

ADMIN_TOKEN = "admin-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"


def token_file(folder: Path) -> Path:
    path = folder / "tokens"
    path.write_text(f"# role name token\nadmin ops {ADMIN_TOKEN}\nread grafana {READ_TOKEN}\n")
    os.chmod(path, 0o600)
    return path


@dataclass
class Api:
    server: AdminServer
    store: MetadataStore
    client: httpx.AsyncClient

    async def revision(self) -> int:
        return await self.store.revision()


@asynccontextmanager
async def running(
    folder: Path,
    *,
    tokens: bool = False,
    store: MetadataStore | None = None,
    analysis: Path | None = None,
) -> AsyncIterator[Api]:
    """An admin server (with the token file when `tokens`) and a client of it."""
    opened = store or await SqliteStore.open(folder / "store.db")
    read = Tokens.read(token_file(folder)) if tokens else None
    settings = ServerSettings(port=0, tokens=read, analysis=analysis)
    server = AdminServer(opened, settings)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url.rstrip("/"), timeout=30) as client:
            yield Api(server, opened, client)
    finally:
        await server.stop()
        await opened.aclose()
