"""Which schema suits a model? Estimate every candidate variant's success on a small
stratified sample (the same tasks for each, so comparisons are paired) and rank them.

Each candidate gets a task-bootstrap interval and a paired interval of its difference
to the best; variants whose paired interval contains 0 are statistically tied with
the best at this sample size (the honest answer is then "any of these").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .runner import Study, StudyConfig, build_study, run_study
from .stats import bootstrap_ci, paired_bootstrap, task_success
from .store import Store


@dataclass
class Recommendation:
    variant: str
    functions: int
    ratio: float
    n: int
    success: float
    ci_low: float
    ci_high: float
    diff_to_best: float
    diff_ci_low: float
    diff_ci_high: float
    tied_with_best: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_variants(study: Study, store: Store, *, seed: int = 0) -> list[Recommendation]:
    """Rank the study's variants by success on its stored episodes (best first)."""
    rows = [r for r in store.rows(study=study.config.study_name, with_record=False)]
    by_variant: dict[str, dict[str, float]] = {}
    for codec in study.codecs:
        by_variant[codec.name] = task_success(
            [{"task_id": r.task_id, "success": r.success} for r in rows if r.variant == codec.name])
    native = len(study.catalog.tools) or 1
    scored = []
    for codec in study.codecs:
        per_task = by_variant[codec.name]
        ci = bootstrap_ci(list(per_task.values()), seed=seed, key=("recommend", codec.name))
        scored.append((codec, per_task, ci))
    order = {c.name: i for i, c in enumerate(study.codecs)}  # ties keep the candidates' order (native first)
    scored.sort(key=lambda x: (-x[2].estimate if x[2].n else 1.0, order[x[0].name]))
    best_tasks = scored[0][1] if scored else {}
    out = []
    for codec, per_task, ci in scored:
        d = paired_bootstrap(per_task, best_tasks, seed=seed, key=("recommend-diff", codec.name))
        tied = codec is scored[0][0] or (d.low <= 0 <= d.high)
        out.append(Recommendation(codec.name, codec.function_count(), codec.function_count() / native, ci.n,
                                  ci.estimate, ci.low, ci.high, d.estimate, d.low, d.high, bool(tied)))
    return out


def recommend(cfg: StudyConfig, store: Store | str = "recommend.db", *, seed: int = 0) -> list[Recommendation]:
    """Run (or resume) the sample study for ``cfg`` and rank its variants."""
    study = build_study(cfg)
    st = store if isinstance(store, Store) else Store(store)
    try:
        run_study(study, st)
        return rank_variants(study, st, seed=seed)
    finally:
        if not isinstance(store, Store):
            st.close()


__all__ = ["Recommendation", "rank_variants", "recommend"]
