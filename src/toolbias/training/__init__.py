"""Mitigations that repair a model (paper section 8): SFT traces, splits, a multi-turn RL
environment and its TRL GRPO wiring.

* :mod:`.traces` - turn-by-turn oracle traces in TRL's chat-with-tools format;
* :mod:`.knowledge` - the check that a trace only uses what it was told;
* :mod:`.rl_env` - the multi-turn environment (toolbias's protocol or the paper's), its rewards and ablations;
* :mod:`.grpo` - prompts, a TRL ``rollout_func`` and the reward (torch/trl imported lazily).
"""

from __future__ import annotations

from .knowledge import UnseenUse, unseen_uses
from .rl_env import EnvOptions, Reward, ToolEnv, exact_success_reward, partial_reward, shaped_reward
from .traces import MIXTURES, PAPER_MIXTURE, TraceAgent, TraceError, TraceOptions, hf_messages, sft_examples

__all__ = ["MIXTURES", "PAPER_MIXTURE", "EnvOptions", "Reward", "ToolEnv", "TraceAgent", "TraceError",
           "TraceOptions", "UnseenUse", "exact_success_reward", "hf_messages", "partial_reward", "sft_examples",
           "shaped_reward", "unseen_uses"]
