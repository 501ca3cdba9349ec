"""GRPO wiring: the multi-turn rollout function, and a few real TRL GRPO steps on CPU.

The smoke test builds a tiny tokenizer and a tiny randomly initialised model locally (no
downloads), warms the model on one trace for a few dozen steps so that its samples
contain tool calls (a purely random model never calls a tool, so every reward would be
equal and GRPO would have nothing to learn from), then runs two GRPO steps with TRL.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from tests.support.catalogs import mini_catalog
from toolbias import VariantSpec, build_codec
from toolbias.training import EnvOptions, Reward, sft_examples
from toolbias.training.hf import EPISODE_KEY

torch = pytest.importorskip("torch", reason="needs the train extra (pip install 'toolbias[train]')")
pytest.importorskip("transformers", reason="needs the train extra (pip install 'toolbias[train]')")
datasets = pytest.importorskip("datasets", reason="needs the train extra (pip install 'toolbias[train]')")

from toolbias.training.grpo import Rollout, env_reward, rl_prompts  # noqa: E402
from toolbias.training.hf import rl_features  # noqa: E402

CAT = mini_catalog()
NATIVE = build_codec(CAT, VariantSpec("native"))
REFERENCE = build_codec(CAT, VariantSpec("reference_resolution", ({"op": "reference"},)))


@pytest.fixture(scope="module")
def tokenizer():
    from tests.support.tiny import tiny_tokenizer

    torch.set_num_threads(1)  # a tiny model is much faster on one thread, and the machine is shared
    rows = list(sft_examples([NATIVE, REFERENCE], CAT.tasks))
    return tiny_tokenizer([json.dumps(r) for r in rows] + [t.query for t in CAT.tasks], vocab_size=600)


class ScriptedPolicy:
    """Stands in for the policy: its turns are a trace's assistant turns, as tokens."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns, self.training = tokenizer, list(turns), True

    def eval(self):
        self.training = False

    def train(self):
        self.training = True

    def generate(self, context, pad_token_id, **_):
        rows = []
        for _row in context:  # a batch: each row gets the next scripted turn
            m = self.turns.pop(0)
            calls = "".join("<tool_call>" + json.dumps({"name": c["function"]["name"],
                                                        "arguments": c["function"]["arguments"]})
                            + "</tool_call>" for c in m["tool_calls"] or [])
            rows.append(self.tokenizer((m["content"] or "") + calls + "<|im_end|>", add_special_tokens=False)["input_ids"])
        width = max(len(r) for r in rows)
        new = torch.tensor([r + [pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([context, new], dim=1)


def fake_trainer(tokenizer, policy, max_completion_length=4096):
    return SimpleNamespace(processing_class=tokenizer, model=policy,
                           accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                           args=SimpleNamespace(max_completion_length=max_completion_length, temperature=1.0))


def test_rollout_plays_protocol_turns_and_masks_the_environment_tokens(tokenizer):
    task = CAT.tasks[0]
    prompt = rl_prompts([REFERENCE], [task])[0]["prompt"]
    trace = next(sft_examples([REFERENCE], [task]))
    policy = ScriptedPolicy(tokenizer, [m for m in trace["messages"] if m["role"] == "assistant"])
    rollout = Rollout({"reference_resolution": REFERENCE})
    out = rollout([prompt], fake_trainer(tokenizer, policy))
    assert out["env_reward"] == [1.0] and out["env_turns"] == [3] and out["logprobs"] is None
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    assert len(ids) == len(mask) and 0 in mask
    model_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    env_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert model_text.count("<tool_call>") == 2 and "<tool_response>" not in model_text
    assert env_text.count("<tool_response>") == 2 and "ref_" in env_text  # the reply that hands out the id
    assert tokenizer.decode(out["prompt_ids"][0]).endswith("<|im_start|>assistant\n")
    assert rollout.last[0].record.turns == 3 and policy.training  # train mode restored


def test_rollout_batches_each_turn_over_the_episodes_still_running(tokenizer):
    a, b = CAT.tasks[0], next(t for t in CAT.tasks if len(t.gold) == 2)
    prompts = [rl_prompts([REFERENCE], [a])[0]["prompt"], rl_prompts([NATIVE], [b])[0]["prompt"]]
    turns_a = [m for m in next(sft_examples([REFERENCE], [a]))["messages"] if m["role"] == "assistant"]
    turns_b = [m for m in next(sft_examples([NATIVE], [b]))["messages"] if m["role"] == "assistant"]
    assert (len(turns_a), len(turns_b)) == (3, 2)
    policy = ScriptedPolicy(tokenizer, [turns_a[0], turns_b[0], turns_a[1], turns_b[1], turns_a[2]])
    out = Rollout({"reference_resolution": REFERENCE, "native": NATIVE})(prompts, fake_trainer(tokenizer, policy))
    assert out["env_reward"] == [1.0, 1.0] and out["env_turns"] == [3, 2] and not policy.turns
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(ids) == len(mask) and tokenizer.pad_token_id not in ids  # padding never enters a rollout
        assert ids[-1] == tokenizer.eos_token_id and mask[-1] == 1  # each ends with the policy's answer


def test_rollout_needs_the_episode_marker(tokenizer):
    from toolbias.errors import ToolbiasError

    with pytest.raises(ToolbiasError, match=EPISODE_KEY):
        Rollout({"native": NATIVE})([[{"role": "user", "content": "hi"}]],
                                    fake_trainer(tokenizer, ScriptedPolicy(tokenizer, [])))


def test_grpo_smoke_real_trl_steps_on_a_tiny_model(tokenizer, tmp_path):
    trl = pytest.importorskip("trl", reason="needs the train extra (pip install 'toolbias[train]')")
    from tests.support.tiny import tiny_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    task = CAT.tasks[0]
    model = tiny_model(tokenizer)
    # warm start: a few dozen supervised steps on the task's trace, so samples contain tool calls
    trace = next(sft_examples([NATIVE], [task]))
    clean = [{k: v for k, v in m.items() if v is not None} for m in trace["messages"]]
    full = tokenizer.apply_chat_template(clean[:3], tools=trace["tools"], tokenize=False)
    prompt = tokenizer.apply_chat_template(clean[:2], tools=trace["tools"], tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tokenizer(full, add_special_tokens=False)["input_ids"]])
    labels = ids.clone()
    labels[0, :len(tokenizer(prompt, add_special_tokens=False)["input_ids"])] = -100
    opt = torch.optim.AdamW(model.parameters(), 3e-3)
    for _ in range(40):
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()

    data = datasets.Dataset.from_list(rl_prompts([NATIVE], [task] * 4), features=rl_features())
    played = []

    class Recorded(Rollout):  # keeps every batch's environments (``last`` holds only the latest)
        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            played.append((list(self.last), out["env_reward"]))
            return out

    rollout = Recorded({"native": NATIVE}, EnvOptions(turn_limit=2, reward=Reward.SHAPED), max_turn_tokens=40)
    args = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=80, learning_rate=1e-3, beta=0.0, report_to=[], logging_steps=1,
                          save_strategy="no", use_cpu=True, temperature=1.0)
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[env_reward], args=args, train_dataset=data,
                              processing_class=tokenizer, rollout_func=rollout)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    assert trainer.state.global_step == 2
    # rollouts went through the environment: every episode took a turn and was scored there
    assert len(played) == 2 and all(len(envs) == 4 for envs, _ in played)
    assert all(env.done and env.record.turns >= 1 for envs, _ in played for env in envs)
    assert any(env.record.calls for envs, _ in played for env in envs)  # the policy called tools (warm start)
    logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2
    for (envs, rewards), h in zip(played, logged, strict=True):  # the rewards the trainer saw are the env's
        assert rewards == [env.reward() for env in envs]
        assert h["rewards/env_reward/mean"] == pytest.approx(sum(rewards) / 4, abs=1e-6)
    # the optimiser stepped, on a non-zero gradient where the rewards of a group differed
    assert any(h["reward_std"] > 0 and h["grad_norm"] > 0 for h in logged)
    assert any((a != p).any() for a, p in zip(before, model.parameters(), strict=True))
