"""``toolbias tasks generate``: a model proposes tasks, and only those whose gold calls run on a fresh
environment are written. The model is a scripted loopback OpenAI-compatible server; the tools are
the real mcp-server-time's (and a tools: file on the state engine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.catalog import load_catalog
from toolbias.catalog.taskfile import read_task_file
from toolbias.store import Store
from toolbias.study.taskgen import candidates, vet

SHIPPED = Path(__file__).resolve().parents[2] / "src" / "toolbias" / "integrations" / "mcp_tasks"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


GOOD_1 = {"query": "It is 08:00 in Madrid. What time is it in Lima?",
          "gold_calls": [_call("convert_time", source_timezone="Europe/Madrid", time="08:00",
                               target_timezone="America/Lima")]}
GOOD_2 = {"query": "What's the time in Nairobi right now?",
          "gold_calls": [_call("get_current_time", timezone="Africa/Nairobi")]}
FIRST_ANSWER = "<think>two good ones and some bad ones</think>\n```json\n" + json.dumps({"tasks": [
    GOOD_1,
    {"query": "Book a flight to Oslo.", "gold_calls": [_call("book_flight", city="Oslo")]},  # no such tool
    {"query": "What time is it on Mars?", "gold_calls": [_call("get_current_time", timezone="Mars/Olympus")]},
    {"query": "Convert noon.", "gold_calls": [_call("convert_time", time="12:00")]},  # arguments missing
    {"query": "It is 08:00 in Madrid. What time is it in Lima?", "gold_calls": GOOD_1["gold_calls"]},  # a repeat
]}) + "\n```"
SECOND_ANSWER = json.dumps([GOOD_2, {"no": "query"}])


@pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
def test_generate_keeps_only_tasks_whose_gold_runs_on_a_fresh_server(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = f"mcp-config:{SHIPPED / 'time.json'}"
    out = tmp_path / "tasks.jsonl"
    with FakeOpenAIServer() as server:
        server.queue(Reply.text(FIRST_ANSWER), Reply.text(SECOND_ANSWER))
        code, stdout, err = run_cli(capsys, "tasks", "generate", "--catalog", spec, "--model", "openai:fake-model",
                                    "--base-url", server.base_url, "--n", "2", "--per-request", "5", "-o", str(out))
        asked = [b for b in server.requests if b.get("messages")]
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["query"], r["gold_calls"]) for r in rows] == [(GOOD_1["query"], GOOD_1["gold_calls"]),
                                                             (GOOD_2["query"], GOOD_2["gold_calls"])]
    assert [r["id"] for r in rows] == ["time-1", "time-2"] and {r["domain"] for r in rows} == {"time"}
    assert "kept 2 of 7 proposed in 2 request(s)" in err
    assert "gold call get_current_time failed" in err and "unknown tool" in err and "a repeat" in err
    # the prompt showed the server's tools, and the second request named what was already kept
    first, second = (json.dumps(b["messages"]) for b in asked[:2])
    assert "convert_time" in first and "source_timezone" in first
    assert "Already written" in second and "Madrid" in second
    # the file is a task file: the oracle plays it on the live server
    catalog = load_catalog(spec)
    assert [t.id for t in read_task_file(out, catalog)] == ["time-1", "time-2"]
    store = tmp_path / "s.db"
    code, _, err = run_cli(capsys, "run", "--model", "oracle", "--catalog", spec, "--task-file", str(out),
                           "--variants", "native,opaque_names", "--store", str(store))
    assert code == 0, err
    with Store(str(store)) as st:
        assert [r.success for r in st.rows()] == [True] * 4


def test_nothing_kept_is_an_error_and_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    tools = tmp_path / "office.json"
    tools.write_text(json.dumps([{"type": "function", "function": {
        "name": "send_note", "description": "Send a note.", "parameters": {
            "type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}}}}]), encoding="utf-8")
    out = tmp_path / "tasks.jsonl"
    with FakeOpenAIServer(default=Reply.text("I cannot think of any task.")) as server:
        code, _, err = run_cli(capsys, "tasks", "generate", "--catalog", f"tools:{tools}", "--model",
                               "openai:fake-model", "--base-url", server.base_url, "--n", "1", "--max-requests", "2",
                               "-o", str(out))
    assert code == 2 and "no proposed task survived" in err and "2 no JSON list of tasks" in err
    assert not out.exists()


def test_vet_on_the_state_engine_refuses_bad_calls_and_check_calls_to_writing_tools() -> None:
    from tests.support.catalogs import mini_catalog

    catalog = mini_catalog()
    ok = {"query": "kitchen light on", "gold_calls": [_call("set_light", room="kitchen", state="on")]}
    task, reason, dropped = vet(catalog, "home", ok, 3)
    assert task is not None and reason is None and not dropped and task.gold[0].arguments["room"] == "kitchen"
    bad_enum = {"query": "garage light", "gold_calls": [_call("set_light", room="garage", state="on")]}
    assert vet(catalog, "home", bad_enum, 3)[1] == "gold_calls: arguments refused by the schema (not_in_enum)"
    writer_check = {**ok, "check_calls": [_call("set_fan", room="kitchen", speed="low")]}
    assert vet(catalog, "home", writer_check, 3)[1] == "check_calls: a tool not marked read-only"
    too_long = {"query": "q", "gold_calls": [ok["gold_calls"][0]] * 4}
    assert vet(catalog, "home", too_long, 3)[1] == "not 1 to 3 gold calls"


@pytest.mark.parametrize("text,n", [('{"tasks": [{"query": "a"}, {"query": "b"}]}', 2), ('[{"query": "a"}]', 1),
                                    ("no json here", 0), ('{"tasks": "nope"}', 0), (None, 0),
                                    ('<think>{"tasks": [1, 2, 3]}</think> {"tasks": []}', 0)])
def test_candidates_reads_the_answer_as_data(text: str | None, n: int) -> None:
    assert len(candidates(text)) == n


@pytest.mark.skipif(shutil.which("mcp-server-git") is None or shutil.which("git") is None,
                    reason="mcp-server-git or git is not installed")
def test_vet_keeps_check_calls_to_tools_the_server_marks_read_only() -> None:
    pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")
    catalog = load_catalog(f"mcp-config:{SHIPPED / 'git.json'}")
    add = _call("git_add", repo_path=".", files=["notes.txt"])
    task, reason, dropped = vet(catalog, "git", {"query": "stage notes.txt", "gold_calls": [add],
                                                 "check_calls": [_call("git_status", repo_path=".")]}, 3)
    assert reason is None and task is not None and not dropped
    assert task.meta["check_calls"] == [_call("git_status", repo_path=".")]
    commit = _call("git_commit", repo_path=".", message="m")
    assert vet(catalog, "git", {"query": "q", "gold_calls": [add], "check_calls": [commit]}, 3)[1] == \
        "check_calls: a tool not marked read-only"
    missing = _call("git_add", repo_path=".", files=["no-such-file.txt"])
    assert vet(catalog, "git", {"query": "q", "gold_calls": [missing]}, 3)[1] == "gold call git_add failed"
