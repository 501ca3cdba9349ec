"""Merge: fuse several tools into one dispatcher behind an ``operation`` discriminator.

One layer covers every merge method of the paper (Table 1, Figures 3-4, Tables 6-8);
the method is data, in the step's parameters:

``groups`` -- the grouping rule
    ``"all"`` (default): one dispatcher per scope (*fully merged*);
    ``"class"``: class-semantic groups, one per class (*class dispatch*), or brought to
    a target count by merging the classes whose tool and argument names share most
    words (or halving the largest classes) -- the granularity ladder;
    ``"random"``: a seeded random partition with the class-semantic size profile;
    ``"anti_class"``: the same size profile, each class spread over as many groups as
    possible;
    ``"none"``: no merging (with ``scope: "catalog"`` the *whole-catalog* control: every
    tool under its native name in every domain, except a name two domains share, which
    stays in its own domains);
    or an explicit list ``[{"tools": [name | "domain::name", ...], "name": ..., "encoding": ...}]``
    (unlisted tools are singletons).
``scope`` -- ``"domain"`` (default): groups within each domain; ``"catalog"``: groups
    across the whole catalog. Catalog-scope tools are visible in every domain
    (``Tool.domain == "*"``) and forward inner calls as ``"domain::name"`` uids, so equal
    names in two domains never collide; an operation of another domain than the
    episode's decodes to a native action the codec rejects (a wrong-class routing).
    Operation names shared by two members of one dispatcher are qualified
    (``tv.set_mute``). The paper's class dispatch and Table 8 controls are catalog-wide.
``key`` -- what a "class" is: ``"class"`` (``Tool.cls``, default; a tool without one is
    its own class) or ``"domain"`` (the paper's artifact names no finer classes: its
    class groups are its domains).
``functions`` (total count) | ``ratio`` (of the native count) | ``group_size`` (mean
    members per group, per scope) -- target size for ``class``/``random``/``anti_class``;
    a total is apportioned over domains by size (largest remainder).
``names`` -- ``"semantic"`` (default: after the classes of the members, ``window`` or
    ``window_sunroof``; ``into`` for ``all``) or ``"neutral"`` (``group_01`` ...).
``into`` -- the dispatcher name of ``groups: "all"`` (default ``execute``).
``encoding`` -- ``"flat"`` (``<op>::<arg>`` keys, only the discriminator required),
    ``"nested"`` (an object property per operation), ``"union"`` (a ``oneOf`` of
    per-operation objects, arguments next to the discriminator), ``"mixed"``
    (= ``["flat", "nested", "union"]``) or a list, rotated over each scope's
    dispatchers starting at ``rotation`` (paper Table 7).
``singletons`` -- a one-member group is ``"keep"`` (the native tool, unchanged) or
    ``"merge"`` (a one-operation dispatcher). Default: ``keep`` for ``functions``/``ratio``
    targets (the ladder converges on native) and ``groups: "none"``, else ``merge``.
``seed`` -- for ``random`` and ``anti_class`` (default 0).
``operation_key`` -- the discriminator's name (default ``operation``, or the first of
    ``op``, ``operation_name``, ``action`` that no argument (union) or tool (nested) uses).

Decoding forwards ``Forward(call, route=<dispatcher>, classes=<member classes>)``.
Strict decoding rejects flat keys or nested objects of other operations and missing
arguments of the chosen one with a message naming them; lenient ``repair`` accepts any
unambiguous form (flat, nested, union or an ``arguments`` object, a missing
discriminator implied by the keys, another operation's arguments dropped, an
operation routed to the wrong dispatcher, an operation name used as the tool name).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.names import fit_name, is_tool_name
from ..catalog.model import Tool
from ..errors import VariantError
from . import _grouping as grouping
from .base import ALL_DOMAINS, Call, Forward, Layer, Reject, RejectionKind, Step

ENCODINGS = ("flat", "nested", "union")
RULES = ("all", "class", "random", "anti_class", "none")
PARAMS = ("groups", "scope", "key", "functions", "ratio", "group_size", "names", "into", "encoding",
          "rotation", "singletons", "seed", "operation_key")
_WHERE = "operator 'merge'"
_PLAIN = frozenset({"type", "properties", "required", "additionalProperties", "description", "title"})
_ARGUMENT_OBJECTS = ("arguments", "args", "parameters", "params")
#: discriminator names, the first that no inner argument or tool uses
_OP_KEYS = ("operation", "op", "operation_name", "action")


def _bad(param: str, what: str, valid: Sequence[Any] | str) -> VariantError:
    listed = valid if isinstance(valid, str) else ", ".join(map(str, valid))
    return VariantError(f"parameter '{param}' {what}", where=_WHERE, fix=f"use {listed}")


# -- built structure -----------------------------------------------------------------

@dataclass
class _Member:
    op: str                    # the operation value
    tool: Tool                 # the inner tool
    target: str                # inner call name to forward (a name, or a uid in catalog scope)
    flat: dict[str, str]       # argument -> flat key
    required: frozenset[str]
    props: frozenset[str]
    open: bool                 # the inner schema admits unlisted arguments


@dataclass
class _Dispatcher:
    tool: Tool
    encoding: str
    op_key: str
    ops: dict[str, _Member]
    classes: tuple[str, ...]
    flat_index: dict[str, tuple[str, str]] = field(default_factory=dict)  # flat key -> (op, argument)
    aliases: dict[str, list[str]] = field(default_factory=dict)           # name/uid/op -> ops

    def encode_args(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {self.op_key: op}
        if self.encoding == "flat":
            m = self.ops[op]
            out.update((m.flat.get(a) or f"{op}::{a}", v) for a, v in args.items())
        elif self.encoding == "nested":
            if args:
                out[op] = dict(args)
        else:
            out.update(args)
        return out

    def resolve(self, name: Any, domain: str) -> str | None:
        """The operation ``name`` means here: an operation, a member's name or uid; a name
        shared by members of several domains means the episode domain's."""
        if not isinstance(name, str):
            return None
        ops = self.aliases.get(name)
        if not ops:
            return None
        if len(ops) == 1:
            return ops[0]
        own = [op for op in ops if self.ops[op].tool.domain in (domain, ALL_DOMAINS)]
        return own[0] if len(own) == 1 else None


@dataclass
class _Kept:
    tool: Tool      # the outer tool (the inner one, possibly made catalog-wide)
    target: str     # inner call name to forward


@dataclass
class _Group:
    members: list[Tool]
    name: str = ""
    encoding: str | None = None
    explicit_name: bool = False


# -- the layer -------------------------------------------------------------------------

class Merge(Layer):
    """Dispatchers over groups of tools; see the module docstring for the parameters."""

    op = "merge"
    PARAMS = PARAMS

    def __init__(self, inner: Sequence[Tool], params: Mapping[str, Any]) -> None:
        super().__init__(inner, params)
        p = self.params
        self.scope = self._choice("scope", ("domain", "catalog"), "domain")
        self.key = self._choice("key", ("class", "domain"), "class")
        self.names = self._choice("names", ("semantic", "neutral"), "semantic")
        rule = p.get("groups", "all")
        explicit = isinstance(rule, list)
        if not explicit and rule not in RULES:
            raise _bad("groups", f"must be a rule or a list of groups, got {rule!r}",
                       RULES + ('[{"tools": [...], "name": ...}]',))
        self.rule = "explicit" if explicit else str(rule)
        self.encodings = self._encodings(p.get("encoding", "flat"))
        self.rotation = self._int("rotation", 0, 0)
        self.seed = self._int("seed", 0, None)
        encs = set(ENCODINGS) if explicit else set(self.encodings)
        used = ({a for t in self.inner for a in t.properties} if "union" in encs else set()) | (
            {t.name for t in self.inner} if "nested" in encs else set())
        self.op_key = p.get("operation_key") or next(
            (k for k in _OP_KEYS if k not in used),
            next(f"operation_{i}" for i in range(2, len(used) + 3) if f"operation_{i}" not in used))
        if not is_tool_name(self.op_key):
            raise _bad("operation_key", f"must be a plain identifier, got {self.op_key!r}", "e.g. 'operation'")
        into = p.get("into", "execute")
        if not is_tool_name(into):
            raise _bad("into", f"must be a tool name (^[a-zA-Z0-9_-]{{1,64}}$), got {into!r}", "e.g. 'execute'")
        self.into = into
        targets = [k for k in ("functions", "ratio", "group_size") if k in p]
        if len(targets) > 1:
            raise VariantError(f"parameters {' and '.join(map(repr, targets))} both set a target size",
                               where=_WHERE, fix="give only one of 'functions', 'ratio', 'group_size'")
        if targets and self.rule not in ("class", "random", "anti_class"):
            raise _bad(targets[0], f"sets a group count, which groups={self.rule!r} fixes",
                       "groups 'class', 'random' or 'anti_class' with a target size")
        self.target = targets[0] if targets else None
        ladder = self.target in ("functions", "ratio") or self.rule == "none"
        self.singletons = self._choice("singletons", ("keep", "merge"), "keep" if ladder else "merge")

        units = self._units()
        counts = self._counts(units)
        self._outer: dict[tuple[str, str], _Dispatcher | _Kept] = {}
        self._index: dict[tuple[str, str], tuple[_Dispatcher | _Kept, str]] = {}  # inner key -> entry, op
        self._visible: dict[str, dict[str, list[tuple[_Dispatcher, str]]]] = {}
        self._build(units, counts)
        self.instruction = self._instruction()

    # -- parameters ------------------------------------------------------------------
    def _choice(self, name: str, valid: Sequence[str], default: str) -> str:
        value = self.params.get(name, default)
        if value not in valid:
            raise _bad(name, f"must be one of {', '.join(map(repr, valid))}, got {value!r}", valid)
        return str(value)

    def _int(self, name: str, default: int, lo: int | None) -> int:
        value = self.params.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or (lo is not None and value < lo):
            raise _bad(name, f"must be an integer{f' >= {lo}' if lo is not None else ''}, got {value!r}",
                       "e.g. 0")
        return value

    def _encodings(self, value: Any) -> list[str]:
        if value == "mixed":
            return list(ENCODINGS)
        listed = [value] if isinstance(value, str) else value
        if not isinstance(listed, list) or not listed or any(e not in ENCODINGS for e in listed):
            raise _bad("encoding", f"must be one of flat, nested, union, mixed or a list of them, got {value!r}",
                       ENCODINGS + ("mixed", '["flat", "union"]'))
        return [str(e) for e in listed]

    # -- grouping --------------------------------------------------------------------
    def _units(self) -> dict[str, list[Tool]]:
        """Scope -> its inner tools: each domain (``*`` first), or the whole catalog."""
        if self.scope == "catalog":
            return {ALL_DOMAINS: list(self.inner)} if self.inner else {}
        units: dict[str, list[Tool]] = {}
        if any(t.domain == ALL_DOMAINS for t in self.inner):
            units[ALL_DOMAINS] = []
        for t in self.inner:
            units.setdefault(t.domain, []).append(t)
        return units

    def _counts(self, units: Mapping[str, list[Tool]]) -> dict[str, int | None]:
        sizes = {u: len(ts) for u, ts in units.items()}
        n = sum(sizes.values())
        if self.target is None:
            return dict.fromkeys(units)
        value = self.params[self.target]
        if self.target == "group_size":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
                raise _bad("group_size", f"must be a number >= 1, got {value!r}", "e.g. 4")
            return {u: max(1, min(s, round(s / value))) for u, s in sizes.items()}
        if self.target == "ratio":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise _bad("ratio", f"must be a number in (0, 1], got {value!r}", "e.g. 0.29, 0.46, 0.69, 0.85")
            total = max(len(units), round(value * n))
        else:
            total = value
            if isinstance(total, bool) or not isinstance(total, int) or not len(units) <= total <= n:
                raise _bad("functions", f"must be an integer between {len(units)} (one per scope) and {n} "
                           f"(the inner tool count), got {value!r}", f"{len(units)}..{n}")
        return dict(zip(units, grouping.apportion(list(sizes.values()), total), strict=True))

    def _class_of(self, t: Tool) -> str:
        if self.key == "domain":
            return t.domain
        return t.cls or t.name

    @staticmethod
    def _words(t: Tool) -> frozenset[str]:
        """What a tool is about: the content words of its name and its argument names."""
        words = grouping.tokens(t.name)
        for a in t.properties:
            words |= grouping.tokens(a)
        return words

    def _partition(self, unit: str, tools: list[Tool], k: int | None) -> list[_Group]:
        if self.rule == "all":
            return [_Group(list(tools))]
        if self.rule == "none":
            return [_Group([t]) for t in tools]
        items = [grouping.Item(self._class_of(t), self._words(t)) for t in tools]
        parts = grouping.semantic(items, k)
        if self.rule == "random":
            parts = grouping.random_like(len(tools), [len(g) for g in parts], self.seed, unit)
        elif self.rule == "anti_class":
            parts = grouping.anti_class(items, [len(g) for g in parts], self.seed, unit)
        return [_Group([tools[i] for i in g]) for g in parts]

    def _explicit(self) -> dict[str, list[_Group]]:
        spec = self.params["groups"]
        by_uid = {t.uid: t for t in self.inner}
        by_name: dict[str, list[Tool]] = {}
        for t in self.inner:
            by_name.setdefault(t.name, []).append(t)
        used: set[str] = set()
        units: dict[str, list[_Group]] = {}
        for i, g in enumerate(spec):
            where = f"{_WHERE}, groups[{i}]"
            if not isinstance(g, Mapping) or not isinstance(g.get("tools"), list) or not g["tools"]:
                raise VariantError("each group must be an object with a non-empty 'tools' list", where=where,
                                   fix='write {"tools": ["set_window", "car::set_seat"], "name": "window"}')
            extra = sorted(set(g) - {"tools", "name", "into", "encoding", "domain"})
            if extra:
                raise VariantError(f"unknown group key(s) {', '.join(map(repr, extra))}", where=where,
                                   fix="use tools, name (or into), encoding, domain")
            members = []
            for ref in g["tools"]:
                ref = str(ref)
                if "::" not in ref and "domain" in g:
                    ref = f"{g['domain']}::{ref}"
                hits = [by_uid[ref]] if ref in by_uid else by_name.get(ref, [])
                if len(hits) != 1:
                    why = "is ambiguous" if hits else "is not a tool of the inner schema"
                    options = ", ".join(t.uid for t in hits) or "a name or 'domain::name' uid"
                    raise VariantError(f"tool '{ref}' {why}", where=where, fix=f"write one of: {options}")
                if hits[0].uid in used:
                    raise VariantError(f"tool '{hits[0].uid}' is in two groups", where=where,
                                       fix="put every tool in at most one group")
                used.add(hits[0].uid)
                members.append(hits[0])
            domains = {t.domain for t in members}
            if self.scope == "domain" and len(domains) > 1:
                raise VariantError(f"group mixes domains {', '.join(sorted(domains))}", where=where,
                                   fix='set "scope": "catalog" for cross-domain groups')
            name = g.get("name", g.get("into"))
            if name is not None and not is_tool_name(name):
                raise VariantError(f"group name {name!r} is not a valid tool name", where=where,
                                   fix="use ^[a-zA-Z0-9_-]{1,64}$")
            enc = g.get("encoding")
            if enc is not None and enc not in ENCODINGS:
                raise VariantError(f"encoding {enc!r} unknown", where=where, fix=f"use {', '.join(ENCODINGS)}")
            unit = ALL_DOMAINS if self.scope == "catalog" else members[0].domain
            units.setdefault(unit, []).append(_Group(members, name or "", enc, explicit_name=name is not None))
        for t in self.inner:  # unlisted tools are singletons
            if t.uid not in used:
                unit = ALL_DOMAINS if self.scope == "catalog" else t.domain
                units.setdefault(unit, []).append(_Group([t]))
        position = {t.uid: i for i, t in enumerate(self.inner)}
        for groups in units.values():
            groups.sort(key=lambda g: min(position[t.uid] for t in g.members))
        return units

    # -- building --------------------------------------------------------------------
    def _build(self, units: Mapping[str, list[Tool]], counts: Mapping[str, int | None]) -> None:
        grouped = self._explicit() if self.rule == "explicit" else {
            u: self._partition(u, ts, counts[u]) for u, ts in units.items()}
        inner_names: dict[str, set[str]] = {}
        for t in self.inner:
            inner_names.setdefault(t.domain, set()).add(t.name)
        all_names = {t.name for t in self.inner}
        name_count = Counter(t.name for t in self.inner)
        claimed: dict[str, set[str]] = {}
        out: list[Tool] = []
        for unit, groups in grouped.items():
            if unit == ALL_DOMAINS:
                reserved = set(all_names)
            else:
                reserved = inner_names.get(unit, set()) | inner_names.get(ALL_DOMAINS, set())
                reserved |= claimed.get(ALL_DOMAINS, set())
            taken = claimed.setdefault(unit, set())
            dispatchers = [g for g in groups if len(g.members) > 1 or self.singletons == "merge"
                           or g.explicit_name]
            width = max(2, len(str(len(dispatchers))))
            for j, g in enumerate(dispatchers):
                g.name = self._claim(self._label(g, j, width), reserved | taken)
                taken.add(g.name)
                g.encoding = g.encoding or self.encodings[(j + self.rotation) % len(self.encodings)]
            for g in groups:
                if g.name:
                    out.append(self._dispatcher(unit, g))
                    continue
                t = g.members[0]
                if unit == ALL_DOMAINS and t.domain != ALL_DOMAINS:
                    # catalog-wide under its own name when that name is unique, else left in its domain
                    domain = ALL_DOMAINS if name_count[t.name] == 1 and t.name not in taken else t.domain
                    outer = Tool(t.name, t.description, t.parameters, domain, t.cls, t.effect)
                    kept = _Kept(outer, t.uid)
                else:
                    kept = _Kept(t, t.name)
                self._outer[(kept.tool.domain, kept.tool.name)] = kept
                self._index[(t.domain, t.name)] = (kept, "")
                out.append(kept.tool)
        self.tools = tuple(out)

    def _label(self, g: _Group, j: int, width: int) -> str:
        if g.explicit_name:
            return g.name
        if self.names == "neutral":
            return f"group_{j + 1:0{width}d}"
        if self.rule == "all":
            return self.into
        counts = Counter(self._class_of(t) for t in g.members)
        first = {c: i for i, c in reversed(list(enumerate(self._class_of(t) for t in g.members)))}
        top = sorted(counts, key=lambda c: (-counts[c], first[c]))[:2]
        return "_".join(top)

    @staticmethod
    def _claim(label: str, taken: set[str]) -> str:
        base = fit_name(label)
        if base in taken:
            base = fit_name(f"{label}_ops")
        name, i = base, 2
        while name in taken:
            suffix = f"_{i}"
            name = base[:64 - len(suffix)] + suffix
            i += 1
        return name

    def _dispatcher(self, unit: str, g: _Group) -> Tool:
        enc = g.encoding or "flat"
        k = self.op_key
        counts = Counter(t.name for t in g.members)
        members: dict[str, _Member] = {}
        for t in g.members:
            op = t.name if counts[t.name] == 1 else f"{t.domain}.{t.name}"
            if op in members or (enc == "nested" and op == k):
                raise VariantError(f"operation name '{op}' clashes in dispatcher '{g.name}'", where=_WHERE,
                                   fix="set 'operation_key' to a name no tool uses")
            plain = not (set(t.parameters) - _PLAIN)
            open_ = t.parameters.get("additionalProperties", False) is not False
            if enc in ("flat", "union") and not plain:
                raise VariantError(f"tool '{t.uid}' has a parameter schema with combinators, which the "
                                   f"{enc} encoding cannot spread", where=_WHERE, fix="use encoding 'nested'")
            if enc == "flat" and open_:
                raise VariantError(f"tool '{t.uid}' accepts unlisted arguments (additionalProperties), which "
                                   "flat keys cannot carry", where=_WHERE, fix="use encoding 'nested' or 'union'")
            if enc == "union" and k in t.properties:
                raise VariantError(f"tool '{t.uid}' has an argument named '{k}', the union discriminator",
                                   where=_WHERE, fix="set 'operation_key' to a name no argument uses")
            target = t.uid if unit == ALL_DOMAINS else t.name
            flat = {a: f"{op}::{a}" for a in t.properties}
            members[op] = _Member(op, t, target, flat, frozenset(t.required), frozenset(t.properties), open_)
        classes = tuple(dict.fromkeys(t.cls for t in g.members if t.cls))
        outer = Tool(g.name, self._description(g.name, list(members), enc),
                     self._schema(members, enc), unit,
                     cls=classes[0] if len(classes) == 1 else "")
        d = _Dispatcher(outer, enc, k, members, classes)
        for op, m in members.items():
            for a, key in m.flat.items():
                if key in d.flat_index:
                    raise VariantError(f"flat key '{key}' is ambiguous in dispatcher '{g.name}'", where=_WHERE,
                                       fix="use encoding 'nested' or 'union'")
                d.flat_index[key] = (op, a)
            for alias in dict.fromkeys((op, m.tool.name, m.tool.uid)):
                d.aliases.setdefault(alias, []).append(op)
            self._index[(m.tool.domain, m.tool.name)] = (d, op)
        self._outer[(unit, g.name)] = d
        return outer

    def _schema(self, members: Mapping[str, _Member], enc: str) -> dict[str, Any]:
        k = self.op_key
        disc = {"type": "string", "enum": list(members),
                "description": "The operation to run: " + "; ".join(
                    f"{op} ({m.tool.description.strip().rstrip('.')})" if m.tool.description.strip() else op
                    for op, m in members.items()) + "."}
        if enc == "flat":
            props: dict[str, Any] = {k: disc}
            for m in members.values():
                for a, s in m.tool.properties.items():
                    props[m.flat[a]] = s  # shared, read-only (tools are immutable)
            return {"type": "object", "properties": props, "required": [k]}
        if enc == "nested":
            props = {k: disc}
            for op, m in members.items():
                sub = dict(m.tool.parameters)
                sub.setdefault("type", "object")
                sub.setdefault("properties", {})
                if m.tool.description:
                    sub["description"] = m.tool.description
                props[op] = sub
            return {"type": "object", "properties": props, "required": [k]}
        branches = []
        for op, m in members.items():
            branch: dict[str, Any] = {"type": "object", "title": op}
            if m.tool.description:
                branch["description"] = m.tool.description
            branch["properties"] = {k: {"type": "string", "enum": [op]}, **m.tool.properties}
            branch["required"] = [k, *m.tool.required]
            branch["additionalProperties"] = m.tool.parameters.get("additionalProperties", False)
            branches.append(branch)
        return {"type": "object", "properties": {k: disc}, "required": [k], "additionalProperties": True,
                "oneOf": branches}

    def _description(self, name: str, ops: list[str], enc: str) -> str:
        k = self.op_key
        head = (f"Dispatcher for the operation {ops[0]}." if len(ops) == 1 else
                f"Dispatcher for {len(ops)} operations: {', '.join(ops)}.")
        how = {"flat": f"pass each of its arguments under the key <{k}>::<argument>",
               "nested": f"put its arguments in the object named after the {k}",
               "union": f"pass its arguments next to {k}, as that {k}'s alternative in the schema lists them"}[enc]
        return f"{head} Set {k} to the one you need and {how}."

    def _instruction(self) -> str | None:
        dispatchers = [e for e in self._outer.values() if isinstance(e, _Dispatcher)]
        if not dispatchers:
            return None
        k = self.op_key
        encs = {d.encoding for d in dispatchers}
        some = any(isinstance(e, _Kept) for e in self._outer.values())
        if len(encs) > 1:
            tail = (f"pass its arguments in the form that tool's schema defines: keys <{k}>::<argument>, an "
                    f"object named after the {k}, or the arguments next to {k}.")
        else:
            tail = {"flat": f"pass each of its arguments under the key <{k}>::<argument>.",
                    "nested": f"put its arguments in the object named after the {k}.",
                    "union": f"pass its arguments next to {k}, as the schema's alternative for that {k} "
                             "lists them."}[encs.pop()]
        if self.rule == "all" and not some:
            return f"All operations go through a single dispatcher tool. Set {k} to the operation you need and {tail}"
        if self.rule == "class" and self.target is None and self.names == "semantic" and not some:
            method_tail = tail.replace(f"<{k}>", "<method>").replace(f"that {k}", "that method").replace(
                f"after the {k}", "after the method").replace("each of its arguments", "each argument")
            return (f"Each class has one dispatcher tool named after the class. Call the tool of the right class, "
                    f"set {k} to the method you need, and {method_tail}")
        who = "Some operations are" if some else "Operations are"
        return (f"{who} grouped into dispatcher tools. Call the tool whose {k} list contains the operation "
                f"you need, set {k} to it, and {tail}")

    def groups(self) -> list[dict[str, Any]]:
        """The dispatchers, in schema order: name, domain, encoding, the discriminator, its
        operation values, the members' uids and classes (for reports and tests)."""
        return [{"name": e.tool.name, "domain": e.tool.domain, "encoding": e.encoding, "operation_key": e.op_key,
                 "operations": list(e.ops), "members": [m.tool.uid for m in e.ops.values()],
                 "classes": list(e.classes)}
                for e in self._outer.values() if isinstance(e, _Dispatcher)]

    # -- encoding --------------------------------------------------------------------
    def _find(self, domain: str, name: str) -> tuple[_Dispatcher | _Kept, str] | None:
        if "::" in name:
            d, _, n = name.partition("::")
            return self._index.get((d, n))
        return self._index.get((domain, name)) or self._index.get((ALL_DOMAINS, name))

    def encode(self, call: Call, domain: str, state: Any) -> list[Call]:
        hit = self._find(domain, call.name)
        if hit is None:
            return [call]
        entry, op = hit
        if isinstance(entry, _Kept):
            return [Call(entry.tool.name, dict(call.arguments))]
        return [Call(entry.tool.name, entry.encode_args(op, call.arguments))]

    # -- decoding --------------------------------------------------------------------
    def decode(self, call: Call, tool: Tool, state: Any) -> Step:
        entry = self._outer.get((tool.domain, tool.name))
        if entry is None:
            return Forward((call,))
        if isinstance(entry, _Kept):
            return Forward((Call(entry.target, call.arguments),))
        d = entry
        args = call.arguments
        op = args[d.op_key]
        m = d.ops[op]
        if d.encoding == "union":
            inner = {a: v for a, v in args.items() if a != d.op_key}
        elif d.encoding == "nested":
            foreign = [key for key in args if key != d.op_key and key != op]
            if foreign:
                return self._foreign(d, m, foreign)
            inner = dict(args.get(op) or {})
        else:
            inner = {}
            foreign = []
            for key, v in args.items():
                if key == d.op_key:
                    continue
                hit = d.flat_index[key]
                if hit[0] != op:
                    foreign.append(key)
                else:
                    inner[hit[1]] = v
            if foreign:
                return self._foreign(d, m, foreign)
        missing = [a for a in m.tool.required if a not in inner]
        if missing:
            shown = ", ".join(self._form(d, m, a) for a in missing)
            return Reject(RejectionKind.INVALID_ARGUMENTS,
                          f"Invalid arguments for '{d.tool.name}': operation '{op}' needs {shown}.")
        return Forward((Call(m.target, inner),), route=d.tool.name, classes=d.classes)

    @staticmethod
    def _form(d: _Dispatcher, m: _Member, arg: str) -> str:
        if d.encoding == "flat":
            return f"'{m.flat[arg]}'"
        if d.encoding == "nested":
            return f"'{m.op}.{arg}'"
        return f"'{arg}'"

    def _foreign(self, d: _Dispatcher, m: _Member, foreign: list[str]) -> Reject:
        owners = []
        for key in foreign:
            owner = d.flat_index[key][0] if d.encoding == "flat" else key
            owners.append(f"'{key}' (operation '{owner}')")
        own = ", ".join(self._form(d, m, a) for a in m.tool.properties) or "no arguments"
        return Reject(RejectionKind.INVALID_ARGUMENTS,
                      f"Invalid arguments for '{d.tool.name}': {d.op_key} '{m.op}' takes {own}; remove "
                      f"{', '.join(owners)}, which belong to other operations.")

    # -- lenient repair ----------------------------------------------------------------
    def _dispatchers_in(self, domain: str) -> dict[str, list[tuple[_Dispatcher, str]]]:
        """Alias -> (dispatcher, operation) over the dispatchers visible in ``domain``, for
        operations ``domain`` can run (another domain's would be rejected anyway)."""
        cached = self._visible.get(domain)
        if cached is None:
            cached = {}
            for (dom, _), e in self._outer.items():
                if isinstance(e, _Dispatcher) and dom in (domain, ALL_DOMAINS):
                    for alias in e.aliases:
                        op = e.resolve(alias, domain)
                        if op is not None and e.ops[op].tool.domain in (domain, ALL_DOMAINS):
                            cached.setdefault(alias, []).append((e, op))
            self._visible[domain] = cached
        return cached

    def _route(self, d: _Dispatcher | None, name: Any, domain: str) -> tuple[_Dispatcher, str] | None:
        """The dispatcher and operation ``name`` means: ``d``'s own, else the only visible one."""
        if d is not None:
            op = d.resolve(name, domain)
            if op is not None:
                return d, op
        if not isinstance(name, str):
            return None
        hits = self._dispatchers_in(domain).get(name, [])
        return hits[0] if len(hits) == 1 else None

    def repair(self, call: Call, domain: str) -> Call | None:
        entry = self._outer.get((domain, call.name)) or self._outer.get((ALL_DOMAINS, call.name))
        d = entry if isinstance(entry, _Dispatcher) else None
        args = dict(call.arguments)
        fixed = None
        if d is None:  # an operation's name used as the tool name
            fixed = self._route(None, call.name, domain)
            if fixed is None:
                return None
        chosen = self._choose(d, fixed, args, domain)
        if chosen is None:
            return None
        disp, op = chosen
        inner = self._collect(disp, op, args, domain)
        if inner is None:
            return None
        return Call(disp.tool.name, disp.encode_args(op, inner))

    def _choose(self, d: _Dispatcher | None, fixed: tuple[_Dispatcher, str] | None, args: Mapping[str, Any],
                domain: str) -> tuple[_Dispatcher, str] | None:
        keys = [d.op_key] if d is not None else []
        if fixed is not None:
            keys = [fixed[0].op_key]
        stated = next((args[k] for k in keys if k in args), None)
        if fixed is not None:
            if stated is not None and self._route(fixed[0], stated, domain) != fixed:
                return None
            return fixed
        if stated is not None:
            return self._route(d, stated, domain)
        assert d is not None
        # no discriminator: the operation the keys name, if exactly one
        named = set()
        for key, v in args.items():
            prefix = key.rpartition("::")[0] if "::" in key else (key if isinstance(v, Mapping) else "")
            op = d.resolve(prefix, domain) if prefix else None
            if op is not None:
                named.add(op)
        if len(named) == 1:
            return d, named.pop()
        if named:
            return None
        plain = {k for k in args if "::" not in k}
        fits = [op for op, m in d.ops.items() if plain <= m.props and m.required <= plain]
        return (d, fits[0]) if len(fits) == 1 else None

    def _collect(self, d: _Dispatcher, op: str, args: Mapping[str, Any], domain: str) -> dict[str, Any] | None:
        m = d.ops[op]
        inner: dict[str, Any] = {}

        def put(a: str, v: Any) -> bool:
            if a in inner and inner[a] != v:
                return False
            inner[a] = v
            return True

        for key, v in args.items():
            if key == d.op_key:
                continue
            if "::" in key:
                prefix, _, a = key.rpartition("::")
                owner = d.resolve(prefix, domain)
                if owner == op:
                    if not put(a, v):
                        return None
                elif owner is None and self._route(None, prefix, domain) is None:
                    return None  # a prefix that names no operation
                continue  # another operation's argument: dropped
            if isinstance(v, Mapping) and key not in m.props:  # an object of arguments
                owner = op if key in _ARGUMENT_OBJECTS else d.resolve(key, domain)
                if owner == op:
                    if not all(put(a, x) for a, x in v.items()):
                        return None
                elif owner is None and self._route(None, key, domain) is None:
                    return None
                continue  # another operation's object: dropped
            if key in m.props or m.open:
                if not put(key, v):
                    return None
                continue
            return None  # a key that belongs to nothing: not unambiguous
        if not m.required <= inner.keys() or (not m.open and not inner.keys() <= m.props):
            return None
        return inner


__all__ = ["ENCODINGS", "RULES", "Merge"]
