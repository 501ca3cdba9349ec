"""SFT traces: played turn by turn, only acting on what the conversation told them."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.catalogs import covering_sample, mini_catalog
from toolbias import VariantSpec, build_codec
from toolbias.catalog import load_catalog
from toolbias.providers.oracle import OracleProvider
from toolbias.study.episode import EpisodeConfig, run_episode
from toolbias.training import PAPER_MIXTURE, TraceOptions, sft_examples, unseen_uses
from toolbias.variants import registry

CAT = mini_catalog()
NATIVE = build_codec(CAT, VariantSpec("native"))
STRIP = build_codec(CAT, VariantSpec("strip_descriptions", ({"op": "strip"},)))
REFERENCE = build_codec(CAT, VariantSpec("reference_resolution", ({"op": "reference"},)))
TRANSACTION = build_codec(CAT, VariantSpec("transaction", ({"op": "transaction"},)))


def calls_of(row):
    return [c for m in row["messages"] if m["tool_calls"] for c in m["tool_calls"]]


def without_ids(messages):
    return [{**m, "tool_call_id": None, "tool_calls": [c["function"] for c in m["tool_calls"] or []]}
            for m in messages]


def protocol_variants():
    builtin = load_catalog("builtin")
    out = []
    for spec in registry().values():
        codec = build_codec(builtin, spec)
        if any(getattr(layer, "protocol", False) for layer in codec.layers):
            out.append(codec)
    return builtin, out


def test_every_protocol_variant_over_every_case_of_the_builtin_catalog_uses_only_what_it_was_told():
    builtin, codecs = protocol_variants()
    assert {"transaction", "reference_resolution", "schema_discovery"} <= {c.name for c in codecs}
    gold = {t.id: t.gold for t in builtin.tasks}
    # each trace plays one task alone: a task of every domain and gold length, every tool a gold
    # calls and a tool called twice check what all 2,688 tasks did, in a twentieth of the time
    tasks = covering_sample(builtin.tasks)
    assert {t.domain for t in tasks} == {d.name for d in builtin.domains}
    for codec in codecs:
        rows = list(sft_examples([codec], tasks))  # raises TraceError unless each replays its gold
        assert len(rows) == len(tasks)
        bad = [f"{r['task_id']}: {u}" for r in rows for u in unseen_uses(r["messages"], r["tools"], gold[r["task_id"]])]
        assert not bad, f"{codec.name}: {len(bad)} uses before the reply that gives them, e.g. {bad[:3]}"
        # the protocol really spreads over turns: some trace has more assistant turns than gold actions + 1
        turns = [sum(m["role"] == "assistant" for m in r["messages"]) for r in rows]
        assert max(turns) > 2, codec.name


def test_recovery_traces_over_the_papers_artifact_use_only_what_they_were_told(toolschemaspace_dir):
    """The paper's own catalog and queries: every protocol variant and the mixture, half of the
    traces opening with a refused call (a refused call acts on nothing and is not checked)."""
    artifact = load_catalog(f"toolschemaspace:{toolschemaspace_dir}")
    gold = {t.id: t.gold for t in artifact.tasks}
    codecs = [build_codec(artifact, registry()[name]) for name in
              ("transaction", "reference_resolution", "schema_discovery", *PAPER_MIXTURE)]
    rows = list(sft_examples(codecs, artifact.tasks[::3], TraceOptions(recovery=0.5)))
    assert sum(r["recovery"] for r in rows) > len(rows) // 3
    bad = [f"{r['variant']} {r['task_id']}: {u}" for r in rows
           for u in unseen_uses(r["messages"], r["tools"], gold[r["task_id"]])]
    assert not bad, bad[:3]


def test_the_check_catches_a_trace_that_writes_handles_it_was_not_given():
    """The oracle sends every call in its first turn: the check must refuse that trace."""
    task = next(t for t in CAT.tasks if len(t.gold) == 2)
    for codec in (REFERENCE, TRANSACTION):
        rec = asyncio.run(run_episode(task, codec, OracleProvider(), EpisodeConfig()))
        found = unseen_uses(rec.messages, codec.schema(task.domain), task.gold)
        assert found and all(u.token.startswith(("ref_", "txn_")) for u in found), codec.name


def test_protocol_replies_arrive_in_a_turn_before_the_call_that_uses_them():
    task = CAT.tasks[0]
    row = next(sft_examples([REFERENCE], [task]))
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    resolve, use = row["messages"][2]["tool_calls"][0], row["messages"][4]["tool_calls"][0]
    ref = json.loads(row["messages"][3]["content"])
    assert resolve["function"]["name"].startswith("resolve_")
    assert ref["reference"].startswith("ref_") and ref["reference"] in use["function"]["arguments"].values()
    assert row["messages"][-1]["content"] == "Done."


def test_independent_calls_stay_parallel_on_a_native_schema():
    task = next(t for t in CAT.tasks if len(t.gold) == 2)
    row = next(sft_examples([NATIVE], [task]))
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls_of(row)] == [
        (a.tool, dict(a.arguments)) for a in task.gold]


def test_mixture_rotates_over_tasks_and_native_only_is_native():
    rows = list(sft_examples([NATIVE, STRIP], CAT.tasks[:4]))
    assert [r["variant"] for r in rows] == ["native", "strip_descriptions", "native", "strip_descriptions"]
    assert rows[1]["tools"][0]["function"]["description"] == ""  # the stripped variant's own schema
    assert len(PAPER_MIXTURE) == 7 and PAPER_MIXTURE[0] == "native"


def test_instructions_on_and_off():
    on = next(sft_examples([REFERENCE], CAT.tasks[:1], TraceOptions(instructions=True)))
    off = next(sft_examples([REFERENCE], CAT.tasks[:1], TraceOptions(instructions=False)))
    instruction = REFERENCE.instructions()[0]
    assert instruction in on["messages"][0]["content"] and instruction not in off["messages"][0]["content"]


def test_recovery_examples_show_a_refused_call_its_error_and_the_correction():
    rows = list(sft_examples([NATIVE, REFERENCE, TRANSACTION], CAT.tasks, TraceOptions(recovery=0.5)))
    recovered = [r for r in rows if r["recovery"]]
    assert len(recovered) == len(rows) // 2  # spread evenly
    for r in recovered:
        mistake, error = r["messages"][2], r["messages"][3]
        assert len(mistake["tool_calls"]) == 1 and error["role"] == "tool" and error["content"].startswith("Error:")
        assert r["messages"][4]["tool_calls"], "the correction follows the refusal"
    # the rest of a recovery example is the plain trace
    plain = {r["task_id"]: r for r in sft_examples([NATIVE], CAT.tasks)}
    for r in (r for r in recovered if r["variant"] == "native"):
        assert without_ids(r["messages"][4:]) == without_ids(plain[r["task_id"]]["messages"][2:])


def test_protocol_recovery_examples_show_the_premature_use_and_its_refusal():
    task = CAT.tasks[0]
    for codec, word in ((REFERENCE, "reference id"), (TRANSACTION, "handle")):
        row = next(sft_examples([codec], [task], TraceOptions(recovery=1.0)))
        mistake, error = row["messages"][2]["tool_calls"][0], row["messages"][3]["content"]
        used = json.dumps(mistake["function"]["arguments"])
        assert ("ref_" in used or "txn_" in used) and word in error  # used before any reply gave it
        assert not unseen_uses(row["messages"], row["tools"], task.gold)  # the refused call acts on nothing


def test_prompt_completion_rows_keep_the_mistake_out_of_the_completion():
    rows = list(sft_examples([TRANSACTION], CAT.tasks[:2], TraceOptions(recovery=1.0, prompt_completion=True)))
    for r in rows:
        assert "messages" not in r and r["recovery"]
        assert [m["role"] for m in r["prompt"]] == ["system", "user", "assistant", "tool"]
        assert r["prompt"][-1]["content"].startswith("Error:")
        assert r["completion"][0]["role"] == "assistant" and r["completion"][-1]["content"] == "Done."


@pytest.mark.parametrize("variant", ["schema_discovery", "fully_merged", "composed"])
def test_traces_of_registered_variants_replay_their_gold(variant):
    codec = build_codec(CAT, registry()[variant])
    rows = list(sft_examples([codec], CAT.tasks))
    assert all(not unseen_uses(r["messages"], r["tools"], t.gold) for r, t in zip(rows, CAT.tasks, strict=True))
