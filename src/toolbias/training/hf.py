"""Hugging Face ``datasets`` column types for traces and RL prompts.

Tool schemas and call arguments differ from row to row; inferred from the data, Arrow
would unite them into one struct and fill every missing key with null (which a chat
template then prints). These features store them as JSON (``datasets.Json``), so every
row reads back exactly as written. ``load_dataset("json", data_files=...)`` of a
``toolbias train-data`` file infers the same; pass ``features=sft_features()`` to be sure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import MissingExtraError

#: the system-message key naming a GRPO prompt's episode (see :mod:`.grpo`)
EPISODE_KEY = "toolbias_episode"


def require(package: str) -> Any:
    """Import a package of the ``train`` extra, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError:
        raise MissingExtraError(package, "train", "training") from None


def _message(extra: Sequence[str] = ()) -> dict[str, Any]:
    ds = require("datasets")
    text = ds.Value("string")
    call = {"type": text, "id": text, "function": {"name": text, "arguments": ds.Json()}}
    return {"role": text, "content": text, "tool_calls": ds.List(call), "tool_call_id": text, "name": text,
            **{k: text for k in extra}}


def sft_features(prompt_completion: bool = False, protocol: bool = False) -> Any:
    """Features of ``toolbias train-data`` rows (``messages``, or ``prompt`` + ``completion``; ``protocol``:
    rows labelled with their evaluation protocol, as ``--protocol paper`` writes them)."""
    ds = require("datasets")
    text = ds.Value("string")
    turns = {"prompt": ds.List(_message()), "completion": ds.List(_message())} if prompt_completion \
        else {"messages": ds.List(_message())}
    return ds.Features({**turns, "tools": ds.List(ds.Json()), "variant": text, "task_id": text, "domain": text,
                        "recovery": ds.Value("bool"), **({"protocol": text} if protocol else {})})


def rl_features() -> Any:
    """Features of :func:`toolbias.training.grpo.rl_prompts` rows."""
    ds = require("datasets")
    text = ds.Value("string")
    prompt = {"role": text, "content": text, EPISODE_KEY: text}
    return ds.Features({"prompt": ds.List(prompt), "task_id": text, "variant": text, "domain": text})


def sft_dataset(rows: Sequence[dict[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of trace rows (:func:`toolbias.training.sft_examples`)."""
    ds = require("datasets")
    first = rows[0] if rows else {}
    return ds.Dataset.from_list(list(rows), features=sft_features("prompt" in first, "protocol" in first))


__all__ = ["EPISODE_KEY", "require", "rl_features", "sft_dataset", "sft_features"]
