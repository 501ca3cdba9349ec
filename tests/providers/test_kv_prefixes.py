"""Evaluated prompt prefixes kept on disk (providers.kv_prefixes): a second run of the same request
loads its system+tools prefix instead of evaluating it and answers as the first did; a file
llama.cpp refuses is evaluated again and replaced; the folder stays under its size limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.catalogs import THERMOSTAT_TOOLS
from tests.support.local_model import HAS_LLAMA, NO_LLAMA
from toolbias.providers.base import GenerateConfig, ModelOutput
from toolbias.providers.kv_prefixes import KV_CACHE_ENV, PrefixStore, default_folder, folder_for, prefix_key

#: a system prompt long enough (with the tools) to be worth keeping: more than MIN_TOKENS tokens
SYSTEM = {"role": "system", "content": "You control a smart home. Use only the provided tools. "
          + "Read each request carefully and act on exactly what it asks. " * 30}
MESSAGES = [SYSTEM, {"role": "user", "content": "Set the bedroom to 21 degrees please."}]


def test_saved_states_are_found_by_their_tokens_and_pruned_oldest_first(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, prefix_key("abc", "engine 1", True), max_mb=1)
    a, b, c = [1, 2, 3], [1, 2, 4], [5] * 10
    store.save(a, b"x" * 400_000)
    assert store.has(a) and not store.has(b) and store.load(b) is None
    assert store.load(a) == b"x" * 400_000
    store.save(b, b"y" * 400_000)
    os.utime(store._path(a), (1, 1))  # a is now the least recently used
    store.save(c, b"z" * 400_000)  # 1.2 MB > 1 MB: the oldest goes
    assert not store.has(a) and store.has(b) and store.has(c)
    store.discard(b)
    assert not store.has(b) and (store.saved, store.loaded, store.missed) == (3, 1, 1)
    # another model, engine or attention kernel: another folder
    assert len({prefix_key("abc", "engine 1", True), prefix_key("abd", "engine 1", True),
                prefix_key("abc", "engine 2", True), prefix_key("abc", "engine 1", False)}) == 4
    assert not list(tmp_path.rglob("*.part"))  # written whole


def test_the_folder_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KV_CACHE_ENV, "off")
    assert default_folder() is None
    monkeypatch.setenv(KV_CACHE_ENV, str(tmp_path))
    assert default_folder() == tmp_path
    monkeypatch.delenv(KV_CACHE_ENV)
    monkeypatch.setenv("TOOLBIAS_CACHE", str(tmp_path / "c"))
    assert default_folder() == tmp_path / "c" / "kv"
    # the provider's kv_cache option: not given is the default, a folder is that folder
    assert folder_for(None) == default_folder() and folder_for(str(tmp_path)) == tmp_path
    assert folder_for("off") is folder_for("") is folder_for(" OFF ") is None


def _answer(folder: Path) -> tuple[ModelOutput, int, PrefixStore]:
    from toolbias.providers.local import LocalProvider

    provider = LocalProvider("", batch=2, kv_cache=str(folder))
    try:
        out = provider.generate_sync(MESSAGES, THERMOSTAT_TOOLS, None, GenerateConfig(max_tokens=40))
        stats, decoder = provider.decoder_stats(), provider._decoder
        assert stats is not None and decoder is not None and decoder.prefixes is not None
        return out, stats.restored_tokens, decoder.prefixes
    finally:
        provider.close()


@pytest.mark.skipif(not HAS_LLAMA, reason=NO_LLAMA)
def test_a_second_run_loads_the_prefix_and_answers_the_same(tmp_path: Path) -> None:
    first, restored, store = _answer(tmp_path)
    assert restored == 0 and store.saved == 1 and first.usage.cached_prompt_tokens == 0
    second, restored, store = _answer(tmp_path)
    assert store.loaded == 1 and restored == second.usage.cached_prompt_tokens > 256
    assert second.usage.prompt_tokens == first.usage.prompt_tokens
    assert (second.content, second.tool_calls) == (first.content, first.tool_calls)
    # a damaged file: llama.cpp refuses it, the prefix is evaluated again and saved afresh
    (saved,) = tmp_path.rglob("*.kv")
    saved.write_bytes(saved.read_bytes()[:1000])
    third, restored, store = _answer(tmp_path)
    assert restored == 0 and store.saved == 1 and saved.stat().st_size > 1000
    assert (third.content, third.tool_calls) == (first.content, first.tool_calls)
