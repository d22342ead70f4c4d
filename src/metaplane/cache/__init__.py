"""The LocalCache: a broker's read path, served from memory and kept current by a watch,
with read-your-writes through `wait_for(revision)`."""

from metaplane.cache._cache import NOT_COVERED, CacheState, Decoder, LocalCache, NotCovered
from metaplane.cache._listeners import (
    CacheClosed,
    CacheLagged,
    CacheTimeout,
    Listener,
    ListenerTask,
    Subscription,
)

__all__ = [
    "NOT_COVERED",
    "CacheClosed",
    "CacheLagged",
    "CacheState",
    "CacheTimeout",
    "Decoder",
    "Listener",
    "ListenerTask",
    "LocalCache",
    "NotCovered",
    "Subscription",
]
