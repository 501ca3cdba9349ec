"""The recommender ranks variants by paired sample success."""

from __future__ import annotations

from tests.support.catalogs import mini_catalog
from toolbias.providers.scripted import ScriptedProvider
from toolbias.recommend import rank_variants
from toolbias.runner import StudyConfig, build_study, run_study
from toolbias.store import Store

CAT = mini_catalog()


def native_only(task, codec, messages, turn):
    """Plays the gold on the native variant and answers without calls on any other."""
    if turn or codec.name != "native":
        return None
    return {"tool_calls": [{"name": a.tool, "arguments": dict(a.arguments)} for a in task.gold]}


def test_ranks_best_first_with_paired_intervals(tmp_path):
    cfg = StudyConfig(model="m", variants="strip_descriptions,native", concurrency=2)
    study = build_study(cfg, model=ScriptedProvider(script=native_only, name="m"), catalog=CAT)
    with Store(tmp_path / "r.db") as st:
        run_study(study, st)
        ranked = rank_variants(study, st)
    assert [r.variant for r in ranked] == ["native", "strip_descriptions"]
    best, worst = ranked
    assert best.success == 1.0 and worst.success == 0.0 and worst.diff_to_best == -1.0
    assert not worst.tied_with_best and worst.diff_ci_high < 0
    assert best.n == worst.n == len(CAT.tasks)  # every task counted once per variant
