"""Rename: namespaced names (class prefix) and opaque names (``f_07``, ``p_2``).

Step parameters (``{"op": "rename", ...}``):

* ``method="namespace"`` (default): every tool becomes ``<class>__<name>`` (the tool's
  ``cls``, or its domain when it has none). ``prefix="domain"`` prefixes the domain
  instead. ``scope="catalog"`` lists every domain's tools in every episode (the paper's
  whole-catalog arm, where classes are domains); the default ``scope="domain"`` keeps
  each domain's own tools. Each decoded call is routed through its namespace
  (``Forward(route=<prefix>, classes=(cls,))``) so wrong-class use can be scored.
* ``method="opaque"``: tools become ``f_00`` .. ``f_NN`` (numbers assigned by a seeded
  permutation within each domain) and, with ``params=true`` (the default), parameters
  become ``p_0`` .. ``p_k`` in schema order at every object level. ``seed`` (default 0).

Lenient repair: an unprefixed / native name, a prefix with other separators or case
(``Window.set_window``), a wrong class prefix whose remainder names exactly one tool,
and native parameter names under an opaque tool are mapped to the variant's names.

Names are valid and unique through :mod:`toolbias.base.names` (the allocator every operator uses).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.names import NameAllocator, has_invalid_characters, name_token
from ..catalog.model import Tool
from ..errors import VariantError
from .base import ALL_DOMAINS, Call, Forward, Layer, Step, outer_tool


class ToolIndex:
    """Find a layer's inner tool from a call name as the codec would (domain, catalog scope, uid)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.by_key: dict[tuple[str, str], Tool] = {(t.domain, t.name): t for t in tools}

    def find(self, domain: str, name: str) -> Tool | None:
        t = self.by_key.get((domain, name)) or self.by_key.get((ALL_DOMAINS, name))
        if t is None and "::" in name:
            d, _, n = name.partition("::")
            t = self.by_key.get((d, n))
        return t


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


# -- parameter renaming trees -------------------------------------------------------------


@dataclass
class ParamTree:
    """Key renaming for one object level: ``props`` maps a key to (new key, subtree)."""

    props: dict[str, tuple[str, ParamTree | None]]
    items: ParamTree | None = None


def map_value(value: Any, tree: ParamTree | None) -> Any:
    """Rename the keys of ``value`` following ``tree`` (unknown keys are kept)."""
    if tree is None:
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            hit = tree.props.get(k)
            if hit is None:
                out[k] = v
            else:
                out[hit[0]] = map_value(v, hit[1])
        return out
    if isinstance(value, list) and tree.items is not None:
        return [map_value(v, tree.items) for v in value]
    return value


def _opaque_schema(schema: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], ParamTree | None, ParamTree | None]:
    """Schema with keys renamed ``p_0..`` at every object level; trees outer->inner and inner->outer.

    The alternatives of a ``oneOf``/``anyOf`` (the merge operator's union encoding) describe one
    argument object, so a key gets the same new name in every alternative it appears in."""
    out = dict(schema)
    fwd: ParamTree | None = None
    inv: ParamTree | None = None
    unions = [k for k in ("oneOf", "anyOf") if isinstance(schema.get(k), list)]
    levels = [schema] + [b for k in unions for b in schema[k] if isinstance(b, Mapping)]
    occurrences: dict[str, list[Any]] = {}
    for level in levels:
        props = level.get("properties")
        if isinstance(props, Mapping):
            for name, sub in props.items():
                occurrences.setdefault(name, []).append(sub)
    if occurrences:
        fwd, inv = ParamTree({}), ParamTree({})
        names: dict[str, str] = {}
        renamed: dict[str, list[dict[str, Any]]] = {}
        for i, (name, subs) in enumerate(occurrences.items()):
            new = names[name] = f"{prefix}{i}"
            results = [_opaque_schema(sub, prefix) if isinstance(sub, Mapping) else (sub, None, None) for sub in subs]
            if any(r[1] != results[0][1] for r in results[1:]):
                raise VariantError(f"argument '{name}' nests different keys in different alternatives of a union",
                                   where="rename step (opaque parameters)",
                                   fix="rename before merging with encoding union, or use params: false")
            renamed[name] = [r[0] for r in results]
            fwd.props[new] = (name, results[0][1])
            inv.props[name] = (new, results[0][2])
        taken = {name: 0 for name in occurrences}

        def rename_level(level: Mapping[str, Any]) -> dict[str, Any]:
            res = dict(level)
            props = level.get("properties")
            if isinstance(props, Mapping):
                new_props: dict[str, Any] = {}
                for name in props:
                    new_props[names[name]] = renamed[name][taken[name]]
                    taken[name] += 1
                res["properties"] = new_props
            if "required" in level:
                res["required"] = [names.get(r, r) for r in level.get("required") or []]
            return res

        out = rename_level(schema)
        for k in unions:
            out[k] = [rename_level(b) if isinstance(b, Mapping) else b for b in schema[k]]
    items = schema.get("items")
    if isinstance(items, Mapping):
        sub_schema, sub_fwd, sub_inv = _opaque_schema(items, prefix)
        out["items"] = sub_schema
        if sub_fwd is not None:
            fwd = fwd or ParamTree({})
            inv = inv or ParamTree({})
            fwd.items, inv.items = sub_fwd, sub_inv
    return out, fwd, inv


def _tolerant(value: Any, fwd: ParamTree | None, inv: ParamTree | None) -> Any:
    """Map a value that may mix outer and inner keys to outer keys; raise KeyError if ambiguous."""
    if fwd is None or inv is None:
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in fwd.props:  # already an outer key
                if k in inv.props and inv.props[k][0] != k:
                    raise KeyError(k)  # a native name that is also another parameter's new name
                new, sub_fwd = k, fwd.props[k][1]
                sub_inv = inv.props[fwd.props[k][0]][1]
            elif k in inv.props:
                new, sub_inv = inv.props[k]
                sub_fwd = fwd.props[new][1]
            else:
                raise KeyError(k)
            if new in out:
                raise KeyError(k)
            out[new] = _tolerant(v, sub_fwd, sub_inv)
        return out
    if isinstance(value, list) and fwd.items is not None:
        return [_tolerant(v, fwd.items, inv.items) for v in value]
    return value


# -- the layer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    inner: str                       # inner tool uid
    params: ParamTree | None         # outer -> inner parameter keys (opaque)
    route: str | None
    classes: tuple[str, ...]


class Rename(Layer):
    op = "rename"
    PARAMS = ("method", "scope", "prefix", "sep", "seed", "tool_prefix", "param_prefix", "params")

    METHODS = ("namespace", "opaque")

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        method = self.chosen_method(params)
        self.method = method
        self._index = ToolIndex(self.inner)
        self._decode: dict[str, _Target] = {}                    # outer uid -> target
        self._encode: dict[tuple[str, str], str] = {}            # inner (domain, name) -> outer name
        self._inv: dict[tuple[str, str], ParamTree | None] = {}  # inner (domain, name) -> inner->outer keys
        if method == "namespace":
            self.tools = self._namespace(params)
            # Table 11's sentence for either prefix: the paper's classes are the artifact's domains
            self.instruction = ("Tool names are prefixed with their class name. Call each tool by its full "
                                "prefixed name, using the class you intend to act on.")
        else:
            self.tools = self._opaque(params)
            self.instruction = ("Tool names are opaque identifiers; choose tools and arguments by their "
                                "descriptions and call them by the exact identifiers given.")
        # lenient lookups, per visible domain: normalised name -> outer names
        self._outer_by_key = {(t.domain, t.name): t for t in self.tools}
        self._normal: dict[str, dict[str, list[str]]] = {}
        for t in self.tools:
            self._normal.setdefault(t.domain, {}).setdefault(_normal(t.name), []).append(t.name)

    # -- building -----------------------------------------------------------------
    def _namespace(self, params: Mapping[str, Any]) -> tuple[Tool, ...]:
        scope = str(params.get("scope", "domain"))
        by = str(params.get("prefix", "class"))
        sep = str(params.get("sep", "__"))
        if scope not in ("domain", "catalog"):
            raise VariantError(f"unknown rename scope '{scope}'", where="rename step", fix="use domain or catalog")
        if by not in ("class", "domain"):
            raise VariantError(f"unknown rename prefix '{by}'", where="rename step", fix="use class or domain")
        if not sep or has_invalid_characters(sep):
            raise VariantError(f"separator '{sep}' is not valid in tool names", where="rename step",
                               fix="use characters from [a-zA-Z0-9_-], e.g. '__'")
        alloc = NameAllocator()
        wanted: list[tuple[Tool, str, str]] = []
        for t in self.inner:
            prefix = name_token((t.cls or t.domain) if by == "class" else t.domain) or "tool"
            if by == "class" and t.domain == ALL_DOMAINS and not t.cls:
                prefix = "all"
            wanted.append((t, prefix, f"{prefix}{sep}{t.name}"))
        if scope == "catalog":
            # the same qualified name in two domains: qualify those with the domain as well
            counts: dict[str, int] = {}
            for _t, _p, n in wanted:
                counts[n] = counts.get(n, 0) + 1
            wanted = [(t, p, n if counts[n] == 1 or by == "domain" else f"{name_token(t.domain)}{sep}{n}")
                      for t, p, n in wanted]
        out: list[Tool] = []
        for t, prefix, name in wanted:
            domain = ALL_DOMAINS if scope == "catalog" else t.domain
            new = alloc.add(domain, name)
            tool = outer_tool(t, name=new, domain=domain)
            out.append(tool)
            self._decode[tool.uid] = _Target(t.uid, None, prefix, (t.cls,) if t.cls else ())
            self._encode[(t.domain, t.name)] = new
            self._inv[(t.domain, t.name)] = None
        return tuple(out)

    def _opaque(self, params: Mapping[str, Any]) -> tuple[Tool, ...]:
        seed = params.get("seed", 0)
        tool_prefix = str(params.get("tool_prefix", "f_"))
        param_prefix = str(params.get("param_prefix", "p_"))
        rename_params = bool(params.get("params", True))
        if has_invalid_characters(tool_prefix):
            raise VariantError(f"tool prefix '{tool_prefix}' is not valid in tool names", where="rename step")
        # number tools within each domain; with catalog-scope tools present, across the whole catalog
        one_group = any(t.domain == ALL_DOMAINS for t in self.inner)
        groups: dict[str, list[Tool]] = {}
        for t in self.inner:
            groups.setdefault("" if one_group else t.domain, []).append(t)
        number: dict[str, int] = {}
        width: dict[str, int] = {}
        for key, tools in groups.items():
            order = list(range(len(tools)))
            random.Random(f"rename-opaque:{seed}:{key}").shuffle(order)
            w = max(2, len(str(len(tools) - 1)))
            for t, n in zip(tools, order, strict=True):
                number[t.uid] = n
                width[t.uid] = w
        alloc = NameAllocator()
        out: list[Tool] = []
        for t in self.inner:
            new = alloc.add(t.domain, f"{tool_prefix}{number[t.uid]:0{width[t.uid]}d}")
            if rename_params:
                schema, fwd, inv = _opaque_schema(t.parameters, param_prefix)
            else:
                schema, fwd, inv = dict(t.parameters), None, None
            tool = outer_tool(t, name=new, parameters=schema)
            out.append(tool)
            self._decode[tool.uid] = _Target(t.uid, fwd, None, ())
            self._encode[(t.domain, t.name)] = new
            self._inv[(t.domain, t.name)] = inv
        return tuple(out)

    # -- codec interface ------------------------------------------------------------
    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        t = self._index.find(domain, call.name)
        if t is None:
            return [call]
        key = (t.domain, t.name)
        return [Call(self._encode[key], map_value(call.arguments, self._inv[key]))]

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        target = self._decode.get(tool.uid)
        if target is None:
            return Forward((call,))
        args = map_value(call.arguments, target.params) if target.params is not None else call.arguments
        return Forward((Call(target.inner, args),), route=target.route, classes=target.classes)

    def repair(self, call: Call, domain: str) -> Call | None:
        name = self._resolve(call.name, domain)
        if name is None:
            return None
        outer = self._outer_by_key.get((domain, name)) or self._outer_by_key.get((ALL_DOMAINS, name))
        if outer is None:
            return None
        target = self._decode[outer.uid]
        if target.params is None:
            return Call(name, dict(call.arguments))
        inner = self._index.find(domain, target.inner)
        inv = self._inv.get((inner.domain, inner.name)) if inner is not None else None
        try:
            args = _tolerant(call.arguments, target.params, inv)
        except KeyError:
            return None
        return Call(name, args)

    def _resolve(self, name: str, domain: str) -> str | None:
        """The outer tool an off-schema name unambiguously means, if any."""
        if (domain, name) in self._outer_by_key or (ALL_DOMAINS, name) in self._outer_by_key:
            return name
        inner = self._index.find(domain, name)
        if inner is not None:
            return self._encode.get((inner.domain, inner.name))
        table = {**self._normal.get(ALL_DOMAINS, {}), **self._normal.get(domain, {})}
        hits = table.get(_normal(name), [])
        if len(hits) == 1:
            return hits[0]
        if self.method != "namespace":
            return None
        # a wrong or differently written prefix: the longest inner name the call ends with
        best: list[str] = []
        best_len = 0
        for (d, n), new in self._encode.items():
            if d not in (domain, ALL_DOMAINS):  # another domain's tool could not execute here
                continue
            if re.search(r"(^|[^a-zA-Z0-9])" + re.escape(n) + "$", name):
                if len(n) > best_len:
                    best, best_len = [new], len(n)
                elif len(n) == best_len:
                    best.append(new)
        return best[0] if len(best) == 1 else None
