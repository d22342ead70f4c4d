"""Who may do what on the HTTP API: no token 401, a read token on a write 403, the token
file's rules, loopback only without tokens, TLS through the server's certificate."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import httpx
import pytest
import trustme
from typer.testing import CliRunner

from metaplane.admin._auth import TokenFileError, Tokens
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.admin.cli import app
from metaplane.store import SqliteStore
from tests.admin.api import ADMIN_TOKEN, READ_TOKEN, running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_no_token_is_401_and_a_read_token_on_a_write_is_403(tmp_path: Path) -> None:
    async with running(tmp_path, tokens=True) as api:
        anonymous = await api.client.get("/admin/v2/status")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.json()["title"] == "NotAuthorizedException"
        wrong = await api.client.get("/admin/v2/status", headers=bearer("x" * 30))
        assert wrong.status_code == 401
        assert (await api.client.get("/metrics")).status_code == 401
        assert (await api.client.get("/admin/v2/openapi.json")).status_code == 401
        events = await api.client.get("/admin/v2/events")
        assert events.status_code == 401
        read = await api.client.get("/admin/v2/status", headers=bearer(READ_TOKEN))
        assert read.status_code == 200
        before = await api.revision()
        refused = await api.client.put("/admin/v2/namespaces/ns", headers=bearer(READ_TOKEN))
        assert refused.status_code == 403 and "read role" in refused.json()["detail"]
        assert (await api.client.put("/admin/v2/namespaces/ns")).status_code == 401
        assert await api.revision() == before  # nothing written
        created = await api.client.put("/admin/v2/namespaces/ns", headers=bearer(ADMIN_TOKEN))
        assert created.status_code == 201
        # The dashboard's page and assets load without a token: it asks for one.
        assert (await api.client.get("/")).status_code == 200
        assert (await api.client.get("/dashboard/dashboard.js")).status_code == 200
        assert (await api.client.get("/healthz")).status_code == 200


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("admin ops short\n", "at least 16 characters"),
        ("root ops 0123456789abcdef0\n", "neither read nor admin"),
        ("admin 0123456789abcdef0\n", "ROLE NAME TOKEN"),
        ("admin a 0123456789abcdef0\nread b 0123456789abcdef0\n", "given twice"),
        ("# nothing\n", "no token"),
    ],
)
def test_a_bad_token_file_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(content)
    os.chmod(path, 0o600)
    with pytest.raises(TokenFileError, match=message):
        Tokens.read(path)
    result = CliRunner().invoke(app, ["serve", "--tokens", str(path), "--store", "memory://"])
    assert result.exit_code == 2 and message in result.output


def test_a_token_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"admin ops {ADMIN_TOKEN}\n")
    os.chmod(path, 0o644)
    with pytest.raises(TokenFileError, match="chmod 600"):
        Tokens.read(path)


def test_without_tokens_only_loopback() -> None:
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--store", "memory://"])
    assert result.exit_code == 2
    assert "loopback only" in result.output and "Traceback" not in result.output
    half = CliRunner().invoke(app, ["serve", "--tls-cert", "c.pem", "--store", "memory://"])
    assert half.exit_code == 2 and "go together" in half.output


async def test_tls_through_the_servers_certificate(tmp_path: Path) -> None:
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    certificate.cert_chain_pems[0].write_to_path(str(cert))
    certificate.private_key_pem.write_to_path(str(key))
    store = await SqliteStore.open(tmp_path / "store.db")
    server = AdminServer(store, ServerSettings(port=0, tls_cert=cert, tls_key=key))
    await server.start()
    try:
        assert server.url.startswith("https://")
        context = ssl.create_default_context()
        authority.configure_trust(context)
        async with httpx.AsyncClient(verify=context) as client:
            assert (await client.get(server.url + "admin/v2/status")).status_code == 200
        async with httpx.AsyncClient(verify=ssl.create_default_context()) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(server.url + "admin/v2/status")
    finally:
        await server.stop()
        await store.aclose()
