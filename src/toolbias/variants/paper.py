"""The paper's variants as its artifact renders them: ``paper.<name>`` variants.

toolbias's own constructions (``fully_merged``, ``interval_split`` ...) keep their names and
behaviour. Each ``paper.<name>`` here is one ``paper`` operator step (:mod:`toolbias.operators.paper`)
that builds the artifact's own construction of the paper variant the spec's ``paper`` field
names (its ``registry.json`` entry): the ladder index, the spec file or the whole-catalog arm.
On the artifact's catalog (``toolschemaspace:DIR``) the tool lists are the artifact's, names,
descriptions, parameters and order, and calls decode as the artifact decodes them. Spec files
are read from the catalog's ``specs/`` folder, so those variants build only there.

They are not in ``all``; select them by name, or by group: ``paper-representative`` (Figure 2's
13, in its order), ``paper-appendix`` (Figure 4's other methods), ``paper-encodings`` (Table 6/7's
argument structures), ``paper-mixture`` (the convention mixtures), ``paper-catalog`` (Table 8's
whole-catalog arms, every realization), ``paper`` (all). :func:`paper_rendering` maps a paper
variant (its paper name, toolbias's name or the ``paper.`` name) to its rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import VariantError
from .spec import VariantSpec

PREFIX = "paper."
#: the groups :func:`paper_renderings` and ``--variants`` accept, besides names
GROUPS = ("paper", "paper-representative", "paper-appendix", "paper-encodings", "paper-mixture", "paper-catalog")


def _v(name: str, paper: str, group: str, description: str, **step: Any) -> VariantSpec:
    return VariantSpec(PREFIX + name, ({"op": "paper", **step},), f"the artifact's rendering: {description}",
                       paper=paper, tags=("paper", group))


def _ladder(k: int) -> dict[str, Any]:
    return {"build": "ladder", "k": k}


def _ops(file: str) -> dict[str, Any]:
    return {"build": "ops", "file": file}


def _arm(arm: str) -> dict[str, Any]:
    return {"build": "hierarchy", "arm": arm}


def _groups(file: str) -> dict[str, Any]:
    return {"build": "groups", "file": file}


_REP = "paper-representative"
_APP = "paper-appendix"
_ENC = "paper-encodings"
_MIX = "paper-mixture"
_CAT = "paper-catalog"

_SPECS: list[VariantSpec] = [
    # Figure 2, in its order
    _v("native", "native", _REP, "ladder index 5 (native)", **_ladder(5)),
    _v("fully_merged", "fully merged", _REP, "ladder index 0: one execute(operation, <op>::<arg>) per domain",
       **_ladder(0)),
    _v("class_dispatch", "class dispatch", _REP, "hierarchy arm dispatch: one dispatcher per class (domain), whole "
       "catalog", **_arm("dispatch")),
    _v("fully_split", "fully split", _REP, "ladder index 9: every enumerable argument folded into names, fewest "
       "values first", **_ladder(9)),
    _v("interval_split", "interval split", _REP, "specs/pred.json: numeric arguments split at one cut "
       "(lt_<c> / ge_<c>)", **_ops("pred.json")),
    _v("nested_args", "nested args", _REP, "specs/pack.json: arguments after the first in one options object",
       **_ops("pack.json")),
    _v("namespaced_names", "namespaced names", _REP, "hierarchy arm qualified: <class>__<tool>, whole catalog",
       **_arm("qualified")),
    _v("strip_descriptions", "strip descriptions", _REP, "specs/s_nodesc.json", **_ops("s_nodesc.json")),
    _v("reorder_arguments", "reorder arguments", _REP, "specs/s_shuffle.json: the seeded shuffle (seed 13)",
       **_ops("s_shuffle.json")),
    _v("transaction", "transaction", _REP, "specs/curry.json: begin_<f> / set_<f>__<arg> / commit_<f>",
       **_ops("curry.json")),
    _v("reference_resolution", "reference resolution", _REP, "specs/indirect.json: <arg>_ref handles from "
       "resolve_<f>__<arg>(query) over a fixed table", **_ops("indirect.json")),
    _v("schema_discovery", "schema discovery", _REP, "hierarchy arm disclose: list_methods(class) and "
       "invoke(class, method, arguments)", **_arm("disclose")),
    _v("composed", "composed", _REP, "specs/mixed.json (as the agentic runner sends it: no optional markers)",
       **_ops("mixed.json")),
    # Figure 4: the other methods of each operator
    *[_v(f"merge_domain_{r.replace('.', '_')}x", f"merge · domain {r}x", _APP, f"ladder index {k}", **_ladder(k))
      for k, r in ((1, "0.29"), (2, "0.46"), (3, "0.69"), (4, "0.85"))],
    _v("merge_semantic_groups", "merge · semantic groups", _APP, "specs/mgroup_sem.json", **_ops("mgroup_sem.json")),
    _v("merge_random_groups", "merge · random groups", _APP, "specs/mgroup_rand.json", **_ops("mgroup_rand.json")),
    _v("merge_anti_semantic_groups", "merge · anti-semantic groups", _APP, "specs/mgroup_anti.json",
       **_ops("mgroup_anti.json")),
    _v("native_whole_catalog", "native · whole catalog", _APP, "hierarchy arm flat: every tool, [class] "
       "descriptions, shared names suffixed _<class>", **_arm("flat")),
    *[_v(f"split_enum_{r.replace('.', '_')}x", f"split · enum {r}x", _APP, f"ladder index {k}", **_ladder(k))
      for k, r in ((6, "1.5"), (7, "2.9"), (8, "5.4"))],
    _v("split_one_enum", "split · one enum", _APP, "specs/enum1.json", **_ops("enum1.json")),
    _v("split_all_enums", "split · all enums", _APP, "specs/enumfull.json", **_ops("enumfull.json")),
    _v("opaque_names", "rename · opaque", _APP, "specs/s_obf.json: fn_<sha1> names", **_ops("s_obf.json")),
    # Tables 6-7: a merged tool's argument structure
    *[_v(f"merge_domain_{enc}", f"merge · domain, {enc}", _ENC, f"specs/merge_full_{enc}.json",
         **_ops(f"merge_full_{enc}.json")) for enc in ("flat", "nested", "union")],
    *[_v(f"semantic_grouped_merge_{enc}", f"semantic grouped merge · {enc}", _ENC, f"specs/merge_sem_{enc}.json",
         **_ops(f"merge_sem_{enc}.json")) for enc in ("flat", "nested", "union")],
    *[_v(f"convention_mixture_{r.replace('.', '_')}x_{arm}",
         f"convention mixture {r}x · {arm.replace('_', ' ')}", _MIX,
         f"specs/mix_r0{r[-1]}_{arm.replace('mixed_', '')}.json",
         **_ops(f"mix_r0{r[-1]}_{arm.replace('mixed_', '')}.json"))
      for r in ("0.3", "0.5") for arm in ("flat", "nested", "union", "mixed_rot0", "mixed_rot1", "mixed_rot2")],
    # Table 8: whole-catalog dispatchers (membership vs naming), every realization
    _v("merge_catalog_class_names", "merge · catalog, class names", _CAT, "specs/class_semantic.json",
       **_groups("class_semantic.json")),
    _v("merge_catalog_neutral_names", "merge · catalog, neutral names", _CAT, "specs/class_neutral.json",
       **_groups("class_neutral.json")),
    *[_v("merge_catalog_random_classes" + (f"_r{r}" if r else ""),
         "merge · catalog, random classes" + (f" r{r}" if r else ""), _CAT,
         f"specs/random_neutral_r{r}.json (seed {101 + r} as requested)", **_groups(f"random_neutral_r{r}.json"))
      for r in range(5)],
    *[_v("merge_catalog_anti_classes" + (f"_r{r}" if r else ""),
         "merge · catalog, anti-classes" + (f" r{r}" if r else ""), _CAT,
         f"specs/anti_class_neutral_r{r}.json (seed {201 + r} as requested)",
         **_groups(f"anti_class_neutral_r{r}.json")) for r in range(5)],
]

PAPER_VARIANTS: dict[str, VariantSpec] = {v.name: v for v in _SPECS}
_BY_PAPER: dict[str, VariantSpec] = {str(v.paper): v for v in _SPECS}


def ladder_step(steps: Sequence[Any]) -> int | None:
    """The artifact's ladder index ``k`` (0 fully merged, 5 native, 9 fully split) of a variant whose
    steps are one ``paper`` ladder step (``{"op": "paper", "build": "ladder", "k": K}``, or the
    stored ``["paper", {"build": "ladder", "k": K}]``); None for any other variant."""
    if len(steps) != 1:
        return None
    step = steps[0]
    if isinstance(step, Sequence) and not isinstance(step, str) and len(step) == 2:
        op, params = step[0], dict(step[1] or {})
    elif isinstance(step, dict):
        op, params = step.get("op"), step
    else:
        return None
    k = params.get("k")
    return k if op == "paper" and params.get("build") == "ladder" and isinstance(k, int) else None


#: Figure 3's ten variants, the artifact's merge/split ladder in index order (``SCHEMA_VARIANT`` 0-9:
#: fully merged, the four partial merges, native, the three partial splits, fully split)
LADDER: tuple[str, ...] = tuple(sorted((v.name for v in _SPECS if ladder_step(v.steps) is not None),
                                       key=lambda n: ladder_step(PAPER_VARIANTS[n].steps) or 0))


def paper_rendering(name: str) -> VariantSpec:
    """The artifact's rendering of one paper variant, named by its ``paper.`` name, its paper
    name (``"fully merged"``, ``registry.json``'s) or toolbias's variant reproducing it
    (``fully_merged``, through that variant's ``paper`` field)."""
    if name in PAPER_VARIANTS:
        return PAPER_VARIANTS[name]
    if PREFIX + name in PAPER_VARIANTS:
        return PAPER_VARIANTS[PREFIX + name]
    if name in _BY_PAPER:
        return _BY_PAPER[name]
    from .named import REGISTRY

    own = REGISTRY.get(name)
    if own is not None and own.paper in _BY_PAPER:
        return _BY_PAPER[own.paper]
    raise VariantError(f"no artifact rendering for '{name}'",
                       fix="name a paper variant (toolbias variants --paper lists them) or a group: "
                           + ", ".join(GROUPS))


def paper_renderings(selector: str | Sequence[str]) -> list[VariantSpec]:
    """``representative`` (Figure 2's 13), ``all`` (every rendering), a group, or a comma list of
    names each mapped by :func:`paper_rendering`; in order, without repeats."""
    names = selector.split(",") if isinstance(selector, str) else list(selector)
    out: dict[str, VariantSpec] = {}
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        group = {"representative": "paper-representative", "all": "paper"}.get(name, name)
        if group in GROUPS:
            out.update((v.name, v) for v in _SPECS if group in v.tags)
        else:
            v = paper_rendering(name)
            out.setdefault(v.name, v)
    return list(out.values())


__all__ = ["GROUPS", "LADDER", "PAPER_VARIANTS", "PREFIX", "ladder_step", "paper_rendering", "paper_renderings"]
