"""Import the schema-bias paper artifact's variant spec files as toolbias variants.

The artifact (``benchmarks/synthetic/data/specs/*.json``) writes a variant in one of
two forms:

* ``{"ops": [{"op": KIND, "tool": NAME, "group": DOMAIN, ...}, ...]}``: per-tool
  operations, compiled in file order;
* ``{"arm": ..., "encoding": ..., "groups": [{"into": NAME, "members": [[DOMAIN, TOOL], ...]}]}``:
  a whole-catalog class-grouping arm (Table 8).

:func:`import_spec` maps them onto toolbias steps. Op kinds of one file become one
step per toolbias operator, ordered merge, split, nest, reorder, rename, strip and
the cross-call protocol last:

=================  ==============================================================
artifact op        toolbias step
=================  ==============================================================
``merge``          ``merge`` with explicit ``groups`` (name = ``into``, per-group
                   ``encoding``), unlisted tools unchanged (``singletons: keep``)
groups form        ``merge`` with ``scope: catalog`` and the arm's groups
``split_enum``     ``split`` ``method: enum`` with ``select`` {tool: params}
``split_predicate``  ``split`` ranges with explicit ``cuts`` {tool.param: cuts},
                   ``auto: false``
``arg_lower``      ``nest`` with explicit groups (when the nest operator is installed)
``shuffle_params`` ``reorder`` with the same seed (a different RNG: another permutation)
``rename``         ``rename`` ``method: opaque`` on tool names only (toolbias numbers
                   the names; the artifact's hashed names are not reproduced)
``strip_desc``     ``strip`` (only when every tool of the catalog is listed)
``curry``          ``transaction`` ``method: per_function`` on the listed tools
                   (``begin_<f>``/``set_<f>__<arg>``/``commit_<f>``)
``indirect``       ``reference`` ``method: per_function`` with ``params`` {tool: [params]},
                   ``select: none`` (``resolve_<f>__<arg>(query)``); the artifact's
                   ``values`` directory is not a restriction (it would make native
                   actions with other values unreachable)
=================  ==============================================================

Reading a file as a variant (:func:`load_spec_file`, ``--variants FILE``) builds it as the
artifact builds it instead: one ``paper`` step (:mod:`toolbias.operators.paper`), its names,
order and decoding. :func:`import_spec` is toolbias's construction of the same file (the
``composed`` recipe uses it).

A protocol step's tools are retargeted to what the earlier steps made of them (a split
tool's pieces share its resolvers; ``curryind``'s references land in the setters).
Anything else (an unknown kind, an operator not installed, a per-tool strip) is
*unsupported*: :func:`import_spec` lists it in
:attr:`Imported.unsupported`, and :func:`load_spec_file` refuses such files unless
``partial=True``. :attr:`Imported.approximate` names steps that build an equivalent
variant of the same kind but not the artifact's exact surface (names, orders).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.jsonfile import read_json
from ..catalog.coverage import coverage_actions
from ..catalog.model import Catalog, Tool
from ..errors import VariantError
from ..operators import OPERATORS
from .codec import Codec
from .compose import compose
from .spec import VariantSpec, is_artifact_spec

#: artifact op kind -> toolbias operator
KINDS: dict[str, str] = {
    "merge": "merge", "split_enum": "split", "split_predicate": "split", "arg_lower": "nest",
    "shuffle_params": "reorder", "rename": "rename", "strip_desc": "strip", "curry": "transaction",
    "indirect": "reference",
}
#: step order of an imported variant (protocols last)
ORDER = ("merge", "split", "nest", "reorder", "rename", "strip", "transaction", "reference")
PROTOCOL_OPS = ("transaction", "reference", "discovery")


@dataclass
class Imported:
    """An imported variant and what did not carry over."""

    spec: VariantSpec
    #: op kind -> (count, reason)
    unsupported: dict[str, tuple[int, str]] = field(default_factory=dict)
    approximate: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not self.unsupported and not self.approximate

    def report(self) -> str:
        lines = [f"{self.spec.name}: {len(self.spec.steps)} step(s): "
                 + (", ".join(str(s['op']) for s in self.spec.steps) or "none")]
        lines += [f"  unsupported: {kind} x{n}: {why}" for kind, (n, why) in self.unsupported.items()]
        lines += [f"  approximate: {a}" for a in self.approximate]
        return "\n".join(lines)


def _uid(op: Mapping[str, Any], tool: Any = None) -> str:
    return f"{op['group']}::{tool if tool is not None else op['tool']}"


def import_spec(data: Mapping[str, Any], name: str, catalog: Catalog | None = None) -> Imported:
    """Map an artifact spec onto toolbias steps (see the module doc)."""
    if not is_artifact_spec(data):
        raise VariantError("not a variant spec of the paper artifact", where=name,
                           fix='expected {"ops": [{"op", "tool", "group", ...}]} or {"arm", "groups"}')
    unsupported: dict[str, tuple[int, str]] = {}
    approximate: list[str] = []

    def skip(kind: str, why: str, n: int = 1) -> None:
        count, _ = unsupported.get(kind, (0, why))
        unsupported[kind] = (count + n, why)

    if "groups" in data:  # whole-catalog class-grouping arm
        groups = [{"tools": [f"{d}::{t}" for d, t in g["members"]], "name": g["into"],
                   "encoding": g.get("encoding", data.get("encoding", "flat"))} for g in data["groups"]]
        merge_step: dict[str, Any] = {"op": "merge", "scope": "catalog", "groups": groups, "singletons": "keep"}
        if "merge" not in OPERATORS:
            skip("groups", "the merge operator is not installed", len(groups))
            steps: list[dict[str, Any]] = []
        else:
            steps = [merge_step]
        if any("description" in g for g in data["groups"]):
            approximate.append("dispatcher descriptions are toolbias's, not the arm's custom text")
        return Imported(VariantSpec(name, tuple(steps), f"imported from the paper artifact ({data.get('arm')})",
                                    tags=("artifact",)), unsupported, approximate)

    by_op: dict[str, dict[str, Any]] = {}
    strip_tools: set[str] = set()
    for op in data["ops"]:
        kind = str(op.get("op"))
        target = KINDS.get(kind)
        if target is None:
            skip(kind, "no toolbias operator for this kind")
            continue
        if target not in OPERATORS:
            skip(kind, f"the '{target}' operator is not installed")
            continue
        step = by_op.setdefault(target, {"op": target})
        if kind == "merge":
            group: dict[str, Any] = {"tools": [_uid(op, t) for t in op["tools"]]}
            if op.get("into"):
                group["name"] = op["into"]
            if op.get("encoding"):
                group["encoding"] = op["encoding"]
            step.setdefault("groups", []).append(group)
            step["singletons"] = "keep"
        elif kind == "split_enum":
            step.setdefault("method", "enum")
            step.setdefault("select", {})[_uid(op)] = list(op["params"])
        elif kind == "split_predicate":
            step.setdefault("cuts", {})[f"{_uid(op)}.{op['param']}"] = list(op["cuts"])
            step["auto"] = False
        elif kind == "arg_lower":
            step["method"] = "groups"
            step.setdefault("groups", {}).setdefault(_uid(op), {})[op.get("into", "options")] = list(op["params"])
        elif kind == "shuffle_params":
            step.setdefault("seed", op.get("seed", 0))
            step.setdefault("tools", []).append(_uid(op))
        elif kind == "rename":
            step.update({"method": "opaque", "params": False, "tool_prefix": "fn_"})
            step.setdefault("_tools", []).append(_uid(op))
        elif kind == "strip_desc":
            strip_tools.add(_uid(op))
        elif kind == "curry":
            step.update({"method": "per_function", "min_args": 1})
            step.setdefault("tools", []).append(_uid(op))
        elif kind == "indirect":
            step.update({"method": "per_function", "select": "none"})
            params = step.setdefault("params", {}).setdefault(_uid(op), [])
            if op["param"] not in params:
                params.append(op["param"])
    split = by_op.get("split")
    if split is not None and "cuts" in split:
        if "select" in split:
            split["interval"] = True
        else:
            split["method"] = "interval"
    if "strip" in by_op:
        native = {t.uid for t in catalog.tools} if catalog is not None else None
        if native is None or not native <= strip_tools:
            skip("strip_desc", "toolbias strips every tool; this file strips only some", len(strip_tools))
            del by_op["strip"]
    if "rename" in by_op:
        listed = by_op["rename"].pop("_tools")
        native = {t.uid for t in catalog.tools} if catalog is not None else set(listed)
        if not native <= set(listed):
            skip("rename", "toolbias renames every tool; this file renames only some", len(listed))
            del by_op["rename"]
        else:
            approximate.append("rename: opaque names fn_00.. in toolbias's seeded order, not the artifact's hashes")
    if "reorder" in by_op:
        listed = by_op["reorder"].pop("tools")
        native = {t.uid for t in catalog.tools} if catalog is not None else set(listed)
        if not native <= set(listed):
            skip("shuffle_params", "toolbias reorders every tool; this file reorders only some", len(listed))
            del by_op["reorder"]
        else:
            approximate.append("reorder: same seed, toolbias's permutation (not the artifact's RNG)")
    steps = [by_op[op] for op in ORDER if op in by_op]
    if catalog is not None and any(s["op"] in PROTOCOL_OPS for s in steps):
        _retarget_protocol(steps, catalog, approximate)
    return Imported(VariantSpec(name, tuple(steps), "imported from the paper artifact", tags=("artifact",)),
                    unsupported, approximate)


def _retarget_protocol(steps: list[dict[str, Any]], catalog: Catalog, approximate: list[str]) -> None:
    """Point each protocol step's tool names (native uids in the artifact) at the tools the
    earlier steps made of them (a split tool becomes several, a curried one its setters),
    found by encoding each native tool's coverage actions through the earlier steps. A
    referenced argument keeps its native function's resolver (``origin``)."""
    def outer_tools(codec: Codec, native_uid: str) -> list[Tool]:
        domain, _, name = native_uid.partition("::")
        tool = catalog.tool(domain, name)
        if tool is None:
            raise VariantError(f"the artifact spec names '{native_uid}', which the catalog lacks",
                               where=catalog.name, fix="import it with the catalog it was written for")
        visible = {t.name: t for t in codec.tools_for(domain)}
        found: dict[str, Tool] = {}
        for action in coverage_actions(tool):
            for call in codec.encode([action]):
                hit = visible.get(call.name)
                if hit is not None:
                    found.setdefault(hit.uid, hit)
        return list(found.values())

    for i, proto in enumerate(steps):
        if proto["op"] not in PROTOCOL_OPS or i == 0:
            continue
        codec = compose(catalog, steps[:i], name="prefix", where="variant 'prefix'")

        if proto["op"] == "transaction" and isinstance(proto.get("tools"), list):
            proto["tools"] = list(dict.fromkeys(t.uid for ref in proto["tools"] for t in outer_tools(codec, ref)))
        elif proto["op"] == "reference" and isinstance(proto.get("params"), Mapping):
            params: dict[str, list[str]] = {}
            origin: dict[str, str] = {}
            lost = 0
            for ref, wanted in proto["params"].items():
                names = [wanted] if isinstance(wanted, str) else list(wanted)
                hits = outer_tools(codec, ref)
                for param in names:
                    carriers = [t for t in hits if param in t.properties]
                    lost += not carriers
                    for t in carriers:
                        params.setdefault(t.uid, []).append(param)
                        origin[t.uid] = ref.partition("::")[2]
            proto["params"] = params
            if proto.get("method") == "per_function":
                proto["origin"] = origin
            if lost:
                approximate.append(f"reference: {lost} referenced argument(s) not kept as such by earlier steps "
                                   "(merged or renamed away) are passed by value")


def load_spec_file(path: str | Path, catalog: Catalog | None = None, *, partial: bool = False) -> VariantSpec:
    """A variant spec file: toolbias's ``{"name", "steps"}`` or the artifact's forms, which build
    as the artifact builds them (one ``paper`` step: its names, its shuffle, its decoding).

    Artifact files with op kinds the artifact does not know are refused unless ``partial`` is
    true (then those ops are dropped). ``catalog`` is not needed (kept for callers)."""
    from ..operators.paper import OP_KINDS

    p = Path(path)
    data = read_json(p, error=VariantError)
    if not is_artifact_spec(data):
        if isinstance(data, Mapping) and ({"class_semantic", "n_dispatchers"} <= set(data) or "r03" in data):
            raise VariantError("an assignment file of the artifact, not a variant spec", where=str(p),
                               fix="use the arm's own spec file (class_semantic.json, mix_r03_flat.json, ...)")
        return VariantSpec.from_dict(data, where=str(p))
    if "ops" in data:
        unknown: dict[str, int] = {}
        for o in data["ops"]:
            if o.get("op") not in OP_KINDS:
                unknown[str(o.get("op"))] = unknown.get(str(o.get("op")), 0) + 1
        if unknown and not partial:
            raise VariantError("the artifact spec uses op kinds the artifact does not know: " + "; ".join(
                f"{k} x{n}" for k, n in unknown.items()), where=str(p),
                fix=f"drop those ops (known: {', '.join(OP_KINDS)}), or load with partial=True to build the rest")
        data = {**data, "ops": [o for o in data["ops"] if o.get("op") in OP_KINDS]}
    return VariantSpec.from_dict(data, where=str(p))


def import_dir(folder: str | Path, catalog: Catalog | None = None) -> list[Imported]:
    """Import every spec file of an artifact ``specs/`` folder (assignment files skipped)."""
    out = []
    for f in sorted(Path(folder).glob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        if is_artifact_spec(data):
            out.append(import_spec(data, f.stem, catalog))
    return out


__all__ = ["Imported", "import_dir", "import_spec", "is_artifact_spec", "load_spec_file"]
