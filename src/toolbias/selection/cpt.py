"""Biased continued pre-training, after the corpus (PROTOCOL.md 7): train a LoRA adapter, score its selections.

**Training** (:func:`train_cpt`, ``select train-cpt``; needs ``toolbias[train]``): a causal-LM LoRA on the
corpus's ``text`` documents (each + EOS) with TRL's ``SFTTrainer``, the authors' settings as defaults
(:data:`PAPER_CPT`, :data:`PAPER_CPT_LORA`): LoRA r 128, alpha 32, rsLoRA, dropout 0 on the attention and
MLP projections, ``embed_tokens`` and ``lm_head`` trained in full (as Unsloth does); sequence length 2048; batch 2 x accumulation 8; one
epoch; learning rate 5e-5 with 5e-6 for the embedding and head parameters (:data:`PAPER_EMBEDDING_LR`,
an optimizer parameter group as Unsloth's ``embedding_learning_rate``); warmup ratio 0.1, cosine schedule,
``adamw_8bit`` (``adamw_torch`` where bitsandbytes or CUDA is missing, said so), weight decay 0, seed 3407,
checkpoints every 52 steps (the authors': 52, 104, 153). The authors trained Unsloth's 4-bit
``Qwen3-8B-Base``; any causal LM id or path works here (quantisation is the user's choice).

**Evaluation** (:func:`aevaluate_cpt`, ``select eval-cpt``): the 500 cluster-8 text prompts (the main
benchmark's ToolBench text prompts for its 100 queries x 5 rotations, each stripped) sent as raw completions
(``/completions``, no chat template) at temperature 0.5, top-p 1, 512 new tokens, no seed, to a base model
and to its adapter (served as another model name, e.g. vLLM ``--lora-modules``). The answer is read as the
authors read it (:func:`cpt_parse`): from the first line starting with "Action" (case-insensitive; the whole
output if none), the leftmost occurrence of any of the five function names or five standardized tool names
(plain substring), credited to its function; shares over the recognised outputs, each with a Wilson interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig, InfraError, ModelAPI
from .intervals import interval_dict, wilson
from .present import build, resolve_prompt
from .toolbench import api_of
from .types import Benchmark, rotations

#: the authors' target: Text Language by API-Ninjas (cluster 8, API 3)
PAPER_CLUSTER, PAPER_TARGET_API = "8", 2
EVAL_CONFIG = GenerateConfig(temperature=0.5, top_p=1.0, max_tokens=512)

PAPER_CPT: dict[str, Any] = {
    "per_device_train_batch_size": 2, "gradient_accumulation_steps": 8, "num_train_epochs": 1,
    "learning_rate": 5e-5, "warmup_steps": 0.1, "lr_scheduler_type": "cosine", "optim": "adamw_8bit",
    "weight_decay": 0.0, "seed": 3407, "max_length": 2048, "save_strategy": "steps", "save_steps": 52,
    "logging_steps": 1, "report_to": "none", "dataset_text_field": "text", "packing": False,
}
PAPER_CPT_LORA: dict[str, Any] = {
    "r": 128, "lora_alpha": 32, "use_rslora": True, "lora_dropout": 0.0, "bias": "none",
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    # Unsloth trains the embeddings and the head in full (1.59 B of 9.78 B parameters for Qwen3-8B: the two
    # 151k x 4096 matrices plus the rank-128 adapters), which peft calls modules_to_save
    "modules_to_save": ["embed_tokens", "lm_head"],
}
PAPER_EMBEDDING_LR = 5e-6
EMBEDDING_PARTS = ("embed_tokens", "lm_head")


# --- evaluation ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CptPrompt:
    query_index: int
    rotation: int
    text: str


def cpt_prompts(bench: Benchmark, cluster: str = PAPER_CLUSTER, *, queries: int | None = None) -> list[CptPrompt]:
    """The cluster's ToolBench text prompts, every query in every cyclic rotation, each stripped."""
    c = bench.cluster(cluster)
    template = resolve_prompt("toolbench", "base")
    out = []
    for qi, query in enumerate(c.queries[:queries]):
        for r, order in enumerate(rotations(c.k)):
            req = build(query, c.presented(order), "toolbench", prompt=template, tool_choice=None)
            out.append(CptPrompt(qi, r, str(req.messages[-1]["content"]).strip()))
    return out


def cpt_names(bench: Benchmark, cluster: str = PAPER_CLUSTER) -> list[tuple[str, str]]:
    """(function name, standardized tool name) of each API of the cluster, canonical order."""
    return [(a.function_name, a.standard_tool_name) for a in (api_of(t) for t in bench.cluster(cluster).tools)]


def cpt_parse(text: str, names: Sequence[tuple[str, str]]) -> int | None:
    """The authors' reading (module doc): the API index credited, or None when no name occurs."""
    region = text
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().lower().startswith("action"):
            region = text[offset:]
            break
        offset += len(line)
    best: tuple[int, int, int] | None = None   # (position, -length, api)
    for api, (function, tool) in enumerate(names):
        for needle in (function, tool):
            at = region.find(needle)
            if at >= 0 and (best is None or (at, -len(needle)) < best[:2]):
                best = (at, -len(needle), api)
    return None if best is None else best[2]


@dataclass
class CptScores:
    """One model's shares over its recognised outputs."""

    model: str
    n: int
    recognised: int
    counts: list[int]
    target: int
    errors: int = 0
    outputs: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "outputs": self.n, "recognised": self.recognised, "errors": self.errors,
                "shares": [interval_dict(wilson(c, self.recognised)) for c in self.counts],
                "target": self.target, "target_share": interval_dict(wilson(self.counts[self.target],
                                                                              self.recognised))}


async def aevaluate_cpt(model: ModelAPI, prompts: Sequence[CptPrompt], names: Sequence[tuple[str, str]], *,
                        target: int = PAPER_TARGET_API, config: GenerateConfig = EVAL_CONFIG, concurrency: int = 8,
                        on_output: Callable[[dict[str, Any]], None] | None = None) -> CptScores:
    """Every prompt once through ``model`` (raw completions when it is a completions backbone)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    scores = CptScores(model=model.spec, n=0, recognised=0, counts=[0] * len(names), target=target)

    async def one(p: CptPrompt) -> None:
        async with gate:
            try:
                out = await model.generate([{"role": "user", "content": p.text}], [], None, config)
            except InfraError as exc:
                scores.errors += 1
                row: dict[str, Any] = {"query_index": p.query_index, "rotation": p.rotation, "error": str(exc)}
            else:
                api = cpt_parse(out.content or "", names)
                scores.n += 1
                if api is not None:
                    scores.recognised += 1
                    scores.counts[api] += 1
                row = {"query_index": p.query_index, "rotation": p.rotation, "api": api, "text": out.content}
            scores.outputs.append(row)
            if on_output is not None:
                on_output({"model": model.spec, **row})

    await asyncio.gather(*(one(p) for p in prompts))
    return scores


def completions_model(model: ModelAPI) -> ModelAPI:
    """``model`` sending raw completions (no chat template, no stop), as the authors' ``generate`` calls."""
    from .backbones import BACKBONES, BackboneModel

    bb = BACKBONES["toolllama"].with_overrides(stop=(), temperature=EVAL_CONFIG.temperature,
                                               top_p=EVAL_CONFIG.top_p, max_tokens=EVAL_CONFIG.max_tokens)
    return BackboneModel(model, bb)


# --- training ------------------------------------------------------------------------------------------------


def _optim(name: str) -> tuple[str, str | None]:
    """``adamw_8bit`` where bitsandbytes and CUDA are present, else ``adamw_torch`` with a note."""
    if name != "adamw_8bit":
        return name, None
    try:
        import bitsandbytes  # noqa: F401
        import torch

        if torch.cuda.is_available():
            return name, None
    except ImportError:
        pass
    return "adamw_torch", "note: adamw_8bit needs bitsandbytes on CUDA; training with adamw_torch"


def train_cpt(corpus: str, model: Any, output_dir: str, *, tokenizer: Any | None = None,
              embedding_lr: float | None = PAPER_EMBEDDING_LR, lora: Mapping[str, Any] | None = None,
              overrides: Mapping[str, Any] | None = None, on_note: Callable[[str], None] | None = None) -> Any:
    """LoRA continued pre-training on a corpus JSONL (``{"text": ...}`` per line); returns the trainer."""
    from ..training.hf import require
    from ..training.run import load_model

    trl = require("trl")
    datasets = require("datasets")
    peft = require("peft")
    transformers = require("transformers")
    dataset = datasets.load_dataset("json", data_files=corpus, split="train")
    if "text" not in dataset.column_names:
        raise ToolbiasError("the corpus has no 'text' field", where=corpus,
                            fix="give the JSONL that `select pretrain-corpus` writes")
    dataset = dataset.select_columns(["text"])
    settings = {**PAPER_CPT, **(overrides or {})}
    settings["optim"], note = _optim(str(settings["optim"]))
    if note and on_note is not None:
        on_note(note)
    if "bf16" not in settings:   # bf16 where the GPU has it (the authors' run), else full precision on CPU
        import torch

        settings["bf16"] = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    model, tokenizer = load_model(model, tokenizer)
    lora_config = peft.LoraConfig(task_type="CAUSAL_LM", **{**PAPER_CPT_LORA, **(lora or {})})

    class CptTrainer(trl.SFTTrainer):  # type: ignore[misc, name-defined]
        """SFTTrainer with a separate learning rate for the embedding and head parameters."""

        def create_optimizer(self, *args: Any, **kwargs: Any) -> Any:
            if getattr(self, "optimizer", None) is None and embedding_lr is not None:
                cls, opt_kwargs = transformers.Trainer.get_optimizer_cls_and_kwargs(self.args, self.model)
                embed: list[Any] = []
                rest: list[Any] = []
                for name, p in self.model.named_parameters():
                    if p.requires_grad:
                        (embed if any(part in name for part in EMBEDDING_PARTS) else rest).append(p)
                groups = [{"params": rest, "weight_decay": self.args.weight_decay}]
                if embed:
                    groups.append({"params": embed, "weight_decay": 0.0, "lr": embedding_lr})
                self.optimizer = cls(groups, **opt_kwargs)
            return super().create_optimizer(*args, **kwargs)

    trainer = CptTrainer(model=model, args=trl.SFTConfig(output_dir=output_dir, **settings), train_dataset=dataset,
                         processing_class=tokenizer, peft_config=lora_config)
    trainer.train()
    trainer.save_model(output_dir)
    return trainer


__all__ = ["EVAL_CONFIG", "PAPER_CPT", "PAPER_CPT_LORA", "PAPER_EMBEDDING_LR", "CptPrompt", "CptScores",
           "aevaluate_cpt", "completions_model", "cpt_names", "cpt_parse", "cpt_prompts", "train_cpt"]
