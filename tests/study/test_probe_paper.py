"""``toolbias probe --protocol paper`` against the artifact's own runner: each compliance probe, played
by one deterministic scripted agent on a loopback server, is the same episode as the artifact's
``eval/run_agentic.py`` plays on the same query (the probe's instruction as the user message, the
domain's system prompt): every request body (prompt, tools, the 1,024-token cap) and every episode's
exact success, executed actions, turns, rejections and flags agree. The artifact is imported from
``../shared/reference`` (skipped with the reason when absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paper_runs import (
    CATALOG,
    CONTROLS,
    MODEL,
    PERSONAS,
    agentic_runner,
    artifact_query,
    needs_runner,
    scripted_reply,
    write_queries,
)
from tests.support.servers import FakeOpenAIServer
from toolbias.store import Store
from toolbias.study.probes import compliance_cells, make_probes, probe_outcome

pytestmark = needs_runner
N_PROBES = 12


def _by_turn(requests: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(b["messages"][1]["content"], len(b["messages"])): b for b in requests}


@pytest.mark.parametrize("control", list(CONTROLS))
@pytest.mark.parametrize("variant", ["paper.native", "paper.fully_merged"])
def test_probe_episodes_equal_the_artifacts(variant: str, control: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from toolbias.catalog import load_catalog

    catalog = load_catalog(CATALOG)
    probes = make_probes(catalog, n=N_PROBES, seed=0)  # the probes `toolbias probe --seed 0 --n 12` plays
    queries = [artifact_query(p, catalog) for p in probes]
    gold_of = {q["query"]: q["gold_calls"] for q in queries}
    persona_of = {q["query"]: PERSONAS[i % len(PERSONAS)] for i, q in enumerate(queries)}
    with FakeOpenAIServer(models=(MODEL,), responder=lambda body: scripted_reply(body, gold_of, persona_of)) as srv:
        ra = agentic_runner(variant, control, srv.base_url, write_queries(tmp_path / "q.jsonl", queries))
        theirs = {q["id"]: ra.run_episode(q) for q in queries}
        their_requests = _by_turn(list(srv.requests))
        srv.requests.clear()
        code, out, err = run_cli(capsys, "probe", "--model", f"openai:{MODEL}", "--base-url", srv.base_url,
                                 "--catalog", CATALOG, "--variants", variant, "--n", str(N_PROBES),
                                 "--control", control, "--protocol", "paper", "--store", str(tmp_path / "p.db"),
                                 "--concurrency", "1")
        assert code == 0, out + err
        our_requests = _by_turn(list(srv.requests))
    assert all(r["err"] is None for r in theirs.values())
    assert our_requests == their_requests  # prompt, tools, max_tokens 1,024, every turn of every probe
    with Store(tmp_path / "p.db") as st:
        rows = [r.__dict__ for r in st.rows(kind="probe")]
    assert {r["condition"] for r in rows} == {"base@paper"} and all("|probe" in r["study"] for r in rows)
    assert {r["task_id"] for r in rows} == set(theirs)
    for r in rows:
        rec, t = r["record"], theirs[r["task_id"]]
        assert (int(bool(r["success"])), [[a["tool"], a["arguments"]] for a in rec["executed"]], rec["turns"],
                rec["paper"]["n_rejected"], rec["paper"]["flags"], rec["paper"]["argument_parse_errors"]) == \
            (t["exact"], t["actions"], t["turns"], t["n_rejected"], t["flags"], t["argument_parse_errors"]), r["task_id"]
        # the exact call is judged by the artifact's rule: a case or number-as-text difference still counts
        outcome = probe_outcome(rec)
        if t["exact"] and len(t["actions"]) == 1:
            assert outcome.exact_call
        # compliance reads the artifact's episode: no action executed, not compliant; actions and no
        # rejection at all, compliant
        if not t["actions"]:
            assert not outcome.compliant
        elif t["n_rejected"] == 0:
            assert outcome.compliant
    # not vacuous: both outcomes occur, and so do compliant and non-compliant probes
    assert {t["exact"] for t in theirs.values()} == {0, 1}
    assert 0 < compliance_cells(rows)[0].compliance < 1
    if control == "strict":
        assert sum(t["n_rejected"] for t in theirs.values()) >= 1
