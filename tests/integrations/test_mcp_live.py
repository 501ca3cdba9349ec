"""Live MCP servers as catalogs (mcp-config:FILE), against the real mcp-server-time, mcp-server-git and
mcp-server-sqlite."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolbias.catalog import load_catalog
from toolbias.errors import CatalogError

pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")


def _config(tmp_path: Path, servers: dict) -> str:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return str(path)


@pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
def test_time_server_tools_become_a_domain(tmp_path: Path) -> None:
    spec = "mcp-config:" + _config(tmp_path, {"time": {"command": "mcp-server-time",
                                                        "args": ["--local-timezone", "UTC"]}})
    catalog = load_catalog(spec)
    assert [d.name for d in catalog.domains] == ["time"]
    tools = {t.name: t for t in catalog.tools}
    assert set(tools) == {"get_current_time", "convert_time"}
    assert set(tools["convert_time"].parameters["properties"]) == {"source_timezone", "time", "target_timezone"}
    assert tools["get_current_time"].parameters["required"] == ["timezone"]


@pytest.mark.skipif(shutil.which("mcp-server-git") is None or shutil.which("git") is None,
                    reason="mcp-server-git or git is not installed")
def test_git_server_in_a_working_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    spec = "mcp-config:" + _config(tmp_path, {"git": {"command": "mcp-server-git", "args": ["--repository", "."],
                                                      "cwd": "repo"}})
    catalog = load_catalog(spec)
    names = {t.name for t in catalog.tools}
    assert {"git_status", "git_log", "git_commit", "git_add"} <= names
    assert len(names) >= 10


def test_missing_server_is_refused_with_a_fix(tmp_path: Path) -> None:
    spec = "mcp-config:" + _config(tmp_path, {"nope": {"command": "no-such-mcp-server-xyz"}})
    with pytest.raises(CatalogError) as err:
        load_catalog(spec)
    assert "not installed" in str(err.value.what if hasattr(err.value, "what") else err.value)
    assert "mcpServers.nope" in str(err.value)


def test_crashing_server_is_refused_not_hung(tmp_path: Path) -> None:
    spec = "mcp-config:" + _config(tmp_path, {"bad": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}})
    with pytest.raises(CatalogError) as err:
        load_catalog(spec)
    assert "bad" in str(err.value)


@pytest.mark.parametrize("body", [{}, {"mcpServers": {}}, {"mcpServers": {"x": {"args": []}}},
                                  {"mcpServers": {"x": {"command": "c", "args": "notalist"}}}])
def test_bad_configuration_is_refused(tmp_path: Path, body: dict) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(CatalogError):
        load_catalog(f"mcp-config:{path}")


@pytest.mark.skipif(shutil.which("mcp-server-git") is None or shutil.which("git") is None,
                    reason="mcp-server-git or git is not installed")
def test_episode_runs_calls_on_a_fresh_server_and_copy(tmp_path: Path) -> None:
    from toolbias.catalog.model import NativeAction, Task
    from toolbias.study.env import make_environment

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("hello\n", encoding="utf-8")
    catalog = load_catalog("mcp-config:" + _config(tmp_path, {"git": {"command": "mcp-server-git",
                                                                      "args": ["--repository", "."], "cwd": "repo"}}))
    task = Task(id="t", domain="git", query="stage a.txt", gold=())
    env = make_environment(catalog, task)
    staged = env.execute(NativeAction("git", "git_add", {"repo_path": ".", "files": ["a.txt"]}))
    assert staged["ok"], staged
    status = env.execute(NativeAction("git", "git_status", {"repo_path": "."}))
    assert "a.txt" in status["content"] and "new file" in status["content"]
    env.check()
    # the original working directory is untouched: the episode ran on a copy
    plain = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "?? a.txt"
    # a second episode starts from the fresh state again
    env2 = make_environment(catalog, task)
    again = env2.execute(NativeAction("git", "git_status", {"repo_path": "."}))
    assert "Untracked" in again["content"] and "new file" not in again["content"]
    env2.check()


@pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
def test_server_error_is_a_result(tmp_path: Path) -> None:
    from toolbias.catalog.model import NativeAction, Task
    from toolbias.study.env import make_environment

    catalog = load_catalog("mcp-config:" + _config(tmp_path, {"time": {"command": "mcp-server-time"}}))
    env = make_environment(catalog, Task(id="t", domain="time", query="q", gold=()))
    out = env.execute(NativeAction("time", "convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                            "target_timezone": "Europe/Paris"}))
    assert out["ok"] and "Europe/Paris" in out["content"]
    bad = env.execute(NativeAction("time", "get_current_time", {"timezone": "Not/AZone"}))
    assert not bad["ok"]
    env.check()


SHIPPED = Path(__file__).resolve().parents[2] / "src" / "toolbias" / "integrations" / "mcp_tasks"
_GIT = shutil.which("mcp-server-git") is None or shutil.which("git") is None


@pytest.mark.skipif(_GIT, reason="mcp-server-git or git is not installed")
def test_check_calls_compare_state_with_the_gold_replay() -> None:
    from types import SimpleNamespace

    from toolbias.catalog.model import NativeAction
    from toolbias.catalog.taskfile import with_task_file
    from toolbias.study.env import make_environment

    catalog = with_task_file(load_catalog(f"mcp-config:{SHIPPED / 'git.json'}"), SHIPPED / "git.jsonl")
    task = next(t for t in catalog.tasks if t.id == "git-2")
    assert task.meta["check_calls"][0]["name"] == "git_log"

    def play(actions: list[NativeAction]) -> dict:
        env = make_environment(catalog, task)
        for a in actions:
            assert env.execute(a)["ok"]
        env.check()
        rec = SimpleNamespace(executed=actions, gold=list(task.gold), accept=None, match="exact")
        return env.evaluate(rec)

    good = play(list(task.gold))
    assert good["reward"] == 1.0 and good["checks_equal"]
    other = [task.gold[0], NativeAction("git", "git_commit", {"repo_path": ".", "message": "something else"})]
    bad = play(other)
    assert bad["reward"] == 0.0 and not bad["checks_equal"]


@pytest.mark.parametrize("server,task_id", [("time", "time-3"), ("git", "git-10")])
def test_oracle_scores_a_task_under_every_registered_variant(tmp_path: Path, server: str, task_id: str) -> None:
    """A sample of the shipped task sets (a task calling both time tools; four git calls with state
    checked): the whole grid, every variant x every task, is bench/bench_mcp.py."""
    if shutil.which(f"mcp-server-{server}") is None or (server == "git" and _GIT):
        pytest.skip(f"mcp-server-{server} is not installed")
    from toolbias.study.runner import StudyConfig, build_study, run_study
    from toolbias.variants import resolve_variants

    cfg = StudyConfig(model="oracle", catalog=f"mcp-config:{SHIPPED / (server + '.json')}",
                      task_file=str(SHIPPED / f"{server}.jsonl"), variants="all", workers=1)
    study = build_study(cfg)
    study.tasks = [t for t in study.tasks if t.id == task_id]
    prog = run_study(study, str(tmp_path / "s.db"))
    assert prog.total == len(resolve_variants("all")) >= 60
    assert prog.infra_errors == 0
    assert prog.successes == prog.total


@pytest.mark.skipif(shutil.which("mcp-server-sqlite") is None, reason="mcp-server-sqlite is not installed")
def test_oracle_scores_every_sqlite_task_under_the_representative_variants(tmp_path: Path) -> None:
    from toolbias.study.runner import StudyConfig, build_study, run_study

    cfg = StudyConfig(model="oracle", catalog=f"mcp-config:{SHIPPED / 'sqlite.json'}",
                      task_file=str(SHIPPED / "sqlite.jsonl"), variants="representative", workers=1)
    study = build_study(cfg)
    assert sum(bool(t.meta.get("check_calls")) for t in study.tasks) >= 5  # state checked with read_query
    prog = run_study(study, str(tmp_path / "s.db"))
    assert prog.total == len(study.codecs) * len(study.tasks) >= 100
    assert prog.infra_errors == 0
    assert prog.successes == prog.total


@pytest.mark.skipif(shutil.which("mcp-server-sqlite") is None, reason="mcp-server-sqlite is not installed")
def test_sqlite_check_calls_see_a_different_row() -> None:
    from types import SimpleNamespace

    from toolbias.catalog.model import NativeAction
    from toolbias.catalog.taskfile import with_task_file
    from toolbias.study.env import make_environment

    catalog = with_task_file(load_catalog(f"mcp-config:{SHIPPED / 'sqlite.json'}"), SHIPPED / "sqlite.jsonl")
    task = next(t for t in catalog.tasks if t.id == "sql-1")
    env = make_environment(catalog, task)
    wrong = NativeAction("sqlite", "write_query",
                         {"query": "INSERT INTO customers (id, name, city) VALUES (4, 'Marie', 'Lyon')"})
    assert env.execute(wrong)["ok"]
    env.check()
    verdict = env.evaluate(SimpleNamespace(executed=[wrong], gold=list(task.gold), accept=None, match="exact"))
    assert verdict is not None and verdict["reward"] == 0.0 and not verdict["checks_equal"]
    assert "Lyon" in str(verdict["found"]) and "Paris" in str(verdict["expected"])


@pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
@pytest.mark.parametrize("row,words", [({"query": "q", "gold_calls": []}, "'id'"),
                                       ({"id": 1, "query": "q", "gold_calls": [{"name": "nope"}]}, "no tool"),
                                       ({"id": 1, "query": "q", "gold_calls": {}}, "must be a list")])
def test_bad_task_rows_are_refused(tmp_path: Path, row: dict, words: str) -> None:
    from toolbias.catalog.taskfile import read_task_file

    catalog = load_catalog(f"mcp-config:{SHIPPED / 'time.json'}")
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        read_task_file(path, catalog)
    assert words in str(err.value) and "t.jsonl:1" in str(err.value)


@pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
def test_a_server_that_fails_mid_study_is_an_infrastructure_error(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from toolbias.catalog.model import NativeAction, Task
    from toolbias.integrations.mcp_live import McpEnvironment
    from toolbias.study.episode import Termination

    catalog = load_catalog("mcp-config:" + _config(tmp_path, {"time": {"command": "mcp-server-time"}}))
    env = McpEnvironment(catalog, Task(id="t", domain="time", query="q", gold=()))
    env._spec["command"] = "no-such-mcp-server-xyz"  # the server is gone when the episode starts
    out = env.execute(NativeAction("time", "get_current_time", {"timezone": "UTC"}))
    assert not out["ok"] and "MCP server 'time' failed" in out["error"]
    env.check()
    rec = SimpleNamespace(termination=Termination.ANSWERED, infra_error=None)
    assert env.evaluate(rec) is None
    assert rec.termination is Termination.INFRA_ERROR and "MCP server 'time'" in rec.infra_error
