"""The chaos checker finds each kind of violation it claims to: journals and histories made
by hand, one defect each (a checker that could never fail would prove nothing)."""

from __future__ import annotations

from typing import Any

from metaplane import layout
from metaplane.cluster._moves import BROKER_LOST
from metaplane.layout import TopicName
from metaplane.resources import (
    NamespaceManager,
    SubscriptionManager,
    TopicManager,
    UnassignedMarker,
)
from metaplane.store import MemoryStore
from metaplane.testing.chaos import (
    History,
    Report,
    _check_cursors,
    _check_fenced_writes,
    _check_offsets,
    _subscription,
    replay,
)

TOPIC = TopicName("chaos", "t0001")


def line(event: str, broker: int = 1, t: float = 0.0, **fields: Any) -> dict[str, Any]:
    return {"t": t, "broker": broker, "event": event, "topic": TOPIC.path, **fields}


def test_a_write_by_a_broker_that_does_not_own_the_topic_is_found() -> None:
    history = History()
    history.put(layout.assignment(1, TOPIC), 10, None)
    history.delete(layout.assignment(1, TOPIC), 20)
    history.put(layout.unassigned(TOPIC), 20, UnassignedMarker(reason="unload", from_broker=1))
    history.delete(layout.unassigned(TOPIC), 30)
    history.put(layout.assignment(2, TOPIC), 30, None)
    report = Report()
    lines = [
        line("cursors", revision=15, cursors={"a": 1}),  # owner: fine
        line("sealed", revision=25, last=9, cursors={}),  # handing over under its marker
        line("upload", revision=35, start=10, end=20),  # broker 1 after broker 2 got it
        line("cursors", broker=2, revision=32, cursors={"a": 3}),  # owner: fine
    ]
    _check_fenced_writes(lines, history, report)
    assert report.checked["fenced-commits"] == 4
    assert len(report.violations["fenced-writes-by-owners"]) == 1
    assert "revision 35" in report.violations["fenced-writes-by-owners"][0]


def test_an_acknowledged_cursor_missing_from_the_hand_over_is_found() -> None:
    report = Report()
    lines = [
        line("load", t=1, start=0, read=5, token=5),
        line("ack", t=2, subscription="a", offset=40),
        line("ack", t=3, subscription="a", offset=41),
        line("cursors", t=4, revision=9, cursors={"a": 40}),
        line("sealed", t=5, revision=10, last=50, cursors={}),  # 41 was never written
    ]
    _check_cursors(lines, History(), report)
    assert len(report.violations["no-acked-cursor-lost"]) == 1
    fixed = Report()
    lines[-1] = line("sealed", t=5, revision=10, last=50, cursors={"a": 41})
    _check_cursors(lines, History(), fixed)
    assert not fixed.violations["no-acked-cursor-lost"]


def test_acks_a_killed_process_had_not_written_are_not_held_against_its_successor() -> None:
    """Broker 1 acks 41, writes 40 and is killed; its new process (a first registration)
    seals the topic it still finds its own with no cursor: 41 died with the old process
    (delivered again), which is no loss the hand-over made. The same seal by the process
    that acked is one."""
    killed = [
        line("registered", t=0, generation=1),
        line("load", t=1, start=0, read=5, token=5),
        line("ack", t=2, subscription="a", offset=41),
        line("cursors", t=3, revision=9, cursors={"a": 40}),
        line("registered", t=4, generation=1),  # SIGKILL, then a new process
        line("sealed", t=5, revision=10, last=50, cursors={}),
    ]
    report = Report()
    _check_cursors(killed, History(), report)
    assert not report.violations["no-acked-cursor-lost"]
    same_process = [*killed[:4], line("registered", t=4, generation=2), killed[5]]
    report = Report()
    _check_cursors(
        same_process, History(), report
    )  # a session lost and registered again: no excuse
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def test_a_cursor_of_a_deleted_subscription_may_be_dropped() -> None:
    report = Report()
    lines = [
        line("load", t=1, start=0, read=5, token=5),
        line("ack", t=2, subscription="a", offset=40),
        line("cursor-dropped", t=3, subscription="a"),
        line("sealed", t=4, revision=10, last=50, cursors={}),
    ]
    _check_cursors(lines, History(), report)
    assert not report.violations["no-acked-cursor-lost"]


LOST = UnassignedMarker(reason=BROKER_LOST, from_broker=1)
MOVED = UnassignedMarker(reason="unload", from_broker=1)


def _history(*, registered_until: int | None = None) -> History:
    """Broker 1 registered at 1 (until `registered_until`), the topic created at 2 and
    assigned to it at 5 (the token of its load)."""
    history = History()
    history.put(layout.broker_registration(1), 1, None)
    if registered_until is not None:
        history.delete(layout.broker_registration(1), registered_until)
    history.put(layout.topic_root(TOPIC), 2, None)
    history.put(layout.assignment(1, TOPIC), 5, None)
    return history


def _taken(history: History, at: int, marker: UnassignedMarker | None) -> None:
    history.delete(layout.assignment(1, TOPIC), at)
    if marker is not None:
        history.put(layout.unassigned(TOPIC), at, marker)


def _abandoned(history: History) -> Report:
    """Broker 1 loads the topic under the assignment of revision 5, acks 41, writes 40 and
    abandons the topic."""
    lines = [
        line("load", t=1, start=0, read=5, token=5),
        line("ack", t=2, subscription="a", offset=41),
        line("cursors", t=3, revision=9, cursors={"a": 40}),
        line("abandon", t=4, why="taken", cursors={"a": 41}),
    ]
    report = Report()
    _check_cursors(lines, history, report)
    return report


def test_an_abandon_that_drops_an_ack_is_a_loss_unless_the_store_shows_why() -> None:
    """An abandon drops the broker's pending acks. No loss where the leader took the topic
    from a broker it found gone (as it takes a killed one's), or the topic was deleted; a
    loss where the broker was there to seal it (a move whose marker the leader consumed
    anyway, a marker that changed under the hand-over)."""
    moved = _history()
    _taken(moved, 20, MOVED)
    moved.delete(layout.unassigned(TOPIC), 30)  # the leader assigned it: no seal came
    report = _abandoned(moved)
    assert report.violations["no-acked-cursor-lost"] == [
        f"broker 1 acked {TOPIC.path}/a at 41 but abandoned it, having written 40"
    ]

    lost = _history(registered_until=15)
    _taken(lost, 20, LOST)
    report = _abandoned(lost)
    assert not report.violations["no-acked-cursor-lost"]
    assert report.checked["abandons: taken while the broker was not registered"] == 1

    back_already = _history()  # registered again before the leader's change landed
    _taken(back_already, 20, LOST)
    report = _abandoned(back_already)
    assert not report.violations["no-acked-cursor-lost"]
    assert report.checked["abandons: the broker was lost"] == 1

    gone_by_then = _history(registered_until=25)  # moved; lost before the leader assigned it
    _taken(gone_by_then, 20, MOVED)
    gone_by_then.delete(layout.unassigned(TOPIC), 30)
    assert not _abandoned(gone_by_then).violations["no-acked-cursor-lost"]

    deleted = _history()
    _taken(deleted, 20, None)
    deleted.delete(layout.topic_root(TOPIC), 20)
    assert _abandoned(deleted).checked["abandons: the topic was deleted"] == 1

    deleted_while_moving = _history()
    _taken(deleted_while_moving, 20, MOVED)
    deleted_while_moving.delete(layout.unassigned(TOPIC), 30)
    deleted_while_moving.delete(layout.topic_root(TOPIC), 30)
    assert not _abandoned(deleted_while_moving).violations["no-acked-cursor-lost"]

    lost_later = _history(registered_until=40)  # lost after the leader took the topic
    _taken(lost_later, 20, MOVED)
    lost_later.delete(layout.unassigned(TOPIC), 30)
    assert len(_abandoned(lost_later).violations["no-acked-cursor-lost"]) == 1

    still_assigned = _history(registered_until=15)  # the abandon is not of this assignment
    assert len(_abandoned(still_assigned).violations["no-acked-cursor-lost"]) == 1


def test_a_seal_after_an_abandon_starts_from_nothing() -> None:
    """CI's case (etcd hung 30 s): broker 1 served a topic, its session was lost, the leader
    took the topic (`broker_lost`) and broker 1 abandoned it; the topic was assigned to it
    again and taken before it loaded it, and it sealed it then with no cursor. The acks
    went with the abandon; the seal is of a serving that acked nothing. The same seal
    without the abandon before it is a loss."""
    history = _history(registered_until=15)
    _taken(history, 20, LOST)
    lines = [
        line("load", t=1, start=0, read=5, token=5),
        line("ack", t=2, subscription="a", offset=41),
        line("abandon", t=4, why="fence failed", cursors={"a": 41}),
        line("sealed", t=5, revision=30, last=50, cursors={}),
    ]
    report = Report()
    _check_cursors(lines, history, report)
    assert not report.violations["no-acked-cursor-lost"]
    report = Report()
    _check_cursors([*lines[:2], lines[3]], history, report)
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def test_a_load_below_what_the_store_showed_is_found() -> None:
    report = Report()
    lines = [
        line("upload", t=1, revision=10, start=0, end=20),
        line("cursors", t=2, revision=11, cursors={"a": 25}),
        line("load", broker=2, t=3, start=26, read=11),  # right: after the cursor
        line("sealed", t=4, revision=12, last=30, cursors={}),
        line("load", broker=3, t=5, start=21, read=12),  # wrong: the seal said 30
    ]
    _check_offsets(lines, report)
    assert report.checked["loads"] == 2
    assert len(report.violations["no-offset-twice"]) == 1
    assert "broker 3" in report.violations["no-offset-twice"][0]


def test_a_commit_after_the_load_read_does_not_count_against_it() -> None:
    report = Report()
    lines = [
        line("load", broker=2, t=1, start=0, read=5),
        line("upload", t=2, revision=6, start=0, end=9),  # a paused owner's, fenced later
    ]
    _check_offsets(lines, report)
    assert not report.violations["no-offset-twice"]


async def test_a_cursor_written_without_its_subscription_is_found() -> None:
    store = MemoryStore()
    await NamespaceManager(store).create(TOPIC.namespace)
    await TopicManager(store).create(TOPIC)
    await SubscriptionManager(store).create(TOPIC, _subscription("a"))
    await SubscriptionManager(store).write_cursor(TOPIC, "a", 5)  # fine: it exists
    await store.put(layout.cursor(TOPIC, "b"), b"7")  # an orphan
    report = Report()
    await replay(store, report)
    assert report.checked["cursor-writes"] == 2
    assert len(report.violations["no-cursor-without-subscription"]) == 1
    assert "/b/cursor" in report.violations["no-cursor-without-subscription"][0]
