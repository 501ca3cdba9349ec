"""Schema discovery: tools are listed without argument schemas until the agent asks.

Two methods (step parameter ``method``):

* ``"catalog"`` -- the paper's construction (Figure 2's *schema discovery* row): the
  whole catalog is two tools visible in every domain, ``list_methods(class)``, which
  returns that class's native schemas, and ``invoke(class, method, arguments)``. A class
  is a domain (``key: "domain"``, the default: the artifact's classes are its domains)
  or ``Tool.cls`` (``key: "class"``; a class name two domains share is qualified
  ``domain.class``). Invoking a method of a class never listed in the session is
  rejected (:attr:`FlagKind.UNDISCOVERED_TOOL`); the arguments are checked against the
  method's native schema; a method of another domain is a wrong-class routing.
  Lenient control executes an invoke of a never-listed method and an invoke naming the
  wrong class when the method names exactly one tool visible in the episode's domain.
* ``"per_tool"`` (default, toolbias's own design) -- described next.

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

from ..base.names import NameAllocator
from ..catalog.model import Tool
from ..errors import VariantError
from .base import ALL_DOMAINS, Call, Flag, FlagKind, Forward, Layer, Reject, RejectionKind, Reply, Step
from .transaction import InnerIndex, object_schema, scopes, select_tools, visible_in

#: what an undiscovered tool's parameters look like: any object
OPEN_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


class Discovery(Layer):
    """Tools without argument schemas plus ``get_tool_schema(name)``."""

    op = "discovery"
    PARAMS = ("method", "tools", "name", "key")
    METHODS = ("per_tool", "catalog")
    LENIENT = ("a tool (per_tool) or method (catalog) invoked before its schema was listed; an invoke naming the "
               "wrong class when the method names exactly one tool of the episode's domain")
    protocol: ClassVar[bool] = True
    instruction = ("Tools are listed without their arguments. Before invoking a tool, call get_tool_schema "
                   "with its name to learn its arguments, then call the tool with arguments that follow that "
                   "schema.")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        self.method = self.chosen_method(self.params)
        self._cat: CatalogDiscovery | None = None
        if self.method == "catalog":
            if "name" in self.params:
                raise VariantError("'name' applies to method 'per_tool' only", where="operator 'discovery'",
                                   fix="drop 'name' (the catalog method's tools are list_methods and invoke)")
            key = str(self.params.get("key", "domain"))
            if key not in ("domain", "class"):
                raise VariantError(f"'key' must be 'domain' or 'class', got {key!r}", where="operator 'discovery'")
            self._cat = CatalogDiscovery(self.inner, select_tools(self, self.inner), key)
            self.tools = self._cat.tools
            self.hidden = self._cat.hidden
            self.instruction = CatalogDiscovery.instruction
            return
        if "key" in self.params:
            raise VariantError("'key' applies to method 'catalog' only", where="operator 'discovery'",
                               fix="drop 'key', or set method: catalog")
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
    def lenient_decode(self, call: Call, tool: Tool, state: Any, domain: str) -> Forward | None:
        if self._cat is not None:
            return self._cat.lenient(call, tool, domain)
        return Forward((call,)) if tool.uid in self.hidden else None  # invoked before its schema was asked

    def new_encode_state(self) -> Any:
        return set()

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        if self._cat is not None:
            return self._cat.encode(call, domain, state)
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
        if self._cat is not None:
            return self._cat.decode(call, tool, state)
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


class CatalogDiscovery:
    """The ``catalog`` method of :class:`Discovery`: ``list_methods(class)`` and
    ``invoke(class, method, arguments)`` over the whole catalog (see the module doc)."""

    instruction = ("The tools are listed by class. Call list_methods with a class to get the schemas of its "
                   "methods, then call invoke with the class, the method name and an arguments object that "
                   "follows that method's schema.")

    def __init__(self, inner: Sequence[Tool], hidden: set[str], key: str) -> None:
        if any(t.domain == ALL_DOMAINS for t in inner if t.uid in hidden):
            raise VariantError("the catalog method needs tools that belong to one domain each",
                               where="operator 'discovery'",
                               fix="apply schema discovery before catalog-wide steps, or use method per_tool")
        self.hidden = hidden
        self._index = InnerIndex(inner)
        wrapped = [t for t in inner if t.uid in hidden]
        raw = {t.uid: (t.domain if key == "domain" else (t.cls or t.domain)) for t in wrapped}
        homes: dict[str, set[str]] = {}
        for t in wrapped:
            homes.setdefault(raw[t.uid], set()).add(t.domain)
        #: inner uid -> class name; class -> {method name: inner tool}
        self.class_of = {t.uid: raw[t.uid] if len(homes[raw[t.uid]]) == 1 else f"{t.domain}.{raw[t.uid]}"
                         for t in wrapped}
        self.methods: dict[str, dict[str, Tool]] = {}
        for t in wrapped:
            self.methods.setdefault(self.class_of[t.uid], {})[t.name] = t
        names = NameAllocator()
        for t in inner:
            if t.uid not in hidden:
                names.add(t.domain, t.name)
        classes = list(self.methods)
        self.lister = Tool(names.add(ALL_DOMAINS, "list_methods"),
                           "Return the methods of a class with their argument schemas. Call it before invoking "
                           "a method of that class.",
                           object_schema({"class": {"type": "string", "enum": classes,
                                                    "description": "The class whose methods you need."}},
                                         ["class"]), domain=ALL_DOMAINS, cls="discovery")
        self.invoker = Tool(names.add(ALL_DOMAINS, "invoke"),
                            "Invoke a method of a class with its arguments (list the class's methods first).",
                            object_schema({"class": {"type": "string", "enum": classes,
                                                     "description": "The class the method belongs to."},
                                           "method": {"type": "string", "description": "The method's name."},
                                           "arguments": {"type": "object",
                                                         "description": "The method's arguments."}},
                                          ["class", "method", "arguments"]), domain=ALL_DOMAINS, cls="discovery")
        self.tools = (self.lister, self.invoker, *[t for t in inner if t.uid not in hidden])

    def encode(self, call: Call, domain: str, state: set[str]) -> list[Call]:
        inner = self._index.lookup(domain, call.name)
        if inner is None or inner.uid not in self.hidden:
            return [call]
        cls = self.class_of[inner.uid]
        out = [] if cls in state else [Call(self.lister.name, {"class": cls})]
        state.add(cls)
        out.append(Call(self.invoker.name, {"class": cls, "method": inner.name, "arguments": dict(call.arguments)}))
        return out

    def decode(self, call: Call, tool: Tool, state: set[str]) -> Step:
        if tool.uid == self.lister.uid:
            cls = call.arguments["class"]
            state.add(cls)
            return Reply({"class": cls, "methods": [{"name": t.name, "description": t.description,
                                                     "parameters": _copy(t.parameters)}
                                                    for t in self.methods[cls].values()]})
        if tool.uid != self.invoker.uid:
            return Forward((call,))
        cls, method = call.arguments["class"], call.arguments["method"]
        target = self.methods[cls].get(method)
        if target is None:
            known = ", ".join(self.methods[cls]) if cls in state else f"call list_methods(class='{cls}') to see them"
            return Reject(RejectionKind.PROTOCOL, f"class '{cls}' has no method '{method}' ({known}).")
        if cls not in state:
            return Reject(RejectionKind.PROTOCOL,
                          f"the methods of class '{cls}' are not known yet: call list_methods(class='{cls}') first, "
                          f"then invoke '{method}' with arguments that follow the schema it returns.",
                          (Flag(FlagKind.UNDISCOVERED_TOOL, f"{cls}.{method}"),))
        return self._forward(target, cls, call)

    def _forward(self, target: Tool, cls: str, call: Call) -> Forward:
        return Forward((Call(target.uid, call.arguments["arguments"]),), route=cls, classes=(cls,))

    def lenient(self, call: Call, tool: Tool, domain: str) -> Forward | None:
        """An invoke that names its method unambiguously, listed or not (see the module doc)."""
        if tool.uid != self.invoker.uid:
            return None
        cls, method = call.arguments["class"], call.arguments["method"]
        target = self.methods[cls].get(method)
        if target is None:
            own = [t for c, ms in self.methods.items() for t in ms.values() if t.name == method and t.domain == domain]
            if len(own) != 1:
                return None
            target, cls = own[0], self.class_of[own[0].uid]
        return self._forward(target, cls, call)
