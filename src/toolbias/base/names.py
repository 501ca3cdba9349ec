"""Tool names: the one valid-name pattern (OpenAI's function-name rule) and the one allocator
that keeps the names a variant shows unique and valid."""

from __future__ import annotations

import hashlib
import re
from typing import Any

#: a tool visible in every domain of a catalog (``Tool.domain`` of a catalog-scope tool)
ALL_DOMAINS = "*"
#: the longest valid tool name
MAX_NAME = 64
#: a valid tool name: 1-64 of ``[a-zA-Z0-9_-]`` (OpenAI's function-name rule)
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID = re.compile(r"[^a-zA-Z0-9_-]+")


def is_tool_name(name: Any, *, any_length: bool = False) -> bool:
    """OpenAI's function-name rule; ``any_length``: its characters at any length (names another
    system renders past 64 characters, which it accepted)."""
    if any_length:
        return isinstance(name, str) and bool(name) and _INVALID.search(name) is None
    return isinstance(name, str) and TOOL_NAME_RE.match(name) is not None


def name_token(text: Any) -> str:
    """A name fragment: invalid characters become ``_``, runs of ``_`` collapse, ends trimmed."""
    s = _INVALID.sub("_", str(text))
    return re.sub(r"_+", "_", s).strip("_")


def has_invalid_characters(text: str) -> bool:
    return _INVALID.search(text) is not None


def short_hash(text: str, n: int = 8) -> str:
    """A short stable hash of ``text`` that keeps shortened names distinct."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def fit_name(name: str) -> str:
    """A valid tool name for ``name``: invalid characters replaced, shortened with a stable hash."""
    s = _INVALID.sub("_", name) or "tool"
    if len(s) > MAX_NAME:
        s = s[: MAX_NAME - 9] + "_" + short_hash(name)
    return s


class NameAllocator:
    """Unique valid tool names per domain; a catalog-scope tool's name (domain ``*``) is unique everywhere."""

    def __init__(self) -> None:
        self._used: dict[str, set[str]] = {}
        self._all: set[str] = set()

    def taken(self, domain: str, name: str) -> bool:
        if domain == ALL_DOMAINS:
            return name in self._all
        return name in self._used.get(domain, ()) or name in self._used.get(ALL_DOMAINS, ())

    def reserve(self, domain: str, name: str) -> None:
        """Claim a name as it is (a tool that keeps its name)."""
        self._used.setdefault(domain, set()).add(name)
        self._all.add(name)

    def add(self, domain: str, name: str) -> str:
        """A valid name like ``name`` that no tool visible in ``domain`` has yet, claimed."""
        base = fit_name(name)
        cand, i = base, 2
        while self.taken(domain, cand):
            cand = fit_name(f"{base}_{i}")
            i += 1
        self.reserve(domain, cand)
        return cand


__all__ = ["ALL_DOMAINS", "MAX_NAME", "TOOL_NAME_RE", "NameAllocator", "fit_name", "has_invalid_characters",
           "is_tool_name", "name_token", "short_hash"]
