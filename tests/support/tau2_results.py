"""Hand-built tau2 results files (the JSON ``tau2 run`` writes), as small as the import allows:
no tau2 needed to make or read them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def simulation(task_id: str, reward: float | None, *, trial: int = 0, mark: str | None = None,
               where: str = "choice", skipped: bool = False) -> dict[str, Any]:
    """One simulation: the user asks, the agent makes one call and answers. ``mark``: the
    variant the proxy's reply names, kept where litellm keeps it (``where``: "choice",
    "message", or "top": the top-level field litellm drops, so it never reaches the file)."""
    raw: dict[str, Any] = {"finish_reason": "stop", "index": 0,
                           "message": {"role": "assistant", "content": None, "tool_calls": None}}
    if mark is not None and where == "choice":
        raw["provider_specific_fields"] = {"toolbias": {"variant": mark}}
    elif mark is not None and where == "message":
        raw["message"]["provider_specific_fields"] = {"toolbias": {"variant": mark}}
    messages = [
        {"role": "user", "content": f"please help with {task_id}"},
        {"role": "assistant", "content": None, "raw_data": raw, "usage": {"prompt_tokens": 100, "completion_tokens": 7},
         "tool_calls": [{"id": "c1", "name": "get_user_details", "arguments": {"user_id": "u1"},
                         "requestor": "assistant"}]},
        {"role": "tool", "id": "c1", "content": "{\"name\": \"U\"}", "requestor": "assistant", "error": False},
        {"role": "assistant", "content": "Done.", "raw_data": raw},
    ]
    return {"id": f"sim-{task_id}-{trial}", "task_id": task_id, "trial": trial, "seed": 7, "start_time": "t0",
            "end_time": "t1", "duration": 2.5, "termination_reason": "user_stop", "skipped": skipped,
            "reward_info": None if reward is None else {"reward": reward, "db_check": {"db_match": reward == 1.0,
                                                                                        "db_reward": reward}},
            "messages": [] if skipped else messages}


def results(domain: str, sims: Sequence[dict[str, Any]], *, llm: str | None = "openai/qwen",
            timestamp: str = "2026-01-01T00:00:00") -> dict[str, Any]:
    """A results file's JSON: ``info`` with the domain and the agent's LLM, and ``sims``."""
    agent: dict[str, Any] = {"implementation": "llm_agent", "llm_args": {"api_key": "secret-key"}}
    if llm is not None:
        agent["llm"] = llm
    return {"timestamp": timestamp,
            "info": {"git_commit": "abc", "num_trials": 1, "max_steps": 100, "max_errors": 10, "seed": 300,
                     "user_info": {"implementation": "user_simulator", "llm": "openai/user"},
                     "agent_info": agent, "environment_info": {"domain_name": domain, "policy": "..."}},
            "tasks": [{"id": s["task_id"], "evaluation_criteria": {"actions": [
                {"action_id": "a", "name": "get_user_details", "arguments": {}, "requestor": "assistant"}]}}
                for s in sims],
            "simulations": list(sims)}


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def rewards_file(path: Path, domain: str, rewards: Sequence[float | None], *, mark: str | None = None,
                 llm: str | None = "openai/qwen", timestamp: str | None = None) -> Path:
    """A file with one simulation per reward, tasks "0", "1", ...; each file its own run (tau2
    stamps a run's creation time in the file: by default the file's name stands in for it)."""
    sims = [simulation(str(i), r, mark=mark) for i, r in enumerate(rewards)]
    return write(path, results(domain, sims, llm=llm, timestamp=timestamp or f"2026-01-01 {path.name}"))
