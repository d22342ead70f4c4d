"""`metaplane kv …`: the store's keys as they are, for operators — read an entry, write or
delete with a version compare, list, show as a tree, and watch changes live.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from metaplane import layout
from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    Output,
    OutputFormat,
    StoreURL,
    console,
    errors,
    fail,
    print_json,
    usage,
)
from metaplane.admin._operations import Operations, entry_document
from metaplane.admin._progress import counting
from metaplane.admin._runner import execute
from metaplane.admin._tree import key_tree
from metaplane.resources import MalformedValue, decode
from metaplane.store import (
    ABSENT,
    ANY,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Expect,
    InvalidValue,
    MetadataStore,
    NotFound,
    WatchBatch,
)

kv_app = typer.Typer(
    name="kv",
    help="The store's keys as they are: get, put, del, ls, tree, watch.",
    no_args_is_help=True,
)

PAGE_SIZE = 1000
"""Keys read per request when listing: a large prefix is paged at one pinned revision."""

Key = Annotated[str, typer.Argument(help="A key: an absolute path such as /cluster/leader.")]
Prefix = Annotated[str, typer.Argument(help="A prefix: the key itself and every key under it.")]
ExpectOption = Annotated[
    str,
    typer.Option(
        "--expect", help="absent, any, or the version the key must have (else nothing is written)."
    ),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

_VERSION = re.compile(r"[1-9][0-9]*")


def expectation(text: str) -> Expect | int:
    """The expectation an --expect option names."""
    word = text.strip().lower()
    if word == "any":
        return ANY
    if word == "absent":
        return ABSENT
    if _VERSION.fullmatch(word) is None:
        usage(f"--expect is absent, any or a version >= 1, not {text!r}")
    return int(word)


def readable(value: bytes) -> tuple[str, bool]:
    """A value as text: itself if it is UTF-8, else its base64 (and True)."""
    try:
        return value.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii"), True


def entry_json(entry: Entry, *, with_value: bool = True) -> dict[str, Any]:
    """An entry as scripts read it; a value that is not UTF-8 comes in base64, flagged."""
    return entry_document(entry, with_value=with_value)


def report(output: Output, text: str, **facts: object) -> None:
    if output is Output.JSON:
        print_json(facts)
    else:
        console.print(text, markup=False, highlight=False)


# get ----------------------------------------------------------------------------------------


@kv_app.command()
def get(key: Key, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """Print a key's value; with -o json, its whole entry (value, version, revisions, lease)."""

    async def read(ops: Operations) -> Entry:
        entry = await ops.store.get(key)
        if entry is None:
            raise NotFound(key)
        return entry

    entry = execute(store, read)
    if output is Output.JSON:
        print_json(entry_json(entry))
        return
    text, in_base64 = readable(entry.value)
    if in_base64:
        errors.print(f"{key}: the value is not UTF-8; printed in base64", highlight=False)
    sys.stdout.write(text + "\n")


# put ----------------------------------------------------------------------------------------


@kv_app.command()
def put(
    key: Key,
    value: Annotated[
        str | None, typer.Argument(help="The value, as text; - reads it from stdin.")
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the value from this file.")
    ] = None,
    expect: ExpectOption = "any",
    raw: Annotated[
        bool, typer.Option("--raw", help="Write even a value that is not of its key's kind.")
    ] = False,
    store: StoreURL = DEFAULT_STORE,
    create_store: Create = False,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Write a key, byte for byte, if --expect holds.

    A key of the layout takes only a value of its kind (a broker state, a policy, …) unless
    --raw: a value its readers cannot decode would stop them."""
    data = value_of(value, file)
    expected = expectation(expect)

    async def write(ops: Operations) -> int:
        if not raw:
            check_kind(key, data)
        return await ops.store.put(key, data, expect=expected)

    revision = execute(store, write, create=create_store)
    report(output, f"put {key} at revision {revision}", key=key, revision=revision)


def value_of(value: str | None, file: Path | None) -> bytes:
    """The bytes to write: the argument, stdin (-) or a file; exactly one of them."""
    if (value is None) == (file is None):
        usage("give the VALUE, - for stdin, or --file (one of them)")
    if file is not None:
        try:
            return file.read_bytes()
        except OSError as error:
            usage(f"cannot read {file}: {error.strerror}")
    assert value is not None
    return sys.stdin.buffer.read() if value == "-" else value.encode("utf-8")


def check_kind(key: str, data: bytes) -> None:
    """Refuse a value a reader of `key` could not decode; keys outside the layout take any."""
    try:
        kind = layout.parse(key).kind
    except layout.UnknownKey:
        return
    try:
        decode(kind, data)
    except MalformedValue as error:
        raise InvalidValue(f"{key}: {error} (--raw writes it anyway)") from None


# del ----------------------------------------------------------------------------------------


@kv_app.command("del")
def delete(
    key: Key,
    prefix: Annotated[
        bool, typer.Option("--prefix", help="Delete the key and every key under it.")
    ] = False,
    expect: ExpectOption = "any",
    yes: Yes = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a key (at the version --expect names), or with --prefix a whole prefix.

    A prefix goes in one revision, after confirmation (-y skips it)."""
    if prefix:
        delete_prefix(key, expect, yes, store, output)
        return
    expected = expectation(expect)
    if expected is ABSENT:
        usage("--expect absent cannot hold for a key being deleted")
    revision = execute(store, lambda ops: delete_key(ops.store, key, expected))
    report(output, f"deleted {key} at revision {revision}", deleted=1, revision=revision)


async def delete_key(store: MetadataStore, key: str, expected: Expect | int) -> int:
    """Delete one key that must exist (at `expected` if a version); its revision."""
    if expected is not ANY:
        return await store.delete(key, expect=expected)
    result = await store.txn([Compare.exists(key)], [Delete(key)])
    if not result.succeeded:
        raise NotFound(key)
    return result.revision


def delete_prefix(prefix: str, expect: str, yes: bool, store: str, output: Output) -> None:
    if expect.strip().lower() != "any":
        usage("--expect compares one key's version; it does not apply to --prefix")
    found = len(read_prefix(store, prefix, keys_only=True)[0])
    if found == 0:
        fail(f"no key under {prefix}")
    if not yes:
        typer.confirm(f"delete {found} key(s) under {prefix}?", abort=True)

    async def delete_all(ops: Operations) -> tuple[int, int]:
        result = await ops.store.txn((), [DeletePrefix(prefix)])
        return result.count(0), result.revision

    deleted, revision = execute(store, delete_all)
    text = f"deleted {deleted} key(s) under {prefix} at revision {revision}"
    report(output, text, deleted=deleted, revision=revision)


# ls, tree -----------------------------------------------------------------------------------


def read_prefix(url: str, prefix: str, *, keys_only: bool) -> tuple[list[Entry], int]:
    """Every entry under `prefix` and the revision they were read at: page by page, each page
    at the revision of the first, with a count of keys read so far."""

    async def read(ops: Operations) -> tuple[list[Entry], int]:
        with counting(f"reading {prefix}") as progress:
            return await read_pages(ops.store, prefix, keys_only, progress)

    return execute(url, read)


async def read_pages(
    store: MetadataStore, prefix: str, keys_only: bool, progress: Callable[[int], None]
) -> tuple[list[Entry], int]:
    page = await store.list(prefix, keys_only=keys_only, limit=PAGE_SIZE)
    entries, revision = list(page), page.revision
    while page.more and page.entries:
        progress(len(entries))
        page = await store.list(
            prefix,
            revision=revision,
            keys_only=keys_only,
            limit=PAGE_SIZE,
            start_after=page[-1].key,
        )
        entries.extend(page)
    return entries, revision


@kv_app.command("ls")
def list_keys(
    prefix: Prefix = "/",
    long: Annotated[
        bool, typer.Option("--long", "-l", help="With versions, revisions and leases.")
    ] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """List the keys under a prefix, read at one revision."""
    entries, revision = read_prefix(store, prefix, keys_only=True)
    if output is Output.JSON:
        keys = [entry_json(entry, with_value=False) for entry in entries]
        print_json({"prefix": prefix, "revision": revision, "keys": keys})
    elif long:
        console.print(entries_table(entries, f"{len(entries)} key(s) at revision {revision}"))
    else:
        sys.stdout.writelines(entry.key + "\n" for entry in entries)


def entries_table(entries: list[Entry], title: str) -> Table:
    table = Table(title=title)
    table.add_column("key", overflow="fold")
    for column in ("version", "created", "modified", "lease"):
        table.add_column(column, justify="right")
    for entry in entries:
        lease = f"{entry.lease:x}" if entry.lease else ""
        table.add_row(
            escape(entry.key),
            str(entry.version),
            str(entry.create_revision),
            str(entry.mod_revision),
            lease,
        )
    return table


@kv_app.command()
def tree(prefix: Prefix = "/", store: StoreURL = DEFAULT_STORE) -> None:
    """Show the keys under a prefix as the tree their paths make, with values and versions."""
    entries, revision = read_prefix(store, prefix, keys_only=False)
    if not entries:
        fail(f"no key under {prefix}")
    console.print(key_tree(entries, root=prefix, width=console.width))
    console.print(f"[dim]{len(entries)} key(s) at revision {revision}[/]")


# watch --------------------------------------------------------------------------------------


@kv_app.command()
def watch(
    prefix: Prefix,
    from_revision: Annotated[
        int | None,
        typer.Option("--from-revision", min=1, help="Replay from this revision (default: now)."),
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="Stop after this many revisions.")
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Print each change under a prefix as it happens, until Ctrl-C (or --count).

    With -o json, one JSON object a line per event (JSON Lines)."""

    async def follow(ops: Operations) -> None:
        async with ops.store.watch(prefix, start_revision=from_revision) as changes:
            if output is Output.TABLE:
                errors.print(f"watching {escape(prefix)} (Ctrl-C to stop)", highlight=False)
            seen = 0
            async for batch in changes:
                if not batch.events:  # a progress notification: nothing changed
                    continue
                show_batch(batch, output)
                seen += 1
                if seen == count:
                    return

    execute(store, follow)


def show_batch(batch: WatchBatch, output: Output) -> None:
    """The events of one revision: a line each, or a JSON object each (JSON Lines)."""
    for event in batch.events:
        if output is Output.JSON:
            document = {"revision": batch.revision, "type": event.type.value}
            sys.stdout.write(json.dumps({**document, **entry_json(event.entry)}) + "\n")
            sys.stdout.flush()
            continue
        line = f"[dim]{batch.revision}[/] [bold]{event.type.value:<6}[/] {escape(event.key)}"
        if event.entry.version:
            text, _ = readable(event.entry.value)
            line += f" = [green]{escape(text)}[/] [dim](v{event.entry.version})[/]"
        console.print(line, highlight=False, soft_wrap=True)
