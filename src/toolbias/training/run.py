"""Real training runs: LoRA SFT on ``toolbias train-data`` traces and GRPO in the multi-turn
environment, with the paper's Table 12 settings as defaults (``PAPER_SFT``, ``PAPER_GRPO``,
``PAPER_LORA`` in :mod:`.grpo`). Every setting can be overridden by keyword (the CLI's flags).

Heavy packages (torch, transformers, trl, datasets, peft) are imported here, when a run starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .grpo import PAPER_GRPO, PAPER_LORA, PAPER_SFT, Rollout, env_reward, rl_dataset
from .hf import require, sft_features
from .rl_env import EnvOptions


def _lora(enabled: bool) -> Any:
    if not enabled:
        return None
    peft = require("peft")
    return peft.LoraConfig(task_type="CAUSAL_LM", **PAPER_LORA)


def load_model(model: Any, tokenizer: Any | None) -> tuple[Any, Any]:
    """A model id/path or a loaded model, and its tokenizer."""
    transformers = require("transformers")
    if tokenizer is None:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model) if isinstance(model, str) else None
    if isinstance(model, str):
        model = transformers.AutoModelForCausalLM.from_pretrained(model, dtype="auto")
    return model, tokenizer


def sft(data: str, model: Any, output_dir: str, *, lora: bool = True, tokenizer: Any | None = None,
        overrides: Mapping[str, Any] | None = None) -> Any:
    """LoRA SFT (assistant-only loss) on a ``train-data`` JSONL file; returns the trainer."""
    trl = require("trl")
    datasets = require("datasets")
    with open(data, encoding="utf-8") as fh:
        first = json.loads(fh.readline() or "{}")
    features = sft_features(prompt_completion="prompt" in first, protocol="protocol" in first)
    dataset = datasets.load_dataset("json", data_files=data, split="train", features=features)
    settings = {**PAPER_SFT, **(overrides or {})}
    if "prompt" in features:  # prompt-completion rows: the loss is on the completion already
        settings["assistant_only_loss"] = False
    model, tokenizer = load_model(model, tokenizer)
    trainer = trl.SFTTrainer(model=model, args=trl.SFTConfig(output_dir=output_dir, **settings),
                             train_dataset=dataset, processing_class=tokenizer, peft_config=_lora(lora))
    trainer.train()
    trainer.save_model(output_dir)
    return trainer


def grpo(model: Any, output_dir: str, *, catalog: str = "builtin", variants: str = "mixture",
         sample: int | None = None, seed: int = 0, splits: str = "default", env: EnvOptions | None = None,
         lora: bool = True, tokenizer: Any | None = None, max_turn_tokens: int | None = None,
         overrides: Mapping[str, Any] | None = None) -> Any:
    """GRPO with the multi-turn rollout on the splits manifest's training tasks; returns the trainer."""
    trl = require("trl")
    options = env or EnvOptions(turn_limit=16)
    dataset, codecs = rl_dataset(catalog, variants, sample=sample, seed=seed, splits=splits, options=options)
    model, tokenizer = load_model(model, tokenizer)
    args = trl.GRPOConfig(output_dir=output_dir, seed=seed, **{**PAPER_GRPO, **(overrides or {})})
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[env_reward], args=args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=_lora(lora),
                              rollout_func=Rollout(codecs, options, max_turn_tokens=max_turn_tokens))
    trainer.train()
    trainer.save_model(output_dir)
    return trainer


__all__ = ["grpo", "sft"]
