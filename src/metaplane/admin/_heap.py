"""The garbage collector in processes that hold or stream millions of objects."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def freeze_heap() -> int:
    """Collect once, then leave what survived out of every later collection (`gc.freeze`);
    the number of objects frozen.

    For a process that owns its heap: `metaplane serve` and `standalone` once their cache
    is loaded, a snapshot export while it reads (`heap_frozen`). A full collection walks
    every object that lives: the cache's (about 240,000 for 10,000 topics: 90–150 ms on the
    2-core test machine, and ten times that at 100,000 topics), or the hundred thousand
    objects of the modules a command imports (pyspark, pyarrow), which an export of a
    million keys, whose pages survive young collections, walked about forty times: half of
    its time. Objects made later are collected as before; a cycle among the frozen ones is
    never collected (neither the cache nor the modules make any)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """The heap frozen (`freeze_heap`) for the span of a bulk read — a snapshot export, once
    its modules are imported and its store is open — and given back to the collector after:
    a command run inside another process (a test's `CliRunner`) leaves that process's heap
    as it found it."""
    freeze_heap()
    try:
        yield
    finally:
        gc.unfreeze()
