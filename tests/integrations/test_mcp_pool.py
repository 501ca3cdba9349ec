"""How an episode's MCP server is made fresh (toolbias.integrations.mcp_pool): by a process of its
own, by a reused server whose working directory is restored, or reused as is, as the
configuration's ``state`` says; against real servers (mcp-server-git, and a server that keeps a
counter in memory, tests/support/mcp_counter.py)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from toolbias.catalog import load_catalog
from toolbias.catalog.model import Catalog, NativeAction, Task
from toolbias.errors import CatalogError
from toolbias.integrations.mcp_pool import restore

COUNTER = Path(__file__).resolve().parents[1] / "support" / "mcp_counter.py"


def _tree(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    return out


def test_restore_makes_a_changed_tree_the_template_again(tmp_path: Path) -> None:
    template, work = tmp_path / "template", tmp_path / "work"
    (template / "sub" / "deep").mkdir(parents=True)
    (template / "a.txt").write_text("alpha\n")
    (template / "sub" / "b.txt").write_text("beta\n")
    (template / "sub" / "deep" / "c.bin").write_bytes(b"\x00\x01")
    (template / "ro").write_text("read only\n")
    (template / "ro").chmod(0o444)
    (template / "link").symlink_to("a.txt")
    shutil.copytree(template, work, symlinks=True)
    inode = work.stat().st_ino
    # what an episode may do: edit (same size too), add, remove, replace a file by a folder, relink
    (work / "a.txt").write_text("ALPHA\n")
    (work / "sub" / "b.txt").unlink()
    (work / "sub" / "deep" / "new.txt").write_text("new\n")
    shutil.rmtree(work / "sub" / "deep")
    (work / "sub" / "deep").write_text("now a file\n")
    (work / "extra").mkdir()
    (work / "extra" / "x").write_text("x\n")
    (work / "ro").chmod(0o644)
    (work / "ro").write_text("written\n")
    (work / "link").unlink()
    (work / "link").symlink_to("sub")
    restore(str(work), str(template))
    assert _tree(work) == _tree(template)
    assert work.stat().st_ino == inode  # the same folder: a server running in it keeps its working directory


pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")


def _catalog(tmp_path: Path, server: dict, name: str = "servers.json") -> Catalog:
    path = tmp_path / name
    path.write_text(json.dumps({"mcpServers": server}), encoding="utf-8")
    return load_catalog(f"mcp-config:{path}")


def _episode(catalog: Catalog, domain: str, *actions: NativeAction) -> tuple[list[dict], object]:
    from toolbias.integrations.mcp_live import McpEnvironment

    env = McpEnvironment(catalog, Task(id="t", domain=domain, query="q", gold=()))
    results = [env.execute(a) for a in actions]
    pool = env._pool if env._lease is not None else None
    env.check()
    return results, pool


def _counter(tmp_path: Path, state: str | None) -> Catalog:
    entry = {"command": sys.executable, "args": [str(COUNTER)], **({"state": state} if state else {})}
    return _catalog(tmp_path, {"counter": entry}, name=f"counter-{state}.json")


def test_a_server_that_keeps_state_in_memory_gets_a_process_of_its_own_each_episode(tmp_path: Path) -> None:
    catalog = _counter(tmp_path, None)  # "process", the default
    bump = NativeAction("counter", "bump", {})
    seen = [_episode(catalog, "counter", bump, bump)[0] for _ in range(3)]
    assert [[r["content"] for r in results] for results in seen] == [["1", "2"]] * 3


def test_a_server_declared_stateless_is_reused_as_it_is(tmp_path: Path) -> None:
    catalog = _counter(tmp_path, "none")  # a wrong declaration shows: the counter goes on
    bump = NativeAction("counter", "bump", {})
    first, pool = _episode(catalog, "counter", bump)
    second, _ = _episode(catalog, "counter", bump)
    assert (first[0]["content"], second[0]["content"]) == ("1", "2")
    assert pool is not None and pool.started == 1


def test_a_server_that_failed_is_never_reused(tmp_path: Path) -> None:
    catalog = _counter(tmp_path, "none")
    crashed, pool = _episode(catalog, "counter", NativeAction("counter", "bump", {}),
                             NativeAction("counter", "crash", {}))
    assert crashed[0]["ok"] and not crashed[1]["ok"] and crashed[1].get("infrastructure")
    after, _ = _episode(catalog, "counter", NativeAction("counter", "bump", {}))
    assert after[0]["content"] == "1"  # a new process
    assert pool is not None and pool.started == 2


def test_the_process_pool_starts_the_next_server_once_it_is_used_again(tmp_path: Path) -> None:
    from toolbias.integrations.mcp_live import McpEnvironment

    catalog = _counter(tmp_path, "process")
    task = Task(id="t", domain="counter", query="q", gold=())
    envs = []
    for _ in range(2):
        env = McpEnvironment(catalog, task)
        env.execute(NativeAction("counter", "bump", {}))
        envs.append(env)
        if len(envs) == 1:
            assert not env._pool.ahead  # used once: nothing started ahead
    assert envs[1]._pool.ahead
    for env in envs:
        env.check()


@pytest.mark.skipif(shutil.which("mcp-server-git") is None or shutil.which("git") is None,
                    reason="mcp-server-git or git is not installed")
def test_a_git_server_is_reused_from_a_restored_working_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=repo, check=True, env={**os.environ, **env})
    (repo / "b.txt").write_text("b\n")
    catalog = _catalog(tmp_path, {"git": {"command": "mcp-server-git", "args": ["--repository", "."], "cwd": "repo",
                                          "env": env, "state": "cwd"}})
    R = {"repo_path": "."}
    first, pool = _episode(catalog, "git", NativeAction("git", "git_add", {**R, "files": ["b.txt"]}),
                           NativeAction("git", "git_commit", {**R, "message": "second"}),
                           NativeAction("git", "git_create_branch", {**R, "branch_name": "side"}))
    assert all(r["ok"] for r in first), first
    log, _ = _episode(catalog, "git", NativeAction("git", "git_log", R), NativeAction("git", "git_status", R),
                      NativeAction("git", "git_branch", {**R, "branch_type": "local"}))
    assert "first" in log[0]["content"] and "second" not in log[0]["content"]
    assert "b.txt" in log[1]["content"] and "Untracked" in log[1]["content"]
    assert "side" not in log[2]["content"]
    assert pool is not None and pool.started == 1
    assert subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.count("\n") == 1  # the configured folder itself is untouched


def test_an_unknown_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as err:
        _catalog(tmp_path, {"time": {"command": "mcp-server-time", "state": "sometimes"}})
    assert "'sometimes'" in str(err.value) and "mcpServers.time" in str(err.value)


def test_a_gold_replay_whose_server_dies_is_an_infrastructure_error(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from toolbias.integrations.mcp_live import McpEnvironment
    from toolbias.study.episode import Termination

    catalog = _counter(tmp_path, "process")
    crash, bump = NativeAction("counter", "crash", {}), NativeAction("counter", "bump", {})
    task = Task(id="t", domain="counter", query="q", gold=(crash,), meta={"check_calls": [{"name": "bump"}]})
    env = McpEnvironment(catalog, task)
    assert env.execute(bump)["ok"]  # the agent did something else; its server lives
    env.check()
    rec = SimpleNamespace(termination=Termination.ANSWERED, infra_error=None, executed=[bump], gold=[crash],
                          accept=None, match="exact")
    assert env.evaluate(rec) is None
    assert rec.termination is Termination.INFRA_ERROR and rec.infra_error.startswith("gold replay: MCP server")
