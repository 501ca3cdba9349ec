"""Splits manifests: no evaluated task is a training task, and results say what training saw."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from toolbias.catalog import load_catalog
from toolbias.cli import cli
from toolbias.study.runner import StudyConfig, select_tasks
from toolbias.study.splits import BUILTIN, TABLE4, SplitError, Splits, default_splits, load_splits

BUILTIN_CAT = load_catalog("builtin")


def test_builtin_default_mirrors_table4_and_parts_are_disjoint():
    splits = default_splits(BUILTIN_CAT)
    assert splits is BUILTIN and len(splits.train_domains) == len(splits.held_out_domains) == 6
    assert {d.name for d in BUILTIN_CAT.domains} == set(splits.train_domains) | set(splits.held_out_domains)
    train = splits.tasks(BUILTIN_CAT.tasks, "train")
    evaluated = splits.tasks(BUILTIN_CAT.tasks, "eval")
    assert not {t.id for t in train} & {t.id for t in evaluated}
    assert len(train) + len(evaluated) == len(BUILTIN_CAT.tasks)
    assert all(t.domain in splits.train_domains for t in train)
    held = [t for t in BUILTIN_CAT.tasks if t.domain in splits.held_out_domains]
    assert held and all(t in evaluated for t in held)
    share = len(train) / sum(t.domain in splits.train_domains for t in BUILTIN_CAT.tasks)
    assert 0.4 < share < 0.6  # eval_fraction 0.5 of the training domains, by hash


def test_labels():
    assert BUILTIN.label("car_cabin", "transaction") == "seen"
    assert BUILTIN.label("car_cabin", "class_dispatch") == "held_out_variant"
    assert BUILTIN.label("tv", "transaction") == "held_out_domain"
    assert BUILTIN.label("tv", "class_dispatch") == "held_out_both"


def test_table4_names_the_artifact_domains(toolschemaspace_dir):
    tools = json.loads((toolschemaspace_dir / "tools.json").read_text())
    domains = {t["group"] for t in tools}
    assert set(TABLE4.train_domains) | set(TABLE4.held_out_domains) == domains
    assert load_splits("default", load_catalog(f"toolschemaspace:{toolschemaspace_dir}")) is TABLE4


def test_train_data_and_an_eval_run_never_share_a_task(tmp_path):
    out = tmp_path / "sft.jsonl"
    res = CliRunner().invoke(cli, ["train-data", "--sample", "300", "--variants", "native", "-o", str(out)])
    assert res.exit_code == 0, res.output
    trained = {json.loads(line)["task_id"] for line in out.read_text().splitlines()}
    manifest = Splits.from_file(tmp_path / "sft.splits.json")
    assert manifest.train_variants == ("native",) and manifest.train_domains == BUILTIN.train_domains
    for sample in (None, 300):
        evaluated = select_tasks(BUILTIN_CAT, StudyConfig(split="eval", splits=str(tmp_path / "sft.splits.json"),
                                                          sample=sample))
        assert evaluated and not trained & {t.id for t in evaluated}
    # without a split the old sampling overlapped (the report): the split is what prevents it
    unsplit = {t.id for t in select_tasks(BUILTIN_CAT, StudyConfig(sample=300))}
    assert trained & unsplit


def test_bad_manifests_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"train_domains": ["car_cabin", "atlantis"]}))
    with pytest.raises(SplitError, match="atlantis") as err:
        load_splits(str(bad), BUILTIN_CAT)
    assert "car_cabin" in str(err.value.fix)
    bad.write_text(json.dumps({"train_domains": ["tv"], "held_out_domains": ["tv"]}))
    with pytest.raises(SplitError, match="both trained on and held out"):
        Splits.from_file(bad)
    bad.write_text(json.dumps({"train_domain": ["tv"]}))
    with pytest.raises(SplitError, match="unknown key"):
        Splits.from_file(bad)
    with pytest.raises(SplitError, match="not found"):
        Splits.from_file(tmp_path / "missing.json")
    res = CliRunner().invoke(cli, ["run", "--model", "oracle", "--split", "eval", "--splits", str(tmp_path / "x.json"),
                                   "--store", str(tmp_path / "s.db")])
    assert res.exit_code != 0 and "not found" in str(res.exception or res.output)


def test_run_split_eval_plays_only_eval_tasks(tmp_path):
    from toolbias.store import Store

    db = tmp_path / "s.db"
    res = CliRunner().invoke(cli, ["run", "--model", "oracle", "--variants", "native", "--split", "eval",
                                   "--sample", "24", "--store", str(db)])
    assert res.exit_code == 0, res.output
    with Store(db) as st:
        ids = {r.task_id for r in st.rows(with_record=False)}
    by_id = {t.id: t for t in BUILTIN_CAT.tasks}
    assert len(ids) == 24 and all(BUILTIN.part(by_id[i]) == "eval" for i in ids)
