"""The data types of tool selection: tools, clusters, benchmarks, filter examples.

Behaviour modules (loading, running, scoring) import these; these import nothing of
selection, so the package has no import circle. A :class:`Cluster` holds ``k`` tools
in a **canonical order** (index 0..k-1: the ``api`` of a selection record) and queries
that every tool can serve; :func:`rotations` gives the k cyclic orders shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..base.canonical import sha256_text
from ..base.names import TOOL_NAME_RE as NAME_RE
from ..errors import CatalogError

JSON = Any

#: what an OpenAI function name may look like


@dataclass(frozen=True)
class SelectionTool:
    """One marketplace tool (one API endpoint) of a cluster.

    ``tool_description`` describes the provider's tool, ``api_description`` the endpoint;
    the model sees both (:attr:`description`). ``metadata`` is never shown to the model
    (e.g. ``popularity``, the exposure proxy of :mod:`.features`; ``url``).
    """

    name: str
    tool_description: str = ""
    api_description: str = ""
    parameters: Mapping[str, JSON] = field(default_factory=lambda: {"type": "object", "properties": {}})
    provider: str = ""
    style: str = ""
    metadata: Mapping[str, JSON] = field(default_factory=dict)

    @property
    def description(self) -> str:
        """The description the model sees: tool description, then endpoint description."""
        parts = [p.strip() for p in (self.tool_description, self.api_description) if p and p.strip()]
        return " ".join(parts)

    @property
    def n_parameters(self) -> int:
        props = self.parameters.get("properties") or {}
        return len(props)

    def to_openai(self) -> dict[str, JSON]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": json.loads(json.dumps(dict(self.parameters)))}}

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.name, "provider": self.provider, "style": self.style,
                "tool_description": self.tool_description, "api_description": self.api_description,
                "parameters": json.loads(json.dumps(dict(self.parameters))), "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> SelectionTool:
        return cls(name=str(d["name"]), tool_description=str(d.get("tool_description", "") or ""),
                   api_description=str(d.get("api_description", "") or ""),
                   parameters=d.get("parameters") or {"type": "object", "properties": {}},
                   provider=str(d.get("provider", "") or ""), style=str(d.get("style", "") or ""),
                   metadata=dict(d.get("metadata") or {}))


@dataclass(frozen=True)
class Cluster:
    """Functionally equivalent tools (canonical order) and queries that each of them serves."""

    id: str
    tools: tuple[SelectionTool, ...]
    queries: tuple[str, ...]
    name: str = ""
    task: str = ""

    @property
    def k(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def presented(self, order: Sequence[int]) -> list[SelectionTool]:
        return [self.tools[i] for i in order]

    def fingerprint(self) -> str:
        """Hash of what the model can see of this cluster (tools in canonical order)."""
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:
        # ASCII-escaped JSON (not canonical_json): the fingerprint is part of stored resume keys
        text = json.dumps([t.to_openai() for t in self.tools], sort_keys=True, separators=(",", ":"))
        return sha256_text(text, 16)

    def with_tools(self, tools: Sequence[SelectionTool]) -> Cluster:
        return replace(self, tools=tuple(tools))

    def to_dict(self) -> dict[str, JSON]:
        return {"id": self.id, "name": self.name, "task": self.task, "tools": [t.to_dict() for t in self.tools],
                "queries": list(self.queries)}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> Cluster:
        return cls(id=str(d["id"]), tools=tuple(SelectionTool.from_dict(t) for t in d["tools"]),
                   queries=tuple(str(q) for q in d["queries"]), name=str(d.get("name", "") or ""),
                   task=str(d.get("task", "") or ""))


@dataclass(frozen=True)
class Benchmark:
    name: str
    clusters: tuple[Cluster, ...]
    description: str = ""

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    def cluster(self, cluster_id: str) -> Cluster:
        for c in self.clusters:
            if c.id == str(cluster_id):
                return c
        raise CatalogError(f"no cluster '{cluster_id}'", where=f"benchmark '{self.name}'",
                           fix=f"use one of: {', '.join(c.id for c in self.clusters)}")

    def with_clusters(self, clusters: Sequence[Cluster], name: str | None = None) -> Benchmark:
        return replace(self, clusters=tuple(clusters), name=name or self.name)

    def limit_queries(self, n: int | None) -> Benchmark:
        """The first ``n`` queries of every cluster (all when ``n`` is None)."""
        if n is None:
            return self
        return replace(self, clusters=tuple(replace(c, queries=c.queries[:n]) for c in self.clusters))

    def select_clusters(self, ids: Sequence[str] | None) -> Benchmark:
        if not ids:
            return self
        return replace(self, clusters=tuple(self.cluster(i) for i in ids))

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.name, "description": self.description, "clusters": [c.to_dict() for c in self.clusters]}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON], *, name: str | None = None) -> Benchmark:
        bench = cls(name=name or str(d.get("name", "benchmark")),
                    clusters=tuple(Cluster.from_dict(c) for c in d["clusters"]),
                    description=str(d.get("description", "") or ""))
        validate_benchmark(bench)
        return bench


def rotations(k: int) -> list[tuple[int, ...]]:
    """The k cyclic rotations of ``range(k)``: rotation r shows tool ``(p + r) % k`` at position p."""
    return [tuple((p + r) % k for p in range(k)) for r in range(k)]


def validate_benchmark(bench: Benchmark) -> None:
    """Raise CatalogError for clusters the runner cannot present unambiguously."""
    seen: set[str] = set()
    for c in bench.clusters:
        where = f"benchmark '{bench.name}', cluster '{c.id}'"
        if c.id in seen:
            raise CatalogError("duplicate cluster id", where=where)
        seen.add(c.id)
        if c.k < 2:
            raise CatalogError(f"a cluster needs at least 2 tools, has {c.k}", where=where)
        if not c.queries:
            raise CatalogError("a cluster needs at least one query", where=where)
        names = [t.name for t in c.tools]
        if len(set(names)) != len(names):
            raise CatalogError(f"tool names must be unique within a cluster: {names}", where=where)
        folded = [n.casefold() for n in names]
        if len(set(folded)) != len(folded):
            raise CatalogError(f"tool names must differ other than in case: {names}", where=where)
        for n in names:
            if not NAME_RE.match(n):
                raise CatalogError(f"tool name '{n}' is not a valid function name ([A-Za-z0-9_-], 1-64 chars)",
                                   where=where)
            if n.isdigit():
                raise CatalogError(f"tool name '{n}' is all digits and would read as a list index", where=where)


@dataclass(frozen=True)
class FilterExample:
    """A query, candidate tools (in presented order) and the positions of the correct ones."""

    id: str
    query: str
    candidates: tuple[SelectionTool, ...]
    correct: frozenset[int]
    cluster: str = ""

    @property
    def k(self) -> int:
        return len(self.correct)
