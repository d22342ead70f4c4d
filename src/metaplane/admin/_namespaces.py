"""`metaplane namespaces …`: create namespaces with their policy, list them, show and change a
policy with a version compare, delete an empty one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    Output,
    OutputFormat,
    StoreURL,
    console,
    fail,
    print_json,
    usage,
)
from metaplane.admin._namespace_ops import POLICY_FIELDS, with_limits
from metaplane.admin._operations import Operations
from metaplane.admin._runner import execute
from metaplane.resources import MalformedValue, NamespacePolicy, decode
from metaplane.store import InvalidValue

namespaces_app = typer.Typer(
    name="namespaces",
    help="Namespaces and their policies: create, list, policy, delete.",
    no_args_is_help=True,
)

Namespace = Annotated[str, typer.Argument(help="The namespace, e.g. default.")]
Limit = Annotated[int | None, typer.Option(min=0, show_default=False, help="0: unlimited.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

_WHOLE_NUMBER = re.compile(r"[0-9]+")


# create -------------------------------------------------------------------------------------


@namespaces_app.command()
def create(
    namespace: Namespace,
    policy_file: Annotated[
        Path | None,
        typer.Option("--policy-file", help="A policy as JSON; the --max-… options override it."),
    ] = None,
    max_consumers_per_subscription: Limit = None,
    max_consumers_per_topic: Limit = None,
    max_dispatch_rate: Limit = None,
    max_message_size: Limit = None,
    max_producers_per_topic: Limit = None,
    max_publish_rate: Limit = None,
    max_subscription_dispatch_rate: Limit = None,
    max_subscriptions_per_topic: Limit = None,
    store: StoreURL = DEFAULT_STORE,
    create_store: Create = False,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Create a namespace with its policy (default: every limit off, messages up to 10 MiB)."""
    limits = {
        "max_consumers_per_subscription": max_consumers_per_subscription,
        "max_consumers_per_topic": max_consumers_per_topic,
        "max_dispatch_rate": max_dispatch_rate,
        "max_message_size": max_message_size,
        "max_producers_per_topic": max_producers_per_topic,
        "max_publish_rate": max_publish_rate,
        "max_subscription_dispatch_rate": max_subscription_dispatch_rate,
        "max_subscriptions_per_topic": max_subscriptions_per_topic,
    }

    base = NamespacePolicy() if policy_file is None else read_policy(policy_file)
    document = execute(
        store,
        lambda ops: ops.create_namespace(namespace, with_limits(base, limits)),
        create=create_store,
    )
    if output is Output.JSON:
        print_json(document)
    else:
        console.print(
            f"created namespace {namespace} at revision {document['revision']}", highlight=False
        )


def read_policy(path: Path) -> NamespacePolicy:
    """A policy from a JSON file, checked as the store's readers will decode it."""
    try:
        data = path.read_bytes()
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror}")
    try:
        return decode(NamespacePolicy, data)
    except MalformedValue as error:
        fail(str(InvalidValue(f"{path}: {error}")))


# list ---------------------------------------------------------------------------------------


@namespaces_app.command("list")
def list_namespaces(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every namespace with its number of topics and its policy."""
    document = execute(store, lambda ops: ops.list_namespaces())
    if output is Output.JSON:
        print_json(document)
        return
    table = Table(title=f"{len(document)} namespace(s)")
    for column in ("namespace", "topics", "limits set"):
        table.add_column(column)
    for row in document:
        table.add_row(row["namespace"], str(row["topics"]), limits_set(row["policy"]))
    console.print(table)


def limits_set(policy: dict[str, Any]) -> str:
    """The limits that are on (not 0), briefly."""
    on = [f"{name.removeprefix('max_')}={value}" for name, value in policy.items() if value]
    return ", ".join(on) or "none"


# policy -------------------------------------------------------------------------------------


@namespaces_app.command()
def policy(
    namespace: Namespace,
    set_fields: Annotated[
        list[str] | None,
        typer.Option("--set", help="field=value (repeatable), e.g. max_producers_per_topic=5."),
    ] = None,
    expect: Annotated[
        int | None,
        typer.Option("--expect", min=1, help="Change it only if it is still at this version."),
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Show a namespace's policy, or change fields of it with --set.

    The change is written over the version read (or the one --expect names): a concurrent
    change makes it fail instead of being lost."""
    changes = parse_fields(set_fields or [])

    async def show_or_change(ops: Operations) -> dict[str, Any]:
        if not changes:
            return await ops.namespace_policy(namespace)
        return await ops.change_policy(namespace, changes, expect)

    document = execute(store, show_or_change)
    if output is Output.JSON:
        print_json({"revision": None, **document})
    else:
        show_policy(document)


def parse_fields(settings: list[str]) -> dict[str, int]:
    """{field: value} of `field=value` texts ("-" or "_" in names, values whole numbers)."""
    changes: dict[str, int] = {}
    for text in settings:
        name, sep, value = text.partition("=")
        name = name.strip().lower().replace("-", "_")
        if not sep or name not in POLICY_FIELDS:
            usage(f"--set {text!r}: no such field (`namespaces policy NS` shows the fields)")
        if _WHOLE_NUMBER.fullmatch(value.strip()) is None:
            usage(f"--set {text!r}: the value is a whole number >= 0 (0: unlimited)")
        changes[name] = int(value)
    return changes


def show_policy(document: dict[str, Any]) -> None:
    namespace, version = document["namespace"], document["version"]
    table = Table(title=f"namespace {namespace}, policy version {version}")
    table.add_column("field")
    table.add_column("value", justify="right")
    for name, value in document["policy"].items():
        table.add_row(name, "unlimited" if value == 0 else str(value))
    console.print(table)
    if document.get("revision") is not None:
        console.print(f"changed at revision {document['revision']}", highlight=False)


# delete -------------------------------------------------------------------------------------


@namespaces_app.command()
def delete(
    namespace: Namespace,
    yes: Yes = False,
    expect: Annotated[
        int | None,
        typer.Option("--expect", min=1, help="Delete it only if its policy is at this version."),
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a namespace; refused while it has topics."""
    if not yes:
        typer.confirm(f"delete namespace {namespace}?", abort=True)
    document = execute(store, lambda ops: ops.delete_namespace(namespace, expect))
    if output is Output.JSON:
        print_json(document)
    else:
        revision = document["revision"]
        console.print(f"deleted namespace {namespace} at revision {revision}", highlight=False)
