"""`metaplane serve`: the HTTP admin API (OpenAPI at /admin/v2/openapi.json), the cluster's
metrics (/metrics) and the live dashboard (/), until Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from metaplane.admin._auth import Tokens, loopback
from metaplane.admin._console import (
    DEFAULT_STORE,
    StoreURL,
    console,
    fail,
    interrupted,
    usage,
)
from metaplane.admin._heap import freeze_heap
from metaplane.admin._progress import spinner
from metaplane.admin._runner import check_store
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.store import MetadataError, open_store

log = logging.getLogger(__name__)

Host = Annotated[
    str, typer.Option("--host", help="The address to listen on (loopback unless --tokens).")
]
Port = Annotated[int, typer.Option("--port", min=0, max=65535, help="The port (0: a free one).")]
TokensFile = Annotated[
    Path | None,
    typer.Option(
        "--tokens",
        envvar="METAPLANE_TOKENS",
        help="The token file (ROLE NAME TOKEN lines; see docs/api.md).",
    ),
]
CertFile = Annotated[
    Path | None, typer.Option("--tls-cert", help="The server's certificate (PEM).")
]
KeyFile = Annotated[Path | None, typer.Option("--tls-key", help="The certificate's key (PEM).")]
AnalysisDir = Annotated[
    Path | None,
    typer.Option("--analysis", help="A `metaplane analyze` output folder to show and export."),
]


def settings_of(
    host: str,
    port: int,
    tokens: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    analysis: Path | None,
) -> ServerSettings:
    """The server's settings, refused (exit 2) when they would expose it: no tokens off
    loopback, a certificate without its key."""
    if (tls_cert is None) != (tls_key is None):
        usage("--tls-cert and --tls-key go together")
    read = None
    if tokens is not None:
        try:
            read = Tokens.read(tokens)
        except MetadataError as error:
            usage(str(error))
    elif not loopback(host):
        usage(f"without --tokens the server listens on loopback only, not on {host}")
    return ServerSettings(host, port, read, tls_cert, tls_key, analysis)


def announce(server: AdminServer) -> None:
    settings = server.settings
    console.print(f"admin API on {server.url}admin/v2 (OpenAPI: {server.url}admin/v2/openapi.json)")
    console.print(f"dashboard: [bold]{server.url}[/]", highlight=False)
    if settings.tokens is None:
        console.print(
            "no tokens configured (--tokens): listening on loopback only; anyone on this "
            "machine may read and write",
            highlight=False,
        )
    else:
        console.print(f"{len(settings.tokens.by_token)} token(s) from the token file")


def serve(
    store: StoreURL = DEFAULT_STORE,
    host: Host = "127.0.0.1",
    port: Port = 8080,
    tokens: TokensFile = None,
    tls_cert: CertFile = None,
    tls_key: KeyFile = None,
    analysis: AnalysisDir = None,
) -> None:
    """Serve the HTTP admin API, the cluster's metrics and the live dashboard until Ctrl-C."""
    settings = settings_of(host, port, tokens, tls_cert, tls_key, analysis)
    try:
        check_store(store, create=False)
        asyncio.run(serving(store, settings))
    except MetadataError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror}")
    except KeyboardInterrupt:
        interrupted()


async def serving(url: str, settings: ServerSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_store(url) as store:
        server = AdminServer(store, settings)
        with spinner("loading the cache"):
            await server.start()
        log.debug("heap frozen after the cache's load: %d objects", freeze_heap())
        try:
            announce(server)
            await stop.wait()
        finally:
            await server.stop()
    console.print("admin server stopped")
