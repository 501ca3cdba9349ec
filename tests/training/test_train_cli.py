"""The README's real-training commands, end to end on CPU with a tiny local model (one step each)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from toolbias.cli import cli
from toolbias.training import sft_examples

for _package in ("torch", "transformers", "trl", "datasets", "peft"):
    pytest.importorskip(_package, reason="needs the train extra (pip install 'toolbias[train]')")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    import torch

    from tests.support.tiny import tiny_model, tiny_tokenizer
    from toolbias import VariantSpec, build_codec
    from toolbias.catalog import load_catalog

    torch.set_num_threads(1)
    builtin = load_catalog("builtin")
    rows = list(sft_examples([build_codec(builtin, VariantSpec("native"))], builtin.tasks[:40]))
    tokenizer = tiny_tokenizer([json.dumps(r) for r in rows], vocab_size=800)
    out = tmp_path_factory.mktemp("tiny")
    tiny_model(tokenizer).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_train_sft_then_grpo_commands(tiny_dir, tmp_path):
    data = tmp_path / "sft.jsonl"
    runner = CliRunner()
    res = runner.invoke(cli, ["train-data", "--variants", "native,transaction", "--sample", "4", "-o", str(data)],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    sft_out = tmp_path / "sft-out"
    res = runner.invoke(cli, ["train-sft", str(data), "--model", str(tiny_dir), "-o", str(sft_out), "--max-steps",
                              "1", "--batch-size", "1", "--grad-accum", "1", "--no-bf16"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "trained 1 steps" in res.output and (sft_out / "adapter_config.json").exists()  # a LoRA adapter
    grpo_out = tmp_path / "grpo-out"
    res = runner.invoke(cli, ["train-grpo", "--model", str(tiny_dir), "-o", str(grpo_out), "--variants",
                              "reference_resolution", "--sample", "2", "--num-generations", "2", "--batch-size",
                              "2", "--grad-accum", "1", "--max-completion-length", "24", "--turn-tokens", "12",
                              "--turn-limit", "2", "--reward", "shaped", "--max-steps", "1", "--no-bf16"],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "trained 1 steps" in res.output and (grpo_out / "adapter_config.json").exists()


def test_training_without_the_extra_says_what_to_install(monkeypatch):
    import sys

    from toolbias.errors import MissingExtraError
    from toolbias.training.hf import require

    monkeypatch.setitem(sys.modules, "trl", None)  # as if not installed: importing it raises ImportError
    with pytest.raises(MissingExtraError, match=r"toolbias\[train\]"):
        require("trl")
