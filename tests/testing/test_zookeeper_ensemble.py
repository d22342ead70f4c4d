"""The 3-member ZooKeeper ensemble fixture itself: it forms a quorum with one leader, serves
through the loss of the member a client talks to, and takes a killed or paused member back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from metaplane.testing import ZooKeeperEnsemble, ZooKeeperMember

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path_factory.mktemp("ensemble")) as started:
        yield started


@pytest.fixture
def client(ensemble: ZooKeeperEnsemble) -> Iterator[KazooClient]:
    # Retries ride out the seconds without a member; the session outlives them (10 s).
    retry = {"max_tries": -1, "max_delay": 0.2, "deadline": 20}
    zk = KazooClient(hosts=ensemble.hosts, timeout=10, command_retry=retry)
    zk.start(timeout=15)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()
        ensemble.wait_serving()  # the next case starts from a whole ensemble


def test_a_quorum_with_one_leader(ensemble: ZooKeeperEnsemble) -> None:
    modes = sorted(member.mode() for member in ensemble.members)
    assert modes == ["follower", "follower", "leader"]
    assert ensemble.url == "zk://" + ensemble.hosts
    assert ensemble.member(ensemble.members[1].hosts) is ensemble.members[1]


def test_the_member_a_client_talks_to_is_killed(
    ensemble: ZooKeeperEnsemble, client: KazooClient
) -> None:
    session_id, _ = client.client_id
    member = ensemble.member_of_session(session_id)
    client.retry(client.create, "/killed/before", b"1", makepath=True)
    ensemble.kill(member)
    assert not member.running
    client.retry(client.create, "/killed/after", b"2")
    # The same session, now on another member.
    assert client.client_id[0] == session_id
    assert ensemble.member_of_session(session_id) is not member
    ensemble.restart(member)
    ensemble.wait_serving()
    assert member.mode() in ("leader", "follower")
    # Both acknowledged writes, read back through the restarted ensemble.
    assert sorted(client.retry(client.get_children, "/killed")) == ["after", "before"]


def test_a_paused_leader_is_replaced_and_rejoins(
    ensemble: ZooKeeperEnsemble, client: KazooClient
) -> None:
    leader = ensemble.leader()
    ensemble.pause(leader)
    assert leader.mode() == ""  # a hung member answers nothing
    new_leader = ensemble.wait_serving()
    assert new_leader is not leader
    client.retry(client.create, "/paused", b"1")
    ensemble.resume(leader)
    ensemble.wait_serving()
    assert leader.mode() == "follower"
    session_id, _ = client.client_id
    assert isinstance(ensemble.member_of_session(session_id), ZooKeeperMember)
    assert client.retry(client.get, "/paused")[0] == b"1"


def test_without_a_quorum_the_ensemble_is_not_serving(ensemble: ZooKeeperEnsemble) -> None:
    # Two of three members down: the last one stops serving (no quorum) and says so.
    first, second, third = ensemble.members
    ensemble.kill(first)
    ensemble.kill(second)
    try:
        with pytest.raises(RuntimeError, match="not serving"):
            ensemble.wait_serving(timeout=3)
        assert third.mode() == ""
    finally:
        first.start()
        second.start()
        ensemble.wait_serving()
