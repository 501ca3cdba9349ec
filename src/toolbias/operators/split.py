"""Split: one tool becomes several, by enum values or numeric ranges folded into the names.

Step parameters (``{"op": "split", "method": ...}``):

* ``method="enum"`` (default; *fully split*): every required enumerable argument (a
  string or number ``enum``, or a boolean) is folded into the tool name, in parameter
  order: ``set_window(position, state, speed)`` becomes ``set_window__front_left__open``
  ... with ``speed`` still passed. Booleans and numbers fold as ``<param>_<value>``
  (``dry_true``, ``level_3``). ``max_per_tool=N`` folds greedily, in parameter order,
  only arguments that keep a tool's share at most N tools (the paper's "all enums"
  uses 24). ``select={"tool" | "domain::tool": [params]}`` names the folds explicitly.
* ``method="one_enum"``: one enumerable argument per tool, ``choose="first"`` (default,
  as the paper's ``enum1`` spec), ``"smallest"`` or ``"largest"``.
* ``method="ladder"``: a partial enum split whose function count is about ``ratio``
  times native in every domain (the split ladder: 1.5x, 2.9x, 5.4x). Tools deepen
  their split one enumerable argument at a time, round by round, in a seeded order
  (``seed``, default 0), as long as the domain stays within its target.
* ``method="interval"``: each required numeric argument with cut points is split into
  ranges (``set_volume__0_to_49``, ``set_volume__50_to_100``; ``set_sunroof__extent_below_75``,
  ``set_sunroof__extent_from_75``); the value is still passed and constrained with
  ``minimum``/``maximum`` (``exclusiveMaximum`` for real numbers). Cut points, first
  match wins: ``cuts={"tool.param" | "domain::tool.param": [c, ...]}``; the midpoint of
  the argument's [minimum, maximum]; the upper median of the distinct values the
  catalog's gold actions use (``observed_cuts``, filled in by :meth:`Split.prepare`
  unless ``cuts_from_tasks=false``); otherwise the argument is left alone.
  ``auto=false`` uses only the explicit ``cuts``. A cut ``c`` starts a new range: ``[.., c)``
  and ``[c, ..]``.
* ``interval=true`` with an enum method also splits numeric arguments.

Optional arguments are never folded (a name cannot say "absent" without inventing a
value). ``limit`` (default 512) caps how many tools one native tool may become.
Names are valid (``^[a-zA-Z0-9_-]{1,64}$``), unique, shortened with a stable hash when long.

Lenient repair: a value outside the named range goes to the right range's tool; a name
with the folded values in another order, only some of them (the rest as arguments),
or the folded values repeated as arguments resolves when exactly one tool fits. An
enum value passed as an argument to the unsplit name is the codec's generic rule.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ..base.names import NameAllocator, name_token, short_hash
from ..catalog.model import Catalog, Tool
from ..errors import VariantError
from .base import ALL_DOMAINS, Call, Forward, Layer, Step, outer_tool
from .rename import ToolIndex

Number = int | float

ENUM_INSTRUCTION = ("The values of enumerable arguments are part of the tool names. Call the tool whose name "
                    "contains the values you need and pass only the remaining arguments.")
INTERVAL_INSTRUCTION = ("Numeric arguments are split into ranges across several tools. Call the tool whose name "
                        "gives the range that contains your value, and still pass the value itself.")

_BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _vkey(value: Any) -> str:
    """Exact identity of a JSON value (``1``, ``1.0`` and ``true`` differ); cheap for scalars."""
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value!r}"
    return "j" + json.dumps(value, sort_keys=True)


def _is_num(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v: Number) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).replace(".", "p").replace("+", "")


def _num_type(schema: Mapping[str, Any]) -> str | None:
    """'integer' or 'number' for a numeric argument without an enum, else None."""
    if "enum" in schema or "const" in schema:
        return None
    t = schema.get("type")
    return t if t in ("integer", "number") else None


def enum_values(schema: Mapping[str, Any]) -> list[Any] | None:
    """The values of an enumerable argument (enum or boolean), or None."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        seen: dict[str, Any] = {}
        for v in enum:
            seen.setdefault(_vkey(v), v)
        return list(seen.values())
    if schema.get("type") == "boolean":
        return [True, False]
    return None


def enumerable(tool: Tool) -> list[tuple[str, list[Any]]]:
    """Required enumerable arguments of ``tool`` in parameter order, with their values."""
    req = set(tool.required)
    out = []
    for p, s in tool.properties.items():
        if p in req and isinstance(s, Mapping):
            vals = enum_values(s)
            if vals is not None:
                out.append((p, vals))
    return out


@dataclass(frozen=True)
class _Interval:
    bounds: Mapping[str, Number]  # bound keywords of the split tool's argument
    token: str                    # range text for names
    text: str                     # range text for descriptions


def _intervals(param: str, schema: Mapping[str, Any], cuts: Sequence[Number]) -> tuple[list[Number], list[_Interval]]:
    """Usable cut points and the ranges they make (empty if none is usable)."""
    kind = _num_type(schema)
    lo_inc = schema.get("minimum") if _is_num(schema.get("minimum")) else None
    lo_exc = schema.get("exclusiveMinimum") if _is_num(schema.get("exclusiveMinimum")) else None
    hi_inc = schema.get("maximum") if _is_num(schema.get("maximum")) else None
    hi_exc = schema.get("exclusiveMaximum") if _is_num(schema.get("exclusiveMaximum")) else None
    out: list[_Interval] = []
    if kind == "integer":
        lo = max([math.ceil(v) for v in (lo_inc,) if v is not None] + [math.floor(v) + 1 for v in (lo_exc,)
                                                                         if v is not None], default=None)
        hi = min([math.floor(v) for v in (hi_inc,) if v is not None] + [math.ceil(v) - 1 for v in (hi_exc,)
                                                                          if v is not None], default=None)
        ok = sorted({math.ceil(c) for c in cuts if (lo is None or c > lo) and (hi is None or c <= hi)})
        if not ok:
            return [], []
        starts: list[int | None] = [lo, *ok]
        ends: list[int | None] = [c - 1 for c in ok] + [hi]
        for a, b in zip(starts, ends, strict=True):
            bounds: dict[str, Number] = {}
            if a is not None:
                bounds["minimum"] = a
            if b is not None:
                bounds["maximum"] = b
            if a is not None and b is not None:
                token = _fmt(a) if a == b else f"{_fmt(a)}_to_{_fmt(b)}"
                text = f"{param} = {a}" if a == b else f"{a} <= {param} <= {b}"
            elif a is None:
                assert b is not None
                token, text = f"below_{_fmt(b + 1)}", f"{param} <= {b}"
            else:
                token, text = f"from_{_fmt(a)}", f"{param} >= {a}"
            out.append(_Interval(bounds, token, text))
        return list(ok), out
    # real numbers: [lo, c1), [c1, c2), ..., [ck, hi]
    low = lo_inc if lo_inc is not None else lo_exc
    high = hi_inc if hi_inc is not None else hi_exc
    okf = sorted({c for c in cuts if (low is None or c > low) and (high is None or c < high)})
    if not okf:
        return [], []
    for i in range(len(okf) + 1):
        bounds = {}
        first, last = i == 0, i == len(okf)
        if first:
            if lo_inc is not None:
                bounds["minimum"] = lo_inc
            elif lo_exc is not None:
                bounds["exclusiveMinimum"] = lo_exc
        else:
            bounds["minimum"] = okf[i - 1]
        if last:
            if hi_inc is not None:
                bounds["maximum"] = hi_inc
            elif hi_exc is not None:
                bounds["exclusiveMaximum"] = hi_exc
        else:
            bounds["exclusiveMaximum"] = okf[i]
        start: Number | None = low if first else okf[i - 1]
        end: Number | None = high if last else okf[i]
        if start is None:
            assert end is not None
            token, text = f"below_{_fmt(end)}", f"{param} < {end}"
        elif end is None:
            token, text = f"from_{_fmt(start)}", f"{param} >= {start}"
        else:
            token = f"{_fmt(start)}_to_{_fmt(end)}"
            lo_op = "<" if first and lo_inc is None else "<="
            hi_op = "<=" if last and hi_inc is not None else "<"
            text = f"{start} {lo_op} {param} {hi_op} {end}"
        out.append(_Interval(bounds, token, text))
    return list(okf), out


def _midpoint(schema: Mapping[str, Any]) -> Number | None:
    """Default single cut: the middle of the argument's [minimum, maximum]."""
    kind = _num_type(schema)
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if not (_is_num(lo) and _is_num(hi)) or hi <= lo:
        return None
    if kind == "integer":
        ilo = math.ceil(lo) if "minimum" in schema else math.floor(lo) + 1
        ihi = math.floor(hi) if "maximum" in schema else math.ceil(hi) - 1
        return ilo + (ihi - ilo + 1) // 2 if ihi > ilo else None
    mid = (lo + hi) / 2
    return int(mid) if float(mid).is_integer() else mid


def _value_tokens(param: str, values: Sequence[Any]) -> list[str]:
    """One name token per value, unique (case-insensitively) within the argument."""
    out: list[str] = []
    seen: set[str] = set()
    for v in values:
        tok = name_token(v) if isinstance(v, str) else name_token(f"{param}_{_fmt(v) if _is_num(v) else json.dumps(v)}")
        if not tok:
            tok = name_token(param) or "v"
        if tok.lower() in seen:
            tok = f"{tok}_{short_hash(_vkey(v), 6)}"
        seen.add(tok.lower())
        out.append(tok)
    return out


@dataclass
class _Plan:
    """How one inner tool splits: folded enumerable arguments and range-split numeric ones."""

    tool: Tool
    folds: list[tuple[str, list[Any]]]                 # (param, values)
    ranges: list[tuple[str, list[Number], list[_Interval]]] = field(default_factory=list)
    outer: dict[tuple[int, ...], str] = field(default_factory=dict)
    value_index: list[dict[str, int]] = field(default_factory=list)
    tokens: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # lower token -> (fold, value)
    range_tokens: set[str] = field(default_factory=set)

    def size(self) -> int:
        n = 1
        for _p, vals in self.folds:
            n *= len(vals)
        for _p, _c, ivs in self.ranges:
            n *= len(ivs)
        return n

    def key(self, args: Mapping[str, Any]) -> tuple[int, ...] | None:
        """The split tool ``args`` (inner form) belong to, as fold value and range indices."""
        out: list[int] = []
        for i, (p, _vals) in enumerate(self.folds):
            if p not in args:
                return None
            j = self.value_index[i].get(_vkey(args[p]))
            if j is None:
                return None
            out.append(j)
        for p, cuts, _ivs in self.ranges:
            v = args.get(p)
            if not _is_num(v):
                return None
            out.append(bisect.bisect_right(cuts, float(v)))
        return tuple(out)


@dataclass(frozen=True)
class _Entry:
    inner: str                     # inner tool uid
    fixed: Mapping[str, Any]       # folded argument values
    order: tuple[str, ...]         # inner parameter order
    plan: _Plan
    key: tuple[int, ...]


def _observed_cuts(catalog: Catalog) -> dict[str, Number]:
    """Upper median of each numeric argument's distinct gold values (the interval split's
    default cut points), or the cut points the catalog declares (``meta["interval_cuts"]``:
    the paper's artifact ships its own, computed on its full query set); computed once per
    catalog (every interval variant asks)."""
    cached = catalog.__dict__.get("_split_observed_cuts")
    if cached is not None:
        return dict(cached)
    declared = catalog.meta.get("interval_cuts") if isinstance(catalog.meta, Mapping) else None
    if isinstance(declared, Mapping) and declared:
        observed_: dict[str, Number] = {str(k): v for k, v in declared.items() if _is_num(v)}
        object.__setattr__(catalog, "_split_observed_cuts", observed_)
        return dict(observed_)
    values: dict[str, set[Number]] = {}
    for task in catalog.tasks:
        for a in task.gold:
            tool = catalog.tool(a.domain, a.tool)
            if tool is None:
                continue
            for p, v in a.arguments.items():
                s = tool.properties.get(p)
                if isinstance(s, Mapping) and _num_type(s) and _is_num(v):
                    values.setdefault(f"{a.uid}.{p}", set()).add(v)
    observed: dict[str, Number] = {}
    for k, vs in sorted(values.items()):
        distinct = sorted(vs)
        observed[k] = distinct[len(distinct) // 2]  # upper median of the distinct values
    object.__setattr__(catalog, "_split_observed_cuts", observed)  # catalogs are immutable
    return dict(observed)


def _fold_alternatives(branches: list[Any], fixed: Mapping[str, Any]) -> list[Any]:
    """A union's alternatives once ``fixed`` values are folded into the tool name: those the
    values rule out are dropped, and the folded arguments leave the rest (a union dispatcher
    split by its discriminator keeps exactly the matching alternative)."""
    out = []
    for b in branches:
        props = b.get("properties") if isinstance(b, Mapping) else None
        if not isinstance(props, Mapping):
            out.append(b)
            continue
        rules_out = any(isinstance(props.get(p), Mapping) and (
            ("enum" in props[p] and v not in props[p]["enum"]) or ("const" in props[p] and v != props[p]["const"]))
            for p, v in fixed.items())
        if rules_out:
            continue
        nb = dict(b)
        nb["properties"] = {k: v for k, v in props.items() if k not in fixed}
        if "required" in b:
            nb["required"] = [r for r in b["required"] if r not in fixed]
        out.append(nb)
    return out


class Split(Layer):
    op = "split"
    PARAMS = ("method", "limit", "max_per_tool", "auto", "choose", "cuts", "cuts_from_tasks", "interval",
              "observed_cuts", "ratio", "seed", "select")

    METHODS = ("enum", "one_enum", "ladder", "interval")

    @classmethod
    def prepare(cls, params: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
        out = dict(params)
        wants_ranges = params.get("method", "enum") == "interval" or bool(params.get("interval"))
        if (not wants_ranges or "observed_cuts" in out or params.get("cuts_from_tasks", True) is False
                or params.get("auto", True) is False or not catalog.tasks):
            return out
        out["observed_cuts"] = _observed_cuts(catalog)
        return out

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        method = self.chosen_method(params)
        self.method = method
        self.limit = self._int_param("limit", 512, minimum=1)
        self._index = ToolIndex(self.inner)
        folds = self._choose_folds(method, params)
        ranges = self._choose_ranges(params) if method == "interval" or params.get("interval") else {}
        plans: dict[str, _Plan] = {}
        for t in self.inner:
            f = folds.get(t.uid, [])
            r = ranges.get(t.uid, [])
            if f or r:
                plans[t.uid] = _Plan(t, f, r)
        self._plans: dict[tuple[str, str], _Plan] = {}
        self._decode: dict[str, _Entry] = {}
        self.tools = self._build(plans)
        instr = []
        if any(p.folds for p in plans.values()) or method != "interval":
            instr.append(ENUM_INSTRUCTION)
        if any(p.ranges for p in plans.values()) or method == "interval":
            instr.append(INTERVAL_INSTRUCTION)
        self.instruction = " ".join(instr)

    # -- introspection ----------------------------------------------------------------
    def folds_of(self, uid: str) -> list[str]:
        """The arguments of inner tool ``uid`` folded into names (in name order)."""
        d, _, n = uid.partition("::")
        plan = self._plans.get((d, n))
        return [p for p, _v in plan.folds] if plan else []

    def cuts_of(self, uid: str) -> dict[str, list[Number]]:
        """The range-split arguments of inner tool ``uid`` and their cut points."""
        d, _, n = uid.partition("::")
        plan = self._plans.get((d, n))
        return {p: list(c) for p, c, _i in plan.ranges} if plan else {}

    # -- parameters -------------------------------------------------------------------
    def _int_param(self, key: str, default: int | None, minimum: int) -> int:
        v = self.params.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise VariantError(f"split parameter '{key}' must be an integer >= {minimum}, got {v!r}",
                               where="split step")
        return v

    def _choose_folds(self, method: str, params: Mapping[str, Any]) -> dict[str, list[tuple[str, list[Any]]]]:
        out: dict[str, list[tuple[str, list[Any]]]] = {}
        if method == "interval":
            return out
        select = params.get("select")
        if select is not None:
            return self._select(select)
        if method == "enum":
            cap = self._int_param("max_per_tool", self.limit, minimum=1) if "max_per_tool" in params else self.limit
            cap = min(cap, self.limit)
            for t in self.inner:
                n, chosen = 1, []
                for p, vals in enumerable(t):
                    if n * len(vals) <= cap:
                        chosen.append((p, vals))
                        n *= len(vals)
                if chosen:
                    out[t.uid] = chosen
        elif method == "one_enum":
            choose = str(params.get("choose", "first"))
            if choose not in ("first", "smallest", "largest"):
                raise VariantError(f"unknown choice '{choose}'", where="split step (one_enum)",
                                   fix="use first, smallest or largest")
            for t in self.inner:
                cands = [(p, v) for p, v in enumerable(t) if len(v) <= self.limit]
                if not cands:
                    continue
                if choose == "smallest":
                    pick = min(cands, key=lambda pv: len(pv[1]))
                elif choose == "largest":
                    pick = max(cands, key=lambda pv: len(pv[1]))
                else:
                    pick = cands[0]
                out[t.uid] = [pick]
        else:
            out = self._ladder(params)
        return out

    def _select(self, select: Any) -> dict[str, list[tuple[str, list[Any]]]]:
        if not isinstance(select, Mapping):
            raise VariantError("'select' must map tool names to lists of arguments", where="split step",
                               fix='write {"set_window": ["position", "state"]}')
        out: dict[str, list[tuple[str, list[Any]]]] = {}
        used: set[str] = set()
        for t in self.inner:
            key = t.uid if t.uid in select else t.name if t.name in select else None
            if key is None:
                continue
            used.add(key)
            wanted = select[key]
            if not isinstance(wanted, list):
                raise VariantError(f"'select' entry for '{key}' must be a list of argument names", where="split step")
            avail = dict(enumerable(t))
            bad = [p for p in wanted if p not in avail]
            if bad:
                raise VariantError(f"cannot fold {', '.join(map(repr, bad))} of '{t.name}': not a required "
                                   "enumerable argument", where="split step",
                                   fix=f"choose from: {', '.join(avail) or 'none'}")
            if wanted:
                out[t.uid] = [(p, avail[p]) for p in t.properties if p in wanted]
        unknown = [k for k in select if k not in used]
        if unknown:
            raise VariantError(f"'select' names unknown tool(s): {', '.join(unknown)}", where="split step")
        return out

    def _ladder(self, params: Mapping[str, Any]) -> dict[str, list[tuple[str, list[Any]]]]:
        raw = params.get("ratio")
        ratio = float(raw) if _is_num(raw) else 0.0
        if ratio < 1:
            raise VariantError(f"split ladder needs a 'ratio' >= 1 (function count relative to native), got {raw!r}",
                               where="split step", fix='e.g. {"op": "split", "method": "ladder", "ratio": 2.9}')
        seed = params.get("seed", 0)
        by_domain: dict[str, list[Tool]] = {}
        for t in self.inner:
            by_domain.setdefault(t.domain, []).append(t)
        out: dict[str, list[tuple[str, list[Any]]]] = {}
        for tools in by_domain.values():
            chains: dict[str, list[tuple[str, list[Any]]]] = {}
            for t in tools:
                chain, n = [], 1
                for p, vals in enumerable(t):
                    if n * len(vals) > self.limit:
                        break
                    chain.append((p, vals))
                    n *= len(vals)
                chains[t.uid] = chain
            order = sorted(tools, key=lambda t: hashlib.sha256(f"{seed}:{t.uid}".encode()).hexdigest())
            target = ratio * len(tools)
            count = float(len(tools))
            depth = {t.uid: 0 for t in tools}
            cost = {t.uid: 1 for t in tools}
            rounds = max((len(c) for c in chains.values()), default=0)
            for r in range(1, rounds + 1):
                for t in order:
                    chain = chains[t.uid]
                    if depth[t.uid] != r - 1 or len(chain) < r:
                        continue
                    new = cost[t.uid] * len(chain[r - 1][1])
                    if count + new - cost[t.uid] <= target + 1e-9:
                        count += new - cost[t.uid]
                        depth[t.uid], cost[t.uid] = r, new
            # one more step if it lands closer to the target than stopping short
            best: tuple[float, str] | None = None
            for t in order:
                chain = chains[t.uid]
                d = depth[t.uid]
                if d < len(chain):
                    inc = cost[t.uid] * len(chain[d][1]) - cost[t.uid]
                    if best is None or inc < best[0]:
                        best = (inc, t.uid)
            if best is not None and count + best[0] - target < target - count:
                depth[best[1]] += 1
            for t in tools:
                if depth[t.uid]:
                    out[t.uid] = chains[t.uid][: depth[t.uid]]
        return out

    def _choose_ranges(self, params: Mapping[str, Any]) -> dict[str, list[tuple[str, list[Number], list[_Interval]]]]:
        explicit = self._explicit_cuts(params.get("cuts"))
        auto = params.get("auto", True) is not False
        observed = params.get("observed_cuts") or {}
        out: dict[str, list[tuple[str, list[Number], list[_Interval]]]] = {}
        used: set[str] = set()
        for t in self.inner:
            req = set(t.required)
            for p, s in t.properties.items():
                if not isinstance(s, Mapping) or _num_type(s) is None:
                    continue
                cuts: list[Number] | None = None
                for k in (f"{t.uid}.{p}", f"{t.name}.{p}"):
                    if k in explicit:
                        cuts = explicit[k]
                        used.add(k)
                        break
                if cuts is None and auto:
                    mid = _midpoint(s)
                    if mid is not None:
                        cuts = [mid]
                    elif _is_num(observed.get(f"{t.uid}.{p}")):
                        cuts = [observed[f"{t.uid}.{p}"]]
                if not cuts or p not in req:
                    continue
                ok, ivs = _intervals(p, s, cuts)
                if ivs:
                    out.setdefault(t.uid, []).append((p, ok, ivs))
        unknown = [k for k in explicit if k not in used]
        if unknown:
            raise VariantError(f"'cuts' names argument(s) that are not numeric arguments of any tool: "
                               f"{', '.join(unknown)}", where="split step",
                               fix='key cuts by "tool.param" or "domain::tool.param"')
        # a tool split by too many ranges keeps the later arguments whole
        for uid, rs in out.items():
            n, kept = 1, []
            for r in rs:
                if n * len(r[2]) <= self.limit:
                    kept.append(r)
                    n *= len(r[2])
            out[uid] = kept
        return out

    @staticmethod
    def _explicit_cuts(raw: Any) -> dict[str, list[Number]]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise VariantError("'cuts' must map \"tool.param\" to a number or a list of numbers", where="split step")
        out: dict[str, list[Number]] = {}
        for k, v in raw.items():
            if isinstance(v, Mapping):  # {"tool": {"param": cuts}}
                for p, c in v.items():
                    out.update(Split._explicit_cuts({f"{k}.{p}": c}))
                continue
            vals = v if isinstance(v, list) else [v]
            if not vals or not all(_is_num(c) for c in vals):
                raise VariantError(f"cuts for '{k}' must be numbers, got {v!r}", where="split step")
            out[str(k)] = list(vals)
        return out

    # -- the outer schema -------------------------------------------------------------
    def _build(self, plans: Mapping[str, _Plan]) -> tuple[Tool, ...]:
        alloc = NameAllocator()
        for t in self.inner:
            if t.uid not in plans:
                alloc.reserve(t.domain, t.name)
        out: list[Tool] = []
        for t in self.inner:
            plan = plans.get(t.uid)
            if plan is None:
                out.append(t)
                continue
            self._plans[(t.domain, t.name)] = plan
            out.extend(self._split_tool(plan, alloc))
        return tuple(out)

    def _split_tool(self, plan: _Plan, alloc: NameAllocator) -> list[Tool]:
        t = plan.tool
        order = tuple(t.properties)
        fold_tokens = []
        for i, (p, vals) in enumerate(plan.folds):
            toks = _value_tokens(p, vals)
            fold_tokens.append(toks)
            plan.value_index.append({_vkey(v): j for j, v in enumerate(vals)})
            for j, tok in enumerate(toks):
                plan.tokens.setdefault(tok.lower(), []).append((i, j))
        bare = len(plan.ranges) == 1 and t.name.lower().endswith(plan.ranges[0][0].lower())
        range_tokens = []
        for p, _cuts, ivs in plan.ranges:
            toks = [iv.token if bare else f"{name_token(p) or 'x'}_{iv.token}" for iv in ivs]
            range_tokens.append(toks)
            for iv, tok in zip(ivs, toks, strict=True):
                plan.range_tokens.update({tok.lower(), iv.token.lower()})
        folded = {p for p, _v in plan.folds}
        axes = [range(len(v)) for _p, v in plan.folds] + [range(len(ivs)) for _p, _c, ivs in plan.ranges]
        tools = []
        nf = len(plan.folds)
        for combo in itertools.product(*axes):
            parts = [t.name]
            notes = []
            fixed: dict[str, Any] = {}
            for i, (p, vals) in enumerate(plan.folds):
                parts.append(fold_tokens[i][combo[i]])
                fixed[p] = vals[combo[i]]
                v = vals[combo[i]]
                notes.append(f"{p}={v if isinstance(v, str) else json.dumps(v)}")
            props = {p: s for p, s in t.properties.items() if p not in folded}
            for k, (p, _cuts, ivs) in enumerate(plan.ranges):
                iv = ivs[combo[nf + k]]
                parts.append(range_tokens[k][combo[nf + k]])
                notes.append(iv.text)
                s = {kk: vv for kk, vv in props[p].items() if kk not in _BOUND_KEYS}
                s.update(iv.bounds)
                props[p] = s
            params = {k: v for k, v in t.parameters.items() if k not in ("properties", "required")}
            if isinstance(params.get("oneOf"), list) and fixed:
                params["oneOf"] = _fold_alternatives(params["oneOf"], fixed)
            params["properties"] = props
            if "required" in t.parameters or folded:
                params["required"] = [r for r in t.required if r not in folded]
            name = alloc.add(t.domain, "__".join(parts))
            desc = (t.description.rstrip() + " " if t.description else "") + "(" + "; ".join(notes) + ")"
            new = outer_tool(t, name=name, description=desc, parameters=params)
            tools.append(new)
            plan.outer[tuple(combo)] = name
            self._decode[new.uid] = _Entry(t.uid, fixed, order, plan, tuple(combo))
        return tools

    # -- codec interface ----------------------------------------------------------------
    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        t = self._index.find(domain, call.name)
        plan = self._plans.get((t.domain, t.name)) if t is not None else None
        if plan is None:
            return [call]
        key = plan.key(call.arguments)
        name = plan.outer.get(key) if key is not None else None
        if name is None:  # not a valid action of this tool: leave it for the schema to reject
            return [call]
        folded = {p for p, _v in plan.folds}
        return [Call(name, {k: v for k, v in call.arguments.items() if k not in folded})]

    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        e = self._decode.get(tool.uid)
        if e is None:
            return Forward((call,))
        merged = {**e.fixed, **call.arguments}
        args = {k: merged[k] for k in e.order if k in merged}
        if len(args) != len(merged):
            args.update({k: v for k, v in merged.items() if k not in args})
        return Forward((Call(e.inner, args),))

    def repair(self, call: Call, domain: str) -> Call | None:
        found: list[Call] = []
        for plan, assigned in self._candidates(call.name, domain):
            c = self._complete(plan, assigned, call.arguments)
            if c is not None and c not in found:
                found.append(c)
        return found[0] if len(found) == 1 else None

    def _candidates(self, name: str, domain: str) -> list[tuple[_Plan, dict[int, int]]]:
        """(plan, folded value indices) that a possibly off-schema name could mean."""
        for d in (domain, ALL_DOMAINS):
            e = self._decode.get(f"{d}::{name}")
            if e is not None:
                nf = len(e.plan.folds)
                return [(e.plan, dict(enumerate(e.key[:nf])))]
        out = []
        parts = name.split("__")
        for i in range(1, len(parts) + 1):
            base = "__".join(parts[:i])
            t = self._index.find(domain, base)
            plan = self._plans.get((t.domain, t.name)) if t is not None else None
            if plan is None:
                continue
            assigned: dict[int, int] | None = {}
            for tok in parts[i:]:
                low = tok.lower()
                hits = plan.tokens.get(low, [])
                if len(hits) == 1 and assigned is not None:
                    fi, vj = hits[0]
                    if assigned.get(fi, vj) != vj:
                        assigned = None
                    else:
                        assigned[fi] = vj
                elif low not in plan.range_tokens:  # unknown or ambiguous token
                    assigned = None
            if assigned is not None:
                out.append((plan, assigned))
        return out

    @staticmethod
    def _complete(plan: _Plan, assigned: Mapping[int, int], args: Mapping[str, Any]) -> Call | None:
        inner_args = dict(args)
        for i, (p, vals) in enumerate(plan.folds):
            j = assigned.get(i)
            if p in args:
                k = plan.value_index[i].get(_vkey(args[p]))
                if k is None or (j is not None and j != k):
                    return None
                j = k
            if j is None:
                return None
            inner_args[p] = vals[j]
        key = plan.key(inner_args)
        if key is None:
            return None
        folded = {p for p, _v in plan.folds}
        return Call(plan.outer[key], {k: v for k, v in args.items() if k not in folded})
