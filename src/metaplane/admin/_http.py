"""What every endpoint of the HTTP API shares: versions as ETags (If-Match, If-None-Match),
errors as problem details (RFC 9457) with the status the error tree gives, and who may call
(bearer tokens and roles)."""

from __future__ import annotations

import logging
import re
from typing import Any

from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    PermissionDeniedException,
    SerializationException,
    ValidationException,
)
from litestar.handlers.base import BaseRouteHandler

from metaplane.admin._auth import Tokens, bearer
from metaplane.admin._errors import PreconditionFailed, http_status
from metaplane.store import ABSENT, ANY, Expect, MetadataError

log = logging.getLogger(__name__)

PROBLEM = "application/problem+json"
_VERSION_TAG = re.compile(r'^(?:W/)?"?([0-9]+)"?$')
READS = frozenset({"GET", "HEAD", "OPTIONS"})


def version_tag(version: int) -> str:
    """The ETag of a one-key resource: its version."""
    return f'"{version}"'


def if_match_version(request: Request[Any, Any, Any], what: str) -> int | None:
    """The version an If-Match header names (None without one); any other tag can never
    match a one-key resource: 412."""
    header = request.headers.get("if-match")
    if header is None or header.strip() == "*":
        return None
    found = _VERSION_TAG.match(header.strip())
    if found is None or int(found.group(1)) < 1:
        raise PreconditionFailed(what, header, "a version")
    return int(found.group(1))


def creation_expectation(request: Request[Any, Any, Any]) -> Expect:
    """`If-None-Match: *` asks for the resource's absence; a create expects it anyway."""
    header = request.headers.get("if-none-match")
    return ABSENT if header is not None and header.strip() == "*" else ANY


def if_match_tag(request: Request[Any, Any, Any]) -> str | None:
    """The If-Match of a resource of several keys, as given (compared to its ETag)."""
    header = request.headers.get("if-match")
    return None if header is None else header.strip()


def with_tag(document: dict[str, Any], tag: str, status: int = 200) -> Response[dict[str, Any]]:
    return Response(document, status_code=status, headers={"ETag": tag})


# Bodies -------------------------------------------------------------------------------------


class JsonRequest(Request[Any, Any, Any]):
    """A request whose JSON body must be UTF-8, checked before it is parsed: a bad request
    (400) that says so, like any other body that is no JSON. msgspec 0.22 raises
    UnicodeDecodeError, not its DecodeError, for a string holding a byte that is not UTF-8
    (`"\\x80"`), which would be an internal error; 0.23 says "Invalid UTF-8 encoded string"
    itself. Checked here, the answer is the same whichever msgspec is installed."""

    async def json(self) -> Any:
        try:
            (await self.body()).decode("utf-8")
            return await super().json()
        except UnicodeDecodeError as error:
            raise SerializationException(f"the body is not UTF-8: {error}") from error


# Problems -----------------------------------------------------------------------------------


def problem(status: int, title: str, detail: str, **more: Any) -> Response[dict[str, Any]]:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **more}
    headers = {"WWW-Authenticate": 'Bearer realm="metaplane"'} if status == 401 else None
    return Response(body, status_code=status, media_type=PROBLEM, headers=headers)


def metadata_problem(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    status = http_status(error)
    return problem(status, type(error).__name__, str(error))


def http_problem(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    assert isinstance(error, HTTPException)
    extra: dict[str, Any] = {}
    if isinstance(error, ValidationException) and error.extra:
        extra["errors"] = error.extra
    return problem(error.status_code, type(error).__name__, str(error.detail), **extra)


def internal_problem(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    log.exception("%s %s failed", request.method, request.url.path)
    return problem(500, "InternalError", "the server failed; its log says why")


EXCEPTION_HANDLERS = {
    MetadataError: metadata_problem,
    HTTPException: http_problem,
    Exception: internal_problem,
}


# Who may call -------------------------------------------------------------------------------


def authorize(tokens: Tokens | None, connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Refuse a call without a known token (401), or a write with a read token (403).
    Without a token file every call is allowed (the server is on loopback only)."""
    if tokens is None:
        return
    presented = bearer(connection.headers.get("authorization"))
    caller = None if presented is None else tokens.caller(presented)
    if caller is None:
        raise NotAuthorizedException("a bearer token is required (Authorization: Bearer …)")
    write = connection.scope.get("method", "GET") not in READS
    if not caller.may(write):
        raise PermissionDeniedException(f"{caller.name} has the read role: this is a write")


def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    if handler.opt.get("public"):
        return
    authorize(connection.app.state.get("tokens"), connection)
