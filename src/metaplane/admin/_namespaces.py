"""`metaplane namespaces …`: create namespaces with their policy, list them, show and change a
policy with a version compare, delete an empty one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.table import Table

from metaplane import layout
from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    fail,
    print_json,
    run,
)
from metaplane.layout import KeyKind, LayoutError
from metaplane.resources import (
    MalformedValue,
    NamespaceManager,
    NamespacePolicy,
    Versioned,
    decode,
)
from metaplane.store import BadVersion, Entry, InvalidValue, MetadataStore, open_store

namespaces_app = typer.Typer(
    name="namespaces",
    help="Namespaces and their policies: create, list, policy, delete.",
    no_args_is_help=True,
)

Namespace = Annotated[str, typer.Argument(help="The namespace, e.g. default.")]
Limit = Annotated[int | None, typer.Option(min=0, show_default=False, help="0: unlimited.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

POLICY_FIELDS = NamespacePolicy.__struct_fields__
_WHOLE_NUMBER = re.compile(r"[0-9]+")


def policy_json(policy: NamespacePolicy) -> dict[str, Any]:
    """The policy as stored (a field Danube leaves out stays out)."""
    document: dict[str, Any] = msgspec.to_builtins(policy)
    return document


def with_limits(policy: NamespacePolicy, limits: Mapping[str, int | None]) -> NamespacePolicy:
    """`policy` with the limits that were given (not None) replaced."""
    given = {name: value for name, value in limits.items() if value is not None}
    return msgspec.structs.replace(policy, **given)


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

    async def go() -> tuple[NamespacePolicy, int]:
        base = NamespacePolicy() if policy_file is None else read_policy(policy_file)
        policy = with_limits(base, limits)
        async with open_store(store) as opened:
            return policy, await NamespaceManager(opened).create(namespace, policy)

    policy, revision = run(go())
    if output is Output.JSON:
        print_json({"namespace": namespace, "policy": policy_json(policy), "revision": revision})
    else:
        console.print(f"created namespace {namespace} at revision {revision}", highlight=False)


def read_policy(path: Path) -> NamespacePolicy:
    """A policy from a JSON file, checked as the store's readers will decode it."""
    try:
        data = path.read_bytes()
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror}")
    try:
        return decode(NamespacePolicy, data)
    except MalformedValue as error:
        raise InvalidValue(f"{path}: {error}") from None


# list ---------------------------------------------------------------------------------------


Namespaces = tuple[dict[str, NamespacePolicy], dict[str, int]]
"""Every namespace's policy, and how many topics each lists."""


async def read_namespaces(store: MetadataStore) -> Namespaces:
    """Every namespace's policy and its number of topics, from one read of /namespaces."""
    policies: dict[str, NamespacePolicy] = {}
    topics: dict[str, int] = {}
    for entry in await store.list(layout.namespaces_prefix()):
        try:
            key = layout.parse(entry.key)
        except LayoutError:
            continue
        if key.namespace is None:
            continue
        if key.kind is KeyKind.NAMESPACE_POLICY:
            policies[key.namespace] = policy_at(entry)
        elif key.kind is KeyKind.NAMESPACE_TOPIC:
            topics[key.namespace] = topics.get(key.namespace, 0) + 1
    return policies, topics


def policy_at(entry: Entry) -> NamespacePolicy:
    """The policy `entry` holds; a malformed one is named by its key, for the operator."""
    try:
        return decode(NamespacePolicy, entry.value)
    except MalformedValue as error:
        raise InvalidValue(f"{entry.key}: {error}") from None


@namespaces_app.command("list")
def list_namespaces(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every namespace with its number of topics and its policy."""

    async def go() -> Namespaces:
        async with open_store(store) as opened:
            return await read_namespaces(opened)

    policies, topics = run(go())
    document: list[dict[str, Any]] = [
        {"namespace": name, "topics": topics.get(name, 0), "policy": policy_json(policy)}
        for name, policy in sorted(policies.items())
    ]
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

    async def go() -> tuple[Versioned[NamespacePolicy], int | None]:
        async with open_store(store) as opened:
            namespaces = NamespaceManager(opened)
            current = await namespaces.policy(namespace)
            if not changes:
                return current, None
            return await change_policy(namespaces, namespace, current, changes, expect)

    shown, revision = run(go())
    if output is Output.JSON:
        document = {"namespace": namespace, "version": shown.version, "revision": revision}
        print_json({**document, "policy": policy_json(shown.value)})
    else:
        show_policy(namespace, shown, revision)


def parse_fields(settings: list[str]) -> dict[str, int]:
    """{field: value} of `field=value` texts ("-" or "_" in names, values whole numbers)."""
    changes: dict[str, int] = {}
    for text in settings:
        name, sep, value = text.partition("=")
        name = name.strip().lower().replace("-", "_")
        if not sep or name not in POLICY_FIELDS:
            fail(f"--set {text!r}: no such field (`namespaces policy NS` shows the fields)")
        if _WHOLE_NUMBER.fullmatch(value.strip()) is None:
            fail(f"--set {text!r}: the value is a whole number >= 0 (0: unlimited)")
        changes[name] = int(value)
    return changes


async def change_policy(
    namespaces: NamespaceManager,
    namespace: str,
    current: Versioned[NamespacePolicy],
    changes: dict[str, int],
    expect: int | None,
) -> tuple[Versioned[NamespacePolicy], int]:
    """Write `current` with `changes` over the version expected; the policy as written."""
    if expect is not None and expect != current.version:
        raise BadVersion(current.key, expect, current.version)
    changed = with_limits(current.value, changes)
    revision = await namespaces.set_policy(namespace, changed, current.version)
    written = Versioned(
        changed, current.version + 1, revision, current.create_revision, current.key
    )
    return written, revision


def show_policy(namespace: str, shown: Versioned[NamespacePolicy], revision: int | None) -> None:
    table = Table(title=f"namespace {namespace}, policy version {shown.version}")
    table.add_column("field")
    table.add_column("value", justify="right")
    for name, value in policy_json(shown.value).items():
        table.add_row(name, "unlimited" if value == 0 else str(value))
    console.print(table)
    if revision is not None:
        console.print(f"changed at revision {revision}", highlight=False)


# delete -------------------------------------------------------------------------------------


@namespaces_app.command()
def delete(
    namespace: Namespace,
    yes: Yes = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a namespace; refused while it has topics."""
    if not yes:
        typer.confirm(f"delete namespace {namespace}?", abort=True)

    async def go() -> int:
        async with open_store(store) as opened:
            return await NamespaceManager(opened).delete(namespace)

    revision = run(go())
    if output is Output.JSON:
        print_json({"namespace": namespace, "revision": revision})
    else:
        console.print(f"deleted namespace {namespace} at revision {revision}", highlight=False)
