"""The `cli` fixture: the command line against an empty store of a backend with a URL."""

from __future__ import annotations

import pytest

from tests.admin.runner import Cli, emptied

BACKENDS_WITH_URL = pytest.mark.backends(
    "sqlite", "etcd", reason="the CLI opens a store by URL; a memory store has none"
)


@pytest.fixture
def cli(store_url: str) -> Cli:
    command_line = Cli(store_url)
    command_line.do(emptied)
    return command_line
