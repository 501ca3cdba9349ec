"""The schema-bias artifact's episode runner (``eval/run_agentic.py``), imported from
``../shared/reference/ToolSchemaSpace`` as a test oracle and pointed at a loopback server.

    with agentic_runner({"SCHEMA_VARIANT": "5"}, "strict", base_url, queries, "fake-model",
                        max_tokens=64, max_turns=2) as ra:
        row = ra.run_episode(query)   # the artifact's row: exact, actions, turns, n_rejected, ...

The runner reads its settings from the environment at import, so it is imported afresh inside
the block (the environment restored after); its shared client module (``eval.common``) gets the
server, the model name and the token cap, restored when the block ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from tests.support.paths import SHARED_DATA
from tests.support.reference_artifact import ARTIFACT, runner_afresh

#: the artifact's catalog and query sample (the shared copy)
DATA = SHARED_DATA / "toolschemaspace"
#: toolbias's --control for the artifact's SCHEMA_CONTROL
CONTROLS = {"strict": "hard", "lenient": "loose"}
#: the environment run_agentic and its adapter read at import time
_ENV = ("SCHEMA_VARIANT", "SCHEMA_SPEC", "SCHEMA_CONTROL", "SCHEMA_K", "SYN_QUERIES", "MAX_TURNS", "SYN_MODEL",
        "SYN_MAX_TOKENS", "SYN_NOTE", "SYN_TOOLCHOICE", "SYN_SEED", "SYN_EXTRA_BODY", "SYN_API")


def runner_skip_reason() -> str | None:
    """Why the artifact's runner cannot run here (its repository, its query sample, openai), or None."""
    if not (ARTIFACT / "eval" / "run_agentic.py").exists():
        return f"needs the artifact's repository at {ARTIFACT} (../shared/reference/ToolSchemaSpace); not present"
    if not (DATA / "queries.sample.jsonl").exists():
        return f"needs the artifact's query sample at {DATA}; not present"
    try:
        import openai  # noqa: F401
    except ImportError:
        return "the artifact's eval/common.py imports openai (pip install 'toolbias[dev]')"
    return None


@contextmanager
def agentic_runner(variant_env: dict[str, str], control: str, base_url: str, queries: os.PathLike[str] | str,
                   model: str, *, max_tokens: int | None = None, max_turns: int | None = None) -> Iterator[ModuleType]:
    """``eval.run_agentic`` for one variant (``variant_env``: ``{"SCHEMA_VARIANT": "5"}`` or
    ``{"SCHEMA_SPEC": path}``) and control, its client on ``base_url``; ``max_tokens`` and
    ``max_turns`` lower the artifact's 1,024 tokens and 16 turns (the token cap restored after)."""
    env = {**variant_env, "SCHEMA_CONTROL": CONTROLS[control], "SYN_QUERIES": str(queries), "SYN_MODEL": model,
           **({"MAX_TURNS": str(max_turns)} if max_turns else {})}
    ra = runner_afresh("eval.run_agentic", env, base_url, model, unset=_ENV)
    common: Any = sys.modules["eval.common"]  # imported by runner_afresh; run_agentic reads its cap per call
    cap = common.MAX_TOKENS
    common.MAX_TOKENS = max_tokens or cap
    try:
        yield ra
    finally:
        common.MAX_TOKENS = cap
