"""`toolbias train-data` output loads with HF datasets and goes through TRL's SFT chat-with-tools path."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from tests.support.catalogs import mini_catalog
from toolbias import VariantSpec, build_codec
from toolbias.cli import cli
from toolbias.training import TraceOptions, sft_examples

datasets = pytest.importorskip("datasets", reason="needs the train extra (pip install 'toolbias[train]')")
pytest.importorskip("transformers", reason="needs the train extra (pip install 'toolbias[train]')")

CAT = mini_catalog()
CODECS = [build_codec(CAT, VariantSpec("native")),
          build_codec(CAT, VariantSpec("reference_resolution", ({"op": "reference"},))),
          build_codec(CAT, VariantSpec("transaction", ({"op": "transaction"},)))]


def no_nulls(messages):
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


@pytest.fixture(scope="module")
def tokenizer():
    from tests.support.tiny import tiny_tokenizer

    rows = list(sft_examples(CODECS, CAT.tasks))
    return tiny_tokenizer([json.dumps(r) for r in rows], vocab_size=600)


def test_cli_output_loads_with_datasets_exactly_as_written(tmp_path):
    out = tmp_path / "sft.jsonl"
    result = CliRunner().invoke(cli, ["train-data", "--sample", "40", "--recovery", "0.25", "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 40 and sum(r["recovery"] for r in rows) >= 5
    assert len({r["variant"] for r in rows}) == 7  # the paper's mixture, rotated
    from toolbias.training.hf import sft_features

    for ds in (datasets.load_dataset("json", data_files=str(out), split="train"),
               datasets.load_dataset("json", data_files=str(out), split="train", features=sft_features())):
        assert len(ds) == 40
        for i in (0, 3, 17):  # heterogeneous schemas and arguments come back unchanged (no null-filled keys)
            assert ds[i]["tools"] == rows[i]["tools"]
            assert ds[i]["messages"] == rows[i]["messages"]


def test_rows_render_through_a_real_chat_template_with_tools(tokenizer):
    from toolbias.training.hf import sft_dataset

    ds = sft_dataset(list(sft_examples(CODECS, CAT.tasks[:6])))
    for row in ds:
        text = tokenizer.apply_chat_template(no_nulls(row["messages"]), tools=row["tools"], tokenize=False)
        for m in row["messages"]:
            for call in m["tool_calls"] or []:
                assert json.dumps(call["function"]["arguments"]) in text  # each call, with its real arguments
            if m["role"] == "tool":
                assert f"<tool_response>{m['content']}</tool_response>" in text
        assert '"properties": {"room": null' not in text
        assert all(t["function"]["name"] in text for t in row["tools"])


def test_trl_sft_trainer_takes_the_rows_and_learns_only_assistant_turns(tokenizer, tmp_path):
    torch = pytest.importorskip("torch", reason="needs the train extra (pip install 'toolbias[train]')")
    trl = pytest.importorskip("trl", reason="needs the train extra (pip install 'toolbias[train]')")
    from tests.support.tiny import tiny_model
    from toolbias.training.hf import sft_dataset

    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    rows = list(sft_examples([CODECS[2]], CAT.tasks[:2], TraceOptions(recovery=1.0, prompt_completion=True)))
    args = trl.SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, report_to=[],
                         save_strategy="no", use_cpu=True, max_length=2048, logging_steps=1)
    trainer = trl.SFTTrainer(model=tiny_model(tokenizer), args=args, train_dataset=sft_dataset(rows),
                             processing_class=tokenizer)
    example = trainer.train_dataset[0]
    ids, labels = example["input_ids"], example["labels"]  # TRL folds the loss mask into labels (-100: no loss)
    whole, learned = tokenizer.decode(ids), tokenizer.decode([t for t, lab in zip(ids, labels, strict=True)
                                                              if lab != -100])
    error = rows[0]["prompt"][-1]["content"]  # the refusal of the premature write (no handle yet)
    assert error.startswith("Error:") and error in whole and error not in learned
    assert learned.index('"name": "begin"') < learned.index('"name": "write_')  # learned: begin first, then
    assert '"name": "commit"' in learned                                        # the writes and the commit
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert trainer.state.global_step == 1
    assert any((a != p).any() for a, p in zip(before, trainer.model.parameters(), strict=True))


def test_trl_assistant_only_loss_on_message_rows_skips_tool_results(tokenizer, tmp_path):
    pytest.importorskip("torch", reason="needs the train extra (pip install 'toolbias[train]')")
    trl = pytest.importorskip("trl", reason="needs the train extra (pip install 'toolbias[train]')")
    from tests.support.tiny import tiny_model
    from toolbias.training.hf import sft_dataset

    rows = list(sft_examples([CODECS[1]], CAT.tasks[:2]))  # reference resolution: replies between turns
    args = trl.SFTConfig(output_dir=str(tmp_path), max_steps=1, report_to=[], save_strategy="no", use_cpu=True,
                         max_length=2048, assistant_only_loss=True)  # the paper's setting (Table 12)
    trainer = trl.SFTTrainer(model=tiny_model(tokenizer), args=args, train_dataset=sft_dataset(rows),
                             processing_class=tokenizer)
    example = trainer.train_dataset[0]
    learned = tokenizer.decode([t for t, lab in zip(example["input_ids"], example["labels"], strict=True)
                                if lab != -100])
    assert learned.count("<tool_call>") == 2 and "resolve_" in learned
    assert "<tool_response>" not in learned and "ref_" in learned  # the handle is learned where it is used
