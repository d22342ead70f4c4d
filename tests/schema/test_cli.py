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
    made = Cli(tmp_path)
    made.keys()  # the store exists: a command never makes one without --create
    return made


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
    assert by_id["type"] == "Avro" and json.loads(by_id["document"]) == V2
    assert cli.json("get", "--id", "1", "-v", "1")["version"] == 1
    one_error_line(cli("get", code=2), "give either a SUBJECT or --id")
    one_error_line(cli("get", "orders", "--id", "1", code=2), "give either a SUBJECT or --id")
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
            "-r", "money:1", code=2),
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
    one_error_line(cli("compat", "orders", "--set", "sideways", code=2), "'sideways'")


def test_compat_sets_a_mode_over_the_version_it_expects(cli: Cli) -> None:
    """--expect is the subject's metadata version (as `compat -o json` shows it): compared by
    the write's own transaction, refused with nothing written when another writer came first."""
    cli("register", "orders", cli.file("v1.avsc", V1))
    seen = cli.json("compat", "orders")
    assert (seen["compatibility_mode"], seen["version"]) == ("Backward", 1)
    changed = cli.json("compat", "orders", "--set", "full", "--expect", "1")
    assert (changed["compatibility_mode"], changed["version"]) == ("Full", 2)
    stale = cli("compat", "orders", "--set", "none", "--expect", "1", code=1)
    one_error_line(stale, "expected version 1, found 2")
    assert cli.keys().metadata["orders"].compatibility_mode.value == "Full"
    one_error_line(cli("compat", "--set", "full", "--expect", "1", code=2), "--expect goes")
    one_error_line(cli("compat", "orders", "--expect", "1", code=2), "--expect goes")


JSON_TUPLE = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}


def test_draft_shows_and_sets_the_json_schema_draft(cli: Cli) -> None:
    assert cli("draft").stdout.strip() == "default: draft-07"
    cli("register", "tuples", cli.file("tuple.json", JSON_TUPLE), "-t", "json")
    assert "default: 2020-12 (set at revision" in cli("draft", "--set", "2020-12").stdout
    cli("register", "events", cli.file("e.json", {"type": "object"}), "-t", "json")
    assert cli.json("draft", "events") == {"subject": "events", "json_schema_draft": "2020-12"}
    changed = cli.json("draft", "events", "--set", "7")
    assert (changed["subject"], changed["json_schema_draft"]) == ("events", "draft-07")
    assert changed["revision"] > 0
    assert cli("draft", "tuples").stdout.strip() == "tuples: draft-07"
    refused = cli("draft", "tuples", "--set", "2020-12", code=1)
    one_error_line(refused, "invalid JsonSchema schema")
    assert cli("draft", "tuples").stdout.strip() == "tuples: draft-07"
    assert cli.json("draft")["json_schema_draft"] == "2020-12"
    one_error_line(cli("draft", "--set", "draft-99", code=2), "unknown JSON Schema draft")


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
    revision = deprecated["revision"]
    assert deprecated == {
        "subject": "orders",
        "version": 1,
        "deprecated": True,
        "revision": revision,
    }
    assert revision > 0 and cli.keys().versions["orders"][1].is_deprecated
    deleted = cli.json("delete", "orders", "-v", "1", "--yes")
    assert deleted == {"subject": "orders", "version": 1, "revision": deleted["revision"]}
    assert deleted["revision"] > revision
    assert sorted(cli.keys().versions["orders"]) == [2]


def test_bind_and_unbind_a_topic(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli.create_topic(TopicName("default", "orders"))
    assert "/default/orders bound to orders" in cli("bind", "/default/orders", "orders").stdout
    assert cli.keys().bindings == {"/default/orders": "orders"}
    one_error_line(cli("delete", "orders", "-y", code=1), "unbind them first")
    unbound = cli.json("unbind", "/default/orders")
    assert unbound == {"topic": "/default/orders", "revision": unbound["revision"]}
    assert cli.keys().bindings == {}
    one_error_line(cli("bind", "/default/nope", "orders", code=1), "topic /default/nope not found")
    one_error_line(cli("bind", "/a/b/c", "orders", code=2), "invalid topic name")
    one_error_line(cli("bind", "default/orders", "orders", code=2), "/namespace/topic")


def test_a_topic_bound_elsewhere_moves_only_with_replace(cli: Cli) -> None:
    cli("register", "orders", cli.file("v1.avsc", V1))
    cli("register", "other", cli.file("v1.avsc", V1))
    cli.create_topic(TopicName("default", "orders"))
    cli("bind", "/default/orders", "orders")
    refused = cli("bind", "/default/orders", "other", code=1)
    one_error_line(refused, "is bound to schema subject 'orders'")
    keys = cli.keys()
    assert keys.bindings == {"/default/orders": "orders"}
    assert keys.metadata["other"].topics_using == []
    again = cli.json("bind", "/default/orders", "orders")  # already there: nothing to move
    assert (again["previous"], again["subject"]) == ("orders", "orders")
    moved = cli("bind", "/default/orders", "other", "--replace").stdout
    assert (
        "/default/orders bound to other at revision" in moved and "(was bound to orders)" in moved
    )
    keys = cli.keys()
    assert keys.bindings == {"/default/orders": "other"}
    assert (keys.metadata["orders"].topics_using, keys.metadata["other"].topics_using) == (
        [], ["/default/orders"],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("register", "orders", "-"), "invalid Avro schema: not JSON"),
        (("register", "_index", "-t", "string"), "reserved"),
        (("get", "nope"), "schema subject 'nope' not found"),
        (("get", "--id", "4"), "schema id 4 not found"),
    ],
)
def test_errors_are_one_line_and_write_nothing(cli: Cli, args: tuple[str, ...], text: str) -> None:
    one_error_line(cli(*args, input="{nope", code=1), text)
    assert cli.keys().metadata == {}


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("register", "orders", "-t", "yaml", "-"), "unknown schema type 'yaml'"),
        (("register", "orders", "missing.avsc"), "cannot read missing.avsc"),
        (("register", "orders", "-t", "string", "-r", "money:1"), "NAME=SUBJECT:VERSION"),
        (("check", "orders", "-", "-m", "sideways"), "unknown compatibility mode"),
        (("get", "orders", "-v", "0"), "--version"),
    ],
)
def test_usage_errors_exit_2_before_the_store_is_opened(
    tmp_path: Path, args: tuple[str, ...], text: str
) -> None:
    """What the command line gets wrong is a usage error (exit 2, one line), found before the
    store is even looked for: here there is none, and none is made."""
    missing = tmp_path / "registry.db"
    arguments = ["schemas", *args, "--store", f"sqlite://{missing}", "--create"][: len(args) + 3]
    result = CliRunner().invoke(app, arguments, input="{}")
    assert result.exit_code == 2, result.output
    assert text in result.output and "Traceback" not in result.output
    assert not missing.exists()


def test_a_store_that_does_not_exist_is_an_error_unless_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "registry.db"
    url = f"sqlite://{missing}"
    for args in (["list"], ["register", "s", "-t", "string"], ["get", "s"], ["draft"]):
        result = CliRunner().invoke(app, ["schemas", *args, "--store", url])
        assert result.exit_code == 1, result.output
        one_error_line(result, f"no store at {missing}")
    assert not missing.parent.exists()
    made = CliRunner().invoke(
        app, ["schemas", "register", "s", "-t", "string", "--store", url, "--create"]
    )
    assert made.exit_code == 0 and "registered s version 1" in made.stdout, made.output
