"""`toolbias select ...` through click's CliRunner (scripted models), and one run against a loopback
OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import toolbias.cli.select as select_cli
from tests.support.selection import ChooserModel, always_first, always_named
from toolbias.cli import cli
from toolbias.selection import builtin_benchmark

PROMO = {t.name for c in builtin_benchmark() for t in c.tools if t.style == "promotional"}


@pytest.fixture
def models(monkeypatch):
    """Model specs resolved to scripted models: first (position 0), promo (the promotional tool)."""
    made: dict[str, ChooserModel] = {}

    def fake_make_provider(spec: str, **options):
        policies = {"test:first": always_first, "test:promo": always_named(lambda n: n in PROMO)}
        if spec not in policies:
            raise AssertionError(spec)
        made[spec] = ChooserModel(policies[spec], spec=spec,
                                  keep=(lambda n: n in PROMO) if spec == "test:promo" else None)
        return made[spec]

    monkeypatch.setattr(select_cli, "make_provider", fake_make_provider)
    return made


def invoke(*args: str) -> dict | str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return out


def test_run_metrics_export_roundtrip(models, tmp_path) -> None:
    db = str(tmp_path / "s.db")
    out = invoke("select", "run", "--model", "test:first", "--queries", "3", "--runs", "2", "--store", db, "--json")
    assert out["delta_pos"] == pytest.approx(0.8) and out["delta_api"] == pytest.approx(0.0)
    assert out["n_selections"] == 2 * 12 * 3 * 5 and out["n_unparsed"] == 0
    assert set(out["std"]) == {"delta_api", "delta_pos", "delta_model"} and len(out["per_cluster"]) == 12
    # resumed: nothing is asked again
    again = invoke("select", "run", "--model", "test:first", "--queries", "3", "--runs", "2", "--store", db, "--json")
    assert again["delta_pos"] == out["delta_pos"] and models["test:first"].calls == []
    records = tmp_path / "r.jsonl"
    invoke("select", "export", "--store", db, "-o", str(records))
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(lines) == 360 and set(lines[0]) == {"run", "cluster", "query", "api", "position", "k"}
    from_file = invoke("select", "metrics", str(records), "--json")
    from_store = invoke("select", "metrics", "--store", db, "--json")
    for key in ("delta_api", "delta_pos", "delta_model", "n_selections"):
        assert from_file[key] == pytest.approx(from_store[key])
    table = invoke("select", "metrics", str(records))
    assert "δ api" in table and "std (runs)" in table


def test_text_presentation_and_groups(models, tmp_path) -> None:
    db = str(tmp_path / "s.db")
    invoke("select", "run", "--model", "test:first", "--presentation", "text", "--queries", "2",
           "--clusters", "translation,qr_code", "--store", db)
    invoke("select", "run", "--model", "test:promo", "--queries", "2", "--clusters", "translation,qr_code",
           "--store", db)
    groups = invoke("select", "metrics", "--store", db, "--json")["groups"]
    assert len(groups) == 2
    text = groups["test:first | builtin | text | base | prompt=toolbias T=0.5 top_p=1 tool_choice=none"]
    assert text["group"] == {"model": "test:first", "benchmark": "builtin", "presentation": "text",
                             "prompt": "toolbias", "condition": "base", "temperature": 0.5, "top_p": 1.0,
                             "tool_choice": None}
    assert text["delta_pos"] == pytest.approx(0.8)
    promo = groups["test:promo | builtin | tools | base | prompt=toolbias T=0.5 top_p=1 tool_choice=required"]
    assert promo["delta_api"] == pytest.approx(0.8)
    one = invoke("select", "metrics", "--store", db, "--model", "test:promo", "--json")
    assert one["delta_api"] == pytest.approx(0.8)


def test_agreement_explain_perturb_mitigate(models, tmp_path) -> None:
    db = str(tmp_path / "s.db")
    args = ["--queries", "2", "--clusters", "forward_geocoding,translation,qr_code", "--store", db]
    invoke("select", "run", "--model", "test:promo", *args)
    invoke("select", "run", "--model", "test:first", *args)
    agree = invoke("select", "agreement", "--store", db, "--json")
    assert set(agree["models"]) == {"test:promo", "test:first"} and agree["n_tools"] == 15
    expl = invoke("select", "explain", "--store", db, "--model", "test:promo", "--features", "toolbias",
                  "--similarity", "tfidf", "--trees", "30",
                  "--json")
    assert expl["correlations"]["promo_words"]["r"] > 0.7 and len(expl["tools"]) == 15
    pert = invoke("select", "perturb", "--model", "test:promo", "--conditions", "random_names,desc_swap",
                  "--figure", str(tmp_path / "p.svg"), *args, "--json")
    effects = {e["condition"]: e for e in pert["conditions"]}
    assert effects["desc_swap"]["tv_to_base"] == pytest.approx(0.0)
    assert effects["random_names"]["tv_to_base"] == pytest.approx(0.8)
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")
    mit = invoke("select", "mitigate", "--filter-model", "test:promo", "--model", "test:first", *args, "--json")
    assert mit["before"]["delta_pos"] == pytest.approx(0.8)
    # the filter keeps only the promotional tool: the draw has one choice, so API bias stays, position bias goes
    assert mit["after"]["delta_api"] == pytest.approx(0.8) and mit["after"]["delta_pos"] == pytest.approx(0.0)
    fe = invoke("select", "filter-eval", "--filter-model", "test:promo", "--per-cluster", "4", "--store", db,
                "--json")
    # it keeps every promotional tool: also the distractors' (precision < 1), never the others (recall < 1)
    assert 0 < fe["micro_precision"] < 1 and 0 < fe["micro_recall"] < 1 and fe["n"] == 48
    assert set(fe["by_k"]) == {"2", "3", "4", "5"}
    figs = invoke("select", "figures", "--store", db, "-o", str(tmp_path / "figs"), "--benchmark", "builtin",
                  "--html", str(tmp_path / "frag.html"))
    assert "tv_by_model.png" in figs and "perturbations_" in figs
    html = (tmp_path / "frag.html").read_text()
    assert "data:image/png;base64," in html and "<section" in html
    # the hook of the study's HTML report
    from toolbias.report.selection import html_fragments
    titles = [t for t, body in html_fragments(db) if body.startswith("<section")]
    assert titles[0] == "Selection bias" and any(t.startswith("Selection agreement") for t in titles)
    for prefix in ("Perturbations: test:promo", "Mitigation (builtin)", "Filter quality: test:promo"):
        assert any(t.startswith(prefix) for t in titles), (prefix, titles)


def test_html_hook_leaves_other_stores_alone(tmp_path) -> None:
    import sqlite3

    from toolbias.report.selection import html_fragments
    path = tmp_path / "study.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE episodes (key TEXT)")
    assert html_fragments(path) == [] and html_fragments(tmp_path / "absent.db") == []
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"episodes"}


def test_user_errors_exit_cleanly(models, tmp_path) -> None:
    from toolbias.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["select", "metrics", "--store", str(tmp_path / "missing.db")])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["select", "run", "--model", "test:first", "--benchmark", "nope", "--store", str(tmp_path / "x.db")])
    assert exc.value.code == 2


def test_benchmark_command(tmp_path) -> None:
    listing = invoke("select", "benchmark", "--json")
    assert len(listing) == 12 and all(c["k"] == 5 and c["queries"] >= 50 for c in listing)
    path = tmp_path / "b.json"
    invoke("select", "benchmark", "--export", str(path))
    assert len(json.loads(path.read_text())["clusters"]) == 12


def test_openai_compatible_server_end_to_end(tmp_path, monkeypatch) -> None:
    from tests.support import servers
    pytest.importorskip("openai")

    def responder(body):
        tools = body.get("tools") or []
        if tools:
            return servers.Reply.calls((tools[0]["function"]["name"], {}))
        return servers.Reply.text("1")

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with servers.FakeOpenAIServer(responder=responder) as srv:
        db = str(tmp_path / "s.db")
        cache = str(tmp_path / "cache.db")
        base = ["--model", "openai:fake-model", "--base-url", srv.base_url, "--queries", "2",
                "--clusters", "forward_geocoding", "--store", db, "--cache", cache, "--json"]
        out = invoke("select", "run", *base)
        assert out["delta_pos"] == pytest.approx(0.8) and out["n_selections"] == 10
        first = srv.requests[0]
        assert first["tool_choice"] == "required" and len(first["tools"]) == 5
        orders = {tuple(t["function"]["name"] for t in r["tools"]) for r in srv.requests}
        assert len(orders) == 5
        text = invoke("select", "run", *base[:-1], "--presentation", "text", "--json")
        assert text["delta_pos"] == pytest.approx(0.8)
        assert srv.requests[-1].get("tools") in (None, [])


def test_run_in_a_log_prints_progress_lines(models, tmp_path) -> None:
    """stderr not a terminal (a CI job): plain progress lines, the last one counting every answer."""
    result = CliRunner().invoke(cli, ["select", "run", "--model", "test:first", "--queries", "2", "--clusters",
                                      "translation,qr_code", "--store", str(tmp_path / "s.db")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stderr.splitlines() if ": parsed " in ln]
    assert lines, result.stderr
    assert lines[-1].endswith("parsed 20, unparsed 0, errors 0") and " 20/20:" in lines[-1]
