"""The command line with no dead ends: every command's help, --version and -h, the store
found once (and never made by a typo), status, subscriptions, topics delete, brokers
undrain, owners that are not live, and each defect of the operator's issue, fixed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from metaplane import __version__, layout
from metaplane.admin.cli import app
from metaplane.layout import TopicName
from metaplane.resources import BrokerState, ClusterManager, encode
from metaplane.store import ABSENT, MetadataStore
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, add_broker, add_topic
from tests.resources.samples import BROKER, DRAINING, OTHER_BROKER

METAPLANE = [sys.executable, "-c", "from metaplane.admin.cli import main; main()"]
TOPIC = TopicName("default", "orders")


def command_paths() -> list[list[str]]:
    """Every command and group of `metaplane`, as the words that name it."""
    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "metaplane")
def test_every_command_has_its_help(path: list[str]) -> None:
    for flag in ("--help", "-h"):
        result = CliRunner().invoke(app, [*path, flag], env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.output
        assert "Usage" in result.output and "Traceback" not in result.output


def test_version_completion_and_usage_errors() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["--version"]).output.strip() == __version__
    assert runner.invoke(app, ["version"]).output.strip() == __version__
    shown = runner.invoke(app, ["--help"], env={"COLUMNS": "120"}).output
    assert "--install-completion" in shown and "--show-completion" in shown
    assert runner.invoke(app, ["topics", "list", "--no-such-option"]).exit_code == 2
    assert runner.invoke(app, ["no-such-command"]).exit_code == 2
    # A bound on partitions: refused at once as a usage error, nothing built.
    refused = runner.invoke(app, ["topics", "create", "/d/t", "--partitions", "100000"])
    assert refused.exit_code == 2


def test_a_missing_store_file_is_an_error_unless_create(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "metaplane.db"
    url = f"sqlite://{path}"
    runner = CliRunner()
    snapshot = ["snapshot", "export", "--out", str(tmp_path / "snapshot")]
    for command in (
        ["topics", "list"],
        ["status"],
        ["kv", "ls", "/"],
        ["brokers", "list"],
        snapshot,
    ):
        result = runner.invoke(app, [*command, "--store", url])
        assert result.exit_code == 1, (command, result.output)
        assert f"no store at {path}" in result.output and "--create" in result.output
        assert not path.parent.exists()  # nothing made, not even its folder
    created = runner.invoke(app, ["namespaces", "create", "default", "--store", url, "--create"])
    assert created.exit_code == 0, created.output
    assert path.exists()
    assert runner.invoke(app, ["namespaces", "list", "--store", url]).exit_code == 0


def test_the_default_store_is_per_user_and_found_once(tmp_path: Path) -> None:
    home, work, elsewhere = tmp_path / "data", tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    env = {**os.environ, "XDG_DATA_HOME": str(home), "COLUMNS": "120"}
    env.pop("METAPLANE_STORE", None)

    def metaplane(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*METAPLANE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )

    missing = metaplane("topics", "list", cwd=work)
    assert missing.returncode == 1
    assert str(home / "metaplane" / "metaplane.db") in missing.stderr
    assert metaplane("namespaces", "create", "billing", "--create", cwd=work).returncode == 0
    assert (home / "metaplane" / "metaplane.db").exists()
    assert list(work.iterdir()) == []  # nothing in the working directory
    listed = metaplane("namespaces", "list", "-o", "json", cwd=elsewhere)
    assert [row["namespace"] for row in json.loads(listed.stdout)] == ["billing"]
    env["METAPLANE_STORE"] = f"sqlite://{tmp_path / 'other.db'}"
    assert "no store at" in metaplane("namespaces", "list", cwd=elsewhere).stderr


def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    assert (
        CliRunner().invoke(app, ["kv", "put", "/a", "1", "--store", url, "--create"]).exit_code == 0
    )
    # While the commands are imported, while the store opens, while a watch waits.
    for delay in (0.3, 0.8, 1.5, 3.0):
        out, err, code = interrupted_after([*METAPLANE, "kv", "watch", "/", "--store", url], delay)
        assert code == 130, (delay, out, err)
        assert "Traceback" not in err + out, (delay, err)


def interrupted_after(command: list[str], delay: float) -> tuple[str, str, int | None]:
    """Run `command`, send it SIGINT after `delay` seconds (if still running), and return
    its output and exit code. One that outlives its SIGINT by 30 s is made to dump every
    thread's stack (faulthandler, on SIGABRT) into its stderr, then killed: a hang shows
    where it hung, and leaves no process behind to fail a later test."""
    # SIGINT reset to its default for the child: a suite started in the background by a
    # shell without job control inherits it ignored, and Python keeps it ignored.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        try:
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            out, err = process.communicate(timeout=30)
            err = "did not exit within 30 s of SIGINT; its stacks:\n" + err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return out, err, process.returncode


@BACKENDS_WITH_URL
def test_status_shows_the_leader_brokers_waiting_topics_and_the_store(cli: Cli) -> None:
    async def cluster(store: MetadataStore) -> None:
        await add_broker(store, BROKER)
        await ClusterManager(store).set_state(7, DRAINING, ABSENT)
        await add_topic(store, TOPIC)
        await store.put(layout.leader(), encode(BROKER))
        await store.put(layout.leader_epoch(), encode(2))

    cli.do(cluster)
    document = cli.json("status")
    assert document["leader"] == {"broker_id": BROKER, "epoch": 2}
    assert (document["live_brokers"], len(document["brokers"])) == (1, 2)
    assert document["unassigned"] == [
        {"topic": "/default/orders", "reason": None, "from_broker": None, "to_broker": None}
    ]
    assert document["store"]["healthy"] is True
    table = cli("status").stdout
    assert "store: answers in" in table and "brokers: 1 live of 2" in table
    assert "1 unassigned topic(s)" in table


@BACKENDS_WITH_URL
def test_subscriptions_create_list_reset_skip_delete(cli: Cli) -> None:
    cli.do(lambda store: add_topic(store, TOPIC))
    created = cli("subscriptions", "create", TOPIC.path, "billing", "--type", "shared")
    assert "created subscription billing (shared)" in created.stdout
    assert "already has a subscription" in cli.error(
        "subscriptions", "create", TOPIC.path, "billing"
    )
    assert "no subscription type" in cli.error(
        "subscriptions", "create", TOPIC.path, "x", "--type", "sometimes", code=2
    )
    reset = cli.json("subscriptions", "reset", TOPIC.path, "billing", "--to", "41")
    assert (reset["cursor"], reset["through_broker"]) == (41, None)
    assert cli.json("subscriptions", "skip", TOPIC.path, "billing", "9")["cursor"] == 50
    listed = cli.json("subscriptions", "list", TOPIC.path)
    assert [(row["subscription"], row["type"], row["cursor"]) for row in listed] == [
        ("billing", "shared", 50)
    ]
    assert "expected version 2" in cli.error(
        "subscriptions", "delete", TOPIC.path, "billing", "--expect", "2", "-y"
    )
    cli("subscriptions", "delete", TOPIC.path, "billing", "-y")
    assert cli.json("subscriptions", "list", TOPIC.path) == []
    assert "has no subscription" in cli.error(
        "subscriptions", "reset", TOPIC.path, "billing", "--to", "1"
    )


@BACKENDS_WITH_URL
def test_topics_delete_is_refused_while_subscriptions_exist_unless_forced(cli: Cli) -> None:
    cli.do(lambda store: add_topic(store, TOPIC))
    cli("subscriptions", "create", TOPIC.path, "billing")
    assert "still has subscriptions (billing)" in cli.error("topics", "delete", TOPIC.path, "-y")
    assert cli("topics", "delete", TOPIC.path, input="n\n", code=1).exit_code == 1
    assert cli.get(layout.topic_root(TOPIC)) is not None
    deleted = cli("topics", "delete", TOPIC.path, "--force", "-y")
    assert f"deleted {TOPIC}" in deleted.stdout
    assert cli.get(layout.topic_root(TOPIC)) is None
    assert cli.get(layout.subscription(TOPIC, "billing")) is None
    assert "does not exist" in cli.error("topics", "delete", TOPIC.path, "-y")


@BACKENDS_WITH_URL
def test_brokers_undrain_is_the_way_back_from_drain(cli: Cli) -> None:
    cli.do(lambda store: add_broker(store, BROKER))
    maintenance = BrokerState(mode="maintenance", reason="disk")
    cli.do(lambda store: add_broker(store, OTHER_BROKER, maintenance))
    assert "already active: nothing written" in cli("brokers", "undrain", str(BROKER)).stdout
    cli("brokers", "drain", str(BROKER))
    assert "expected version 1" in cli.error("brokers", "undrain", str(BROKER), "--expect", "1")
    undrained = cli("brokers", "undrain", str(BROKER), "--reason", "done")
    assert "set to active (was draining" in undrained.stdout
    state = cli.json("brokers", "list")["brokers"]
    assert {b["broker_id"]: b["state"]["mode"] for b in state}[BROKER] == "active"
    assert "only a draining or drained broker undrains" in cli.error(
        "brokers", "undrain", str(OTHER_BROKER)
    )
    assert "is unknown" in cli.error("brokers", "undrain", "9")


@BACKENDS_WITH_URL
def test_owners_that_are_not_live_are_marked(cli: Cli) -> None:
    async def gone_owner(store: MetadataStore) -> None:
        await add_broker(store, BROKER)
        await add_topic(store, TOPIC, owner=BROKER)
        await store.delete(layout.broker_registration(BROKER))

    cli.do(gone_owner)
    row = cli.json("topics", "list")[0]
    assert (row["owner"], row["owner_live"]) == (BROKER, False)
    assert f"broker {BROKER} (not live)" in cli("topics", "list").stdout
    described = cli.json("topics", "describe", TOPIC.path)
    assert (described["owner"], described["owner_live"]) == (BROKER, False)
    assert f"broker {BROKER} (not live)" in cli("topics", "describe", TOPIC.path).stdout


@BACKENDS_WITH_URL
def test_describe_shows_backlog_and_the_bound_schema(cli: Cli, tmp_path: Path) -> None:
    cli.do(lambda store: add_topic(store, TOPIC))
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps({"type": "record", "name": "O", "fields": []}))
    cli("schemas", "register", "orders-value", str(schema))
    cli("schemas", "bind", TOPIC.path, "orders-value")
    table = cli("topics", "describe", TOPIC.path).stdout
    assert "orders-value" in table and "backlog" in table
    assert cli.json("topics", "describe", TOPIC.path)["schema_subject"] == "orders-value"


@BACKENDS_WITH_URL
def test_a_load_report_with_a_negative_usage_is_refused(cli: Cli) -> None:
    report = {
        "resources_usage": [{"resource": "CPU", "usage": -5}],
        "topic_list": [],
        "topics_len": 0,
    }
    refused = cli.error("kv", "put", layout.load_report(1), json.dumps(report))
    assert "CPU usage -5 is negative" in refused
    assert cli.get(layout.load_report(1)) is None


@BACKENDS_WITH_URL
def test_an_error_keeps_its_bracketed_tags(cli: Cli, tmp_path: Path) -> None:
    first, breaking = tmp_path / "v1.avsc", tmp_path / "v2.avsc"
    first.write_text(
        json.dumps({"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]})
    )
    breaking.write_text(
        json.dumps({"type": "record", "name": "O", "fields": [{"name": "id", "type": "int"}]})
    )
    cli("schemas", "register", "s", str(first))
    refused = cli.error("schemas", "register", "s", str(breaking))
    assert "[type-mismatch]" in refused


def test_the_demo_and_the_tour_never_touch_an_existing_store(tmp_path: Path) -> None:
    existing = tmp_path / "mine.db"
    url = f"sqlite://{existing}"
    assert (
        CliRunner().invoke(app, ["kv", "put", "/mine", "1", "--store", url, "--create"]).exit_code
        == 0
    )
    before = existing.read_bytes()
    for command in (["demo", "--store", url, "--no-analyze"], ["tour", "--store", url]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 1, result.output
        assert "exists" in result.output and "new store of its own" in result.output
    assert existing.read_bytes() == before


@BACKENDS_WITH_URL
def test_a_schema_is_printed_whole_never_wrapped_mid_token(cli: Cli, tmp_path: Path) -> None:
    fields = [{"name": f"identifier_with_a_long_name_{i}", "type": "string"} for i in range(6)]
    document = json.dumps({"type": "record", "name": "Order", "fields": fields})
    path = tmp_path / "order.avsc"
    path.write_text(document)
    cli("schemas", "register", "orders", str(path))
    narrow = CliRunner().invoke(
        app, ["schemas", "get", "orders", "--store", cli.url], env={"COLUMNS": "60"}
    )
    assert narrow.exit_code == 0, narrow.output
    assert document in narrow.stdout.splitlines()
