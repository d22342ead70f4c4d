"""Why a conformance case leaves ZooKeeper out: the named subsets of issue 16, each one a
thing ZooKeeper cannot give (docs/store.md, "ZooKeeper")."""

HISTORY = (
    "ZooKeeper keeps no history: a read or a watch from a revision older than the last "
    "change under its prefixes raises Compacted"
)
COMPACTION = "ZooKeeper keeps no history to compact: compact() only refuses a future revision"
MERGED = (
    "a ZooKeeper watch reads each notified key back: changes between two reads arrive "
    "merged (a key created and deleted in between shows nothing)"
)
