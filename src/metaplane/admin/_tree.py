"""Keys shown as the tree their paths make, each leaf with its value and revisions."""

from __future__ import annotations

from collections.abc import Iterable

from rich.markup import escape
from rich.tree import Tree

from metaplane.store import Entry

MIN_VALUE_WIDTH = 16


def key_tree(entries: Iterable[Entry], root: str = "/", width: int = 100) -> Tree:
    """A Rich tree of `entries`: one node per path segment; a key's node shows its value,
    cut to what fits on a line of `width`."""
    tree = Tree(f"[bold]{escape(root)}[/]")
    nodes: dict[str, Tree] = {"": tree}
    for entry in entries:
        parts = entry.key.removeprefix(root.rstrip("/")).strip("/").split("/")
        path = ""
        for depth, part in enumerate(parts):
            parent, path = nodes[path], f"{path}/{part}"
            if path not in nodes:
                nodes[path] = parent.add(escape(part))
            if depth == len(parts) - 1:
                room = width - 4 * (depth + 1) - len(part) - 24
                nodes[path].label = f"{escape(part)} {_describe(entry, room)}"
    return tree


def _describe(entry: Entry, room: int) -> str:
    text = entry.value.decode("utf-8", "replace")
    room = max(room, MIN_VALUE_WIDTH)
    if len(text) > room:
        text = text[: room - 1] + "…"
    lease = f" lease {entry.lease:x}" if entry.lease else ""
    return f"[green]{escape(text)}[/] [dim](v{entry.version} rev {entry.mod_revision}{lease})[/]"
