"""Merge variants: fully merged, class dispatch, the merge ladder, grouping rules,
argument encodings, convention mixtures and the whole-catalog controls.

Groupings are computed from whichever catalog a variant is built on (see
:mod:`toolbias.operators.merge`); ``paper`` names the entry of the paper's
``registry.json`` each one reproduces. "Class" is ``Tool.cls``; the paper's artifact
gives no finer class than the domain, so on it ``{"key": "domain"}`` gives the exact
twelve-dispatcher arms of its Table 8.
"""

from __future__ import annotations

from typing import Any

from ..spec import VariantSpec


def _merge(**params: Any) -> tuple[dict[str, Any], ...]:
    return ({"op": "merge", **params},)


_SEMANTIC4 = {"groups": "class", "group_size": 4, "singletons": "merge"}   # the paper's fixed group size
_CATALOG = {"scope": "catalog", "groups": "class", "key": "domain"}   # the paper's classes are its domains
#: Table 8's membership controls: five seeded realizations each, as the artifact registers them
_REALIZATIONS = range(5)

VARIANTS: list[VariantSpec] = [
    VariantSpec("fully_merged", _merge(),
                "one dispatcher per domain (execute) with an operation discriminator, flat <op>::<arg> keys",
                paper="fully merged", tags=("representative",)),
    VariantSpec("class_dispatch", _merge(**_CATALOG),
                "one flat dispatcher per class (= domain), named after it, over the whole catalog (all visible in "
                "every domain)", paper="class dispatch", tags=("representative",)),
    VariantSpec("class_dispatch_by_object", _merge(scope="catalog", groups="class"),
                "one dispatcher per object class (Tool.cls: window, seat, ...) over the whole catalog",
                tags=("control",)),
    *[VariantSpec(f"merge_domain_{str(r).replace('.', '_')}x", _merge(groups="class", ratio=r),
                  f"partial merge to {r}x of the native function count: classes whose tool and argument "
                  "names share most words merged per domain, unmerged tools native",
                  paper=f"merge · domain {r}x", tags=("ladder",))
      for r in (0.29, 0.46, 0.69, 0.85)],
    *[VariantSpec(f"merge_domain_{enc}", _merge(encoding=enc),
                  f"fully merged with {enc} arguments", paper=f"merge · domain, {enc}", tags=("control",))
      for enc in ("nested", "union", "flat")],
    VariantSpec("merge_semantic_groups", _merge(**_SEMANTIC4),
                "class-semantic groups of about four operations per domain", paper="merge · semantic groups",
                tags=("control",)),
    VariantSpec("merge_random_groups", _merge(**{**_SEMANTIC4, "groups": "random", "seed": 0}),
                "seeded random groups with the semantic groups' sizes", paper="merge · random groups",
                tags=("control",)),
    VariantSpec("merge_anti_semantic_groups", _merge(**{**_SEMANTIC4, "groups": "anti_class"}),
                "groups with the semantic groups' sizes that spread every class apart",
                paper="merge · anti-semantic groups", tags=("control",)),
    VariantSpec("merge_catalog_neutral_names", _merge(**_CATALOG, names="neutral"),
                "class dispatch with neutral dispatcher names (group_01 ...): Table 8's class-neutral arm",
                paper="merge · catalog, neutral names", tags=("control",)),
    VariantSpec("merge_catalog_random_classes", _merge(**{**_CATALOG, "groups": "random", "seed": 0},
                                                       names="neutral"),
                "whole-catalog random groups with the class size profile, neutral names (realization r0)",
                paper="merge · catalog, random classes", tags=("control",)),
    *[VariantSpec(f"merge_catalog_random_classes_r{r}",
                  _merge(**{**_CATALOG, "groups": "random", "seed": r}, names="neutral"),
                  f"whole-catalog random groups with the class size profile, neutral names (realization r{r})",
                  tags=("control",)) for r in _REALIZATIONS if r],
    VariantSpec("merge_catalog_anti_classes", _merge(**{**_CATALOG, "groups": "anti_class"}, names="neutral"),
                "whole-catalog groups with the class size profile that spread every class apart, neutral names "
                "(realization r0)", paper="merge · catalog, anti-classes", tags=("control",)),
    *[VariantSpec(f"merge_catalog_anti_classes_r{r}",
                  _merge(**{**_CATALOG, "groups": "anti_class", "seed": r}, names="neutral"),
                  f"whole-catalog groups with the class size profile that spread every class apart, neutral names "
                  f"(realization r{r})", tags=("control",)) for r in _REALIZATIONS if r],
    VariantSpec("native_whole_catalog", _merge(scope="catalog", groups="none"),
                "every native function under its native name, visible in every domain (control for class "
                "dispatch; a name two domains share stays in its own domains)",
                paper="native · whole catalog", tags=("control",)),
    *[VariantSpec(f"semantic_grouped_merge_{enc}", _merge(**_SEMANTIC4, encoding=enc),
                  f"class-semantic groups of about four operations, {enc} arguments",
                  paper=f"semantic grouped merge · {enc}", tags=("control",))
      for enc in ("flat", "nested", "union")],
    *[VariantSpec(f"convention_mixture_{str(r).replace('.', '_')}x_{arm}",
                  _merge(groups="class", ratio=r, singletons="merge",
                         encoding="mixed" if arm.startswith("mixed") else arm,
                         **({"rotation": int(arm[-1])} if arm.startswith("mixed") else {})),
                  f"class-semantic dispatchers at {r}x, " + (
                      f"flat/nested/union rotated over each domain's dispatchers (rotation {arm[-1]})"
                      if arm.startswith("mixed") else f"all {arm}"),
                  paper=f"convention mixture {r}x · {arm.replace('_', ' ')}", tags=("control",))
      for r in (0.3, 0.5) for arm in ("flat", "nested", "union", "mixed_rot0", "mixed_rot1", "mixed_rot2")],
]
