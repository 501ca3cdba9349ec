"""The native catalog: domains of OpenAI-format tools, native actions and tasks.

Everything here is an immutable value; loaders build these, operators read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..base.canonical import canonical_json, sha256_text

JSON = Any


#: the Python types of JSON scalars (exact types: a subclass is copied/checked as a container would be)
JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_copy(value: JSON) -> JSON:
    """A deep copy of parsed JSON (dicts, lists, scalars): cheaper than copy.deepcopy; scalars
    are taken in the comprehension (arguments and states are mostly flat)."""
    if isinstance(value, dict):
        return {k: v if type(v) in JSON_SCALARS else json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in JSON_SCALARS else json_copy(v) for v in value]
    return value


#: the state effects a tool may declare (``Tool.effect["kind"]``; see :mod:`toolbias.study.env`, which
#: runs them), the default first
EFFECT_KINDS = ("set", "append", "remove", "event")


@dataclass(frozen=True)
class Tool:
    """One callable tool in OpenAI function-calling form.

    ``cls`` is the object the tool acts on (window, seat, zone); class dispatch and
    namespacing group by it. ``effect`` optionally tells the state engine what the
    tool does (see :mod:`toolbias.study.env`); tools without one record their arguments.
    """

    name: str
    description: str
    parameters: Mapping[str, JSON]
    domain: str
    cls: str = ""
    effect: Mapping[str, JSON] | None = None
    #: what an MCP server says beside the schema (kept where a variant keeps the tool as it is):
    #: a display ``title``, the ``outputSchema`` of its results and its ``annotations`` (hints)
    title: str | None = None
    output_schema: Mapping[str, JSON] | None = field(default=None, hash=False)
    annotations: Mapping[str, JSON] | None = field(default=None, hash=False)

    # cached on the instance (tools are immutable; the codec asks for these on every call)
    @cached_property
    def uid(self) -> str:
        return f"{self.domain}::{self.name}"

    @cached_property
    def properties(self) -> Mapping[str, JSON]:
        return self.parameters.get("properties", {}) or {}

    @cached_property
    def required(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required", []) or [])

    def __getstate__(self) -> dict[str, Any]:
        # checks compiled for this tool (cached as private attributes) are closures: not pickled
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def to_openai(self) -> dict[str, JSON]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json_copy(self.parameters),
            },
        }


@dataclass(frozen=True)
class NativeAction:
    """One call of one native tool with complete arguments."""

    domain: str
    tool: str
    arguments: Mapping[str, JSON]

    @property
    def uid(self) -> str:
        return f"{self.domain}::{self.tool}"

    def key(self) -> str:
        """Exact identity (no normalisation): domain, tool and canonical arguments."""
        return f"{self.uid}{canonical_json(dict(self.arguments))}"

    def to_dict(self) -> dict[str, JSON]:
        return {"domain": self.domain, "tool": self.tool, "arguments": dict(self.arguments)}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> NativeAction:
        return cls(domain=d["domain"], tool=d["tool"], arguments=dict(d.get("arguments") or {}))

    def __hash__(self) -> int:
        return hash(self.key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NativeAction) and self.key() == other.key()

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.tool}({args})"


@dataclass(frozen=True)
class Task:
    """One user utterance and its gold list of native actions (all in one domain)."""

    id: str
    domain: str
    query: str
    gold: tuple[NativeAction, ...]
    query_templated: str = ""
    meta: Mapping[str, JSON] = field(default_factory=dict)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "domain": self.domain,
            "query": self.query,
            "query_templated": self.query_templated,
            "gold": [a.to_dict() for a in self.gold],
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> Task:
        return cls(
            id=str(d["id"]),
            domain=d["domain"],
            query=d["query"],
            query_templated=d.get("query_templated", ""),
            gold=tuple(NativeAction.from_dict(a) for a in d["gold"]),
            meta=dict(d.get("meta") or {}),
        )


@dataclass(frozen=True)
class Domain:
    """A group of tools that act on one environment, with its system prompt.

    ``initial_state`` seeds the state engine; ``title`` is a human name.
    """

    name: str
    tools: tuple[Tool, ...]
    system: str = ""
    title: str = ""
    initial_state: Mapping[str, JSON] = field(default_factory=dict)

    def tool(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    @property
    def classes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for t in self.tools:
            seen.setdefault(t.cls, None)
        return tuple(seen)


#: ``Catalog.meta`` key: when true, every domain is a world of its own (a BFCL entry with its own
#: function list), so a variant is built per domain and catalog-scope operators stay in one domain
ISOLATED_DOMAINS = "isolated_domains"


@dataclass(frozen=True)
class Catalog:
    """Domains plus tasks, named by the spec string it was loaded from."""

    name: str
    domains: tuple[Domain, ...]
    tasks: tuple[Task, ...] = ()
    meta: Mapping[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        index = {t.uid: t for d in self.domains for t in d.tools}
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_domains", {d.name: d for d in self.domains})

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(t for d in self.domains for t in d.tools)

    def domain(self, name: str) -> Domain:
        domains: dict[str, Domain] = self._domains  # type: ignore[attr-defined]
        try:
            return domains[name]
        except KeyError:
            from ..errors import CatalogError

            raise CatalogError(
                f"unknown domain '{name}'",
                where=self.name,
                fix=f"use one of: {', '.join(domains)}",
            ) from None

    def tool(self, domain: str, name: str) -> Tool | None:
        index: dict[str, Tool] = self._index  # type: ignore[attr-defined]
        return index.get(f"{domain}::{name}")

    def with_tasks(self, tasks: Iterable[Task]) -> Catalog:
        return Catalog(self.name, self.domains, tuple(tasks), self.meta)

    def fingerprint(self) -> str:
        """Hash of tools and tasks: resume refuses a catalog that silently changed. Computed once
        (a catalog is immutable; a study asks for it when it plans, checks and describes itself)."""
        cached: str | None = self.__dict__.get("_fingerprint")
        if cached is None:
            parts = [canonical_json([t.uid, t.description, t.parameters, t.cls]) for d in self.domains for t in d.tools]
            parts.extend(canonical_json(task.to_dict()) for task in self.tasks)
            cached = sha256_text("".join(parts), 16)
            object.__setattr__(self, "_fingerprint", cached)
        return cached
