"""``--task-file`` means the same on run, probe, recommend and train-data: the catalog's tasks
come from the file (through ``StudyConfig.task_file`` and ``study_catalog``), and a bad file is
refused the same way by each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from toolbias.store import Store

TOOLS = [
    {"type": "function", "function": {"name": "send_note", "description": "Send a note to someone.",
                                      "parameters": {"type": "object", "required": ["to", "text"], "properties": {
                                          "to": {"type": "string"}, "text": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.",
                                      "parameters": {"type": "object", "required": ["hour"], "properties": {
                                          "hour": {"type": "integer", "minimum": 0, "maximum": 23}}}}},
]
TASKS = [
    {"id": "n1", "query": "Tell zebra-42 that lunch is ready.",
     "gold_calls": [{"name": "send_note", "arguments": {"to": "zebra-42", "text": "lunch is ready"}}]},
    {"id": "a1", "query": "Wake me at 7.", "gold_calls": [{"name": "set_alarm", "arguments": {"hour": 7}}]},
    {"id": "n2", "query": "Tell okapi-7 hello, then set an alarm for 9.",
     "gold_calls": [{"name": "send_note", "arguments": {"to": "okapi-7", "text": "hello"}},
                    {"name": "set_alarm", "arguments": {"hour": 9}}]},
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    tools = tmp_path / "office.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    return f"tools:{tools}", str(tasks)


def _rows(store: Path, kind: str = "task") -> list:
    with Store(str(store)) as st:
        return list(st.rows(kind=kind))


def test_run_plays_the_files_tasks_under_a_study_name_that_names_the_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: tuple[str, str]) -> None:
    catalog, tasks = files
    store = tmp_path / "s.db"
    code, _, err = run_cli(capsys, "run", "--model", "oracle", "--catalog", catalog, "--task-file", tasks,
                           "--variants", "native,opaque_names", "--store", str(store))
    assert code == 0, err
    rows = _rows(store)
    assert sorted({r.task_id for r in rows}) == ["a1", "n1", "n2"]
    assert len(rows) == 6 and all(r.success for r in rows)
    assert {r.study for r in rows} == {f"oracle|strict|base|{catalog}|tasks:{tasks}"}


def test_probe_draws_its_examples_from_the_files_gold_calls(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: tuple[str, str]) -> None:
    catalog, tasks = files
    store = tmp_path / "p.db"
    code, _, err = run_cli(capsys, "probe", "--model", "oracle", "--catalog", catalog, "--task-file", tasks,
                           "--variants", "native", "--n", "2", "--store", str(store))
    assert code == 0, err
    queries = [r.record["query"] for r in _rows(store, kind="probe")]
    assert len(queries) == 2
    # the catalog alone has no tasks, so a probe's values would be drawn at random: these are the file's
    assert any("zebra-42" in q or "okapi-7" in q for q in queries), queries


def test_recommend_plays_the_files_tasks(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         files: tuple[str, str]) -> None:
    catalog, tasks = files
    store = tmp_path / "r.db"
    code, out, err = run_cli(capsys, "recommend", "--model", "oracle", "--catalog", catalog, "--task-file", tasks,
                             "--variants", "native,opaque_names", "--sample", "3", "--no-halving", "--json",
                             "--store", str(store))
    assert code == 0, err
    assert {r["variant"] for r in json.loads(out)} == {"native", "opaque_names"}
    assert sorted({r.task_id for r in _rows(store)}) == ["a1", "n1", "n2"]


def test_train_data_writes_traces_of_the_files_tasks(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     files: tuple[str, str]) -> None:
    catalog, tasks = files
    out = tmp_path / "sft.jsonl"
    code, _, err = run_cli(capsys, "train-data", "--catalog", catalog, "--task-file", tasks, "--variants", "native",
                           "--splits", "none", "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["task_id"] for r in rows) == ["a1", "n1", "n2"]
    assert any("zebra-42" in json.dumps(r["messages"]) for r in rows)


@pytest.mark.parametrize("command", [["run", "--model", "oracle"], ["probe", "--model", "oracle"],
                                     ["recommend", "--model", "oracle", "--no-halving"], ["train-data"]])
def test_every_command_refuses_a_bad_task_file_the_same_way(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: tuple[str, str], command: list[str]) -> None:
    catalog, _ = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "query": "q", "gold_calls": [{"name": "fly", "arguments": {}}]}) + "\n",
                   encoding="utf-8")
    extra = ["-o", str(tmp_path / "o.jsonl")] if command == ["train-data"] else ["--store", str(tmp_path / "x.db")]
    code, _, err = run_cli(capsys, *command, "--catalog", catalog, "--task-file", str(bad), *extra)
    assert code == 2
    assert f"{bad}:1" in err and "'fly'" in err and "send_note" in err
