"""Canonical JSON, its SHA-256, and exact JSON equality: the one definition behind every
key, hash and comparison (episode and cache keys, catalog fingerprints, record hashes).

Canonical text is sorted keys, no spaces, UTF-8 kept (``ensure_ascii=False``); a value that
is not JSON (a path, an enum) is written as its ``str``. Changing any of this changes every
stored key, so it is written once, here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

#: one encoder built once (``json.dumps`` with options builds a new one on every call)
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical_json(value: Any) -> str:
    """Deterministic JSON text of ``value``: sorted keys, no spaces, non-JSON values as ``str``."""
    return _ENCODE(value)


def sha256_text(text: str, n: int | None = None) -> str:
    """Hex SHA-256 of ``text`` (UTF-8), cut to its first ``n`` characters when given."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return digest if n is None else digest[:n]


def sha256_of(value: Any, n: int | None = None) -> str:
    """Hex SHA-256 of ``value``'s :func:`canonical_json`, cut to ``n`` characters when given."""
    return sha256_text(_ENCODE(value), n)


def same_json(x: Any, y: Any) -> bool:
    """Exact JSON equality: ``1``, ``1.0`` and ``true`` differ (``==`` alone takes them as equal),
    key order does not matter.

    Scalars are compared in the loop and only containers recurse: verification and scoring call
    this for every argument object, and arguments are mostly flat."""
    tx = type(x)
    if tx is not type(y):
        return False
    if tx is dict:
        if x.keys() != y.keys():
            return False
        pairs: Iterable[tuple[Any, Any]] = ((v, y[k]) for k, v in x.items())
    elif tx is list:
        if len(x) != len(y):
            return False
        pairs = zip(x, y, strict=True)
    else:
        return bool(x == y)
    for v, w in pairs:
        tv = type(v)
        if tv is not type(w):
            return False
        if tv is dict or tv is list:
            if not same_json(v, w):
                return False
        elif v != w:
            return False
    return True


__all__ = ["canonical_json", "same_json", "sha256_of", "sha256_text"]
