"""`metaplane schemas …`, every command once on an embedded store, its JSON output, and errors
as one line with a non-zero exit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from metaplane import layout
from metaplane.admin.cli import app
from metaplane.layout import TopicName
from metaplane.store import SqliteStore
from tests.schema.consistency import RegistryKeys, assert_consistent

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
BREAKING = {**V1, "fields": [{"name": "id", "type": "int"}]}
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\nmessage Line {}\n'


class Cli:
    """The command line against one sqlite store in a test's folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = f"sqlite://{folder / 'registry.db'}"

    def __call__(self, *args: str, input: str | None = None, code: int = 0) -> Result:
        arguments = ["schemas", *args, "--store", self.url]
        result = CliRunner().invoke(app, arguments, input=input, env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result

    def json(self, *args: str, code: int = 0) -> Any:
        return json.loads(self(*args, "-o", "json", code=code).stdout)

    def file(self, name: str, document: object) -> str:
        path = self.folder / name
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        return str(path)

    def keys(self) -> RegistryKeys:
        return asyncio.run(self._keys())

    async def _keys(self) -> RegistryKeys:
        async with await SqliteStore.open(self.folder / "registry.db") as store:
            return await assert_consistent(store)

    def create_topic(self, topic: TopicName) -> None:
        asyncio.run(self._create_topic(topic))

    async def _create_topic(self, topic: TopicName) -> None:
        async with await SqliteStore.open(self.folder / "registry.db") as store:
            await store.put(layout.topic_root(topic), b"0")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def one_error_line(result: Result, text: str) -> None:
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("error: ") and text in " ".join(lines)


def test_register_from_a_file_and_from_stdin(cli: Cli) -> None:
    result = cli("register", "orders", cli.file("v1.avsc", V1), "--description", "first")
    assert "registered orders version 1 (schema id 1) at revision" in result.stdout
    again = cli("register", "orders", "-", input=json.dumps(V1, indent=2))
    assert "identical to orders version 1 (schema id 1): nothing written" in again.stdout
    second = cli.json("register", "orders", cli.file("v2.avsc", V2), "--tag", "a", "--tag", "b")
    assert {k: second[k] for k in ("subject", "schema_id", "version", "created")} == {
        "subject": "orders", "schema_id": 1, "version": 2, "created": True,
    }  # fmt: skip
    assert second["fingerprint"].startswith("sha256:")
    proto = cli.json("register", "lines", cli.file("o.proto", PROTO), "-t", "proto",
                     "--message-name", "shop.Line")  # fmt: skip
    assert proto["schema_id"] == 2
    scalar = cli.json("register", "counts", "--type", "int64")
    assert scalar["version"] == 1
    keys = cli.keys()
    assert keys.versions["orders"][2].tags == ["a", "b"]
    assert keys.versions["orders"][1].description == "first"


def test_get_shows_a_version_its_document_and_its_json(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli("register", "orders", cli.file("v2.avsc", V2))
    shown = cli("get", "orders", "--version", "1").stdout
    assert "schema id" in shown and "Avro" in shown and '"name": "Order"' in shown
    assert cli("get", "orders", "--raw").stdout == json.dumps(V2) + "\n"
    by_id = cli.json("get", "--id", "1")
    assert (by_id["subject"], by_id["version"], by_id["is_deprecated"]) == ("orders", 2, False)
    assert json.loads(by_id["schema_def"]["Avro"]["raw_schema"]) == V2
    one_error_line(cli("get", code=1), "give either a SUBJECT or --id")
    one_error_line(
        cli("get", "orders", "-v", "9", code=1), "schema subject 'orders' has no version 9"
    )


def test_list_and_versions(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli("register", "orders", cli.file("v2.avsc", V2))
    cli("register", "users", "-t", "string")
    table = cli("list").stdout
    assert "2 subject(s)" in table and "orders" in table and "Backward" in table
    assert cli.json("list") == [
        {"subject": "orders", "schema_id": 1, "compatibility_mode": "Backward",
         "versions": [1, 2], "latest": 2, "topics_using": []},
        {"subject": "users", "schema_id": 2, "compatibility_mode": "Backward",
         "versions": [1], "latest": 1, "topics_using": []},
    ]  # fmt: skip
    assert "sha256:" in cli("versions", "orders").stdout
    assert [v["version"] for v in cli.json("versions", "orders")] == [1, 2]
    one_error_line(cli("versions", "nope", code=1), "schema subject 'nope' not found")


def test_check_says_why_and_exits_1_when_incompatible(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    fine = cli("check", "orders", cli.file("v2.avsc", V2))
    assert "compatible with orders under Backward (versions 1)" in fine.stdout
    refused = cli("check", "orders", cli.file("bad.avsc", BREAKING), code=1)
    assert "not compatible" in refused.stdout and "type-mismatch" in refused.stdout
    verdict = cli.json("check", "orders", cli.file("bad.avsc", BREAKING), code=1)
    assert (verdict["compatible"], verdict["checked_versions"]) == (False, [1])
    assert cli.json("check", "orders", cli.file("bad.avsc", BREAKING), "-m", "none")["compatible"]
    registered = cli("register", "orders", cli.file("bad.avsc", BREAKING), code=1)
    one_error_line(registered, "is not Backward-compatible with subject 'orders'")
    # The rule's tag is printed as text (the console would take [type-mismatch] for markup).
    one_error_line(registered, "[type-mismatch] at Order.id")
    assert sorted(cli.keys().versions["orders"]) == [1]


MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    "message Order { common.Money total = 1; }\n"
)


def test_register_and_check_with_references(cli: Cli) -> None:
    cli("register", "money", cli.file("money.proto", MONEY), "-t", "proto")
    missing = cli("register", "orders", cli.file("order.proto", ORDER), "-t", "proto", code=1)
    one_error_line(missing, "common/money.proto")
    done = cli.json(
        "register", "orders", cli.file("order.proto", ORDER), "-t", "proto",
        "--reference", "common/money.proto=money:1",
    )  # fmt: skip
    assert (done["version"], done["created"]) == (1, True)
    assert cli.keys().references["orders"]["1"][0].subject == "money"
    verdict = cli.json(
        "check", "orders", cli.file("order.proto", ORDER), "-t", "proto",
        "-r", "common/money.proto=money:1",
    )  # fmt: skip
    assert verdict["compatible"]
    one_error_line(
        cli("register", "orders", cli.file("order.proto", ORDER), "-t", "proto",
            "-r", "money:1", code=1),
        "expected NAME=SUBJECT:VERSION",
    )  # fmt: skip
    one_error_line(cli("delete", "money", "-y", code=1), "referenced by orders version 1")


def test_compat_shows_and_sets_modes(cli: Cli) -> None:
    assert cli("compat").stdout.strip() == "default: Backward"
    assert "default: Full (set at revision" in cli("compat", "--set", "full").stdout
    cli("register", "orders", cli.file("v1.avsc", V1))
    assert cli.json("compat", "orders")["compatibility_mode"] == "Full"
    changed = cli.json("compat", "orders", "--set", "forward_transitive")
    assert changed["compatibility_mode"] == "ForwardTransitive" and changed["revision"] > 0
    one_error_line(cli("compat", "orders", "--set", "sideways", code=1), "'sideways'")


def test_deprecate_and_delete(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli("register", "orders", cli.file("v2.avsc", V2))
    assert (
        "orders version 1 deprecated at revision"
        in cli("deprecate", "orders", "1", "--message", "use 2").stdout
    )
    assert "yes: use 2" in cli("versions", "orders").stdout
    cli("deprecate", "orders", "1", "--undo")
    assert not cli.keys().versions["orders"][1].is_deprecated
    cli("delete", "orders", "--version", "1", input="n\n", code=1)  # not confirmed
    assert sorted(cli.keys().versions["orders"]) == [1, 2]
    assert "deleted orders version 1" in cli("delete", "orders", "-v", "1", "--yes").stdout
    assert sorted(cli.keys().versions["orders"]) == [2]
    assert "deleted subject orders" in cli("delete", "orders", input="y\n").stdout
    assert cli.keys().metadata == {}
    one_error_line(cli("delete", "orders", "-y", code=1), "schema subject 'orders' not found")


def test_deprecate_and_delete_in_json(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli("register", "orders", cli.file("v2.avsc", V2))
    deprecated = cli.json("deprecate", "orders", "1", "--message", "use 2")
    assert set(deprecated) == {"revision"} and deprecated["revision"] > 0
    assert cli.keys().versions["orders"][1].is_deprecated
    deleted = cli.json("delete", "orders", "-v", "1", "--yes")
    assert set(deleted) == {"revision"} and deleted["revision"] > deprecated["revision"]
    assert sorted(cli.keys().versions["orders"]) == [2]


def test_bind_and_unbind_a_topic(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli.create_topic(TopicName("default", "orders"))
    assert "/default/orders bound to orders" in cli("bind", "default/orders", "orders").stdout
    assert cli.keys().bindings == {"/default/orders": "orders"}
    one_error_line(cli("delete", "orders", "-y", code=1), "unbind them first")
    assert cli.json("unbind", "/default/orders")["revision"] > 0
    assert cli.keys().bindings == {}
    one_error_line(cli("bind", "default/nope", "orders", code=1), "topic /default/nope not found")
    one_error_line(cli("bind", "a/b/c", "orders", code=1), "invalid topic name")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("register", "orders", "-t", "yaml", "-"), "unknown schema type 'yaml'"),
        (("register", "orders", "missing.avsc"), "cannot read missing.avsc"),
        (("register", "orders", "-"), "invalid Avro schema: not JSON"),
        (("register", "_index", "-t", "string"), "reserved"),
        (("get", "nope"), "schema subject 'nope' not found"),
        (("get", "--id", "4"), "schema id 4 not found"),
    ],
)
def test_errors_are_one_line_and_write_nothing(cli: Cli, args: tuple[str, ...], text: str) -> None:
    one_error_line(cli(*args, input="{nope", code=1), text)
    assert cli.keys().metadata == {}
