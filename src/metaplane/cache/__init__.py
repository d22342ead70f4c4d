"""The LocalCache: a broker's read path, served from memory and kept current by a watch,
with read-your-writes through `wait_for(revision)`."""

from metaplane.cache._cache import CacheState, Decoder, LocalCache
from metaplane.cache._listeners import (
    CacheClosed,
    CacheLagged,
    CacheTimeout,
    Listener,
    ListenerTask,
    Subscription,
)

__all__ = [
    "CacheClosed",
    "CacheLagged",
    "CacheState",
    "CacheTimeout",
    "Decoder",
    "Listener",
    "ListenerTask",
    "LocalCache",
    "Subscription",
]
