"""Mitigation conditions and the report's Table 3 / Table 14 views, from real stores."""

from __future__ import annotations

import json
import zlib

import pytest
from click.testing import CliRunner

from toolbias.catalog import load_catalog
from toolbias.cli import cli
from toolbias.providers.scripted import ScriptedProvider
from toolbias.report.mitigation import MARK_SE, TrainedRun, mitigation_table_from_store
from toolbias.store import Store
from toolbias.study.episode import DEFAULT_SYSTEM, Condition, EpisodeConfig, system_message
from toolbias.study.runner import StudyConfig, build_study, run_study
from toolbias.study.splits import BUILTIN
from toolbias.variants import VariantSpec, build_codec, registry
from toolbias.variants.instructions import GENERATED, variant_instructions

BUILTIN_CAT = load_catalog("builtin")

#: paper Table 11, verbatim (the space before the final period in the paper's text is typesetting)
TABLE11 = {
    "fully_merged": "All operations go through a single dispatcher tool. Set operation to the operation you need "
                    "and pass each of its arguments under the key <operation>::<argument>.",
    "class_dispatch": "Each class has one dispatcher tool named after the class. Call the tool of the right class, "
                      "set operation to the method you need, and pass each argument under the key "
                      "<method>::<argument>.",
    "fully_split": "The values of enumerable arguments are part of the tool names. Call the tool whose name "
                   "contains the values you need and pass only the remaining arguments.",
    "interval_split": "Numeric arguments are split into ranges across several tools. Call the tool whose name gives "
                      "the range that contains your value, and still pass the value itself.",
    "nested_args": "Some arguments are grouped into nested objects. Put each argument inside the object that the "
                   "tool's parameter schema defines for it.",
    "namespaced_names": "Tool names are prefixed with their class name. Call each tool by its full prefixed name, "
                        "using the class you intend to act on.",
}


@pytest.mark.parametrize("variant", sorted(TABLE11))
def test_table11_instructions_verbatim(variant):
    codec = build_codec(BUILTIN_CAT, registry()[variant])
    assert variant_instructions(codec) == [TABLE11[variant]]
    task = BUILTIN_CAT.tasks[0]
    prompt = system_message(codec, BUILTIN_CAT, task, EpisodeConfig(condition=Condition.INSTRUCTION))
    assert prompt.startswith(DEFAULT_SYSTEM) and prompt.endswith("\n\n" + TABLE11[variant])
    assert TABLE11[variant] not in system_message(codec, BUILTIN_CAT, task, EpisodeConfig())


def test_every_registered_variant_and_composed_or_user_defined_ones_get_instructions():
    for name, spec in registry().items():
        codec = build_codec(BUILTIN_CAT, spec)
        sentences = variant_instructions(codec)
        assert bool(sentences) == (name != "native"), name  # the native schema needs none
    composed = build_codec(BUILTIN_CAT, registry()["composed"])
    assert len(variant_instructions(composed)) == len(composed.layers)
    mine = build_codec(BUILTIN_CAT, VariantSpec("mine", ({"op": "strip"}, {"op": "reorder", "seed": 1})))
    assert variant_instructions(mine) == [GENERATED["strip"], GENERATED["reorder"]]


def _gold_turn(task, codec):
    return {"tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in codec.encode(task.gold)]}


def _coin(task_id: str, share: float) -> bool:
    return zlib.crc32(task_id.encode()) % 100 < share * 100


def base_model(task, codec, messages, turn):
    """Succeeds on a third of the tasks; with the instruction in its prompt, on every task."""
    if turn:
        return {"content": "done"}
    told = any(s in messages[0]["content"] for s in variant_instructions(codec))
    return _gold_turn(task, codec) if told or _coin(task.id, 1 / 3) else {"content": "I cannot."}


def trained_model(task, codec, messages, turn):
    """Trained on native only: succeeds on native everywhere, elsewhere on its training domains only."""
    if turn:
        return {"content": "done"}
    ok = codec.name == "native" or (task.domain in BUILTIN.train_domains and _coin(task.id, 0.9))
    return _gold_turn(task, codec) if ok else {"content": "I cannot."}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("mit") / "m.db"
    domains = ("car_cabin", "tv")  # one training domain, one held-out domain of the built-in split
    with Store(path) as st:
        for name, script, condition in (("base", base_model, Condition.BASE),
                                        ("base", base_model, Condition.INSTRUCTION),
                                        ("sft-native", trained_model, Condition.BASE)):
            cfg = StudyConfig(model=name, variants="native,fully_merged", domains=domains, split="eval",
                              sample=80, condition=condition, concurrency=4)
            run_study(build_study(cfg, model=ScriptedProvider(script=script, name=name)), st)
    return path


def test_table3_layout_from_the_store(store, tmp_path):
    manifest = tmp_path / "native.splits.json"
    BUILTIN.with_variants(["native"]).write(manifest)
    with Store(store) as st:
        table = mitigation_table_from_store(st, trained=[TrainedRun.parse(f"SFT native=sft-native@{manifest}")],
                                            n_resamples=500)
    assert table is not None and table.base_model == "base"
    assert table.columns == [("instruction", "mitigation"), ("SFT native", "training")]
    rows = {r.variant: r for r in table.rows}
    assert list(rows) == ["native", "fully_merged"]
    merged = rows["fully_merged"]
    # the numbers are the store's: base success on a third, the instruction lifts it to all
    assert 0.2 < merged.base < 0.5 and merged.n == 80
    inst = merged.deltas["instruction"]
    assert inst.estimate == pytest.approx(1 - merged.base) and inst.marked and inst.sign == "+"
    assert inst.low <= inst.estimate <= inst.high and abs(inst.estimate) >= MARK_SE * inst.se
    assert "instruction" not in rows["native"].deltas or not rows["native"].deltas["instruction"].marked
    sft = rows["native"].deltas["SFT native"]
    assert sft.trained_on is True and sft.marked
    assert rows["fully_merged"].deltas["SFT native"].trained_on is False
    # Table 14: the merged variant's gain stays on the training domain
    transfer = {t.variant: t for t in table.transfer}
    assert transfer["fully_merged"].label == "held_out_variant" and transfer["native"].label == "seen"
    assert transfer["fully_merged"].gain_train_domains > 0.3 > transfer["fully_merged"].gain_held_out_domains
    assert transfer["native"].kept is not None and transfer["native"].kept > 0.8


def test_report_cli_shows_table3_table14_and_split_marks(store, tmp_path):
    manifest = tmp_path / "native.splits.json"
    BUILTIN.with_variants(["native"]).write(manifest)
    args = ["report", "--store", str(store), "--resamples", "300", "--repeats", "5",
            "--trained", f"SFT native=sft-native@{manifest}", "--splits", str(manifest)]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "Mitigations (paper Table 3)" in res.output and "Transfer of training gains (paper Table 14)" in res.output
    assert "held out domain" in res.output and "held out variant" in res.output
    res = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    payload = json.loads(res.output)
    assert payload["mitigation"]["base_model"] == "base" and payload["splits"]["training_tasks_evaluated"] == 0
    labels = {(c["model"], c["variant"], c["label"]) for c in payload["splits"]["cells"]}
    assert ("sft-native", "native", "seen") in labels and ("base", "fully_merged", "held_out_both") in labels
    html = tmp_path / "r.html"
    CliRunner().invoke(cli, [*args, "--html", str(html)], catch_exceptions=False)
    assert "Mitigations (Table 3)" in html.read_text()


def test_bad_trained_option_is_a_clear_error(store):
    res = CliRunner().invoke(cli, ["report", "--store", str(store), "--trained", "nolabel"])
    assert res.exit_code != 0 and "LABEL=MODEL" in str(res.exception)
