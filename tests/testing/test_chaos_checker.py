"""The chaos checker finds each kind of violation it claims to: journals and histories made
by hand, one defect each (a checker that could never fail would prove nothing)."""

from __future__ import annotations

from typing import Any

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    NamespaceManager,
    SubscriptionManager,
    TopicManager,
    UnassignedMarker,
)
from metaplane.store import MemoryStore
from metaplane.testing.chaos import (
    SESSION_TTL,
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
        line("load", t=1, start=0, read=5),
        line("ack", t=2, subscription="a", offset=40),
        line("ack", t=3, subscription="a", offset=41),
        line("cursors", t=4, revision=9, cursors={"a": 40}),
        line("sealed", t=5, revision=10, last=50, cursors={}),  # 41 was never written
    ]
    _check_cursors(lines, report)
    assert len(report.violations["no-acked-cursor-lost"]) == 1
    fixed = Report()
    lines[-1] = line("sealed", t=5, revision=10, last=50, cursors={"a": 41})
    _check_cursors(lines, fixed)
    assert not fixed.violations["no-acked-cursor-lost"]


def test_acks_a_killed_process_had_not_written_are_not_held_against_its_successor() -> None:
    """Broker 1 acks 41, writes 40 and is killed; its new process (a first registration)
    seals the topic it still finds its own with no cursor: 41 died with the old process
    (delivered again), which is no loss the hand-over made. The same seal by the process
    that acked is one."""
    killed = [
        line("registered", t=0, generation=1),
        line("load", t=1, start=0, read=5),
        line("ack", t=2, subscription="a", offset=41),
        line("cursors", t=3, revision=9, cursors={"a": 40}),
        line("registered", t=4, generation=1),  # SIGKILL, then a new process
        line("sealed", t=5, revision=10, last=50, cursors={}),
    ]
    report = Report()
    _check_cursors(killed, report)
    assert not report.violations["no-acked-cursor-lost"]
    same_process = [*killed[:4], line("registered", t=4, generation=2), killed[5]]
    report = Report()
    _check_cursors(same_process, report)  # a session lost and registered again: no excuse
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def _served(broker: int = 1) -> list[dict[str, Any]]:
    """Broker `broker` loads the topic, acks 41 and writes 40."""
    return [
        line("registered", broker=broker, t=0, generation=1),
        line("load", broker=broker, t=1, start=0, read=5),
        line("ack", broker=broker, t=2, subscription="a", offset=41),
        line("cursors", broker=broker, t=3, revision=9, cursors={"a": 40}),
    ]


def _abandon(t: float, broker: int = 1) -> dict[str, Any]:
    return line("abandon", broker=broker, t=t, why="taken", cursors={"a": 41})


def _session(state: str, t: float, broker: int = 1) -> dict[str, Any]:
    return line("session", broker=broker, t=t, state=state, generation=1)


def test_an_abandon_that_drops_an_ack_is_a_loss() -> None:
    """A broker that unloads a topic without a seal drops its pending acks: with its session
    alive and the topic not being deleted, that is a lost ack."""
    report = Report()
    _check_cursors([*_served(), _abandon(t=4)], report)
    assert report.violations["no-acked-cursor-lost"] == [
        f"broker 1 acked {TOPIC.path}/a at 41 but abandoned it, having written 40"
    ]


def test_an_abandon_while_the_session_is_lost_drops_acks_as_a_kill_does() -> None:
    """The leader reassigned the topic of a broker whose session it saw lost, without
    waiting for a seal: the acks the broker had not written die, as a killed one's do —
    whether the broker's own session says lost after the abandon (it hears at its next
    refresh) or before; a loss before the topic was loaded excuses nothing."""
    cases = {
        "suspended, abandon, lost": (
            [_session("suspended", 3.5), _abandon(4), _session("lost", 5)],
            0,
        ),
        "lost, abandon": ([_session("suspended", 3.5), _session("lost", 3.6), _abandon(4)], 0),
        "abandon just before lost": ([_abandon(4), _session("lost", 4.003)], 0),
        "lost long after the abandon": ([_abandon(4), _session("lost", 4 + 2 * SESSION_TTL)], 1),
        "suspended, connected again": (
            [_session("suspended", 3.5), _session("connected", 3.6), _abandon(4)],
            1,
        ),
        "another broker's loss": ([_session("lost", 4.5, broker=2), _abandon(4)], 1),
    }
    for name, (tail, violations) in cases.items():
        report = Report()
        _check_cursors(sorted([*_served(), *tail], key=lambda x: x["t"]), report)
        assert len(report.violations["no-acked-cursor-lost"]) == violations, name
        assert report.checked["abandons-after-a-lost-session"] == 1 - violations, name
    before_the_load = [_session("lost", 0.5), *_served()[1:], _abandon(4)]
    report = Report()
    _check_cursors(before_the_load, report)
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def test_an_abandon_of_a_topic_being_deleted_drops_its_acks() -> None:
    deleting = {"t": 3.5, "event": "deleting-topic", "topic": TOPIC.path}
    report = Report()
    _check_cursors([*_served(), deleting, _abandon(4)], report)
    assert not report.violations["no-acked-cursor-lost"]
    assert report.checked["abandons-of-deleted-topics"] == 1
    report = Report()
    _check_cursors([*_served(), _abandon(4), {**deleting, "t": 5}], report)  # deleted after
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def test_a_seal_after_an_abandon_starts_from_nothing() -> None:
    """CI's case (etcd hung 30 s): broker 3 served a topic, its session was lost, it
    abandoned the topic (the marker it would seal under had changed) and later sealed the
    same topic, assigned to it and taken again before it loaded it, with no cursor. The
    acks went with the abandon; the seal is of a serving that acked nothing. The same seal
    without the abandon between is a loss."""
    lines = [
        *_served(broker=3),
        _session("suspended", 3.2, broker=3),
        _session("lost", 3.4, broker=3),
        _abandon(4, broker=3),
        line("sealed", broker=3, t=5, revision=30, last=50, cursors={}),
    ]
    report = Report()
    _check_cursors(lines, report)
    assert not report.violations["no-acked-cursor-lost"]
    report = Report()
    _check_cursors([*lines[:5], lines[6]], report)
    assert len(report.violations["no-acked-cursor-lost"]) == 1


def test_a_cursor_of_a_deleted_subscription_may_be_dropped() -> None:
    report = Report()
    lines = [
        line("load", t=1, start=0, read=5),
        line("ack", t=2, subscription="a", offset=40),
        line("cursor-dropped", t=3, subscription="a"),
        line("sealed", t=4, revision=10, last=50, cursors={}),
    ]
    _check_cursors(lines, report)
    assert not report.violations["no-acked-cursor-lost"]


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
