"""The typed errors of the managers: rooted in the store's tree as the module docstring draws
it, each carrying its resource and its key."""

from __future__ import annotations

import pytest

from metaplane import layout, resources
from metaplane.resources import (
    BrokerNotActive,
    ChangedSinceRead,
    NamespaceNotEmpty,
    NoObject,
    NoSubscription,
    SubscriptionExists,
)
from metaplane.store import AlreadyExists, BadVersion, MetadataError, NotFound

from .samples import TOPIC

ERRORS = [
    value
    for name in resources.__all__
    if isinstance(value := getattr(resources, name), type) and issubclass(value, MetadataError)
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: error.__name__)
def test_each_error_has_its_place_in_the_tree(error: type[MetadataError]) -> None:
    name = error.__name__
    if name.startswith("No"):
        assert issubclass(error, NotFound)
    elif name.endswith(("Exists", "Registered", "Assigned", "Unassigned")):
        assert issubclass(error, AlreadyExists)
    assert error.__module__ == "metaplane.resources._errors"


def test_errors_carry_their_resource_and_key() -> None:
    missing = NoSubscription(TOPIC, "subs")
    assert (missing.topic, missing.subscription) == (TOPIC, "subs")
    assert missing.key == layout.subscription(TOPIC, "subs")
    assert str(missing) == "topic /default/reliable_topic has no subscription 'subs'"
    exists = SubscriptionExists(TOPIC, "subs")
    assert exists.key == missing.key
    assert NoObject(TOPIC, None).key == layout.storage_cur(TOPIC)
    assert NoObject(TOPIC, 30).key == layout.storage_object(TOPIC, 30)
    assert "still has topics" in str(NamespaceNotEmpty("default"))
    assert "draining" in str(BrokerNotActive(7, "draining"))


def test_a_change_since_read_is_a_bad_version() -> None:
    stale = ChangedSinceRead("/c/a", 5, 9)
    assert isinstance(stale, BadVersion)
    assert (stale.key, stale.expected, stale.actual) == ("/c/a", 5, 9)
    assert "mod_revision 5, now 9" in str(stale)
