"""GRPO wiring for TRL: prompts, a multi-turn rollout function and the reward it returns.

TRL's ``GRPOTrainer(rollout_func=...)`` hands the rollout function the prompts of a batch
and the trainer; it returns the token ids of each prompt and completion and any extra
fields, which reach the reward functions as keyword arguments. :class:`Rollout` plays
each prompt as a multi-turn episode in :class:`~toolbias.training.rl_env.ToolEnv`: the
policy generates a turn, the environment answers its calls (protocol replies, results,
rejections), the answers are appended as tokens the loss ignores (``env_mask`` 0), and so
on until the policy answers without a call or the turn / token budget ends.
:func:`env_reward` hands the environment's reward to the trainer.

Each prompt carries its episode (task id and variant) in a ``toolbias_episode`` key of
its system message, because the rollout function sees only the prompts; chat templates
ignore unknown keys.

Example (one GPU or CPU; see README "Training" for the paper's settings)::

    from trl import GRPOTrainer
    from toolbias.training.grpo import Rollout, env_reward, grpo_config, rl_dataset
    dataset, codecs = rl_dataset("builtin", "mixture", sample=512)
    trainer = GRPOTrainer(model="Qwen/Qwen3-4B-Instruct-2507", reward_funcs=[env_reward],
                          args=grpo_config(output_dir="grpo-out"), train_dataset=dataset,
                          rollout_func=Rollout(codecs))
    trainer.train()

Heavy packages (torch, transformers, trl, datasets) are imported only when used;
``pip install 'toolbias[train]'`` installs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog.model import Task
from ..errors import ToolbiasError
from ..study.paper_env import PaperCallMap
from ..study.paper_protocol import PAPER_MAX_TOKENS, PAPER_TURN_LIMIT, Protocol
from ..variants.codec import Codec
from .hf import EPISODE_KEY, require, rl_features
from .rl_env import EnvOptions, ToolEnv
from .traces import hf_messages, training_codecs, training_variants

#: paper Table 12 (GRPO): the settings our copy of the paper states - eight samples per prompt,
#: a constant learning rate, the low-variance (k3) KL estimator, PPO-style clipping, no entropy
#: bonus. The figures our copy does not show legibly are ours, chosen as common GRPO settings for
#: a 4B model; each is a keyword of grpo_config() and a flag of the README's commands.
PAPER_GRPO = {
    "num_generations": 8,             # Table 12: eight samples per prompt
    "lr_scheduler_type": "constant",  # Table 12: constant learning rate
    "learning_rate": 1e-6,            # ours
    "beta": 0.01,                     # ours: the KL coefficient (Table 13 varies it)
    "epsilon": 0.2,                   # ours: PPO-style clipping, lower
    "epsilon_high": 0.28,             # ours: PPO-style clipping, upper
    "temperature": 1.0,               # ours: rollout temperature
    "max_completion_length": 8192,    # ours: tokens per episode (all turns)
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 4,
    "bf16": True,
}
#: paper Table 12 (LoRA SFT): rank/alpha/dropout, learning rate and batch figures are not legible in
#: our copy; the stated parts are the targets, assistant-only loss, two epochs, cosine decay with
#: warmup, AdamW and bf16.
PAPER_SFT = {
    "num_train_epochs": 2, "lr_scheduler_type": "cosine", "warmup_steps": 0.03, "learning_rate": 1e-4,
    "optim": "adamw_torch", "bf16": True, "assistant_only_loss": True, "max_length": 16384,
    "per_device_train_batch_size": 1, "gradient_accumulation_steps": 16,
}
PAPER_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
              "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def rl_prompts(codecs: Sequence[Codec], tasks: Sequence[Task], options: EnvOptions | None = None
               ) -> list[dict[str, Any]]:
    """One prompt row per task (the variant rotating over ``codecs``): ``prompt`` (system + user,
    the system message naming the episode), ``task_id``, ``variant``, ``domain``."""
    rows = []
    maps = paper_maps(codecs, options)
    for i, task in enumerate(tasks):
        codec = codecs[i % len(codecs)]
        messages, _ = ToolEnv(codec, task, options, calls=maps.get(codec.name)).reset()
        system, user = messages
        rows.append({"prompt": [{**system, EPISODE_KEY: f"{task.id}\t{codec.name}"},
                                {**user, EPISODE_KEY: None}],
                     "task_id": task.id, "variant": codec.name, "domain": task.domain})
    return rows


def rl_dataset(catalog: str, variants: str, *, sample: int | None = None, seed: int = 0,
               splits: str = "default", options: EnvOptions | None = None) -> tuple[Any, dict[str, Codec]]:
    """A ``datasets.Dataset`` of training prompts (the splits manifest's ``train`` part) and the
    codecs by variant name, for :class:`Rollout`."""
    from ..catalog import load_catalog
    from ..study.defaults import study_config
    from ..study.runner import select_tasks

    datasets = require("datasets")
    cat = load_catalog(catalog)
    protocol = (options or EnvOptions()).protocol
    codecs = training_codecs(cat, variants, protocol)
    tasks = select_tasks(cat, study_config(catalog=catalog, variants=training_variants(variants, protocol),
                                           sample=sample, seed=seed, split="train", splits=splits))
    rows = rl_prompts(codecs, tasks, options)
    return datasets.Dataset.from_list(rows, features=rl_features()), {c.name: c for c in codecs}


def paper_maps(codecs: Sequence[Codec], options: EnvOptions | None) -> dict[str, PaperCallMap]:
    """Under the paper's protocol, each codec's reading as the artifact's call map (shared by the
    environments of one variant); empty under toolbias's."""
    if options is None or options.protocol is not Protocol.PAPER:
        return {}
    return {c.name: PaperCallMap(c) for c in codecs}


def env_reward(completions: Sequence[Any], env_reward: Sequence[float], **_: Any) -> list[float]:
    """The reward TRL logs and optimises: what the environment scored each rollout."""
    return [float(r) for r in env_reward]


class Rollout:
    """A TRL ``rollout_func``: each prompt played as a multi-turn :class:`ToolEnv` episode.

    ``codecs``: the variants by name (the prompts name theirs); ``options``: the environment
    (protocol, ablations, reward); ``max_turn_tokens``: tokens the policy may generate per turn
    (None: the artifact's 1,024 under the paper's protocol, else the trainer's
    ``max_completion_length``), the whole episode stays within ``max_completion_length``."""

    def __init__(self, codecs: Mapping[str, Codec], options: EnvOptions | None = None, *,
                 max_turn_tokens: int | None = None) -> None:
        self.codecs = dict(codecs)
        self.options = options or EnvOptions(turn_limit=PAPER_TURN_LIMIT)
        paper = self.options.protocol is Protocol.PAPER
        self.max_turn_tokens = max_turn_tokens if max_turn_tokens is not None or not paper else PAPER_MAX_TOKENS
        #: under the paper's protocol, each variant's reading as the artifact's call map
        self.paper_maps = paper_maps(list(self.codecs.values()), self.options)
        self.tasks = {t.id: t for c in self.codecs.values() for t in c.catalog.tasks}
        #: the finished environments of the last call (inspection, tests)
        self.last: list[ToolEnv] = []

    def env_for(self, prompt: Sequence[Mapping[str, Any]]) -> ToolEnv:
        marker = next((m.get(EPISODE_KEY) for m in prompt if m.get(EPISODE_KEY)), None)
        if not marker:
            raise ToolbiasError(f"a GRPO prompt has no '{EPISODE_KEY}' key naming its episode",
                                fix="build the dataset with toolbias.training.grpo.rl_dataset / rl_prompts")
        task_id, _, variant = str(marker).partition("\t")
        if task_id not in self.tasks or variant not in self.codecs:
            raise ToolbiasError(f"unknown episode {task_id!r} on variant {variant!r}",
                                fix="pass Rollout the codecs the dataset was built with")
        return ToolEnv(self.codecs[variant], self.tasks[task_id], self.options, calls=self.paper_maps.get(variant))

    def __call__(self, prompts: Sequence[Sequence[Mapping[str, Any]]], trainer: Any) -> dict[str, Any]:
        torch = require("torch")
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        budget = int(args.max_completion_length or 1024)
        per_turn = int(self.max_turn_tokens or budget)
        episodes = []
        for prompt in prompts:
            env = self.env_for(prompt)
            ids = tokenizer(_render(tokenizer, env.messages, env.tools, generation=True),
                            add_special_tokens=False)["input_ids"]
            episodes.append(_Episode(env, ids))
        was_training = model.training
        model.eval()
        try:
            while True:  # one batched generation per turn over the episodes still running
                running = [e for e in episodes if not e.env.done and len(e.completion) < budget]
                if not running:
                    break
                self._turn(running, model, tokenizer, args, torch, budget, per_turn)
        finally:
            if was_training:
                model.train()
        self.last = [e.env for e in episodes]
        for e in episodes:
            e.env.done = True
            e.env._finish()
        return {"prompt_ids": [e.prompt_ids for e in episodes],
                "completion_ids": [e.completion[:budget] for e in episodes],
                "logprobs": None,  # the trainer recomputes them
                "env_mask": [e.mask[:budget] for e in episodes],
                "env_reward": [e.env.reward() for e in episodes],
                "env_turns": [e.env.record.turns for e in episodes],
                "env_rejections": [e.env.record.rejections for e in episodes]}

    def _turn(self, running: list[_Episode], model: Any, tokenizer: Any, args: Any, torch: Any, budget: int,
              per_turn: int) -> None:
        """Generate the next turn of every running episode (left-padded batch), play it in its
        environment, and append the environment's answer as masked tokens."""
        pad = tokenizer.pad_token_id
        contexts = [e.prompt_ids + e.completion for e in running]
        width = max(len(c) for c in contexts)
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts])
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
        room = [min(per_turn, budget - len(e.completion)) for e in running]
        with torch.no_grad():
            generated = model.generate(ids, attention_mask=attention, do_sample=True,
                                       temperature=float(getattr(args, "temperature", 1.0) or 1.0),
                                       max_new_tokens=max(room), eos_token_id=tokenizer.eos_token_id,
                                       pad_token_id=pad)
        eos_id, eos = tokenizer.eos_token_id, tokenizer.eos_token or ""
        for e, row, limit in zip(running, generated[:, width:].tolist(), room, strict=True):
            new = row[:row.index(eos_id) + 1] if eos_id in row else row
            new = new[:limit]
            e.completion += new
            e.mask += [1] * len(new)
            before = _render(tokenizer, e.env.messages, e.env.tools, generation=False)
            e.env.step(tokenizer.decode(new, skip_special_tokens=True))
            if e.env.done or not new or new[-1] != eos_id or len(e.completion) >= budget:
                e.env.done = True  # answered, truncated or out of tokens: the episode ends here
                continue
            after = _render(tokenizer, e.env.messages, e.env.tools, generation=True)
            cut = before.rfind(eos) + len(eos) if eos and eos in before else len(before)
            if not after.startswith(before[:cut]):
                raise ToolbiasError("the chat template re-renders earlier turns differently once tool results "
                                    "follow, so a multi-turn rollout cannot extend its tokens",
                                    fix="use a model whose chat template is prefix-preserving (Qwen, Llama 3)")
            reply = tokenizer(after[cut:], add_special_tokens=False)["input_ids"]
            e.completion += reply
            e.mask += [0] * len(reply)


@dataclass
class _Episode:
    """One rollout in progress: its environment, prompt tokens, and completion tokens with the
    mask that tells the policy's tokens (1) from the environment's (0)."""

    env: ToolEnv
    prompt_ids: list[int]
    completion: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)


def _render(tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]],
            *, generation: bool) -> str:
    clean = [{k: v for k, v in m.items() if v is not None and k != EPISODE_KEY} for m in hf_messages(messages)]
    text: str = tokenizer.apply_chat_template(clean, tools=list(tools), add_generation_prompt=generation,
                                              tokenize=False)
    return text


def grpo_config(**overrides: Any) -> Any:
    """TRL's ``GRPOConfig`` with the paper's Table 12 settings (``PAPER_GRPO``) as defaults."""
    trl = require("trl")
    return trl.GRPOConfig(**{**PAPER_GRPO, **overrides})


__all__ = ["EPISODE_KEY", "PAPER_GRPO", "PAPER_LORA", "PAPER_SFT", "Rollout", "env_reward", "grpo_config",
           "paper_maps", "require", "rl_dataset", "rl_prompts"]
