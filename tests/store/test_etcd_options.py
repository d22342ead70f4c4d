"""The etcd backend's connection options against real servers: TLS with a client
certificate, user/password authentication (and a token that expires), and bad options."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
import trustme

from metaplane.store import InvalidStoreURL, PermissionDenied, Unavailable, connect_store
from metaplane.testing import EtcdMember, TlsFiles, free_port

pytestmark = pytest.mark.backends("etcd", reason="options of the etcd backend")


def tls_files(folder: Path) -> tuple[TlsFiles, Path, Path]:
    """A CA, a server certificate for 127.0.0.1, and a client certificate signed by it."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("metaplane-client")
    paths = {
        name: folder / f"{name}.pem"
        for name in ("ca", "server", "server-key", "client", "client-key")
    }
    ca.cert_pem.write_to_path(paths["ca"])
    server.cert_chain_pems[0].write_to_path(paths["server"])
    server.private_key_pem.write_to_path(paths["server-key"])
    client.cert_chain_pems[0].write_to_path(paths["client"])
    client.private_key_pem.write_to_path(paths["client-key"])
    files = TlsFiles(paths["ca"], paths["server"], paths["server-key"], client_cert_auth=True)
    return files, paths["client"], paths["client-key"]


async def test_tls_with_client_certificate(tmp_path: Path, backend: str) -> None:
    files, client_cert, client_key = tls_files(tmp_path)
    # etcdctl (used by the harness) presents the server's own pair as its client certificate.
    with EtcdMember(tmp_path / "data", tls=files) as member:
        url = f"{member.url}?ca={files.ca}&cert={client_cert}&key={client_key}"
        async with await connect_store(url) as store:
            revision = await store.put("/tls", b"secret")
            entry = await store.get("/tls")
            assert entry is not None and entry.mod_revision == revision
        with pytest.raises(Unavailable):
            await connect_store(f"{member.url}?ca={files.ca}&timeout=1")
        with pytest.raises(Unavailable):
            await connect_store(f"{member.url}?timeout=1")


async def test_user_and_password(tmp_path: Path, backend: str) -> None:
    with EtcdMember(tmp_path) as member:
        member.etcdctl("user", "add", "root", "--new-user-password=root-pw")
        member.etcdctl("user", "add", "broker", "--new-user-password=p@ss:word")
        member.etcdctl("role", "add", "metadata")
        member.etcdctl("role", "grant-permission", "metadata", "--prefix=true", "readwrite", "/")
        member.etcdctl("user", "grant-role", "broker", "metadata")
        member.etcdctl("auth", "enable")
        url = f"etcd://broker:{quote('p@ss:word', safe='')}@{member.endpoint}"
        async with await connect_store(url) as store:
            first = await store.put("/auth/k", b"1")
            async with store.watch("/auth", start_revision=first) as watch:
                batch = await anext(watch)
            assert batch.events[0].key == "/auth/k"
            # A password change invalidates the user's tokens: the client logs in again.
            member.etcdctl(
                "--user=root:root-pw",
                "user",
                "passwd",
                "broker",
                "--interactive=false",
                input="p@ss:word\n",
            )
            second = await store.put("/auth/k", b"2")
            assert second > first
            # Every path logs in again after a refusal: a lease refresh, a new watch.
            lease = await store.grant(10)
            member.etcdctl(
                "--user=root:root-pw",
                "user",
                "passwd",
                "broker",
                "--interactive=false",
                input="p@ss:word\n",
            )
            assert await store.refresh(lease) == lease.ttl
            member.etcdctl(
                "--user=root:root-pw",
                "user",
                "passwd",
                "broker",
                "--interactive=false",
                input="p@ss:word\n",
            )
            async with store.watch("/auth", start_revision=second) as watch:
                again = await anext(watch)
            assert again.revision == second
        with pytest.raises(PermissionDenied):
            await connect_store(f"etcd://broker:wrong@{member.endpoint}")
        with pytest.raises(PermissionDenied):
            await connect_store(f"etcd://{member.endpoint}")


@pytest.mark.parametrize(
    "url",
    [
        "etcd://",
        "etcd://host",
        "etcd://host:port",
        "etcd://host:99999",
        "etcd://user@127.0.0.1:2379",
        "etcd://127.0.0.1:2379?ca=/does/not/exist",
        "etcd://127.0.0.1:2379?cert=/etc/hostname",
        "etcd://127.0.0.1:2379?timeout=soon",
        "etcd://127.0.0.1:2379?colour=blue",
    ],
)
async def test_bad_urls(url: str, backend: str) -> None:
    with pytest.raises(InvalidStoreURL):
        await connect_store(url)


async def test_nothing_listening(backend: str) -> None:
    with pytest.raises(Unavailable):
        await connect_store(f"etcd://127.0.0.1:{free_port()}?timeout=1")
