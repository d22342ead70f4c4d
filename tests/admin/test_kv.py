"""`metaplane kv …`: every command once on sqlite, etcd, zk, its JSON, and its errors as one
line with a non-zero exit."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin import _kv
from metaplane.admin.cli import app
from metaplane.resources import encode
from metaplane.store import MetadataStore, Put
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, StoreWork
from tests.on_zookeeper import REVISIONS_COUNT_WRITES
from tests.resources.samples import ACTIVE
from tests.store import zk_subsets

pytestmark = BACKENDS_WITH_URL

BINARY = b"\xff\x00\xfe"


def test_put_and_get_a_value_and_its_entry(cli: Cli) -> None:
    assert cli("kv", "put", "/app/greeting", "hello").stdout.startswith("put /app/greeting at")
    assert cli("kv", "get", "/app/greeting").stdout == "hello\n"
    entry = cli.json("kv", "get", "/app/greeting")
    stored = cli.get("/app/greeting")
    assert stored is not None
    assert entry == {
        "key": "/app/greeting", "value": "hello", "base64": False, "version": 1,
        "create_revision": stored.create_revision, "mod_revision": stored.mod_revision,
        "lease": 0,
    }  # fmt: skip


def test_put_from_stdin_and_from_a_file_byte_for_byte(cli: Cli, tmp_path: Path) -> None:
    cli("kv", "put", "/app/raw", "-", input=BINARY)
    entry = cli.json("kv", "get", "/app/raw")
    assert entry["base64"] and base64.b64decode(entry["value"]) == BINARY
    shown = cli("kv", "get", "/app/raw")
    assert shown.stdout == base64.b64encode(BINARY).decode() + "\n"
    assert "not UTF-8" in shown.stderr
    document = tmp_path / "state.json"
    document.write_bytes(encode(ACTIVE))
    cli("kv", "put", layout.broker_state(7), "--file", str(document))
    assert cli("kv", "get", layout.broker_state(7)).stdout == encode(ACTIVE).decode() + "\n"
    missing = str(tmp_path / "nope")
    assert "cannot read" in cli.error("kv", "put", "/app/x", "--file", missing, code=2)
    assert "give the VALUE" in cli.error("kv", "put", "/app/x", code=2)


def test_put_compares_the_version_it_expects(cli: Cli) -> None:
    assert cli.json("kv", "put", "/app/k", "1", "--expect", "absent")["key"] == "/app/k"
    assert "already exists" in cli.error("kv", "put", "/app/k", "2", "--expect", "absent")
    cli("kv", "put", "/app/k", "2", "--expect", "1")
    assert cli.error("kv", "put", "/app/k", "3", "--expect", "1") == (
        "error: /app/k: expected version 1, found 2"
    )
    assert "not found" in cli.error("kv", "put", "/app/missing", "1", "--expect", "4")
    assert "--expect is absent, any or a version" in cli.error(
        "kv", "put", "/app/k", "4", "--expect", "newest", code=2
    )
    assert cli("kv", "get", "/app/k").stdout == "2\n"


def test_put_refuses_a_value_its_readers_could_not_decode(cli: Cli) -> None:
    key = layout.broker_state(7)
    error = cli.error("kv", "put", key, '{"mode":"asleep"}')
    assert "malformed" in error and "--raw" in error
    assert cli.get(key) is None
    cli("kv", "put", key, '{"mode":"asleep"}', "--raw")
    assert "invalid key" in cli.error("kv", "put", "relative/key", "1")


def test_get_an_unknown_key(cli: Cli) -> None:
    assert cli.error("kv", "get", "/nope") == "error: /nope: not found"


def test_del_a_key_at_a_version(cli: Cli) -> None:
    cli("kv", "put", "/app/k", "1")
    cli("kv", "put", "/app/k", "2")
    assert "expected version 1, found 2" in cli.error("kv", "del", "/app/k", "--expect", "1")
    assert "cannot hold" in cli.error("kv", "del", "/app/k", "--expect", "absent", code=2)
    assert cli.json("kv", "del", "/app/k", "--expect", "2")["deleted"] == 1
    assert cli.error("kv", "del", "/app/k") == "error: /app/k: not found"


def test_del_a_prefix_after_confirmation(cli: Cli) -> None:
    for key in ("/app/a", "/app/a/b", "/app/ab"):
        cli("kv", "put", key, "x")
    refused = cli("kv", "del", "/app/a", "--prefix", input="n\n", code=1)
    assert "delete 2 key(s) under /app/a?" in refused.stdout
    assert cli.get("/app/a") is not None
    confirmed = cli("kv", "del", "/app/a", "--prefix", input="y\n")
    assert "deleted 2 key(s) under /app/a" in confirmed.stdout
    assert cli("kv", "ls", "/app").stdout == "/app/ab\n"  # a prefix stops at a segment
    assert cli.json("kv", "del", "/app", "--prefix", "-y")["deleted"] == 1
    assert cli.error("kv", "del", "/app", "--prefix", "-y") == "error: no key under /app"
    assert "does not apply" in cli.error("kv", "del", "/app", "--prefix", "--expect", "1", code=2)


@pytest.mark.backends("sqlite", "etcd", reason=REVISIONS_COUNT_WRITES)
def test_ls_pages_through_a_prefix_at_one_revision(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_kv, "PAGE_SIZE", 2)
    revision = cli.do(put_keys([f"/app/{name}" for name in "edcba"] + ["/other"]))
    keys = [f"/app/{name}" for name in "abcde"]
    assert cli("kv", "ls", "/app").stdout.splitlines() == keys
    listing = cli.json("kv", "ls", "/app")
    assert (listing["prefix"], listing["revision"]) == ("/app", revision)
    assert [entry["key"] for entry in listing["keys"]] == keys
    assert set(listing["keys"][0]) == {
        "key", "version", "create_revision", "mod_revision", "lease",
    }  # fmt: skip
    long = cli("kv", "ls", "/app", "-l").stdout
    assert "5 key(s) at revision" in long and "modified" in long
    assert cli("kv", "ls", "/nothing").stdout == ""
    assert "invalid key" in cli.error("kv", "ls", "no-slash")


def test_tree_shows_the_paths_and_values(cli: Cli) -> None:
    cli.do(put_keys([layout.broker_state(1), layout.broker_state(2)]))
    shown = cli("kv", "tree", "/cluster").stdout
    for part in ("/cluster", "brokers", "state", "2 key(s) at revision", '"mode":"active"'):
        assert part in shown
    assert cli.error("kv", "tree", "/nothing") == "error: no key under /nothing"


@pytest.mark.backends("sqlite", "etcd", reason=zk_subsets.HISTORY)
def test_watch_replays_batches_from_a_revision(cli: Cli) -> None:
    first = cli.do(put_keys(["/app/a", "/app/b"]))  # one transaction: one batch
    cli("kv", "put", "/app/a", "2")
    cli("kv", "del", "/app/b")
    events = cli("kv", "watch", "/app", "--from-revision", str(first), "--count", "3", "-o", "json")
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert [(e["type"], e["key"], e["version"]) for e in lines] == [
        ("PUT", "/app/a", 1), ("PUT", "/app/b", 1), ("PUT", "/app/a", 2), ("DELETE", "/app/b", 0),
    ]  # fmt: skip
    assert lines[0]["revision"] == lines[1]["revision"] == first
    table = cli("kv", "watch", "/app", "--from-revision", str(first + 1), "--count", "1")
    assert f"{first + 1} PUT    /app/a = 2 (v2)" in table.stdout
    assert "watching /app" in table.stderr
    assert cli("kv", "watch", "/app", "--from-revision", "0", code=2).exit_code == 2


@pytest.mark.backends("sqlite", "etcd", reason=zk_subsets.COMPACTION)
def test_watch_from_a_compacted_revision(cli: Cli) -> None:
    first = cli.do(put_keys(["/app/a"]))
    cli("kv", "put", "/app/a", "2")
    cli.do(compact_now)
    refused = cli("kv", "watch", "/app", "--from-revision", str(first), "--count", "1", code=1)
    assert refused.stderr.splitlines()[-1].startswith("error: history compacted")
    assert refused.stdout == ""


def put_keys(keys: list[str]) -> StoreWork:
    """Write `keys` (value: an active broker state) in one transaction; its revision."""

    async def write(store: MetadataStore) -> int:
        result = await store.txn((), [Put(key, encode(ACTIVE)) for key in keys])
        return result.revision

    return write


async def compact_now(store: MetadataStore) -> None:
    await store.compact(await store.revision())


def test_the_store_comes_from_metaplane_store_when_not_given(cli: Cli) -> None:
    cli("kv", "put", "/app/env", "from-the-env")
    result = CliRunner().invoke(
        app, ["kv", "get", "/app/env"], env={"COLUMNS": "200", "METAPLANE_STORE": cli.url}
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "from-the-env\n"


@pytest.mark.parametrize(
    "url",
    [
        "bogus://somewhere",  # no such backend
        "etcd://",  # no endpoint
        "sqlite:///nonexistent-folder/below/metaplane.db",  # a folder that is not there
    ],
)
def test_a_bad_store_url_is_one_line(cli: Cli, url: str) -> None:
    result = CliRunner().invoke(app, ["kv", "get", "/x", "--store", url], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
