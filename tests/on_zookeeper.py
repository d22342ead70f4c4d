"""The layers above the store on ZooKeeper too (issue 16): a suite that names `EVERY_BACKEND`
runs on zk as well as on the backends every other folder runs on; a case it cannot cover on
ZooKeeper names its subset with one of the reasons below."""

from __future__ import annotations

import pytest

EVERY_BACKEND = pytest.mark.backends(
    "memory", "sqlite", "etcd", "zk", reason="the cluster's layers run on every backend"
)

WITHOUT_ZK = ("memory", "sqlite", "etcd")

MERGED_BATCHES = (
    "a ZooKeeper watch reads each notified key back: changes between two reads arrive merged "
    "into one batch, so a count of batches (one a write, or one a planned break) does not hold"
)
READS_THE_PAST = (
    "the case checks that one transaction wrote its keys by reading the store at the revision "
    "before it: ZooKeeper keeps no history to read there"
)
REVISIONS_COUNT_WRITES = (
    "the case counts writes by revisions: ZooKeeper's revision is its zxid, which a refused "
    "multi (an error transaction in its log) and a session opened or closed (each CLI call "
    "is one) move too, though they write no key"
)
