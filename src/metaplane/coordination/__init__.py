"""Coordination recipes on the store: a session (one lease per process), a fenced leader
election, and a fenced lock. Leadership and lock ownership alone guarantee nothing: every
write that relies on them must be fenced (`election.fenced()`, `lock.fence()`)."""

from metaplane.coordination._election import ElectionListener, LeaderElection, LeaderToken
from metaplane.coordination._lock import FencedLock, LockToken
from metaplane.coordination._session import Session, SessionState, StateListener

__all__ = [
    "ElectionListener",
    "FencedLock",
    "LeaderElection",
    "LeaderToken",
    "LockToken",
    "Session",
    "SessionState",
    "StateListener",
]
