"""Conformance: bad input gets a typed error before it reaches a backend, and the store is
unchanged afterwards."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from metaplane.store import (
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    Compare,
    Delete,
    InvalidKey,
    InvalidRequest,
    InvalidValue,
    MetadataStore,
    Put,
    ValueTooLarge,
    check_key,
)

# Keys near the rules: separators, dots, control characters, surrogates, long segments.
segment_text = st.text(
    alphabet=st.sampled_from(
        [
            "a",
            "Z",
            "0",
            "-",
            "_",
            ".",
            "/",
            " ",
            "\x00",
            "\x1f",
            "\x7f",
            "\x85",
            "é",
            "\u2028",
            "\ud800",
            "😀",
        ]
    ),
    max_size=12,
)
keys = st.one_of(
    segment_text,
    segment_text.map(lambda text: "/" + text),
    st.lists(segment_text, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)),
    st.integers(min_value=MAX_KEY_BYTES - 8, max_value=MAX_KEY_BYTES + 8).map(
        lambda size: "/" + "k" * (size - 1)
    ),
    st.integers(min_value=1020, max_value=1030).map(lambda size: "/" + "😀" * size),
)
values = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([MAX_VALUE_BYTES, MAX_VALUE_BYTES + 1]).map(lambda size: b"v" * size),
    st.sampled_from(["text", 1, None, bytearray(b"ok")]),
)


def expected_error(key: str, value: Any) -> type[Exception] | None:
    try:
        check_key(key)
    except InvalidKey:
        return InvalidKey
    if not isinstance(value, bytes | bytearray):
        return InvalidValue
    if len(value) > MAX_VALUE_BYTES:
        return ValueTooLarge
    return None


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(key=keys, value=values)
async def test_random_writes(store: MetadataStore, key: str, value: Any) -> None:
    error = expected_error(key, value)
    before = await store.revision()
    if error is None:
        await store.put(key, value)
        entry = await store.get(key)
        assert entry is not None and entry.value == bytes(value)
        await store.delete(key)
        return
    with pytest.raises(error):
        await store.put(key, value)
    with pytest.raises(error):
        await store.txn([], [Put("/valid", b"v"), Put(key, value)], [])
    assert await store.revision() == before
    assert await store.get("/valid") is None


@SETTINGS
@given(key=keys)
async def test_random_keys_everywhere(store: MetadataStore, key: str) -> None:
    # "/" is the root prefix: valid for listing and watching, not as a key.
    assume(expected_error(key, b"") is not None and key != "/")
    before = await store.revision()
    attempts: list[Callable[[], Awaitable[object]]] = [
        lambda: store.get(key),
        lambda: store.delete(key),
        lambda: store.list(key),
        lambda: store.children(key),
        lambda: store.txn([Compare.exists(key)], [], []),
        lambda: store.txn([], [Delete(key)], []),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidKey):
            await attempt()
    with pytest.raises(InvalidKey):
        store.watch(key)
    assert await store.revision() == before


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("relative", "absolute path"),
        ("/", "empty segment"),
        ("/a//b", "empty segment"),
        ("/a/", "empty segment"),
        ("/a/./b", "'.'"),
        ("/a/..", "'..'"),
        ("/a/\x00", "control character"),
        ("/a/\n", "control character"),
        ("/a/\ud800", "surrogate"),
        ("/" + "k" * MAX_KEY_BYTES, "longer than"),
    ],
)
def test_invalid_keys_say_why(key: str, reason: str) -> None:
    with pytest.raises(InvalidKey) as raised:
        check_key(key)
    assert reason in str(raised.value)


def test_valid_keys() -> None:
    for key in ["/a", "/a/b-c_d.e", "/..a", "/a/...", "/ünïcödé/😀", "/" + "k" * 4095]:
        assert check_key(key) == key


async def test_other_bad_arguments(store: MetadataStore) -> None:
    for attempt in (
        store.list("/", limit=0),
        store.list("/", revision=0),
        store.grant(0),
        store.compact(0),
        store.put("/k", b"v", lease=-1),
    ):
        with pytest.raises(InvalidRequest):
            await attempt
    with pytest.raises(InvalidRequest):
        store.watch("/", start_revision=0)
    assert await store.get("/k") is None


def test_the_limits_are_the_contracts() -> None:
    """The contract's limits, as literals: a changed constant must fail here."""
    assert MAX_VALUE_BYTES == 1_048_576  # 1 MiB: under etcd's 1.5 MiB request limit
    assert MAX_KEY_BYTES == 4096
