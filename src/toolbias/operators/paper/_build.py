"""The artifact's constructions: what each outer tool is (a :class:`Route`) and how each native
tool is written in the variant (a :class:`Recipe`).

Four constructions, as the artifact builds them:

* :func:`ladder`: the merge/split ladder (its ``SchemaAdapter`` index ``k`` of ``K`` = 10, 5 =
  native): per domain, ``level = round(k / 5 * N)`` tools peeled out of one ``execute``
  dispatcher (most arguments first, then by name), or past native ``N + round((k - 5) / 4 * M)``
  enumerable arguments folded into names (fewest values first, then by tool and argument);
* :func:`compile_ops`: a spec file's ``{"ops": [...]}`` on one domain (merge, split_enum,
  split_predicate, arg_lower, indirect, curry, rename, strip_desc, shuffle_params);
* :func:`hierarchy`: the whole-catalog arms ``flat``, ``qualified``, ``dispatch``, ``disclose``;
* :func:`class_groups`: a whole-catalog ``{"arm", "groups"}`` file (Table 8's arms).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import VariantError
from ._shapes import (
    DISPATCHERS,
    Interval,
    Shape,
    baked_tools,
    enumerable,
    flat_dispatcher,
    handle,
    intervals,
    packed,
    props_of,
    range_text,
    referenced,
    required_of,
    resolver_tool,
    shape,
    shuffled,
    stripped,
    transaction_tools,
    values_of,
)

#: the op kinds of the artifact's ``{"ops": [...]}`` spec files
OP_KINDS = ("merge", "split_enum", "split_predicate", "arg_lower", "indirect", "curry", "rename", "strip_desc",
            "shuffle_params")
#: the ladder's length and its native index (the artifact's K = 10)
LADDER_K = 10
NATIVE_K = LADDER_K // 2


@dataclass
class Route:
    """What calling one outer tool does.

    ``kind``: ``named`` (one native operation, ``fixed`` values folded into the name, ``preds``
    intervals it handles, ``pack`` object arguments to unpack, ``refs`` handles to resolve),
    ``execute`` (a dispatcher over ``ops``), ``resolver``, ``begin``/``set``/``commit`` (a
    transaction), ``list``/``invoke`` (schema discovery)."""

    kind: str
    op: str = ""
    domain: str = ""
    fixed: dict[str, Any] = field(default_factory=dict)
    preds: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    pack: dict[str, list[str]] = field(default_factory=dict)
    #: ref argument -> (native argument, handle -> value)
    refs: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    encoding: str = "flat"
    ops: list[str] = field(default_factory=list)
    op_params: dict[str, list[str]] = field(default_factory=dict)
    #: dispatcher operation -> the domain it acts in (catalog scope)
    owners: dict[str, str] = field(default_factory=dict)
    param: str = ""
    table: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    #: discovery: class -> its methods' schemas (list) or names (invoke)
    classes: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class Recipe:
    """How one native operation is written: ``merged`` into dispatcher ``entry``, or ``plain``
    as tool ``base`` (with ``baked`` and interval-split ``preds`` suffixes, ``pack`` objects,
    ``refs`` {argument: (ref argument, resolver)}), or ``curry`` (begin/set/commit on ``base``),
    or ``invoke`` (``list_methods`` first, then ``invoke``)."""

    kind: str
    base: str = ""
    entry: str = ""
    encoding: str = "flat"
    baked: list[str] = field(default_factory=list)
    preds: dict[str, list[Interval]] = field(default_factory=dict)
    pack: dict[str, list[str]] = field(default_factory=dict)
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)
    cls: str = ""


@dataclass
class Surface:
    """One construction's outer tools (in order, each with its route) and recipes by native uid."""

    tools: list[tuple[Shape, Route]] = field(default_factory=list)
    recipes: dict[str, Recipe] = field(default_factory=dict)


def native_shape(tool: Any) -> Shape:
    """A toolbias tool as the artifact's canonical ``{name, description, parameters}``."""
    return shape(tool.name, tool.description, tool.parameters)


def _dispatcher(members: Sequence[Mapping[str, Any]], into: str, encoding: str, domain: str,
                owners: Mapping[str, str] | None = None) -> tuple[Shape, Route]:
    build = DISPATCHERS.get(encoding)
    if build is None:
        raise VariantError(f"unknown merge encoding '{encoding}'", where=f"dispatcher '{into}'",
                           fix=f"use one of: {', '.join(DISPATCHERS)}")
    ops = [str(m["name"]) for m in members]
    return build(members, into), Route("execute", domain=domain, encoding=encoding, ops=ops,
                                       op_params={str(m["name"]): list(props_of(m)) for m in members},
                                       owners=dict(owners or {}))


# -- the ladder -----------------------------------------------------------------------------

def ladder_level(k: int, n: int, m: int) -> int:
    if k <= NATIVE_K:
        return round(k / NATIVE_K * n)
    return n + round((k - NATIVE_K) / (LADDER_K - 1 - NATIVE_K) * m)


def ladder(domain: str, tools: Sequence[Shape], k: int) -> Surface:
    """One domain at ladder index ``k`` (0 fully merged, 5 native, 9 fully split)."""
    peel = [str(t["name"]) for t in sorted(tools, key=lambda t: (-len(props_of(t)), t["name"]))]
    plan = sorted(((len(values_of(s)), (str(t["name"]), p)) for t in tools for p, s in props_of(t).items()
                   if enumerable(s)))
    bake = [pair for _, pair in plan]
    n, m = len(peel), len(bake)
    level = max(0, min(ladder_level(k, n, m), n + m))
    baked: dict[str, list[str]] = {}
    if level <= n:
        named = set(peel[:level])
        merged = [t for t in tools if t["name"] not in named]
        if len(merged) == 1:  # a dispatcher over one operation is that operation
            named.add(str(merged[0]["name"]))
            merged = []
    else:
        named = {str(t["name"]) for t in tools}
        merged = []
        for op, p in bake[: level - n]:
            baked.setdefault(op, []).append(p)
    out = Surface()
    for t in tools:
        name = str(t["name"])
        if name not in named:
            continue
        params = baked.get(name, [])
        for s, fixed in baked_tools(t, params):
            out.tools.append((s, Route("named", op=name, domain=domain, fixed=fixed)))
        out.recipes[f"{domain}::{name}"] = Recipe("plain", base=name, baked=list(params))
    if merged:
        out.tools.append(_dispatcher(merged, "execute", "flat", domain))
        for t in merged:
            out.recipes[f"{domain}::{t['name']}"] = Recipe("merged", entry="execute")
    return out


# -- spec files ({"ops": [...]}) ---------------------------------------------------------

@dataclass
class _Plan:
    baked: list[str] = field(default_factory=list)
    preds: dict[str, tuple[list[float], list[str] | None]] = field(default_factory=dict)
    packs: list[tuple[str, list[str]]] = field(default_factory=list)
    refs: dict[str, list[Any]] = field(default_factory=dict)
    curry: bool = False
    rename: str | None = None
    strip: bool = False
    shuffle: int | None = None

    def touched(self) -> bool:
        return bool(self.baked or self.preds or self.packs or self.refs or self.curry or self.rename
                    or self.strip or self.shuffle is not None)


def _plans(domain: str, tools: Sequence[Shape], ops: Sequence[Mapping[str, Any]], where: str
           ) -> tuple[dict[str, _Plan], dict[str, tuple[list[str], str]]]:
    by_name = {str(t["name"]): t for t in tools}
    plans = {name: _Plan() for name in by_name}
    merges: dict[str, tuple[list[str], str]] = {}
    for i, o in enumerate(ops):
        if o.get("group") is not None and o["group"] != domain:
            continue
        kind = o.get("op")
        here = f"{where}, op {i + 1} ({kind})"
        if kind not in OP_KINDS:
            raise VariantError(f"unknown artifact op '{kind}'", where=here, fix=f"use one of: {', '.join(OP_KINDS)}")
        if kind == "merge":
            members = [n for n in o.get("tools", []) if n in by_name]
            encoding = str(o.get("encoding", "flat"))
            if members:
                into = str(o.get("into", "execute"))
                slot = merges.setdefault(into, ([], encoding))
                if slot[1] != encoding:
                    raise VariantError(f"dispatcher '{into}' is given two encodings ({slot[1]}, {encoding})",
                                       where=here, fix="give every merge into one dispatcher the same encoding")
                slot[0].extend(members)
            continue
        name = o.get("tool")
        if name not in by_name:
            continue
        plan = plans[name]
        props = props_of(by_name[name])
        if kind == "split_enum":
            for p in o.get("params", []):
                if p not in props or not enumerable(props[p]):
                    raise VariantError(f"'{name}.{p}' is not an enumerable argument", where=here,
                                       fix="split_enum names enum or boolean arguments")
                if p not in plan.baked:
                    plan.baked.append(p)
        elif kind == "split_predicate":
            p = o.get("param")
            cuts = sorted(o.get("cuts") or [])
            if not cuts or p not in props or props[p].get("type") not in ("integer", "number"):
                raise VariantError(f"'{name}.{p}' needs cut points on a numeric argument", where=here,
                                   fix='write {"op": "split_predicate", "tool": ..., "param": ..., "cuts": [c]}')
            plan.preds[str(p)] = (cuts, o.get("labels"))
        elif kind == "arg_lower":
            plan.packs.append((str(o.get("into", "options")), list(o.get("params", []))))
        elif kind == "indirect":
            plan.refs[str(o["param"])] = list(o.get("values", []))
        elif kind == "curry":
            plan.curry = True
        elif kind == "rename":
            plan.rename = str(o["to"])
        elif kind == "strip_desc":
            plan.strip = True
        else:  # shuffle_params
            plan.shuffle = int(o.get("seed", 0))
    merged = {n for members, _ in merges.values() for n in members}
    for n in merged:
        if plans[n].touched():
            raise VariantError(f"merged tool '{n}' takes another op too", where=where,
                               fix="a merged tool takes no other op in the artifact's specs")
    for n, plan in plans.items():
        if plan.curry and (plan.baked or plan.preds):
            raise VariantError(f"curry on '{n}' cannot combine with a split", where=where,
                               fix="drop the split or the curry of that tool")
    return plans, merges


def compile_ops(domain: str, tools: Sequence[Shape], ops: Sequence[Mapping[str, Any]], where: str) -> Surface:
    """One domain under a spec file's ops: resolvers first, then every tool in catalog order,
    then the dispatchers in the order their names first appear."""
    plans, merges = _plans(domain, tools, ops, where)
    merged = {n for members, _ in merges.values() for n in members}
    resolvers: list[tuple[Shape, Route]] = []
    out = Surface()
    for t in tools:
        native = str(t["name"])
        if native in merged:
            continue
        plan = plans[native]
        current, pack = packed(t, plan.packs)
        current, ref_args = referenced(current, list(plan.refs))
        refs: dict[str, tuple[str, dict[str, Any]]] = {}
        for ref, p in ref_args.items():
            table = {handle(native, p, v): v for v in plan.refs[p]}
            refs[ref] = (p, table)
            resolvers.append((resolver_tool(native, p), Route("resolver", op=native, domain=domain, param=p,
                                                                table=table)))
        if plan.strip:
            current = stripped(current)
        if plan.shuffle is not None:
            current = shuffled(current, plan.shuffle)
        if plan.rename:
            current = {**current, "name": plan.rename}
        base = str(current["name"])
        ref_recipe = {p: (ref, f"resolve_{native}__{p}") for ref, (p, _) in refs.items()}
        if plan.curry:
            required = [refs[r][0] if r in refs else r for r in required_of(current)]
            for s, role, arg in transaction_tools(current):
                out.tools.append((s, Route(role, op=native, domain=domain, param=arg or "", refs=refs,
                                           required=required if role == "commit" else [])))
            out.recipes[f"{domain}::{native}"] = Recipe("curry", base=base, refs=ref_recipe)
            continue
        grids = [(p, intervals(cuts, labels)) for p, (cuts, labels) in plan.preds.items()]
        for s, fixed in baked_tools(current, plan.baked):
            combos: list[tuple[Interval, ...]] = [()]
            for _, grid in grids:
                combos = [c + (iv,) for c in combos for iv in grid]
            for combo in combos:
                name, text = str(s["name"]), str(s["description"])
                props = {k: dict(v) for k, v in s["parameters"]["properties"].items()}
                preds = []
                for (p, _), (label, lo, hi) in zip(grids, combo, strict=True):
                    name += f"__{p}_{label}"
                    text = f"{text} (handles {range_text(p, lo, hi)})".strip()
                    if lo is not None:
                        props[p]["minimum"] = lo
                    if hi is not None:
                        props[p]["exclusiveMaximum"] = hi
                    preds.append((p, lo, hi))
                out.tools.append((shape(name, text, {**s["parameters"], "properties": props}),
                                  Route("named", op=native, domain=domain, fixed=fixed, preds=preds, pack=pack,
                                        refs=refs)))
        out.recipes[f"{domain}::{native}"] = Recipe("plain", base=base, baked=list(plan.baked),
                                                    preds=dict(grids), pack=pack, refs=ref_recipe)
    by_name = {str(t["name"]): t for t in tools}
    for into, (members, encoding) in merges.items():
        out.tools.append(_dispatcher([by_name[n] for n in members], into, encoding, domain))
        for n in members:
            out.recipes[f"{domain}::{n}"] = Recipe("merged", entry=into, encoding=encoding)
    out.tools[:0] = resolvers
    return out


# -- whole-catalog arms ------------------------------------------------------------------

HIERARCHY_ARMS = ("flat", "qualified", "dispatch", "disclose")


def _by_class(tools: Sequence[tuple[str, Shape]]) -> dict[str, list[Shape]]:
    grouped: dict[str, list[Shape]] = {}
    for domain, t in tools:
        grouped.setdefault(domain, []).append(t)
    return {c: grouped[c] for c in sorted(grouped)}


def hierarchy(tools: Sequence[tuple[str, Shape]], arm: str) -> Surface:
    """The whole catalog (``(domain, tool)`` pairs) as one of the class-layer arms; classes are
    domains, in sorted order."""
    if arm not in HIERARCHY_ARMS:
        raise VariantError(f"unknown hierarchy arm '{arm}'", fix=f"use one of: {', '.join(HIERARCHY_ARMS)}")
    classes = _by_class(tools)
    shared = {n for n, c in Counter(str(t["name"]) for _, t in tools).items() if c > 1}
    out = Surface()
    if arm in ("flat", "qualified"):
        for cls, members in classes.items():
            for t in members:
                native = str(t["name"])
                if arm == "flat":
                    name = f"{native}_{cls}" if native in shared else native
                    s = shape(name, f"[{cls}] {t['description']}", t["parameters"])
                else:
                    name = f"{cls}__{native}"
                    s = shape(name, str(t["description"]), t["parameters"])
                out.tools.append((s, Route("named", op=native, domain=cls)))
                out.recipes[f"{cls}::{native}"] = Recipe("plain", base=name)
        return out
    if arm == "dispatch":
        for cls, members in classes.items():
            s = flat_dispatcher(members, cls)
            out.tools.append((s, Route("execute", domain=cls, ops=[str(m["name"]) for m in members],
                                       op_params={str(m["name"]): list(props_of(m)) for m in members},
                                       owners={str(m["name"]): cls for m in members})))
            for m in members:
                out.recipes[f"{cls}::{m['name']}"] = Recipe("merged", entry=cls)
        return out
    names = {cls: [str(t["name"]) for t in members] for cls, members in classes.items()}
    schemas: dict[str, list[Any]] = {cls: [shape(str(t["name"]), str(t["description"]), t["parameters"])
                                           for t in members] for cls, members in classes.items()}
    listing = "; ".join(f"{cls}: {', '.join(ms)}" for cls, ms in names.items())
    out.tools.append((shape(
        "list_methods",
        "List a class's methods with their FULL argument schemas. Call this first: `invoke` requires the exact "
        "argument names, which are only available here.",
        {"type": "object",
         "properties": {"class": {"type": "string", "enum": list(names), "description": "The class to inspect."}},
         "required": ["class"]}), Route("list", classes=schemas)))
    out.tools.append((shape(
        "invoke",
        f"Invoke one method of one class. Available methods — {listing}. Argument names/types come from "
        "`list_methods`.",
        {"type": "object",
         "properties": {"class": {"type": "string", "enum": list(names), "description": "The class owning the method."},
                        "method": {"type": "string", "description": "Method name within the class."},
                        "arguments": {"type": "object", "description": "The method's arguments, per list_methods."}},
         "required": ["class", "method", "arguments"]}),
        Route("invoke", classes={c: list(ms) for c, ms in names.items()})))
    for cls, methods in names.items():
        for method in methods:
            out.recipes[f"{cls}::{method}"] = Recipe("invoke", cls=cls)
    return out


def class_groups(tools: Sequence[tuple[str, Shape]], groups: Sequence[Mapping[str, Any]], where: str) -> Surface:
    """A whole-catalog grouping file: one flat dispatcher per group (``into``) over its
    ``[domain, tool]`` members, described by the group's ``description`` when it has one."""
    index = {(d, str(t["name"])): t for d, t in tools}
    out = Surface()
    for i, g in enumerate(groups):
        into = str(g["into"])
        members, owners = [], {}
        for d, n in g["members"]:
            t = index.get((d, n))
            if t is None:
                raise VariantError(f"group '{into}' names '{d}::{n}', which the catalog lacks",
                                   where=f"{where}, group {i + 1}", fix="build it on the catalog it was written for")
            members.append(t)
            owners[n] = d
            out.recipes[f"{d}::{n}"] = Recipe("merged", entry=into)
        s, route = _dispatcher(members, into, "flat", "", owners)
        if g.get("description"):
            s = {**s, "description": g["description"]}
        out.tools.append((s, route))
    return out


__all__ = ["HIERARCHY_ARMS", "LADDER_K", "OP_KINDS", "NATIVE_K", "Recipe", "Route", "Surface", "class_groups", "compile_ops",
           "hierarchy", "ladder", "ladder_level", "native_shape"]
