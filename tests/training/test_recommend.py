"""The recommender ranks variants by paired sample success."""

from __future__ import annotations

from dataclasses import replace

from tests.support.catalogs import mini_catalog
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import Store
from toolbias.study.recommend import rank_variants
from toolbias.study.runner import StudyConfig, build_study, run_study

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


# -- successive halving ------------------------------------------------------------------

HALVING_CANDIDATES = "native,strip_descriptions,nested_args,namespaced_names,reorder_arguments"
#: each candidate's share of tasks the scripted model solves (by a hash of the task id)
SKILL = {"native": 0.9, "strip_descriptions": 0.6, "nested_args": 0.3, "namespaced_names": 0.1,
         "reorder_arguments": 0.0}


def skilled(task, codec, messages, turn):
    import zlib

    if turn or zlib.crc32(task.id.encode()) % 100 >= 100 * SKILL[codec.name]:
        return None
    return {"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(task.gold)]}


def test_successive_halving_spends_the_sample_on_the_finalists(tmp_path):
    from toolbias.study.recommend import halving_schedule, successive_halving

    assert halving_schedule(12, 36) == [(12, 5), (6, 9), (3, 18), (2, 36)]
    assert halving_schedule(2, 36) == [(2, 36)]
    cfg = StudyConfig(model="skilled", variants=HALVING_CANDIDATES, sample=48, concurrency=4)
    rounds = []
    with Store(tmp_path / "h.db") as st:
        result = successive_halving(cfg, st, model=ScriptedProvider(script=skilled, name="skilled"),
                                    on_round=rounds.append)
        again = successive_halving(cfg, st, model=ScriptedProvider(script=skilled, name="skilled"))
    assert result.choice == "native" and [r.variant for r in result.ranking][:2] == ["native", "strip_descriptions"]
    finalists = [r for r in result.ranking if r.eliminated_in is None]
    assert len(finalists) == 2 and all(r.n == 48 for r in finalists)
    assert result.ranking[-1].variant == "reorder_arguments" and result.ranking[-1].n < 48
    assert [len(r.candidates) for r in rounds] == [5, 3, 2] and rounds[-1].tasks == 48
    # paired: every survivor of a round played the same tasks
    before = [0] + [r.tasks for r in rounds[:-1]]  # each round plays only the tasks new to it
    assert result.episodes == sum(len(r.candidates) * (r.tasks - b) for r, b in zip(rounds, before, strict=True))
    assert result.episodes < result.episodes_full == 5 * 48
    assert result.p_best > 0.95 and result.lead is not None and result.lead[1] > 0  # sure, and the lead excludes 0
    assert again.episodes == 0 and again.choice == "native"  # a re-run resumes from the store


def test_halving_under_another_match_rule_is_a_session_of_its_own(tmp_path):
    """Stored success depends on the match rule: a re-run under another rule plays its own episodes
    (it neither reuses the first rule's verdicts nor collides with its study names)."""
    from toolbias.study.recommend import successive_halving
    from toolbias.study.success import MatchRule

    cfg = StudyConfig(model="skilled", variants="native,strip_descriptions", sample=8, concurrency=2)
    with Store(tmp_path / "h.db") as st:
        exact = successive_halving(cfg, st, model=ScriptedProvider(script=skilled, name="skilled"))
        normalised = successive_halving(replace(cfg, match=MatchRule.NORMALISED), st,
                                        model=ScriptedProvider(script=skilled, name="skilled"))
        studies = {r.study.split("|round")[0] for r in st.rows(with_record=False)}
    assert exact.episodes == normalised.episodes == 2 * 8
    assert len(studies) == 2 and any("+normalised" in s for s in studies)


def test_recommend_cli_prints_the_choice_and_exports_it_for_the_proxy(tmp_path):
    import json

    from click.testing import CliRunner

    from toolbias.cli import cli

    out = tmp_path / "exp"
    args = ["recommend", "--model", "oracle", "--variants", "native,fully_merged,transaction", "--sample", "12",
            "--store", str(tmp_path / "r.db"), "--export", str(out)]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "recommended: native" in res.output and "episodes played" in res.output
    spec = json.loads((out / "variant.json").read_text())
    assert spec["name"] == "native" and spec["steps"] == []
    tools = json.loads((out / "tools.json").read_text())
    assert tools["variant"] == "native" and "car_cabin" in tools["domains"]
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["choice"] == "native" and {r["variant"] for r in rec["ranking"]} == {"native", "fully_merged",
                                                                                    "transaction"}
    res = CliRunner().invoke(cli, [*args[:-2], "--json"], catch_exceptions=False)
    assert json.loads(res.output)["choice"] == "native"
