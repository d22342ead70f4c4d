"""Which etcd servers the watch trusts with progress notifications, by version: in order
from 3.4.25 and 3.5.8 (etcd issue 15220); possibly never answered while a watcher catches
up from 3.4.25 to 3.4.30 and 3.5.8 to 3.5.12 (etcd issue 17507)."""

from __future__ import annotations

import pytest

from metaplane.store._etcd_watch import orders_progress, stalls_progress


@pytest.mark.parametrize(
    ("version", "in_order", "may_stall"),
    [
        ("3.4.23", False, False),
        ("3.4.24", False, False),
        ("3.4.25", True, True),
        ("3.4.30", True, True),
        ("3.4.31", True, False),
        ("3.5.7", False, False),
        ("3.5.8", True, True),
        ("3.5.12", True, True),
        ("3.5.13", True, False),
        ("3.6.0", True, False),
        ("3.6.0-rc.1", True, False),
        ("3.3.27", False, False),
        ("", False, False),
        ("unknown", False, False),
    ],
)
def test_progress_is_trusted_by_version(version: str, in_order: bool, may_stall: bool) -> None:
    assert (orders_progress(version), stalls_progress(version)) == (in_order, may_stall)
