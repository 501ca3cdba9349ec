"""Recipes: variants defined by a rule over the catalog rather than by fixed steps.

A recipe step ``{"op": "recipe", "name": NAME}`` stands for the concrete operator steps
that rule gives on the catalog the variant is built on; :func:`expand` computes them
(``build_codec`` calls it). Two recipes:

``artifact`` (``{"op": "recipe", "name": "artifact", "spec": {...}}``) -- one of the paper
artifact's ``specs/*.json`` files (its ``ops`` or ``groups`` form), mapped onto toolbias
steps by :func:`toolbias.variants.artifact.import_spec` on the catalog (tool names in the file are
the catalog's); a construct toolbias cannot build is an error naming it. Reading such a
file as a variant spec (``--variants FILE``) gives this step.

``composed`` -- the paper's composed arm, the rule behind its artifact's
``specs/mixed.json`` (reproduced exactly on the artifact catalog): in each domain, the
tools at even positions (2nd, 4th, ...) are merged into one flat dispatcher; each other
tool has every enumerable argument (enum or boolean) folded into its name, every numeric
argument split into two ranges at the interval split's cut, and every free-text
argument passed as a handle from ``resolve_<f>__<arg>(query)`` (one resolver per native
function and argument, shared by the tools a split made of it). 168 -> 1,303 functions
on the artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..catalog.model import Catalog
from ..errors import VariantError
from ..operators.reference import free_text_params
from ..operators.split import Split
from .artifact import import_spec


def composed_ops(catalog: Catalog) -> dict[str, Any]:
    """The composed arm of ``catalog`` in the artifact's ``{"ops": [...]}`` form."""
    full = Split(catalog.tools, {"method": "enum"})
    interval = Split(catalog.tools, Split.prepare({"method": "interval"}, catalog))
    ops: list[dict[str, Any]] = []
    for d in catalog.domains:
        merged = [t.name for t in d.tools[1::2]]
        if merged:
            ops.append({"op": "merge", "tools": merged, "group": d.name})
        for t in d.tools[0::2]:
            folds = full.folds_of(t.uid)
            if folds:
                ops.append({"op": "split_enum", "tool": t.name, "params": folds, "group": d.name})
            for p, cuts in interval.cuts_of(t.uid).items():
                ops.append({"op": "split_predicate", "tool": t.name, "param": p, "cuts": cuts, "group": d.name})
            ops.extend({"op": "indirect", "tool": t.name, "param": p, "group": d.name} for p in free_text_params(t))
    return {"ops": ops}


def _artifact_file(catalog: Catalog, step: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = step.get("spec")
    if not isinstance(spec, Mapping):
        raise VariantError("the artifact recipe needs 'spec': the artifact file's JSON object",
                           fix="read the file with --variants FILE")
    return spec


#: recipe name -> (the artifact-form spec it gives on a catalog, the step parameters it takes)
RECIPES: dict[str, tuple[Callable[[Catalog, Mapping[str, Any]], Mapping[str, Any]], frozenset[str]]] = {
    "composed": (lambda catalog, _step: composed_ops(catalog), frozenset()),
    "artifact": (_artifact_file, frozenset({"spec"})),
}


def expand(steps: Sequence[Mapping[str, Any]], catalog: Catalog, where: str) -> tuple[Mapping[str, Any], ...]:
    """``steps`` with every recipe step replaced by the steps it gives on ``catalog``."""
    out: list[Mapping[str, Any]] = []
    for i, step in enumerate(steps):
        if step.get("op") != "recipe":
            out.append(step)
            continue
        name = str(step.get("name"))
        recipe = RECIPES.get(name)
        if recipe is None:
            raise VariantError(f"unknown recipe {name!r} in step {i + 1}", where=where,
                               fix=f"use one of: {', '.join(RECIPES)}")
        make, takes = recipe
        extra = set(step) - {"op", "name"} - takes
        if extra:
            raise VariantError(f"recipe '{name}' (step {i + 1}) takes no parameter(s) {', '.join(sorted(extra))}",
                               where=where, fix=f"use: {', '.join(sorted(takes)) or 'only name'}")
        if out:
            raise VariantError(f"recipe '{name}' must be the first step (it is defined on the native catalog)",
                               where=where, fix="put the recipe step first")
        made = make(catalog, step)
        if made.get("ops") == []:  # nothing the recipe rewrites on this catalog (a one-tool BFCL entry)
            continue
        try:
            imported = import_spec(made, name, catalog)
        except VariantError as exc:
            raise VariantError(exc.what, where=f"{where}: {exc.where}" if exc.where else where, fix=exc.fix) from None
        if imported.unsupported:
            raise VariantError("the artifact spec uses constructs toolbias cannot build: " + "; ".join(
                f"{k} x{n} ({why})" for k, (n, why) in imported.unsupported.items()), where=where,
                fix="drop those ops from the file (toolbias.variants.artifact.load_spec_file(..., partial=True) "
                    "builds the rest)")
        out.extend(imported.spec.steps)
    return tuple(out)


__all__ = ["RECIPES", "composed_ops", "expand"]
