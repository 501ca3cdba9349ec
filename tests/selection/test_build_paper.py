"""``select build --method paper``: seed tools, nearest endpoint per provider, outlier rounds, groups of more than
three, queries with required parameters in batches; end to end against a scripted loopback server."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from tests.support import servers
from toolbias.cli import cli


def tool(name: str, description: str, required: tuple[str, ...] = ()) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {r: {"type": "string"} for r in required}, "required": list(required)}}}


PROVIDERS = {
    "WeatherCo": [tool("weatherco_forecast", "Weather forecast for a city: temperature rain wind.", ("city",)),
                  tool("weatherco_alerts", "Severe storm alerts for a region.", ("region",))],
    "SkyData": [tool("skydata_weather", "City weather forecast with temperature rain and wind.", ("city",))],
    "MeteoNow": [tool("meteonow_city", "Forecast of weather for any city: temperature, rain, wind.", ("city",))],
    "OpenClimate": [tool("openclimate_forecast", "Weather forecast temperature rain wind for a city.", ("q",))],
    "RainCheck": [tool("raincheck_weather", "Rain and wind weather forecast for a city.", ("city", "days"))],
    "PayFast": [tool("payfast_invoice", "Email an invoice to a customer.", ("email",))],
    "Translato": [tool("translato_text", "Translate text into another language.", ("text", "target"))],
}
SEEDS = [{"name": "weather forecast", "description": "Weather forecast for a city: temperature, rain and wind."},
         {"name": "translation", "description": "Translate a text into another language."}]


def responder(log: list) -> servers.Responder:
    def reply(body: dict) -> servers.Reply:
        prompt = body["messages"][-1]["content"]
        names = re.findall(r"^- ([a-z_]+):", prompt, re.M)
        log.append((prompt.split(" ", 3)[:3], body["temperature"], names))
        if prompt.startswith("A functionality"):
            # the weather seed: round 1 drops the invoice and translation tools, later rounds nothing;
            # the translation seed: every tool but the translator is an outlier
            if "Functionality: Translate" in prompt:
                return servers.Reply.text(json.dumps({"outliers": [n for n in names if "translato" not in n]}))
            return servers.Reply.text(json.dumps({"outliers": [n for n in names if "invoice" in n
                                                               or "translato" in n]}))
        n = int(re.search(r"Write (\d+) varied", prompt).group(1))
        batch = sum(1 for entry in log if entry[2] == names and entry[0][0] == "The")
        return servers.Reply.text(json.dumps([f"Forecast for Paris on day {batch}-{i} (city=Paris)" for i in range(n)]
                                             + ["ask skydata_weather for Rome"]))
    return reply


def test_the_papers_build_method_end_to_end(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"providers": PROVIDERS}))
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps(SEEDS))
    out = tmp_path / "bench.json"
    log: list = []
    with servers.FakeOpenAIServer(responder=responder(log)) as srv:
        result = CliRunner().invoke(cli, [
            "select", "build", "--method", "paper", "--tools", str(tools), "--seeds", str(seeds), "--model",
            "openai:fake-model", "--base-url", srv.base_url, "-o", str(out), "--similarity", "tfidf", "--pool", "6",
            "--queries", "7", "--batch", "3", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    weather, translation = record["seeds"]
    # one endpoint per provider: WeatherCo's forecast, not its alerts
    assert "weatherco_forecast" in weather["nearest"] and "weatherco_alerts" not in weather["nearest"]
    assert len(weather["nearest"]) == 6
    assert weather["rounds"][-1] == [] and len(weather["rounds"]) == 2       # stops at a round removing nothing
    assert sorted(sum(weather["rounds"], [])) == sorted(n for n in weather["nearest"]
                                                        if "invoice" in n or "translato" in n)
    assert weather["kept"] and len(weather["tools"]) == 5                    # more than three, cut to five
    assert translation["kept"] is False                                       # fewer than four remain
    assert weather["batches"] == 3                                            # 3 + 3 + 1 queries
    assert {t for _, t, _ in log} == {0.7}
    query_prompts = [p for p, _, _ in log if p[0] == "The"]
    assert len(query_prompts) == 3
    written = json.loads(out.read_text())
    assert written["build"]["method"] == "paper" and len(written["clusters"]) == 1
    queries = written["clusters"][0]["queries"]
    assert len(queries) == 7 and not any("skydata" in q for q in queries)   # no provider named
    run = CliRunner().invoke(cli, ["select", "run", "--model", "chooser:first", "--benchmark", str(out),
                                   "--store", str(tmp_path / "s.db"), "--json"], catch_exceptions=False)
    assert run.exit_code == 0 and json.loads(run.stdout)["delta_pos"] == pytest.approx(0.8)


def test_the_required_parameters_are_asked_for(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"providers": PROVIDERS}))
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps(SEEDS[:1]))
    prompts: list[str] = []

    def reply(body: dict) -> servers.Reply:
        prompts.append(body["messages"][-1]["content"])
        return responder([])(body)

    with servers.FakeOpenAIServer(responder=reply) as srv:
        result = CliRunner().invoke(cli, [
            "select", "build", "--method", "paper", "--tools", str(tools), "--seeds", str(seeds), "--model",
            "openai:fake-model", "--base-url", srv.base_url, "-o", str(tmp_path / "b.json"), "--similarity",
            "tfidf", "--queries", "2", "--batch", "2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ask = next(p for p in prompts if p.startswith("The API endpoints"))
    assert "sample value for each required parameter" in ask
    assert "raincheck_weather:" in ask and "required parameters: city (string), days (string)" in ask
    missing = CliRunner().invoke(cli, ["select", "build", "--method", "paper", "--tools", str(tools), "--model",
                                       "chooser:first", "-o", str(tmp_path / "c.json")])
    assert missing.exit_code != 0 and "--seeds" in str(missing.exception) + missing.output
