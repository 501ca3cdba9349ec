"""Continued pre-training after the corpus (PROTOCOL.md 7): ``select eval-cpt`` against a loopback server (raw
completions, the authors' parse, the target's share with intervals) and ``select train-cpt`` on a tiny local
model on CPU (the authors' LoRA settings, the embedding learning rate)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support import servers
from tests.support.selection import SHARED, SHARED_REASON
from toolbias.cli import cli
from toolbias.selection import cpt

needs_shared = pytest.mark.skipif(not (SHARED / "duplicate_api_clusters.json").is_file(), reason=SHARED_REASON)
NAMES = [("f_a_for_tool_a", "tool_a"), ("f_b_for_tool_b", "tool_b"), ("detect_for_tool_c", "tool_c")]


def test_the_authors_parse() -> None:
    # after the first line starting with Action, the leftmost name (function or tool) wins
    assert cpt.cpt_parse("Thought: tool_a looks fine\nAction: f_b_for_tool_b\nAction Input: {}", NAMES) == 1
    assert cpt.cpt_parse("thought\naction - use tool_c then f_a_for_tool_a", NAMES) == 2
    # no Action line: the whole output; a plain substring counts
    assert cpt.cpt_parse("I would call xf_a_for_tool_ay", NAMES) == 0
    assert cpt.cpt_parse("Action: Finish", NAMES) is None
    # a function name and its own tool name at the same place: the function
    assert cpt.cpt_parse("Action: detect_for_tool_c", NAMES) == 2


@needs_shared
def test_the_500_cluster_8_prompts() -> None:
    from toolbias.selection.benchmark import load_benchmark

    bench = load_benchmark(f"biasbusters:{SHARED}")
    prompts = cpt.cpt_prompts(bench)
    assert len(prompts) == 500 and len({p.text for p in prompts}) == 500
    assert all(p.text.startswith("System: You are AutoGPT") and p.text.endswith("Assistant:") for p in prompts)
    names = cpt.cpt_names(bench)
    assert names[2] == ("v1_textlanguage_for_text_language_by_api_ninjas", "text_language_by_api_ninjas")


@needs_shared
def test_eval_cpt_scores_base_and_adapter_as_raw_completions(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from toolbias.selection.benchmark import load_benchmark

    names = cpt.cpt_names(load_benchmark(f"biasbusters:{SHARED}"))

    def reply(body: dict) -> dict:
        # the base names What's Language; the adapter names API-Ninjas' tool twice in three prompts
        prompt = body["prompt"]
        if body["model"] == "base":
            text = f"Thought: ok\nAction: {names[0][0]}\nAction Input: {{}}"
        else:
            text = f"Action: {names[2][1]} rocks" if len(prompt) % 3 else "no idea"
        return {"id": "c", "object": "text_completion", "model": body["model"],
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}]}

    out = tmp_path / "completions.jsonl"
    with servers.FakeOpenAIServer(models=("base", "adapter"), responder=reply) as srv:
        result = CliRunner().invoke(cli, [
            "select", "eval-cpt", "--model", "openai:base", "--model", "openai:adapter", "--base-url", srv.base_url,
            "--benchmark", f"biasbusters:{SHARED}", "--sample", "6", "-o", str(out), "--json"],
            catch_exceptions=False)
        bodies = list(srv.requests)
    assert result.exit_code == 0, result.output
    assert len(bodies) == 60 and all("prompt" in b and "messages" not in b for b in bodies)
    assert {b["temperature"] for b in bodies} == {0.5} and {b["max_tokens"] for b in bodies} == {512}
    assert all("stop" not in b and "seed" not in b and b["prompt"].endswith("Assistant:") for b in bodies)
    data = json.loads(result.stdout)
    base, adapter = data["models"]
    assert base["outputs"] == 30 and base["recognised"] == 30 and base["target_share"]["estimate"] == 0.0
    assert base["target_share"]["high"] > 0                                       # Wilson: not a point
    assert adapter["target_share"]["estimate"] == 1.0 and adapter["recognised"] < 30
    assert data["paper"]["rows"][0]["share"] == 0.006
    assert len(out.read_text().splitlines()) == 60


def test_train_cpt_on_a_tiny_model_with_the_authors_settings(tmp_path) -> None:
    for package in ("torch", "transformers", "trl", "datasets", "peft"):
        pytest.importorskip(package, reason="needs the train extra (pip install 'toolbias[train]')")
    from tests.support.tiny import tiny_model, tiny_tokenizer

    docs = [f"Text Language by API-Ninjas detects the language of any text, note {i}. " * 8 for i in range(6)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d, "brand": "API-Ninjas"}) + "\n" for d in docs))
    tokenizer = tiny_tokenizer(docs, vocab_size=400)
    base = tmp_path / "base"
    tiny_model(tokenizer).save_pretrained(base)
    tokenizer.save_pretrained(base)
    out = tmp_path / "adapter"
    notes: list[str] = []
    trainer = cpt.train_cpt(str(corpus), str(base), str(out), overrides={"max_steps": 2, "save_steps": 1,
                                                                         "gradient_accumulation_steps": 1},
                            lora={"r": 8}, on_note=notes.append)
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["use_rslora"] is True and config["lora_alpha"] == 32 and config["lora_dropout"] == 0.0
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} == set(config["target_modules"])
    assert set(config["modules_to_save"]) == {"embed_tokens", "lm_head"}
    groups = trainer.optimizer.param_groups
    initial = sorted(g.get("initial_lr", g["lr"]) for g in groups)
    assert initial == [cpt.PAPER_EMBEDDING_LR, cpt.PAPER_CPT["learning_rate"]]
    args = trainer.args
    assert (args.lr_scheduler_type, args.warmup_steps, args.seed, args.weight_decay) == ("cosine", 0.1, 3407, 0.0)
    assert args.per_device_train_batch_size == 2 and args.max_length == 2048
    assert any("adamw_torch" in n for n in notes)                                # no CUDA here
    assert trainer.state.global_step == 2 and (out / "checkpoint-1").is_dir()
