"""The schema-bias paper's analysis tables that compare arms of one construction.

* Table 6 (``merge_encodings``): exact success on the fully merged schema under its three
  argument structures (flat, nested, union) next to native.
* Table 7 (``convention_mixture``): at each granularity target (0.3x, 0.5x), the three
  homogeneous arms (flat, nested, union) and *mixed*, the mean of the three rotations of the
  structures across groups; Δ = mixed minus the mean of the homogeneous arms, with a paired
  task bootstrap interval (per task: mean of the rotations minus mean of the homogeneous arms).
* Table 8 (``class_controls``): the whole-catalog class-grouping arms, class-semantic,
  class-neutral, random (mean of the random-neutral realizations r0-r4) and anti-class (mean
  of r0-r4); Δ membership = class-neutral minus the mean of the random realizations and Δ naming
  = class-semantic minus class-neutral, paired task bootstrap intervals.

Under toolbias's protocol an arm is found by the registered variant name or the artifact's
spec-file name (run with ``--variants FILE``), the first present in the study. Under the paper's
protocol (a ``<condition>@paper`` cell) each arm is exactly one of the artifact's renderings, as
the paper defines the table (:data:`PAPER_MERGE_ENCODINGS`, :data:`PAPER_CONVENTION_TARGETS`,
:data:`PAPER_CLASS_CONTROLS`): Table 6's flat arm is ``merge_full_flat.json`` (never the ladder's
fully merged), Table 8's class-semantic arm is the class-grouping runner's ``class_semantic.json``
(never the hierarchy runner's class dispatch), and its random and anti-class columns are means of
all five realizations r0-r4 (absent until all five were run). Rows exist per model and
(control, condition) where at least the arms a Δ needs were run; every Δ is computed on the
tasks all of its arms share; each row says which definition it follows (``arms``: ``paper`` or
``toolbias``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..study.paper_protocol import Protocol, protocol_of
from ..study.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Interval,
    bootstrap_ci,
    cell_table,
)
from ..variants.codec import Codec

#: Table 6 arm -> variant names (registry, artifact spec file)
MERGE_ENCODINGS: dict[str, tuple[str, ...]] = {
    "native": ("native",),
    "flat": ("merge_domain_flat", "fully_merged", "merge_full_flat"),
    "nested": ("merge_domain_nested", "merge_full_nested"),
    "union": ("merge_domain_union", "merge_full_union"),
}
#: Table 7: granularity target -> arm -> variant names
CONVENTION_TARGETS: dict[str, dict[str, tuple[str, ...]]] = {
    target: {
        **{arm: (f"convention_mixture_{tag}x_{arm}", f"mix_r0{digit}_{arm}") for arm in ("flat", "nested", "union")},
        **{f"rot{r}": (f"convention_mixture_{tag}x_mixed_rot{r}", f"mix_r0{digit}_rot{r}") for r in range(3)},
    }
    for target, tag, digit in (("0.3", "0_3", "3"), ("0.5", "0_5", "5"))
}
#: Table 8 arm -> variant names; random and anti-class arms have five realizations each
REALIZATIONS = range(5)
CLASS_CONTROLS: dict[str, tuple[str, ...]] = {
    "class_semantic": ("class_dispatch", "class_semantic"),
    "class_neutral": ("merge_catalog_neutral_names", "class_neutral"),
    **{f"random_r{r}": ((f"merge_catalog_random_classes_r{r}" if r else "merge_catalog_random_classes"),
                        f"random_neutral_r{r}") for r in REALIZATIONS},
    **{f"anti_class_r{r}": ((f"merge_catalog_anti_classes_r{r}" if r else "merge_catalog_anti_classes"),
                            f"anti_class_neutral_r{r}") for r in REALIZATIONS},
}

#: the paper's arms under its protocol: each arm exactly one artifact rendering (toolbias.variants.paper)
#: Table 6: native and the fully merged member sets under merge_full_{flat,nested,union}.json
PAPER_MERGE_ENCODINGS: dict[str, tuple[str, ...]] = {
    "native": ("paper.native",), **{enc: (f"paper.merge_domain_{enc}",) for enc in ("flat", "nested", "union")}}
#: Table 7: mix_r0{3,5}_{flat,nested,union,rot0,rot1,rot2}.json
PAPER_CONVENTION_TARGETS: dict[str, dict[str, tuple[str, ...]]] = {
    target: {**{arm: (f"paper.convention_mixture_{tag}x_{arm}",) for arm in ("flat", "nested", "union")},
             **{f"rot{r}": (f"paper.convention_mixture_{tag}x_mixed_rot{r}",) for r in range(3)}}
    for target, tag in (("0.3", "0_3"), ("0.5", "0_5"))
}
#: Table 8: the class-grouping runner's whole-catalog arms: class_semantic.json, class_neutral.json,
#: random_neutral_r0-r4.json and anti_class_neutral_r0-r4.json
PAPER_CLASS_CONTROLS: dict[str, tuple[str, ...]] = {
    "class_semantic": ("paper.merge_catalog_class_names",),
    "class_neutral": ("paper.merge_catalog_neutral_names",),
    **{f"random_r{r}": ("paper.merge_catalog_random_classes" + (f"_r{r}" if r else ""),) for r in REALIZATIONS},
    **{f"anti_class_r{r}": ("paper.merge_catalog_anti_classes" + (f"_r{r}" if r else ""),) for r in REALIZATIONS},
}

PerTask = dict[str, float]


def _is_paper(condition: str) -> bool:
    return protocol_of(condition) is Protocol.PAPER


def query_weighted_ratio(codec: Codec, weights: Mapping[str, float]) -> float | None:
    """Figure 3's x-axis as the paper defines it: each domain's ratio of the functions an
    episode there sees under the variant to its native functions, averaged over domains
    weighted by their queries (``weights``: domain -> number of tasks). None without weights."""
    def counts(domain: str) -> tuple[int, int]:
        native = len(codec.catalog.domain(domain).tools)
        return native, len(codec.tools_for(domain)) if native else 0
    return weighted_ratio(counts, weights)


def weighted_ratio(counts: Callable[[str], tuple[int, int]], weights: Mapping[str, float]) -> float | None:
    """:func:`query_weighted_ratio` from ``counts``: domain -> (its native functions, the functions
    an episode there sees under the variant), asked for domains of positive weight only."""
    total = sum(w for d, w in weights.items() if w > 0)
    if total <= 0:
        return None
    acc = 0.0
    for d, w in weights.items():
        if w > 0:
            native, shown = counts(d)
            if native:
                acc += w * shown / native
    return acc / total


@dataclass
class Settings:
    seed: int = 0
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE


def _per_task(df: Any) -> dict[tuple[str, str, str], dict[str, PerTask]]:
    """(model, control, condition) -> variant -> task id -> mean success (``df``: episodes or a
    :class:`~toolbias.study.stats.CellTable`)."""
    out: dict[tuple[str, str, str], dict[str, PerTask]] = {}
    for (model, variant, control, condition), cell in cell_table(df).items():
        out.setdefault((model, control, condition), {})[variant] = cell.per_task()
    return out


def _arm(cells: Mapping[str, PerTask], names: Sequence[str], *, exact: bool = False) -> tuple[str, PerTask] | None:
    """The first of ``names`` the cells hold; unless ``exact``, also a name's artifact rendering
    (``paper.<name>``: a study under toolbias's protocol can play renderings too)."""
    for n in (name for base in names for name in ((base,) if exact else (base, f"paper.{base}"))):
        if n in cells:
            return n, cells[n]
    return None


def _mean(values: PerTask, tasks: Sequence[str] | None = None) -> float:
    keys = list(values) if tasks is None else tasks
    return float(np.mean([values[t] for t in keys])) if keys else float("nan")


def _common(arms: Sequence[PerTask]) -> list[str]:
    common = set(arms[0])
    for a in arms[1:]:
        common &= set(a)
    return sorted(common)


def _delta(plus: Sequence[PerTask], minus: Sequence[PerTask], s: Settings, key: Any) -> Interval:
    """Paired task bootstrap of mean(plus arms) - mean(minus arms), per task, on shared tasks."""
    tasks = _common([*plus, *minus])
    diffs = [float(np.mean([a[t] for a in plus]) - np.mean([b[t] for b in minus])) for t in tasks]
    return bootstrap_ci(diffs, confidence=s.confidence, n_resamples=s.n_resamples, seed=s.seed, key=key)


def _interval(iv: Interval) -> dict[str, Any]:
    return asdict(iv)


def merge_encodings(per: Mapping[tuple[str, str, str], Mapping[str, PerTask]], s: Settings) -> list[dict[str, Any]]:
    rows = []
    for (model, control, condition), cells in per.items():
        paper = _is_paper(condition)
        arms = PAPER_MERGE_ENCODINGS if paper else MERGE_ENCODINGS
        found = {arm: _arm(cells, names, exact=paper) for arm, names in arms.items()}
        if not any(found[a] for a in ("nested", "union")) or found["flat"] is None:
            continue
        row: dict[str, Any] = {"model": model, "control": control, "condition": condition,
                               "arms": "paper" if paper else "toolbias"}
        for arm, hit in found.items():
            row[arm] = _mean(hit[1]) if hit else None
            row[f"{arm}_variant"] = hit[0] if hit else None
        scores = {a: row[a] for a in ("flat", "nested", "union") if row[a] is not None}
        row["lowest"] = min(scores, key=lambda a: scores[a])
        rows.append(row)
    return rows


def convention_mixture(per: Mapping[tuple[str, str, str], Mapping[str, PerTask]],
                       s: Settings) -> list[dict[str, Any]]:
    rows = []
    for (model, control, condition), cells in per.items():
        paper = _is_paper(condition)
        for target, arms in (PAPER_CONVENTION_TARGETS if paper else CONVENTION_TARGETS).items():
            found = {arm: _arm(cells, names, exact=paper) for arm, names in arms.items()}
            if any(hit is None for hit in found.values()):
                continue
            hom = [found[a][1] for a in ("flat", "nested", "union")]  # type: ignore[index]
            rot = [found[f"rot{r}"][1] for r in range(3)]  # type: ignore[index]
            delta = _delta(rot, hom, s, ("convention_mixture", model, control, condition, target))
            rows.append({"model": model, "control": control, "condition": condition,
                         "arms": "paper" if paper else "toolbias", "target": float(target),
                         "flat": _mean(hom[0]), "nested": _mean(hom[1]), "union": _mean(hom[2]),
                         "mixed": float(np.mean([_mean(r) for r in rot])),
                         "rotations": [_mean(r) for r in rot],
                         "delta": delta.estimate, "interval": _interval(delta),
                         "variants": {arm: hit[0] for arm, hit in found.items() if hit}})
    return rows


def class_controls(per: Mapping[tuple[str, str, str], Mapping[str, PerTask]], s: Settings) -> list[dict[str, Any]]:
    rows = []
    for (model, control, condition), cells in per.items():
        paper = _is_paper(condition)
        found = {arm: _arm(cells, names, exact=paper)
                 for arm, names in (PAPER_CLASS_CONTROLS if paper else CLASS_CONTROLS).items()}
        semantic, neutral = found["class_semantic"], found["class_neutral"]
        randoms = [hit for r in REALIZATIONS if (hit := found[f"random_r{r}"]) is not None]
        antis = [hit for r in REALIZATIONS if (hit := found[f"anti_class_r{r}"]) is not None]
        ran_random, ran_anti = len(randoms), len(antis)
        if paper:  # the paper's columns are means of all five realizations
            randoms = randoms if ran_random == len(REALIZATIONS) else []
            antis = antis if ran_anti == len(REALIZATIONS) else []
        if neutral is None or (semantic is None and not randoms):
            continue
        row: dict[str, Any] = {
            "model": model, "control": control, "condition": condition, "arms": "paper" if paper else "toolbias",
            "class_semantic": _mean(semantic[1]) if semantic else None,
            "class_neutral": _mean(neutral[1]),
            "random": float(np.mean([_mean(h[1]) for h in randoms])) if randoms else None,
            "random_realizations": ran_random,
            "anti_class": float(np.mean([_mean(h[1]) for h in antis])) if antis else None,
            "anti_class_realizations": ran_anti,
            "variants": {arm: hit[0] for arm, hit in found.items() if hit},
        }
        key = (model, control, condition)
        if randoms:
            iv = _delta([neutral[1]], [h[1] for h in randoms], s, ("membership", *key))
            row["delta_membership"], row["membership_interval"] = iv.estimate, _interval(iv)
        if semantic:
            iv = _delta([semantic[1]], [neutral[1]], s, ("naming", *key))
            row["delta_naming"], row["naming_interval"] = iv.estimate, _interval(iv)
        rows.append(row)
    return rows


def paper_tables(df: Any, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = DEFAULT_CONFIDENCE) -> dict[str, list[dict[str, Any]]]:
    """Tables 6, 7 and 8 of a study's episodes (empty lists where the arms were not run)."""
    s = Settings(seed, n_resamples, confidence)
    per = _per_task(df) if len(df) else {}
    return {"merge_encodings": merge_encodings(per, s), "convention_mixture": convention_mixture(per, s),
            "class_controls": class_controls(per, s)}


def format_value(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and x != x) else f"{x:.3f}"


def format_interval(iv: Mapping[str, Any] | None) -> str:
    return "-" if not iv else f"{iv['estimate']:+.3f} [{iv['low']:+.3f}, {iv['high']:+.3f}]"


def table_rows(tables: Mapping[str, list[dict[str, Any]]]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Header and text rows of each table (terminal and HTML render the same cells)."""
    out: dict[str, tuple[list[str], list[list[str]]]] = {}
    t6 = tables.get("merge_encodings") or []
    if t6:
        out["Table 6: merge penalty by argument structure (fully merged schema)"] = (
            ["model", "native", "flat", "nested", "union", "lowest"],
            [[r["model"] + condition_of(r), format_value(r["native"]), format_value(r["flat"]), format_value(r["nested"]), format_value(r["union"]), r["lowest"]]
             for r in t6])
    t7 = tables.get("convention_mixture") or []
    if t7:
        out["Table 7: convention mixture (mixed = mean of three rotations; Δ = mixed - mean of homogeneous)"] = (
            ["model", "ratio", "flat", "nested", "union", "mixed", "Δ [95% CI]"],
            [[r["model"] + condition_of(r), f"{r['target']:.1f}x", format_value(r["flat"]), format_value(r["nested"]), format_value(r["union"]),
              format_value(r["mixed"]), format_interval(r["interval"])] for r in t7])
    t8 = tables.get("class_controls") or []
    if t8:
        out["Table 8: whole-catalog class-grouping controls (Δ membership = neutral - random; "
            "Δ naming = semantic - neutral)"] = (
            ["model", "class-sem.", "class-neut.", "random", "anti-class", "Δ membership", "Δ naming"],
            [[r["model"] + condition_of(r), format_value(r["class_semantic"]), format_value(r["class_neutral"]),
              format_value(r["random"]) + (f" (r×{r['random_realizations']})" if r["random"] is not None else ""),
              format_value(r["anti_class"]), format_interval(r.get("membership_interval")), format_interval(r.get("naming_interval"))] for r in t8])
    return out


def condition_of(r: Mapping[str, Any]) -> str:
    return "" if (r["control"], r["condition"]) == ("strict", "base") else f" ({r['control']}, {r['condition']})"


__all__ = ["CLASS_CONTROLS", "CONVENTION_TARGETS", "MERGE_ENCODINGS", "PAPER_CLASS_CONTROLS",
           "PAPER_CONVENTION_TARGETS", "PAPER_MERGE_ENCODINGS", "class_controls", "convention_mixture",
           "merge_encodings", "paper_tables", "query_weighted_ratio", "table_rows", "weighted_ratio"]
