"""The variant the paper's schema proxy shows for a request's native tools (``--protocol paper``).

The schema-bias artifact's proxy (``toolschema/proxy.py``) builds its variant from the tools of
each request, not from a catalog: every tool is first read into the artifact's canonical form
(:func:`canonical`: ``$ref``/``allOf``/``anyOf`` flattened, and a string argument whose
description names a closed set of values given that set as its ``enum``), then one of its
operators (:data:`OPERATORS`, named after the paper's representative variants) is written as a
spec of the artifact's ops (:func:`operator_ops`) and built by toolbias's rendering of the
artifact's constructions (:mod:`toolbias.operators.paper`). Classes (class dispatch, namespaced
names, schema discovery) are a tool's ``--classes`` entry, else the text of its name before the
first ``_``; interval cuts are a ``"tool.param"`` entry of ``--cuts``, else the argument's
numeric default, else 10.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolbiasError
from ..operators.paper import Route, canonical, compile_ops, hierarchy, openai_tool, prose_enum
from ..study.paper_protocol import TRANSACTION_INSTRUCTION

#: the artifact's operator names, and the paper variant (toolbias's ``paper.<name>``) each stands for
OPERATORS: dict[str, str] = {
    "native": "native", "merge": "fully_merged", "merge_app": "class_dispatch", "split": "fully_split",
    "pred": "interval_split", "nest": "nested_args", "rename_ns": "namespaced_names",
    "rename_opaque": "opaque_names", "strip": "strip_descriptions", "reorder": "reorder_arguments",
    "transaction": "transaction", "disclose": "schema_discovery", "composed": "composed",
}
#: the note the proxy adds to the prompt for the multi-step protocols
PROTOCOL_NOTES = {
    "transaction": TRANSACTION_INSTRUCTION,
    "disclose": ("Tool argument schemas are progressively disclosed. First call `list_methods` for the relevant "
                 "class, then call `invoke` using the exact method name and argument schema returned by that "
                 "result."),
}
#: the default interval cut, and the seed of the argument reordering
DEFAULT_CUT = 10
REORDER_SEED = 13


class UnknownOperator(ToolbiasError):
    """``--protocol paper`` given a variant the paper's proxy has no operator for."""


def operator_of(variant: str) -> str:
    """The artifact's operator for ``variant``: an operator name (``merge``), or the paper variant it
    stands for, with or without the ``paper.`` prefix (``fully_merged``, ``paper.fully_merged``)."""
    name = variant.removeprefix("paper.")
    if name in OPERATORS:
        return name
    for op, paper in OPERATORS.items():
        if paper == name:
            return op
    raise UnknownOperator(what=f"the paper's proxy has no operator for variant '{variant}'", where="--variant",
                          fix="use one of: " + ", ".join(f"{op} ({paper})" for op, paper in OPERATORS.items()))


# -- the operator as a spec of the artifact's ops ------------------------------------------

@dataclass(frozen=True)
class Settings:
    """``--classes`` ({tool: class}) and ``--cuts`` ({"tool.param": cut})."""

    classes: Mapping[str, str] = field(default_factory=dict)
    cuts: Mapping[str, float] = field(default_factory=dict)

    def class_of(self, tool: str) -> str:
        return self.classes.get(tool) or (tool.split("_", 1)[0] if "_" in tool else tool)

    def cut(self, tool: Mapping[str, Any], param: str) -> float:
        key = f"{tool['name']}.{param}"
        if key in self.cuts:
            return self.cuts[key]
        default = _props(tool)[param].get("default")
        return default if isinstance(default, (int, float)) and not isinstance(default, bool) else DEFAULT_CUT


def _props(tool: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = tool["parameters"].get("properties", {})
    return found


def _required(tool: Mapping[str, Any], test: Any) -> list[str]:
    needed = set(tool["parameters"].get("required", []))
    return [p for p, s in _props(tool).items() if p in needed and test(p, s)]


def enum_params(tool: Mapping[str, Any]) -> list[str]:
    """Required arguments with an enum, or boolean: the ones the split bakes into names."""
    return _required(tool, lambda p, s: "enum" in s or s.get("type") == "boolean")


def numeric_params(tool: Mapping[str, Any]) -> list[str]:
    """Required numbers that are quantities (a name ending in ``id`` is an identifier, never split)."""
    return _required(tool, lambda p, s: s.get("type") in ("integer", "number") and not p.lower().endswith("id"))


def operator_ops(op: str, tools: Sequence[Mapping[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """The artifact's spec ops that operator ``op`` means on these canonical tools."""
    names = [str(t["name"]) for t in tools]
    many = [t for t in tools if len(_props(t)) >= 2]

    def interval(t: Mapping[str, Any], skip: Sequence[str] = ()) -> list[dict[str, Any]]:
        return [{"op": "split_predicate", "tool": t["name"], "param": p, "cuts": [settings.cut(t, p)]}
                for p in numeric_params(t) if p not in skip]

    if op == "native":
        return []
    if op == "merge":
        return [{"op": "merge", "tools": names, "into": "execute"}]
    if op == "merge_app":
        groups: OrderedDict[str, list[str]] = OrderedDict()
        for n in names:
            groups.setdefault(settings.class_of(n), []).append(n)
        return [{"op": "merge", "tools": g, "into": f"{c}_execute"} for c, g in groups.items()]
    if op == "nest":
        return [{"op": "arg_lower", "tool": t["name"], "into": "options", "params": list(_props(t))} for t in many]
    if op == "rename_opaque":
        return [{"op": "rename", "tool": n, "to": "fn_" + hashlib.sha1(n.encode()).hexdigest()[:6]} for n in names]
    if op == "rename_ns":
        return [{"op": "rename", "tool": n, "to": f"{settings.class_of(n)}__{n}"} for n in names]
    if op == "strip":
        return [{"op": "strip_desc", "tool": n} for n in names]
    if op == "reorder":
        return [{"op": "shuffle_params", "tool": n, "seed": REORDER_SEED} for n in names]
    if op == "transaction":
        return [{"op": "curry", "tool": t["name"]} for t in many]
    if op == "split":
        return [{"op": "split_enum", "tool": t["name"], "params": enum_params(t)} for t in tools if enum_params(t)]
    if op == "pred":
        return [o for t in tools for o in interval(t)]
    if op == "composed":  # odd-indexed tools merged (two or more), even-indexed split on enums, then numbers
        ops: list[dict[str, Any]] = []
        if len(names[1::2]) >= 2:
            ops.append({"op": "merge", "tools": names[1::2], "into": "execute"})
        for t in tools[0::2]:
            if enum_params(t):
                ops.append({"op": "split_enum", "tool": t["name"], "params": enum_params(t)})
            ops += interval(t, skip=enum_params(t))
        return ops
    raise UnknownOperator(what=f"unknown operator '{op}'", where="--variant", fix=f"use one of: {', '.join(OPERATORS)}")


#: the domain the proxy's routes act in (a request's tools have none)
DOMAIN = "proxy"


@dataclass
class ProxyVariant:
    """One operator built on one request's tools: the tools the model sees, each tool's route."""

    op: str
    tools: list[dict[str, Any]]
    routes: dict[str, Route]
    discovery: bool = False


def build_variant(op: str, request_tools: Sequence[Mapping[str, Any]], settings: Settings) -> ProxyVariant:
    """The variant ``op`` on a request's native tools (see the module doc)."""
    canon = [canonical(t) for t in request_tools]
    if op == "disclose":
        surface = hierarchy([(settings.class_of(str(t["name"])), t) for t in canon], "disclose")
    else:
        surface = compile_ops(DOMAIN, canon, operator_ops(op, canon, settings), f"proxy operator {op}")
    return ProxyVariant(op, [openai_tool(s) for s, _ in surface.tools], {str(s["name"]): r for s, r in surface.tools},
                        discovery=op == "disclose")


__all__ = ["DOMAIN", "OPERATORS", "PROTOCOL_NOTES", "ProxyVariant", "Settings", "UnknownOperator", "build_variant",
           "canonical", "enum_params", "numeric_params", "openai_tool", "operator_ops", "operator_of", "prose_enum"]
