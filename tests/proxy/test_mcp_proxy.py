"""``toolbias mcp-proxy`` end to end: the proxy as its own process, driven by MCP clients (the ``mcp``
SDK's and fastmcp's), in front of the real mcp-server-time and mcp-server-git (and a small SDK-built
server for what those never do: change their tools, crash mid-session).

The "model" is the oracle: the native calls a task needs, encoded into the variant by a codec built
on the upstream's own tools/list, played through the proxy in one client session. Each test checks
what only a working proxy gives: the real server's results and state."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.paths import ROOT
from toolbias.catalog.model import NativeAction
from toolbias.report.live import live_table, load_conversations
from toolbias.store import Store
from toolbias.variants import resolve_variant

mcp = pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")

from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from toolbias.proxy.mcp_variant import build_mcp_variant  # noqa: E402

UPSTREAM = str(ROOT / "tests" / "support" / "mcp_upstream.py")
TIME = ["python", "-m", "mcp_server_time", "--local-timezone", "UTC"]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
#: seconds any step of a test may take before it fails (never a hung test run)
LIMIT_S = 60

needs_time = pytest.mark.skipif(shutil.which("mcp-server-time") is None, reason="mcp-server-time is not installed")
needs_git = pytest.mark.skipif(shutil.which("mcp-server-git") is None or shutil.which("git") is None,
                               reason="mcp-server-git or git is not installed")


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **GIT_ENV, **extra}


def _proxy_argv(variant: str, upstream: Sequence[str], *options: str) -> list[str]:
    return ["-m", "toolbias", "mcp-proxy", "--variant", variant, *options, "--", *upstream]


@asynccontextmanager
async def proxied(variant: str, upstream: Sequence[str], *options: str, handler: Any = None
                  ) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session to ``toolbias mcp-proxy`` (its own process) over stdio."""
    params = StdioServerParameters(command=sys.executable, args=_proxy_argv(variant, upstream, *options), env=_env())
    async with stdio_client(params) as (read, write):
        kwargs = {"message_handler": handler} if handler is not None else {}
        async with ClientSession(read, write, **kwargs) as session:
            with anyio.fail_after(LIMIT_S):
                await session.initialize()
            yield session


async def direct_tools(upstream: Sequence[str]) -> list[dict[str, Any]]:
    """The upstream's own tools/list (no proxy), as MCP JSON."""
    from toolbias.integrations.mcp_live import list_all_tools

    params = StdioServerParameters(command=upstream[0], args=list(upstream[1:]), env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(LIMIT_S):
            await session.initialize()
            return await list_all_tools(session)


async def play(session: ClientSession, variant: str, entries: list[dict[str, Any]],
               actions: Sequence[NativeAction]) -> list[types.CallToolResult]:
    """The oracle's calls for ``actions`` under ``variant`` (encoded on ``entries``), through the proxy."""
    codec = build_mcp_variant(entries, resolve_variant(variant), verify=False).bound.codec
    results = []
    for call in codec.encode(actions):
        with anyio.fail_after(LIMIT_S):
            results.append(await session.call_tool(call.name, dict(call.arguments)))
    return results


def _text(result: types.CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


VARIANTS = ["native", "fully_merged", "fully_split", "transaction", "schema_discovery", "reference_resolution"]


@needs_time
@pytest.mark.parametrize("variant", VARIANTS)
async def test_time_server_under_each_variant(variant: str, tmp_path: Path) -> None:
    entries = await direct_tools(TIME)
    expected = build_mcp_variant(entries, resolve_variant(variant))
    convert = NativeAction("live", "convert_time", {"source_timezone": "UTC", "time": "16:30",
                                                     "target_timezone": "Asia/Tokyo"})
    store = tmp_path / "live.db"
    async with proxied(variant, TIME, "--store", str(store)) as session:
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == [t["name"] for t in expected.tools]
        results = await play(session, variant, entries, [convert])
        wrong = await session.call_tool("no_such_tool", {})
    final = results[-1]
    assert not final.is_error, _text(final)
    # the real server converted the time: 16:30 UTC is 01:30 the next day in Tokyo (no daylight saving)
    assert final.structured_content is not None
    assert final.structured_content["target"]["datetime"].endswith("T01:30:00+09:00")
    assert all(not r.is_error for r in results)
    assert wrong.is_error and _text(wrong).startswith("Error: Unknown tool 'no_such_tool'")
    # the session is a live row: its native call, its protocol replies and the rejection
    with Store(store) as s:
        rows = list(s.rows(kind="live"))
    assert len(rows) == 1 and rows[0].variant == variant
    log = rows[0].record["live"]
    assert log["native_calls"] == 1 and log["rejections"] == 1
    assert log["replies"] == len(results) - 1
    with Store(store) as s:  # and `toolbias report --store` shows it as it shows the HTTP proxy's
        (row,) = live_table(load_conversations(s))
    assert (row["variant"], row["conversations"], row["native_calls"], row["rejections"]) == (variant, 1, 1, 1)


@needs_git
@pytest.mark.parametrize("variant", ["native", "fully_merged", "fully_split", "transaction", "schema_discovery",
                                     "reference_resolution"])
async def test_git_server_commits_through_the_variant(variant: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = _env()
    for argv in (["git", "init", "-q", "-b", "main"], ["sh", "-c", "echo hi > README.md && echo n > notes.txt"],
                 ["git", "add", "README.md"], ["git", "commit", "-q", "-m", "initial commit"]):
        subprocess.run(argv, cwd=repo, env=env, check=True, timeout=LIMIT_S)
    upstream = ["python", "-m", "mcp_server_git", "--repository", str(repo)]
    entries = await direct_tools(upstream)
    actions = [NativeAction("live", "git_add", {"repo_path": str(repo), "files": ["notes.txt"]}),
               NativeAction("live", "git_commit", {"repo_path": str(repo), "message": "add notes"}),
               NativeAction("live", "git_log", {"repo_path": str(repo), "max_count": 5})]
    async with proxied(variant, upstream) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        results = await play(session, variant, entries, actions)
    assert all(not r.is_error for r in results), [_text(r) for r in results]
    assert "add notes" in _text(results[-1]) and "initial commit" in _text(results[-1])
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, check=True)
    assert log.stdout.split("\n")[:2] == ["add notes", "initial commit"]  # the real repository changed
    if variant == "native":  # kept as they are: the server's own annotations
        assert tools["git_status"].annotations is not None and tools["git_status"].annotations.read_only_hint
        assert tools["git_reset"].annotations is not None and tools["git_reset"].annotations.destructive_hint
    if variant == "fully_merged":  # one tool for all twelve: git_reset makes it destructive, git_commit writes
        (merged,) = tools.values()
        hints = merged.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (False, True, False)


async def test_list_changed_rebuilds_the_variant_and_notifies_the_client() -> None:
    seen: list[str] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen.append("tools")

    async with proxied("fully_merged", [sys.executable, UPSTREAM], handler=handler) as session:
        (before,) = (await session.list_tools()).tools
        ops = before.input_schema["properties"]["operation"]["enum"]
        assert "shout" not in ops
        added = await session.call_tool(before.name, {"operation": "add_tool"})
        assert _text(added) == "added shout"
        with anyio.fail_after(LIMIT_S):
            while not seen:
                await anyio.sleep(0.05)
        (after,) = (await session.list_tools()).tools
        assert "shout" in after.input_schema["properties"]["operation"]["enum"]
        shouted = await session.call_tool(after.name, {"operation": "shout", "shout::text": "hi"})
    assert _text(shouted) == "HI" and shouted.structured_content == {"said": "HI"}


async def test_upstream_that_crashes_mid_session_is_an_error_result() -> None:
    async with proxied("native", [sys.executable, UPSTREAM]) as session:
        echoed = await session.call_tool("echo", {"text": "x"})
        assert _text(echoed) == "x" and echoed.structured_content == {"said": "x"}
        with anyio.fail_after(LIMIT_S):
            crashed = await session.call_tool("crash", {})
            after = await session.call_tool("echo", {"text": "y"})
    assert crashed.is_error and "upstream MCP server" in _text(crashed)
    assert after.is_error and "upstream MCP server" in _text(after)


async def test_upstream_that_hangs_on_a_call_is_an_error_result() -> None:
    async with proxied("native", [sys.executable, UPSTREAM], "--call-timeout", "2") as session:
        with anyio.fail_after(LIMIT_S):
            hung = await session.call_tool("hang", {})
            echoed = await session.call_tool("echo", {"text": "still here"})
    assert hung.is_error and "did not answer 'hang' within 2 s" in _text(hung)
    assert not echoed.is_error and _text(echoed) == "still here"


async def test_off_schema_calls_are_recoverable_errors() -> None:
    async with proxied("native", [sys.executable, UPSTREAM]) as session:
        missing = await session.call_tool("echo", {})
        fixed = await session.call_tool("echo", {"text": "ok"})
    assert missing.is_error and _text(missing).startswith("Error: Invalid arguments for 'echo'")
    assert not fixed.is_error and _text(fixed) == "ok"


@pytest.mark.parametrize(("upstream", "options", "words"), [
    (["no-such-mcp-server-xyz"], (), "not installed"),
    ([sys.executable, "-c", "import sys; sys.exit(3)"], (), "failed at start-up"),
    ([sys.executable, "-c", "import time; time.sleep(120)"], ("--start-timeout", "2"), "did not start"),
])
def test_missing_crashing_or_hanging_upstream_is_refused(upstream: list[str], options: tuple[str, ...],
                                                          words: str) -> None:
    done = subprocess.run([sys.executable, *_proxy_argv("native", upstream, *options)], env=_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT_S)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


@needs_time
async def test_streamable_http_both_ways(tmp_path: Path) -> None:
    """``--listen``: the proxy over streamable HTTP; a second proxy reaches it by ``--upstream-url``."""
    from mcp.client.streamable_http import streamable_http_client

    store = tmp_path / "http.db"
    argv = [sys.executable, *_proxy_argv("native", TIME, "--listen", "http://127.0.0.1:0", "--store", str(store))]
    first = subprocess.Popen(argv, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        url = _ready_url(first)
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(LIMIT_S):
                await session.initialize()
                listed = {t.name for t in (await session.list_tools()).tools}
                now = await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert listed == {"get_current_time", "convert_time"}
        assert not now.is_error and now.structured_content and now.structured_content["timezone"] == "UTC"
        async with proxied("fully_merged", [], "--upstream-url", url) as chained:
            (merged,) = (await chained.list_tools()).tools
            again = await chained.call_tool(merged.name, {"operation": "get_current_time",
                                                              "get_current_time::timezone": "UTC"})
        assert not again.is_error and json.loads(_text(again))["timezone"] == "UTC"
    finally:
        first.terminate()
        first.wait(LIMIT_S)
    assert first.returncode == 0  # stopped cleanly, its store written
    with Store(store) as s:  # two client sessions (this test's and the chained proxy's), two live rows
        logs = sorted((r.record["live"] for r in s.rows(kind="live")), key=lambda log: log["native_calls"])
    assert [log["native_calls"] for log in logs] == [1, 1] and logs[0]["conv_id"] != logs[1]["conv_id"]


def _ready_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    for _ in range(50):
        line = process.stderr.readline()
        if not line:
            break
        found = re.match(r"READY (\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError("the proxy never said READY")


@needs_git
async def test_fastmcp_client_behind_the_proxy(tmp_path: Path) -> None:
    """One more MCP client nobody here wrote (fastmcp's) drives the proxy in front of mcp-server-git."""
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (toolbias[dev]) is not installed")
    from fastmcp.client.transports import StdioTransport

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, timeout=LIMIT_S)
    (repo / "a.txt").write_text("a\n", encoding="utf-8")
    transport = StdioTransport(sys.executable, _proxy_argv("fully_merged", ["mcp-server-git", "--repository",
                                                                            str(repo)]), env=_env())
    async with fastmcp.Client(transport) as client:
        (merged,) = await client.list_tools()
        added = await client.call_tool(merged.name, {"operation": "git_add", "git_add::repo_path": str(repo),
                                                     "git_add::files": ["a.txt"]})
        status = await client.call_tool(merged.name, {"operation": "git_status", "git_status::repo_path": str(repo)})
        wrong = await client.call_tool(merged.name, {"operation": "git_status"}, raise_on_error=False)
    assert not added.is_error
    assert "a.txt" in "".join(getattr(c, "text", "") for c in status.content)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True, text=True)
    assert staged.stdout.split() == ["a.txt"]
    assert wrong.is_error and "Error: " in "".join(getattr(c, "text", "") for c in wrong.content)
