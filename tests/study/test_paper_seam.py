"""The artifact's tau2 adapter (:mod:`toolbias.study.paper_seam`) on a small tool list of its own,
without tau2: which variants it plays, and its turn rules (the differential against the patch's own
lines is ``tests/integrations/test_tau2_paper_seam.py``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolbias.providers.base import ModelOutput, ToolCall
from toolbias.study.paper_protocol import TOOL_INSTRUCTION, TRANSACTION_INSTRUCTION, ProtocolNotImplemented
from toolbias.study.paper_seam import (
    MAX_META_ROUNDS,
    NO_ACTION,
    NO_RESPONSE,
    UNFINISHED,
    AdapterEpisode,
    AdapterTools,
    Seam,
    adapter_plan,
)
from toolbias.variants.paper import paper_rendering

NATIVE = [
    {"type": "function", "function": {"name": "lookup", "description": "Look a user up.", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}},
    {"type": "function", "function": {"name": "refund", "description": "Refund a user.", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["user_id", "amount"]}}},
]


def _out(content: str | None, *calls: tuple[str, dict[str, Any]]) -> ModelOutput:
    return ModelOutput(content=content, tool_calls=tuple(
        ToolCall(f"c{i}", name, args, json.dumps(args)) for i, (name, args) in enumerate(calls)))


def _play(variant: str, hard: bool, outputs: list[ModelOutput]) -> tuple[Any, list[list[dict[str, Any]]]]:
    plan = adapter_plan(paper_rendering(variant))
    episode = AdapterEpisode(AdapterTools.build(plan, "shop", NATIVE), hard=hard)
    seen: list[list[dict[str, Any]]] = []

    async def generate(messages: list[dict[str, Any]]) -> ModelOutput:
        seen.append(list(messages))
        return outputs[len(seen) - 1] if len(seen) <= len(outputs) else _out("")

    turn = asyncio.run(episode.turn(generate, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], 1))
    return turn, seen


def test_the_variants_it_plays_and_a_clear_refusal_of_the_rest() -> None:
    assert adapter_plan(paper_rendering("fully_merged")).k == 0
    assert adapter_plan(paper_rendering("transaction")).seam is Seam.TRANSACTION
    assert adapter_plan(paper_rendering("schema_discovery")).instruction != TOOL_INSTRUCTION
    assert adapter_plan(paper_rendering("native")).instruction == TOOL_INSTRUCTION
    assert adapter_plan(paper_rendering("transaction")).instruction == TRANSACTION_INSTRUCTION
    with pytest.raises(ProtocolNotImplemented) as err:
        adapter_plan(paper_rendering("class_dispatch"))
    assert "paper.class_dispatch" in err.value.what and "paper.transaction" in err.value.what


def test_hard_control_drops_a_hidden_name_and_says_so_when_nothing_is_left() -> None:
    turn, _ = _play("fully_merged", True, [_out("", ("lookup", {"user_id": "u1"}))])
    assert turn.calls == [] and turn.content == NO_ACTION and turn.dropped == 1
    turn, _ = _play("fully_merged", False, [_out("", ("lookup", {"user_id": "u1"}))])
    assert [(c.name, c.arguments, c.raw_arguments) for c in turn.calls] == [("lookup", {"user_id": "u1"},
                                                                             '{"user_id": "u1"}')]
    turn, _ = _play("fully_merged", True, [_out("", ("execute", {"operation": "refund", "refund::user_id": "u1",
                                                                  "refund::amount": 5}))])
    assert [(c.name, c.arguments) for c in turn.calls] == [("refund", {"user_id": "u1", "amount": 5})]
    turn, _ = _play("native", True, [_out(None)])
    assert turn.content == NO_RESPONSE and turn.calls == []


def test_a_transaction_is_answered_within_the_turn_and_only_its_commit_surfaces() -> None:
    turn, seen = _play("transaction", True, [
        _out(None, ("begin_refund", {})),
        _out(None, ("set_refund__user_id", {"txn_id": "txn_1", "user_id": "u1"}),
             ("set_refund__amount", {"txn_id": "txn_1", "amount": 5})),
        _out("Refunding.", ("commit_refund", {"txn_id": "txn_1"}))])
    assert [(c.name, c.arguments) for c in turn.calls] == [("refund", {"user_id": "u1", "amount": 5})]
    assert turn.content == "Refunding." and turn.meta == 3 and len(seen) == 3
    assert json.loads(seen[1][-1]["content"])["txn_id"] == "txn_1" and seen[1][-2]["tool_calls"]


def test_meta_calls_alone_are_asked_again_at_most_the_round_limit() -> None:
    stuck = _out("", ("set_refund__amount", {"txn_id": "nope", "amount": 5}))
    turn, seen = _play("transaction", True, [stuck] * 20)
    assert len(seen) == MAX_META_ROUNDS + 1 and turn.calls == [] and turn.content == UNFINISHED
