"""One canonical JSON, one hash, one exact equality: pinned to the text every stored key was
made from, so old stores and caches keep their keys."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolbias.base.canonical import canonical_json, same_json, sha256_of, sha256_text
from toolbias.store import episode_keys, stable_hash

# JSON values; floats without NaN (never equal to itself) and without -0.0 (equal to 0.0 but
# written differently)
scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(
    allow_nan=False, allow_infinity=False).filter(lambda f: f != 0.0 or str(f) == "0.0")
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


def _as_before(value: Any) -> str:
    """The text the store, the cache and the catalog fingerprint hashed before this module."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@given(json_values)
def test_canonical_text_and_hash_are_what_every_stored_key_was_made_from(value: Any) -> None:
    assert canonical_json(value) == _as_before(value)
    assert sha256_of(value) == hashlib.sha256(_as_before(value).encode("utf-8")).hexdigest()
    assert sha256_of(value, 16) == stable_hash(value) == sha256_text(_as_before(value))[:16]


def test_canonical_text_sorts_keys_keeps_unicode_and_writes_other_values_as_text() -> None:
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'
    from pathlib import PurePosixPath

    assert canonical_json({"p": PurePosixPath("/x")}) == '{"p":"/x"}'


def test_episode_keys_are_unchanged() -> None:
    fields = dict(model="oracle", settings_hash="abc", catalog="builtin#f00", variant="native#12",
                  control="strict", condition="base", seed=0, kind="task")
    listed = ["oracle", "abc", "builtin#f00", "native#12", "t-1", "strict", "base", 0, "task"]
    old = hashlib.sha256(_as_before(listed).encode()).hexdigest()[:32]
    assert episode_keys(**fields)("t-1") == old


@given(json_values)
def test_a_value_is_the_same_json_as_its_round_trip(value: Any) -> None:
    assert same_json(value, json.loads(json.dumps(value)))


@given(json_values, json_values)
def test_same_json_agrees_with_canonical_text(a: Any, b: Any) -> None:
    assert same_json(a, b) == (canonical_json(a) == canonical_json(b))


def test_same_json_tells_numbers_and_booleans_apart() -> None:
    assert not same_json({"n": 1}, {"n": 1.0})
    assert not same_json([1], [True])
    assert not same_json({"a": {"b": [0]}}, {"a": {"b": [False]}})
    assert same_json({"a": 1, "b": [1, {"c": None}]}, {"b": [1, {"c": None}], "a": 1})
    assert not same_json({"a": 1}, {"a": 1, "b": 2})
    assert not same_json([1, 2], [1, 2, 3])
