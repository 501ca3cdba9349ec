"""The paper protocol's success rule (``--match paper``) and the ``--protocol`` option, on their own."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from toolbias.catalog.model import NativeAction
from toolbias.study.paper_protocol import Protocol, ProtocolNotImplemented, check_protocol, paper_match
from toolbias.study.success import MatchRule, condition_label, succeeded


def act(tool: str, **args: object) -> NativeAction:
    return NativeAction("car_cabin", tool, args)


@pytest.mark.parametrize(("gold", "got", "same"), [
    ({"state": "vent", "extent": 25}, {"state": "Vent", "extent": "25"}, True),   # case, number as text
    ({"extent": 25}, {"extent": 25.0}, True),
    ({"extent": 25}, {"extent": " 25 "}, True),
    ({"extent": 25}, {"extent": "25.5"}, False),
    ({"zone": "rear"}, {"zone": "rear", "note": None, "tag": ""}, True),           # null and "" dropped
    ({"zone": "rear", "level": 2}, {"zone": "rear"}, False),                       # missing argument
    ({"on": True}, {"on": 1}, False),                                               # bool is no number
    ({"on": True}, {"on": "true"}, False),
    ({"x": -0.0}, {"x": "0"}, True),
    ({"zone": "rear"}, {"zone": "front"}, False),
])
def test_paper_rule_by_hand(gold: dict, got: dict, same: bool) -> None:
    assert paper_match("set_sunroof", gold, "set_sunroof", got) is same
    assert succeeded([act("set_sunroof", **got)], [act("set_sunroof", **gold)], rule=MatchRule.PAPER) is same


def test_exact_stays_stricter() -> None:
    gold, got = [act("set_sunroof", state="vent", extent=25)], [act("set_sunroof", state="Vent", extent="25")]
    assert succeeded(got, gold, rule=MatchRule.PAPER)
    assert not succeeded(got, gold, rule=MatchRule.EXACT)


def test_paper_rule_is_a_multiset_and_checks_the_name() -> None:
    a, b = act("set_fan", speed="High"), act("set_fan", speed="high")
    assert succeeded([a, b], [b, b], rule=MatchRule.PAPER)
    assert not succeeded([a], [b, b], rule=MatchRule.PAPER)
    assert not succeeded([act("set_fans", speed="high")], [b], rule=MatchRule.PAPER)


def test_the_rule_is_part_of_the_stored_condition() -> None:
    assert condition_label("base", MatchRule.PAPER) == "base+paper"
    assert condition_label("base", MatchRule.EXACT) == "base"


def test_protocol_paper_is_a_clear_error_where_it_is_not_reproduced() -> None:
    assert check_protocol("toolbias") is Protocol.TOOLBIAS
    assert check_protocol("paper", "run") is Protocol.PAPER
    with pytest.raises(ProtocolNotImplemented) as e:
        check_protocol("paper", "select")
    assert e.value.fix is not None and "--protocol paper" in e.value.fix and "--match paper" in e.value.fix


def test_run_under_the_paper_protocol_is_its_own_study(tmp_path) -> None:
    from toolbias.cli import cli
    from toolbias.store import Store

    store = str(tmp_path / "s.db")
    for extra in ([], ["--protocol", "paper"]):
        r = CliRunner().invoke(cli, ["run", "--model", "oracle", "--variants", "native,fully_merged", "--tasks", "3",
                                     "--store", store, *extra])
        assert r.exit_code == 0, r.output
    with Store(store) as st:
        rows = list(st.rows())
        studies = st.studies()
    assert {r.condition for r in rows} == {"base", "base@paper"}
    paper = [r for r in rows if r.condition == "base@paper"]
    assert all(r.success for r in paper) and len(paper) == 6
    assert all(r.record["match"] == "paper" and r.record["paper"]["n_rejected"] == 0 for r in paper)
    # the artifact's prompt: the domain's system prompt, a blank line, its tool instruction
    system = paper[0].record["messages"][0]["content"]
    assert system.endswith("\n\nIMPORTANT: You are given a specific set of callable functions as your tools. "
                           "You must accomplish the task using ONLY these provided functions and their declared "
                           "arguments. Do not call any function that is not in the provided tool list, even if you "
                           "know such a function exists. Encode every action using the tools exactly as defined.")
    assert any(s.get("protocol") == "paper" for s in studies.values())
    out = CliRunner().invoke(cli, ["report", "--store", store]).output
    assert "strict/base:" in out and "strict/base@paper:" in out


def test_the_paper_protocol_refuses_another_match_rule_and_variants_it_cannot_read(tmp_path) -> None:
    from toolbias.cli import cli

    r = CliRunner().invoke(cli, ["run", "--model", "oracle", "--protocol", "paper", "--match", "exact",
                                 "--store", str(tmp_path / "a.db")])
    assert r.exit_code != 0 and "--match exact cannot be used with --protocol paper" in str(r.exception)
    r = CliRunner().invoke(cli, ["run", "--model", "oracle", "--protocol", "paper", "--variants", "transaction_shared",
                                 "--tasks", "2", "--store", str(tmp_path / "b.db")])
    assert isinstance(r.exception, ProtocolNotImplemented), r.output
    assert "variant 'transaction_shared'" in str(r.exception)
    assert not (tmp_path / "b.db").exists()


def test_grpo_default_reward_is_named_the_ablation_it_is() -> None:
    from toolbias.cli import train
    from toolbias.training.rl_env import __doc__ as rl_doc

    help_text = CliRunner().invoke(train.train_grpo, ["--help"]).output
    assert "ablation" in help_text and "exact success (the paper's)" not in help_text
    assert rl_doc is not None and "``exact`` (the paper's)" not in rl_doc


def test_a_study_under_the_paper_rule_is_never_pooled_with_exact(tmp_path) -> None:
    from toolbias.cli import cli

    store = str(tmp_path / "s.db")
    for extra in ([], ["--match", "paper"]):
        r = CliRunner().invoke(cli, ["run", "--model", "oracle", "--variants", "native", "--tasks", "3",
                                     "--store", store, *extra])
        assert r.exit_code == 0, r.output
    out = CliRunner().invoke(cli, ["report", "--store", store]).output
    assert "strict/base:" in out and "strict/base+paper:" in out


def test_recommend_under_the_paper_rule_stores_its_own_condition(tmp_path) -> None:
    import sqlite3

    from toolbias.cli import cli

    store = tmp_path / "r.db"
    r = CliRunner().invoke(cli, ["recommend", "--model", "oracle", "--variants", "native,fully_merged",
                                 "--sample", "4", "--match", "paper", "--store", str(store)])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(store) as db:
        conditions = {c for (c,) in db.execute("select distinct condition from episodes")}
    assert conditions == {"base+paper"}
    paper = CliRunner().invoke(cli, ["recommend", "--model", "oracle", "--protocol", "paper", "--variants",
                                     "native,fully_merged", "--sample", "4", "--store", str(store)])
    assert paper.exit_code == 0, paper.output
    with sqlite3.connect(store) as db:
        conditions = {c for (c,) in db.execute("select distinct condition from episodes")}
    assert conditions == {"base+paper", "base@paper"}
