"""A broker's journal: one line per thing it did that a checker may want to replay — an ack
taken, a topic loaded at an offset, a fenced write committed at a revision, a fault it saw.
Off by default; the chaos test turns it on to check the cluster's invariants afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Protocol


class Journal(Protocol):
    def record(self, event: str, **fields: object) -> None:
        """Note that `event` happened, with what it is about."""


class _NoJournal:
    def record(self, event: str, **fields: object) -> None:
        pass


NO_JOURNAL: Journal = _NoJournal()


class FileJournal:
    """JSON lines appended to `path`, each written through at once (a process killed with
    SIGKILL loses none it recorded): `{"t": unix time, "broker": id, "event": …, …}`."""

    def __init__(self, path: Path, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._file: IO[str] = path.open("a", buffering=1, encoding="utf-8")

    def record(self, event: str, **fields: object) -> None:
        line = {"t": time.time(), "broker": self.broker_id, "event": event, **fields}
        self._file.write(json.dumps(line, default=str, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


def read_journal(path: Path) -> list[dict[str, object]]:
    """The lines of a journal (a last line cut short by a kill is skipped)."""
    lines: list[dict[str, object]] = []
    with path.open(encoding="utf-8") as file:
        for text in file:
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
    return lines
