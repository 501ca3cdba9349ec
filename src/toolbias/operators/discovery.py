"""Schema discovery: tools are listed without argument schemas until the agent asks.

Every wrapped tool keeps its name and description but is listed with a permissive
parameter schema (an open object). ``get_tool_schema(name)`` returns the tool's
real argument schema; invoking a tool whose schema was not queried earlier in the
session is rejected with :attr:`FlagKind.UNDISCOVERED_TOOL` and a message telling
the agent to query it first. After discovery the call is checked against the real
schema (one level down), so nothing outside the native action space is reachable.

Params: ``tools`` (``"all"`` or the tools to hide), ``name`` (the discovery tool,
default ``get_tool_schema``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..catalog.model import Tool
from ..names import NameAllocator
from .base import Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from .transaction import InnerIndex, object_schema, scopes, select_tools, visible_in

#: what an undiscovered tool's parameters look like: any object
OPEN_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


class Discovery(Layer):
    """Tools without argument schemas plus ``get_tool_schema(name)``."""

    op = "discovery"
    PARAMS = ("tools", "name")
    protocol: ClassVar[bool] = True
    instruction = ("Tools are listed without their arguments. Before invoking a tool, call get_tool_schema "
                   "with its name to learn its arguments, then call the tool with arguments that follow that "
                   "schema.")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        hidden = select_tools(self, self.inner)
        self._index = InnerIndex(self.inner)
        names = NameAllocator()
        for t in self.inner:
            names.add(t.domain, t.name)
        base = str(self.params.get("name", "get_tool_schema"))
        self._query: dict[str, dict[str, Tool]] = {}   # discovery tool uid -> {name: inner tool}
        self._query_for: dict[str, Tool] = {}          # scope -> discovery tool
        self.hidden = hidden
        wrapped = [t for t in self.inner if t.uid in hidden]
        made: dict[str, Tool] = {}
        for scope in scopes(self.inner):
            targets = {t.name: t for t in visible_in(scope, wrapped)}
            if not targets:
                continue
            q = Tool(names.add(scope, base),
                     "Return the argument schema of a tool. Call it before invoking any tool whose "
                     "arguments you have not looked up yet.",
                     object_schema({"name": {"type": "string", "enum": list(targets),
                                             "description": "The tool whose arguments you need."}}, ["name"]),
                     domain=scope, cls="discovery")
            self._query[q.uid] = targets
            self._query_for[scope] = q
            made[scope] = q
        out: list[Tool] = []
        emitted: set[str] = set()
        for t in self.inner:
            if t.domain in made and t.domain not in emitted:
                emitted.add(t.domain)
                out.append(made[t.domain])
            if t.uid in hidden:
                out.append(Tool(t.name, t.description, dict(OPEN_SCHEMA), domain=t.domain, cls=t.cls,
                                effect=t.effect))
            else:
                out.append(t)
        out.extend(q for scope, q in made.items() if scope not in emitted)
        self.tools = tuple(out)

    # -- encoding -------------------------------------------------------------------
    def new_encode_state(self) -> Any:
        return set()

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        inner = self._index.lookup(domain, call.name)
        if inner is None or inner.uid not in self.hidden:
            return [call]
        if inner.uid in state:
            return [call]
        state.add(inner.uid)
        q = self._query_for.get(domain) or self._query_for[inner.domain]
        return [Call(q.name, {"name": inner.name}), call]

    # -- decoding -------------------------------------------------------------------
    def new_state(self) -> Any:
        return set()

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        targets = self._query.get(tool.uid)
        if targets is not None:
            inner = targets[call.arguments["name"]]
            state.add(inner.uid)
            return Reply({"name": inner.name, "description": inner.description,
                          "parameters": _copy(inner.parameters)})
        if tool.uid not in self.hidden:
            return Forward((call,))
        if tool.uid not in state:
            q = self._query_for.get(tool.domain)
            qname = q.name if q is not None else "get_tool_schema"
            return Reject(RejectionKind.PROTOCOL,
                          f"the arguments of '{call.name}' are not known yet: call {qname}(name='{call.name}') "
                          f"first, then call '{call.name}' with arguments that follow the schema it returns.",
                          (Flag(FlagKind.UNDISCOVERED_TOOL, call.name),))
        return Forward((call,))


def _copy(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value))
