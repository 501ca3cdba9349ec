"""Work a client abandons and memory a conversation holds (issue 24, item 10): a client that
disconnects cancels its upstream request (today it runs on until the proxy's timeout, times its
retries), a SIGTERM does not wait for such requests, conversation snapshots are bounded in
bytes (today only in number), and a variant for a new tool list is built off the event loop.

The upstream here is a real socket server that reads a request, never answers, and reports when
the proxy closes the connection. Waits are for conditions, with a hang guard."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolbias.proxy import ProxyConfig, ProxyServer, VariantProxy

pytest.importorskip("uvicorn", reason="toolbias proxy needs uvicorn (pip install 'toolbias[proxy]')")

from tests.support.agents import MODEL  # noqa: E402
from tests.support.servers import FakeOpenAIServer, Reply  # noqa: E402

HANG_S = 30.0
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


class SilentUpstream:
    """Accepts connections, reads one HTTP request on each, never answers; ``received`` is set
    once a request has arrived, ``closed`` once the proxy has closed that connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.received = threading.Event()
        self.closed = threading.Event()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += conn.recv(65536)
        self.received.set()
        while conn.recv(65536):  # until the proxy closes its end
            pass
        self.closed.set()
        conn.close()

    def stop(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentUpstream]:
    srv = SilentUpstream()
    yield srv
    srv.stop()


def _send_and_leave(base_url: str, body: dict[str, Any], upstream: SilentUpstream) -> None:
    """A client that sends a request, waits until it reached the upstream, and hangs up."""
    host, port = base_url.split("//")[1].split("/")[0].split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        assert upstream.received.wait(HANG_S), "the request never reached the upstream"


@pytest.mark.parametrize("tools", [True, False])
def test_a_client_that_leaves_cancels_its_upstream_request(silent: SilentUpstream, tools: bool) -> None:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "read it"}]}
    if tools:
        body["tools"] = TOOLS
    config = ProxyConfig(upstream=(silent.base_url,), variant="fully_merged", timeout=300, retries=1)
    with ProxyServer(config) as server:
        _send_and_leave(server.base_url, body, silent)
        assert silent.closed.wait(HANG_S), "the upstream request outlived its client"


def test_sigterm_does_not_wait_for_abandoned_upstream_requests(silent: SilentUpstream, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parents[2] / "src"),
                                                                     os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "toolbias", "proxy", "--upstream", silent.base_url,
                             "--variant", "native", "--port", "0", "--timeout", "300", "--retries", "1",
                             "--store", str(tmp_path / "live.db")],
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert proc.stderr is not None
        line = ""
        while not line.startswith("READY "):
            line = proc.stderr.readline()
            assert line, "the proxy exited before it was ready"
        _send_and_leave(line.split()[1], {"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                                          "tools": TOOLS}, silent)
        assert silent.closed.wait(HANG_S)
        proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal once shut down, so the exit status is SIGTERM's (or 0)
        assert proc.wait(HANG_S) in (0, -signal.SIGTERM), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with sqlite3.connect(tmp_path / "live.db") as c:  # the abandoned turn is on its row, and says so
        assert [r[0] for r in c.execute("SELECT termination FROM episodes")] == ["cancelled"]


def test_snapshots_are_bounded_in_bytes() -> None:
    """Conversations with big tool results: the snapshots kept stay under the byte budget
    (today: only a count, so six 40 MB conversations stay resident)."""
    big = "x" * 200_000
    budget = 1_000_000

    async def main() -> dict[str, int]:
        with FakeOpenAIServer(models=(MODEL,)) as upstream:
            upstream.responder = lambda body: (Reply.text("done") if body["messages"][-1]["role"] == "tool"  # noqa: E731
                                               else Reply.calls(("read_file", {"path": "/a"})))
            proxy = VariantProxy(ProxyConfig(upstream=(upstream.base_url,), variant="native",
                                             max_snapshot_bytes=budget))
            try:
                for n in range(12):
                    messages: list[dict[str, Any]] = [{"role": "user", "content": f"read /a ({n})"}]
                    out = await proxy.chat({"model": MODEL, "messages": messages, "tools": TOOLS})
                    call = out["choices"][0]["message"]["tool_calls"][0]
                    messages += [out["choices"][0]["message"],
                                 {"role": "tool", "tool_call_id": call["id"], "content": big}]
                    out = await proxy.chat({"model": MODEL, "messages": messages, "tools": TOOLS})
                    assert out["choices"][0]["message"]["content"] == "done"
                    assert proxy.memory()["snapshot_bytes"] <= budget
                return proxy.memory()
            finally:
                await proxy.aclose()

    memory = asyncio.run(main())
    assert 0 < memory["snapshot_bytes"] <= budget and memory["snapshots"] < 24


def test_a_new_tool_list_is_built_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a variant for a big tool list takes seconds: it runs in a worker thread, so the
    proxy keeps answering meanwhile (today it runs on the event loop)."""
    from toolbias.proxy.codecs import CodecSource

    threads: list[str] = []
    build = CodecSource.build

    def spy(self: CodecSource, tools: Any) -> Any:
        threads.append(threading.current_thread().name)
        return build(self, tools)

    async def main() -> None:
        with FakeOpenAIServer(models=(MODEL,)) as upstream:
            proxy = VariantProxy(ProxyConfig(upstream=(upstream.base_url,), variant="fully_merged"))
            try:
                await proxy.chat({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": TOOLS})
                await proxy.chat({"model": MODEL, "messages": [{"role": "user", "content": "y"}], "tools": TOOLS})
            finally:
                await proxy.aclose()

    monkeypatch.setattr(CodecSource, "build", spy)
    loop_thread = threading.current_thread().name
    asyncio.run(main())
    assert len(threads) == 1 and threads[0] != loop_thread  # built once, cached, in a worker thread
