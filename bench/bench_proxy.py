"""Throughput of the ``openai:`` provider and of ``toolbias proxy`` against a zero-latency
loopback upstream, as a ratio to a bare httpx loop in the same run.

    python -m bench.bench_proxy                     # concurrency 64, 5 s per arm
    python -m bench.bench_proxy --concurrency 8,64 --seconds 3 --variants native,fully_merged,transaction

The upstream is a minimal asyncio HTTP/1.1 server in its own process (keep-alive, one
canned chat completion per request, ~15 us of CPU each), so it is not the bound. Arms:

- ``httpx``: a bare ``httpx.AsyncClient`` loop posting the provider's request (the baseline asked
  for; at 64 in flight httpx's pool costs milliseconds of CPU per request, so it is slow);
- ``aiohttp``: the same with a bare ``aiohttp.ClientSession`` loop (the cheapest client here);
- ``sdk``: the same through the ``openai`` SDK's ``AsyncOpenAI.post`` (the provider's old path);
- ``provider``: ``openai:`` provider ``generate()`` behind the wrapper (retries, limits), as a study calls it;
- ``proxy:<variant>``: ``toolbias proxy`` in its own process (uvicorn), driven by a bare aiohttp
  loop posting native-tool requests; the upstream answers with the variant's encoding of one
  native call, so every proxy turn decodes one variant call into one native call;
- ``proxy+store:<variant>``: the same with ``--store`` (every conversation a row in SQLite).

For each arm: turns/s, its ratio to ``httpx``, and CPU ms per turn in this process, the
proxy and the upstream (from /proc). Figures, never a test: the machine may be shared.
"""

# ruff: noqa: B023  (each arm's closure runs inside its own loop iteration)
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolbias.catalog import load_catalog
from toolbias.catalog.model import NativeAction
from toolbias.proxy.codecs import CodecSource
from toolbias.variants.resolve import resolve_variant

ROOT = Path(__file__).resolve().parents[1]

UPSTREAM = r'''
import asyncio, json, sys
BODY = json.dumps(json.loads(sys.argv[2])).encode()
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(BODY)
# optional: the completion for a request that holds a tool result (an episode's answer turn)
AFTER = json.dumps(json.loads(sys.argv[3])).encode() if len(sys.argv) > 3 else BODY
AFTER_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(AFTER)
MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
class P(asyncio.Protocol):
    def connection_made(self, t): self.t, self.buf = t, b""
    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0: return
            head = self.buf[:end].lower()
            i = head.find(b"content-length:")
            n = int(head[i + 15:].split(b"\r\n", 1)[0]) if i >= 0 else 0
            if len(self.buf) < end + 4 + n: return
            get = head.startswith(b"get")
            body = self.buf[end + 4:end + 4 + n]
            self.buf = self.buf[end + 4 + n:]
            if get:
                self.t.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(MODELS) + MODELS)
            elif b'"role":"tool"' in body or b'"role": "tool"' in body:
                self.t.write(AFTER_HEAD + AFTER)
            else:
                self.t.write(HEAD + BODY)
async def main():
    server = await asyncio.get_running_loop().create_server(P, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    print("READY", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
asyncio.run(main())
'''


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def completion(call: dict[str, Any]) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "c0", "type": "function",
                                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


def start(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "READY" in line:
            return proc, line.split("READY", 1)[1].strip()
    raise RuntimeError(f"{cmd[:4]} did not start")


async def loop_for(seconds: float, concurrency: int, one: Any) -> int:
    done = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await one()
            done += 1
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def arm(name: str, seconds: float, concurrency: int, one: Any, pids: dict[str, int]) -> dict[str, Any]:
    await loop_for(min(1.0, seconds / 4), concurrency, one)  # warm connections and caches
    before = {k: cpu_s(p) for k, p in pids.items()}
    t0 = time.perf_counter()
    n = await loop_for(seconds, concurrency, one)
    wall = time.perf_counter() - t0
    cpu = {k: (cpu_s(p) - before[k]) * 1000 / max(n, 1) for k, p in pids.items()}
    return {"arm": name, "turns": n, "turns_s": n / wall, "cpu_ms": cpu}


async def run(args: argparse.Namespace) -> None:
    import aiohttp
    import httpx
    import openai

    from toolbias.providers.base import GenerateConfig
    from toolbias.providers.openai import OpenAIProvider
    from toolbias.providers.wrapper import ProviderWrapper

    catalog = load_catalog("builtin")
    task = next(t for t in catalog.tasks if len(t.gold) == 1)
    tools = [t.to_openai() for t in catalog.domain(task.domain).tools]
    messages = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": task.query}]
    me = os.getpid()
    results = []
    tmp = tempfile.mkdtemp(prefix="bench_proxy_")
    for concurrency in args.concurrency:
        gold = task.gold[0]
        up, port = start([sys.executable, "-c", UPSTREAM, "0",
                          json.dumps(completion({"name": gold.tool, "arguments": dict(gold.arguments)}))])
        url = f"http://127.0.0.1:{port}/v1"
        pids = {"client": me, "upstream": up.pid}
        try:
            provider = OpenAIProvider("m", base_url=url, max_connections=concurrency * 2)
            request = provider.chat_request(messages, tools, None, GenerateConfig())
            body = json.dumps(request).encode()
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency * 2))
            client = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency * 2,
                                                           max_keepalive_connections=concurrency * 2), verify=False)

            async def bare() -> None:
                (await client.post(url + "/chat/completions", content=body,
                                   headers={"content-type": "application/json"})).json()
            results.append(await arm(f"httpx c={concurrency}", args.seconds, concurrency, bare, pids))

            async def bare_aiohttp() -> None:
                async with session.post(url + "/chat/completions", data=body,
                                        headers={"content-type": "application/json"}) as r:
                    json.loads(await r.read())
            results.append(await arm(f"aiohttp c={concurrency}", args.seconds, concurrency, bare_aiohttp, pids))

            sdk = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, http_client=openai.DefaultAsyncHttpxClient(
                limits=httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)))

            async def via_sdk() -> None:
                await sdk.post("/chat/completions", body=request, cast_to=openai.types.chat.ChatCompletion)
            results.append(await arm(f"sdk c={concurrency}", args.seconds, concurrency, via_sdk, pids))

            wrapped = ProviderWrapper(provider, concurrency=concurrency * 2)
            cfg = GenerateConfig()

            async def via_provider() -> None:
                await wrapped.generate(messages, tools, None, cfg)
            results.append(await arm(f"provider c={concurrency}", args.seconds, concurrency, via_provider, pids))
            await sdk.close()
            await provider.aclose()
        finally:
            up.kill()
            up.wait()
        arms = [(v, False) for v in args.variants] + [(v, True) for v in args.store_variants]
        for variant, with_store in arms:
            codec = CodecSource(resolve_variant(variant)).for_tools(tools).codec
            encoded = codec.encode([NativeAction("live", gold.tool, gold.arguments)])
            if len(encoded) != 1:  # a protocol: the canned reply cannot play it (one call per turn)
                print(f"(skipping {variant}: {len(encoded)} calls per native call)")
                continue
            up, port = start([sys.executable, "-c", UPSTREAM, "0", json.dumps(completion(
                {"name": encoded[0].name, "arguments": dict(encoded[0].arguments)}))])
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
            store = ["--store", str(Path(tmp) / f"{variant}.db")] if with_store else []
            proxy, proxy_url = start([sys.executable, "-m", "toolbias", "proxy", "--upstream",
                                      f"http://127.0.0.1:{port}/v1", "--variant", variant, "--port", "0", *store], env)
            try:
                agent_body = json.dumps({"model": "m", "messages": messages, "tools": tools}).encode()

                async def via_proxy() -> None:
                    async with session.post(proxy_url + "/chat/completions", data=agent_body,
                                            headers={"content-type": "application/json"}) as r:
                        text = await r.read()
                        assert r.status == 200, text
                name = f"proxy{'+store' if with_store else ''}:{variant}"
                results.append(await arm(f"{name} c={concurrency}", args.seconds, concurrency, via_proxy,
                                         {**pids, "upstream": up.pid, "proxy": proxy.pid}))
            finally:
                for p in (proxy, up):
                    p.terminate()
                    p.wait()
        await client.aclose()
        await session.close()
    base = {r["arm"].split(" ")[1]: r["turns_s"] for r in results if r["arm"].startswith("httpx")}
    base2 = {r["arm"].split(" ")[1]: r["turns_s"] for r in results if r["arm"].startswith("aiohttp")}
    print(f"\n{'arm':34} {'turns/s':>9} {'x httpx':>8} {'x aiohttp':>9}   CPU ms per turn")
    for r in results:
        c = r["arm"].split(" ")[1]
        cpu = "  ".join(f"{k} {v:.2f}" for k, v in r["cpu_ms"].items())
        print(f"{r['arm']:34} {r['turns_s']:9.0f} {r['turns_s'] / base[c]:8.2f} {r['turns_s'] / base2[c]:9.2f}   {cpu}")
    print(f"\nload average: {os.getloadavg()[0]:.1f}  cpus: {os.cpu_count()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="64", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--variants", default="native,fully_merged,nested_args", type=lambda s: s.split(","))
    ap.add_argument("--store-variants", default="fully_merged", type=lambda s: [v for v in s.split(",") if v],
                    help="variants also run with --store (every conversation written to SQLite); '' for none")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
