"""`metaplane demo` (the store tour) on a fresh embedded store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin._tour import TOPIC, seed_examples
from metaplane.admin.cli import app
from metaplane.resources import decode
from metaplane.store import Entry, SqliteStore


async def read_all(path: Path) -> list[Entry]:
    async with await SqliteStore.open(path) as store:
        return list(await store.list("/"))


def test_tour_writes_the_layout_and_watches_a_change(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'tour.db'}"
    result = CliRunner().invoke(app, ["tour", "--store", url], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "23 keys" in result.output
    assert "the watch received" in result.output
    entries = asyncio.run(read_all(tmp_path / "tour.db"))
    assert sorted(entry.key for entry in entries) == sorted(key for key, _ in seed_examples())
    for entry in entries:
        decode(layout.parse(entry.key).kind, entry.value)  # every value is well formed
    cursor = next(e for e in entries if e.key == layout.cursor(TOPIC, "subs_reliable"))
    assert (cursor.value, cursor.version) == (b"14", 2)


def test_errors_are_one_line() -> None:
    result = CliRunner().invoke(app, ["tour", "--store", "redis://nowhere"])
    assert result.exit_code == 1
    assert "error:" in result.output
    assert "Traceback" not in result.output
