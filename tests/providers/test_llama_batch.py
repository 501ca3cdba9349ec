"""The embedded model's batched path (providers.llama_batch): the same answers as the one-sequence
path, a shared prompt prefix evaluated once, a full KV cache handled without losing a request."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.catalogs import THERMOSTAT_TOOLS
from tests.support.local_model import HAS_LLAMA, NO_LLAMA, embedded_weights
from toolbias.errors import ProviderError
from toolbias.providers.base import GenerateConfig, ModelOutput, Usage
from toolbias.providers.llama_batch import BatchDecoder, cells_held, common_prefix, reserve_left
from toolbias.providers.local import _STOP, BATCH_ENV, LocalProvider

SYSTEM = {"role": "system", "content": "You control a smart home. Use only the provided tools."}
MEDIA_SYSTEM = {"role": "system", "content": "You control a media system. Use only the provided tools."}
MEDIA_TOOLS = [{"type": "function", "function": {
    "name": "play_media", "description": "Play a song, album or playlist in a room",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "room": {"type": "string"}},
                   "required": ["title"]}}}]
#: (system, tools, query, tool_choice): two prefixes, free and grammar-constrained answers
REQUESTS: list[tuple[dict[str, str], list[dict[str, Any]], str, str | None]] = [
    (SYSTEM, THERMOSTAT_TOOLS, "Set the bedroom to 21 degrees please.", None),
    (SYSTEM, THERMOSTAT_TOOLS, "Kitchen to 19, thanks.", None),
    (MEDIA_SYSTEM, MEDIA_TOOLS, "Play some jazz in the kitchen.", None),
    (SYSTEM, THERMOSTAT_TOOLS, "Tell me a joke about penguins.", "required"),
    (SYSTEM, THERMOSTAT_TOOLS, "Make the living room 22.5 degrees.", None),
    (MEDIA_SYSTEM, MEDIA_TOOLS, "Put on Kind of Blue.", None),
]
CFG = GenerateConfig(max_tokens=40)


def test_common_prefix_agrees_with_a_plain_scan() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = [rng.randrange(3) for _ in range(rng.randrange(0, 700))]
        b = a[: rng.randrange(0, len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(0, 50))]
        plain = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert common_prefix(a, b) == common_prefix(b, a) == plain


def test_cells_held_counts_every_shared_prefix_once() -> None:
    """The size of the lists' prefix tree, checked against the set of their distinct prefixes."""
    rng = random.Random(11)
    for _ in range(200):
        base = [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        lists = [base[: rng.randrange(0, len(base) + 1)] + [rng.randrange(4) for _ in range(rng.randrange(0, 20))]
                 for _ in range(rng.randrange(0, 6))]
        distinct = {tuple(t[:n]) for t in lists for n in range(1, len(t) + 1)}
        assert cells_held(lists) == len(distinct)


def test_a_long_answer_is_reserved_room_a_block_at_a_time() -> None:
    """What admission counts for a running request's answer: always some room ahead of it until
    ``max_tokens``, so a long answer keeps being counted instead of outgrowing a fixed reserve."""
    for max_tokens in (1, 40, 256, 1024):
        for block in (1, 40, 256):
            for generated in range(max_tokens):
                left = reserve_left(generated, max_tokens, block)
                assert 1 <= left <= block and generated + left <= max_tokens
                assert generated + left == max_tokens or (generated + left) % block == 0
            assert reserve_left(max_tokens, max_tokens, block) == 0
    assert reserve_left(300, 1024, 0) == 0  # nothing held back


@pytest.mark.skipif(not HAS_LLAMA, reason=NO_LLAMA)
def test_batch_option_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BATCH_ENV, raising=False)
    assert LocalProvider().batch == LocalProvider().max_concurrency == 16
    assert LocalProvider("", batch=1).max_concurrency == 1
    monkeypatch.setenv(BATCH_ENV, "3")
    assert LocalProvider().batch == 3 and LocalProvider("", batch="2").batch == 2
    monkeypatch.setenv(BATCH_ENV, "many")
    with pytest.raises(ProviderError, match=BATCH_ENV):
        LocalProvider()
    with pytest.raises(ProviderError, match="batch option"):
        LocalProvider("", batch=0)
    assert LocalProvider("", batch=4).settings() == LocalProvider("", batch=1).settings()  # not in the identity


@pytest.fixture(scope="module")
def one_sequence() -> Iterator[LocalProvider]:
    embedded_weights()
    p = LocalProvider("", n_ctx=2048, batch=1)
    yield p
    p.close()


@pytest.fixture(scope="module")
def batched() -> Iterator[LocalProvider]:
    embedded_weights()
    p = LocalProvider("", n_ctx=2048, batch=4)
    yield p
    p.close()


@pytest.fixture(scope="module")
def alone(one_sequence: LocalProvider) -> list[ModelOutput]:
    """Each of REQUESTS answered by the one-sequence path (``create_completion``), once for the
    tests that compare the batched path with it."""
    return [one_sequence.generate_sync(_messages(s, q), t, c, CFG) for s, t, q, c in REQUESTS]


def _answer(out: ModelOutput) -> tuple[Any, ...]:
    return (out.content, [(c.name, c.arguments, c.parse_error) for c in out.tool_calls], out.recovered,
            out.usage.prompt_tokens, out.usage.completion_tokens)


def _messages(system: dict[str, str], query: str) -> list[dict[str, Any]]:
    return [system, {"role": "user", "content": query}]


@pytest.mark.slow
def test_the_batched_path_alone_answers_as_the_one_sequence_path(alone: list[ModelOutput],
                                                                  batched: LocalProvider) -> None:
    """One request at a time through the decoder (its own context, slots, prefix copies between
    them): token for token what ``create_completion`` gives."""
    through = [batched.generate_sync(_messages(s, q), t, c, CFG) for s, t, q, c in REQUESTS]
    assert [_answer(o) for o in through] == [_answer(o) for o in alone]
    assert any(o.tool_calls for o in alone) and alone[3].tool_calls  # the sample makes calls, "required" too
    assert through[4].usage.cached_prompt_tokens > through[1].usage.prompt_tokens - 20  # the prefix was reused


@pytest.mark.slow
async def test_concurrent_requests_decode_together(alone: list[ModelOutput], batched: LocalProvider) -> None:
    """Decoded together, a request may differ from the one-sequence path where the model hesitates:
    a batched matrix product adds in another order (measured: 1 of these 6 differs). The study's
    finding is checked under both paths by bench/bench_default_job.py."""
    batched.close()  # a fresh decoder, its counters at zero
    together = await asyncio.gather(*(batched.generate(_messages(s, q), t, c, CFG) for s, t, q, c in REQUESTS))
    assert sum(_answer(a) == _answer(b) for a, b in zip(alone, together, strict=True)) >= 4
    assert [bool(o.tool_calls) for o in together] == [bool(o.tool_calls) for o in alone]
    stats = batched.decoder_stats()
    assert stats is not None and stats.requests == len(REQUESTS)
    assert stats.generating > 2 * stats.steps  # most steps decoded several sequences at once


@pytest.mark.slow
async def test_concurrent_episodes_evaluate_their_shared_prefix_once(batched: LocalProvider) -> None:
    batched.close()  # a fresh cache
    queries = ["Bedroom to 18.", "Kitchen to 23.", "Living room to 20.", "Bedroom to 24."]
    outs = await asyncio.gather(*(batched.generate(_messages(SYSTEM, q), THERMOSTAT_TOOLS, None,
                                                   GenerateConfig(max_tokens=4)) for q in queries))
    stats = batched.decoder_stats()
    assert stats is not None
    prompt = outs[0].usage.prompt_tokens
    assert sorted(o.usage.cached_prompt_tokens > prompt - 20 for o in outs) == [False, True, True, True]
    assert stats.prompt_tokens < prompt + 3 * 20  # the prefix once, then each query's own tokens
    # every prompt token is either evaluated or taken from the cache, and the counters say which
    assert stats.reused_tokens == sum(o.usage.cached_prompt_tokens for o in outs)
    assert stats.prompt_tokens + stats.reused_tokens == sum(o.usage.prompt_tokens for o in outs)
    assert 1 <= stats.prompt_steps <= stats.steps and stats.generated_tokens >= sum(
        o.usage.completion_tokens for o in outs)
    # the next turn of an episode continues its own sequence
    turn2 = _messages(SYSTEM, queries[0]) + [{"role": "assistant", "content": outs[0].content or "ok"},
                                              {"role": "user", "content": "And the kitchen?"}]
    out = await batched.generate(turn2, THERMOSTAT_TOOLS, None, GenerateConfig(max_tokens=4))
    assert out.usage.cached_prompt_tokens > prompt


@pytest.mark.slow
@pytest.mark.parametrize("reserve", [0, 40])
def test_a_full_kv_cache_sets_requests_back_and_loses_none(one_sequence: LocalProvider, alone: list[ModelOutput],
                                                           reserve: int) -> None:
    """A cache too small for three prompts at once. With room held back for what each request
    generates, the third waits for room and none is set back; with none held back, a request
    that outgrows the cache sets the latest running one back, which restarts later. Either way
    every answer is the one the one-sequence path gives."""
    prepared = [one_sequence._prepare(_messages(s, q), t, c, CFG) for s, t, q, c in REQUESTS[:3]]
    lengths = [len(tokens) for tokens, _, _ in prepared]
    assert max(lengths) + CFG.max_tokens < 256 < sum(lengths)  # one fits alone, three do not
    llm = one_sequence._llm
    decoder = BatchDecoder(llm, batch=3, slots=4, kv_cells=256, n_batch=512,
                           n_threads=2, flash_attn=True, stop=_STOP, gen_reserve=reserve)
    try:
        futures = [decoder.submit(tokens, n, sampling) for tokens, n, sampling in prepared]
        results = [f.result(timeout=300) for f in futures]
    finally:
        decoder.close()
    assert decoder.stats.kv_waits >= 1  # the third did not fit beside the others' prompts
    if reserve:
        assert decoder.stats.preempted == 0 and decoder.stats.requests == len(prepared)
    else:
        assert decoder.stats.preempted >= 1 and decoder.stats.requests > len(prepared)  # set back, admitted again
    parsed = [LocalProvider._to_output(r.text, t, c, Usage(), 0.0) for r, (_, t, _, c) in zip(results, REQUESTS,
                                                                                                 strict=False)]
    # every request answered, as the one-sequence path answers it (up to batching's rounding: see above)
    same = [(p.content, p.tool_calls) == (o.content, o.tool_calls) for p, o in zip(parsed, alone[:3], strict=True)]
    assert sum(same) >= 2 and all(r.completion_tokens > 0 for r in results)


@pytest.mark.slow
def test_a_cancelled_request_frees_its_sequence_and_spares_the_others(batched: LocalProvider) -> None:
    short = GenerateConfig(max_tokens=6)
    prepared = [batched._prepare(_messages(s, q), t, c, short) for s, t, q, c in REQUESTS[:2]]
    decoder = batched._decoder
    assert decoder is not None
    first = decoder.submit(*prepared[0])
    assert first.cancel()  # its caller gave up (an asyncio task cancelled)
    second = decoder.submit(*prepared[1])
    assert second.result(timeout=300).completion_tokens > 0 and first.cancelled()
    assert all(s.request is None for s in decoder._slots)
    assert batched.generate_sync(_messages(SYSTEM, "Bedroom to 20."), THERMOSTAT_TOOLS, None, short).usage.prompt_tokens
