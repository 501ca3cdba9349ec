"""``toolbias train-data --protocol paper`` against the artifact's own runner: every SFT trace, its
assistant turns served back by a loopback server, is an episode the artifact's ``eval/run_agentic.py``
plays to exact success with the very conversation the trace holds (the artifact's system prompt, its
replies to every call, a recovery example's one refused call), in as many turns. Rows are labelled
with their protocol and name the artifact's renderings. The artifact is imported from
``../shared/reference`` (skipped with the reason when absent)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paper_runs import BUILD, CATALOG, MODEL, agentic_runner, needs_runner, write_queries
from tests.support.servers import FakeOpenAIServer, Reply

pytestmark = needs_runner
#: the per-domain renderings the artifact's agentic runner plays (its whole-catalog ones have their own runners)
VARIANTS = ["paper.native", "paper.fully_merged", "paper.fully_split", "paper.transaction",
            "paper.reference_resolution"]
#: the trace being replayed, by its query: its assistant turns in order
TURNS: dict[str, list[dict[str, Any]]] = {}


def _replay(body: dict[str, Any]) -> Reply:
    turns = TURNS[body["messages"][1]["content"]]
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    m = turns[done] if done < len(turns) else {"content": "(the trace has no more turns)"}
    if not m.get("tool_calls"):
        return Reply.text(m.get("content") or "")
    return Reply.calls(*((c["function"]["name"], json.dumps(c["function"]["arguments"], ensure_ascii=False))
                         for c in m["tool_calls"]))


def _traces(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    out = tmp_path / "sft.jsonl"
    code, stdout, err = run_cli(capsys, "train-data", "--protocol", "paper", "--catalog", CATALOG, "--splits", "none",
                                "-o", str(out), *args)
    assert code == 0, stdout + err
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_every_trace_is_an_artifact_episode_that_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolbias.catalog import load_catalog

    rows = _traces(tmp_path, capsys, "--variants", ",".join(VARIANTS), "--sample", "30", "--recovery", "0.5")
    assert {r["protocol"] for r in rows} == {"paper"} and {r["variant"] for r in rows} == set(VARIANTS)
    catalog = load_catalog(CATALOG)
    tasks = {t.id: t for t in catalog.tasks}
    by_variant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_variant[r["variant"]].append(r)
    recovered = 0
    with FakeOpenAIServer(models=(MODEL,), responder=_replay) as srv:
        for variant, traces in by_variant.items():
            queries = []
            for r in traces:
                t = tasks[r["task_id"]]
                queries.append({"id": t.id, "domain": t.domain, "system": catalog.domain(t.domain).system,
                                "query": t.query, "gold_calls": [{"name": a.tool, "arguments": dict(a.arguments)}
                                                                 for a in t.gold]})
                TURNS[t.query] = [m for m in r["messages"] if m["role"] == "assistant"]
            ra = agentic_runner(variant, "strict", srv.base_url, write_queries(tmp_path / f"{variant}.jsonl", queries))
            for q, r in zip(queries, traces, strict=True):
                srv.requests.clear()
                theirs = ra.run_episode(q)
                last = srv.requests[-1]["messages"]  # the conversation before the trace's final answer
                assert theirs["exact"] == 1 and theirs["err"] is None, (variant, q["id"])
                assert theirs["turns"] == len(TURNS[q["query"]]) and theirs["argument_parse_errors"] == 0
                assert theirs["n_rejected"] == int(r["recovery"]), (variant, q["id"])
                recovered += r["recovery"]
                mine = r["messages"][:len(last)]
                assert [(m["role"], m["content"] or "") for m in mine] == \
                    [(m["role"], m.get("content") or "") for m in last], (variant, q["id"])
                assert r["tools"] == srv.requests[-1]["tools"]
    assert recovered >= 3  # recovery examples occur (the native name, refused where the variant lacks it)
    assert set(BUILD) >= set(VARIANTS)


def test_the_mixture_under_the_papers_protocol_is_the_artifacts_seven(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from toolbias.training.hf import sft_dataset
    from toolbias.training.traces import ARTIFACT_MIXTURE

    rows = _traces(tmp_path, capsys, "--sample", "14")
    assert [r["variant"] for r in rows[:7]] == [f"paper.{v}" for v in ARTIFACT_MIXTURE]
    assert all(r["protocol"] == "paper" for r in rows)
    pytest.importorskip("datasets", reason="the train extra's datasets reads the rows (pip install 'toolbias[train]')")
    data = sft_dataset(rows)
    assert data[0]["protocol"] == "paper" and data[0]["variant"] == "paper.fully_merged"


def test_train_data_without_the_flag_keeps_toolbiass_protocol_and_rows(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    code, stdout, err = run_cli(capsys, "train-data", "--variants", "native", "--sample", "3", "-o", str(out))
    assert code == 0, stdout + err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows and all("protocol" not in r for r in rows) and rows[0]["variant"] == "native"
