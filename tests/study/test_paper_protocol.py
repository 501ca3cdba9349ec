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


def test_protocol_paper_is_a_clear_error_naming_the_match_rule() -> None:
    assert check_protocol("toolbias") is Protocol.TOOLBIAS
    with pytest.raises(ProtocolNotImplemented) as e:
        check_protocol("paper")
    assert e.value.fix is not None and "--match paper" in e.value.fix


def test_run_refuses_protocol_paper_before_any_work(tmp_path) -> None:
    from toolbias.cli.run import run_cmd

    store = tmp_path / "s.db"
    r = CliRunner().invoke(run_cmd, ["--model", "oracle", "--protocol", "paper", "--store", str(store)])
    assert r.exit_code != 0
    assert isinstance(r.exception, ProtocolNotImplemented)
    assert not store.exists()
    help_text = CliRunner().invoke(run_cmd, ["--help"]).output
    assert "--protocol" in help_text and "the paper's)" not in help_text


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
    refused = CliRunner().invoke(cli, ["recommend", "--model", "oracle", "--protocol", "paper",
                                       "--store", str(tmp_path / "x.db")])
    assert isinstance(refused.exception, ProtocolNotImplemented)
