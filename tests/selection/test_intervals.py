"""Intervals of the selection study: δ's bootstrapped over queries, Wilson shares, filter scores, correlations;
``select metrics`` and ``select agreement`` print them."""

from __future__ import annotations

import json
import math
import random

import pytest
from click.testing import CliRunner

from toolbias.cli import cli
from toolbias.selection.intervals import (
    correlation_interval,
    delta_intervals,
    filter_intervals,
    wilson,
    with_intervals,
)
from toolbias.selection.metrics import Selection, bias_report
from toolbias.selection.mitigate import score_sets


def selections(seed: int, *, runs: int = 3, clusters: int = 4, queries: int = 20, bias: float = 0.5) -> list[Selection]:
    """Cyclic trials of a chooser that takes tool 0 with probability ``bias``, else a uniform draw."""
    rng = random.Random(seed)
    out = []
    for run in range(runs):
        for c in range(clusters):
            for q in range(queries):
                for rot in range(5):
                    order = [(rot + i) % 5 for i in range(5)]
                    api = 0 if rng.random() < bias else rng.randrange(5)
                    out.append(Selection(str(run), f"c{c}", str(q), api, order.index(api), 5))
    return out


def test_the_estimate_is_the_reports_delta_and_the_interval_holds_it() -> None:
    sels = selections(1)
    rep = bias_report(sels)
    ivs = delta_intervals(sels, seed=0)
    for m in ("delta_api", "delta_pos", "delta_model"):
        assert ivs[m].estimate == pytest.approx(getattr(rep, m))
        assert ivs[m].low <= ivs[m].estimate <= ivs[m].high
        assert ivs[m].n == 4 * 20
    assert ivs["delta_api"].high - ivs["delta_api"].low > 0.01
    assert delta_intervals(sels, seed=0) == ivs                     # seeded: the same interval again
    assert delta_intervals(sels, seed=1) != ivs


def test_fewer_queries_give_wider_intervals() -> None:
    wide = delta_intervals(selections(2, queries=5))["delta_api"]
    narrow = delta_intervals(selections(2, queries=80))["delta_api"]
    assert wide.high - wide.low > narrow.high - narrow.low


def test_a_deterministic_chooser_has_a_point_interval() -> None:
    sels = selections(3, bias=1.0)
    iv = delta_intervals(sels)["delta_api"]
    assert iv.estimate == pytest.approx(0.8) and iv.low == pytest.approx(0.8) and iv.high == pytest.approx(0.8)


def test_with_intervals_adds_json_intervals_to_a_report() -> None:
    sels = selections(4)
    rep = with_intervals(bias_report(sels, label="x"), sels)
    d = rep.to_dict()["intervals"]["delta_pos"]
    assert set(d) == {"estimate", "low", "high", "n"} and d["low"] <= d["estimate"] <= d["high"]


def test_wilson_and_fisher_intervals() -> None:
    iv = wilson(5, 10)
    assert (round(iv.low, 3), round(iv.high, 3)) == (0.237, 0.763)
    assert wilson(0, 10).low == 0.0 and wilson(10, 10).high == 1.0
    assert math.isnan(wilson(0, 0).estimate)
    r = correlation_interval(0.5, 50)
    half = 1.959964 / math.sqrt(47)
    assert r.low == pytest.approx(math.tanh(math.atanh(0.5) - half), abs=1e-5)
    assert r.high == pytest.approx(math.tanh(math.atanh(0.5) + half), abs=1e-5)
    s = correlation_interval(0.5, 50, kind="spearman")
    assert s.low < r.low and s.high > r.high                       # Fieller's wider standard error
    assert math.isnan(correlation_interval(0.5, 3).low)


def test_filter_intervals_estimate_the_filter_scores() -> None:
    rng = random.Random(0)
    golds = [frozenset(rng.sample(range(8), rng.randint(2, 5))) for _ in range(60)]
    preds = [frozenset(x for x in g if rng.random() < 0.8) | ({7} if rng.random() < 0.1 else set()) for g in golds]
    preds[0] = None                                               # unparsed: an empty prediction
    scores = score_sets(golds, preds)
    ivs = filter_intervals(golds, preds)
    for m in ("micro_precision", "micro_recall", "exact_match"):
        assert ivs[m].estimate == pytest.approx(getattr(scores, m))
        assert ivs[m].low <= ivs[m].estimate <= ivs[m].high


def test_select_metrics_and_agreement_print_intervals(tmp_path) -> None:
    files = []
    for name, bias in (("a", 0.6), ("b", 0.5)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in selections(7, bias=bias)))
        files.append(str(path))
    out = CliRunner().invoke(cli, ["select", "metrics", files[0], "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    iv = json.loads(out.stdout)["intervals"]["delta_model"]
    assert iv["low"] < iv["estimate"] < iv["high"] and iv["n"] == 80
    text = CliRunner().invoke(cli, ["select", "metrics", files[0]], catch_exceptions=False).stdout
    assert "95% CI (queries)" in text
    agree = CliRunner().invoke(cli, ["select", "agreement", *files, "--json"], catch_exceptions=False)
    result = json.loads(agree.stdout)
    ci = result["pearson_ci"]["a | b"]
    assert ci["n"] == 20 and ci["low"] <= result["pearson"]["a | b"] <= ci["high"]
    assert "95% CI" in CliRunner().invoke(cli, ["select", "agreement", *files], catch_exceptions=False).stdout
