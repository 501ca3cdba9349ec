"""Fuzzing the tool-call parser, the text-call recovery and the decoder of every variant.

More than 10,000 malformed model outputs (invalid JSON, wrong types, unknown tools,
huge strings, deeply nested values, unicode, duplicate keys, null arguments) go
through ``ToolCall.from_raw``, ``providers.textcalls`` and ``Session.decode`` of every
registered variant, and a share of them through whole episodes into a store row.
The contract checked: nothing raises, and every case is classified (a parsed call or
a parse error with a message; a native action, a protocol reply, or a rejection with
a kind and a message). Example counts are fixed and derandomised, so the run is
reproducible and takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.paths import SHARED_DATA
from toolbias.catalog import Catalog, load_catalog
from toolbias.catalog.model import NativeAction, Task
from toolbias.catalog.validation import validate_action
from toolbias.operators.base import Call
from toolbias.providers.base import ToolCall
from toolbias.providers.scripted import ScriptedProvider
from toolbias.store import EpisodeRow, record_json
from toolbias.study.episode import EpisodeConfig, run_episode
from toolbias.variants import build_codec, registry
from toolbias.variants.codec import MAX_ARGUMENT_DEPTH, Codec, Decoded, Outcome

SHARED_TSS = SHARED_DATA / "toolschemaspace"

_FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example])


def fuzz(examples: int) -> settings:
    """Fixed, derandomised example counts: reproducible and quick."""
    return settings(_FUZZ, max_examples=examples)

#: a catalog no built-in domain resembles: untyped, array and open-object parameters,
#: unicode names, so deep and odd values get past the schema into the whole pipeline
WILD_TOOLS = [
    {"type": "function", "function": {"name": "keep", "description": "keep any value", "parameters": {
        "type": "object", "properties": {"blob": {"description": "anything"}, "items": {"type": "array"},
                                         "obj": {"type": "object", "additionalProperties": True},
                                         "n": {"type": "integer", "minimum": 0, "maximum": 10},
                                         "mode": {"type": "string", "enum": ["a", "b"]}},
        "required": ["mode"]}}},
    {"type": "function", "function": {"name": "ünïcødé_tøøl", "description": "名前", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}, "flag": {"type": "boolean"}}}}},
]


# --------------------------------------------------------------------------- catalogs


def _task_catalog() -> Catalog:
    """The built-in catalog once it has tasks, else the paper's artifact; skip without either."""
    builtin = load_catalog("builtin")
    if builtin.tasks:
        return builtin
    if (SHARED_TSS / "tools.json").is_file():
        return load_catalog(f"toolschemaspace:{SHARED_TSS}")
    pytest.skip(f"the built-in catalog has no tasks yet and {SHARED_TSS} is absent")


@pytest.fixture(scope="module")
def wild_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    path = tmp_path_factory.mktemp("wild") / "wild.json"
    path.write_text(json.dumps(WILD_TOOLS, ensure_ascii=False), encoding="utf-8")
    return load_catalog(f"tools:{path}")


@pytest.fixture(scope="module")
def task_catalog() -> Catalog:
    return _task_catalog()


def _codecs(catalog: Catalog) -> list[Codec]:
    out = []
    for spec in registry().values():
        try:
            out.append(build_codec(catalog, spec))
        except Exception as exc:  # noqa: BLE001 - building every variant is the registry tests' job
            if not catalog.name.startswith("tools:"):  # the wild catalog need not fit every operator
                warnings.warn(f"variant {spec.name} does not build on {catalog.name}: {exc}", stacklevel=2)
    return out


# --------------------------------------------------------------------------- strategies

json_scalar = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**30), max_value=10**30)
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20))
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

HUGE = "x" * 1_000_000
SPECIAL_RAW = [
    "", " ", "null", "true", "0", "-1e309", "NaN", "Infinity", '"a string"', "[]", "[1, 2]", "{}",
    "{", "}", "{\"a\":", "{\"a\": 1,}", "{'single': 'quotes'}", "{\"a\": 1, \"a\": 2}",
    "{\"a\": undefined}", "{\"a\": 0x10}", "\ufeff{}", "{\"a\": \"\\ud800\"}", "{\"\\ud83d\": \"\\ude00\"}",
    "{\"a\": \"\\u0000\"}", "{\"a\": 1}{\"b\": 2}", "{\"a\": 1} trailing", "```json\n{\"a\": 1}\n```",
    "{\"a\": 1e999999}", "{\"a\": -0.0}", "{\"a\": " + "[" * (MAX_ARGUMENT_DEPTH + 1)
    + "]" * (MAX_ARGUMENT_DEPTH + 1) + "}", "\x00\x01\x02", "\u202e{\"a\": 1}", "{\"a\"\u00a0: 1}",
    "{\"__import__('os').system('true')\": 1}",
]
#: costly ones (megabytes, tens of thousands of levels): each goes through once, not per example
HOSTILE_RAW = [
    "{\"a\": " + "1" * 5000 + "}", "[" * 100_000, "{\"a\":" * 50_000, "[1," * 30_000, "{\"name\": " * 20_000,
    "{\"a\": " + "[" * 900 + "]" * 900 + "}", "{\"a\": \"" + HUGE + "\"}", "{\"" + HUGE + "\": 1}",
    "<tool_call>" * 10_000, "```json\n{" * 10_000, "{}" * 50_000, HUGE,
]


def _mutate(text: str, rnd: random.Random) -> str:
    """Damage a JSON text the ways models and broken servers do."""
    if not text:
        return text
    op = rnd.randrange(7)
    i = rnd.randrange(len(text) + 1)
    if op == 0:
        return text[:i]                                  # truncated (max_tokens, dropped connection)
    if op == 1:
        return text[:i] + rnd.choice('{}[]",:\\') + text[i:]  # stray punctuation
    if op == 2:
        return text[:i] + text[i + 1:]                   # a lost character
    if op == 3:
        return text.replace('"', "'")                    # Python-style quotes
    if op == 4:
        return text + text                               # two objects back to back
    if op == 5:
        return text.replace(":", ": " + "[" * 3, 1)       # unbalanced nesting
    return text[:i] + rnd.choice(["\u0000", "\ud800", "\U0001f600", "\u202e", "\\u", "\\"]) + text[i:]


@st.composite
def raw_arguments(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.sampled_from(SPECIAL_RAW))
    if kind == 1:
        return draw(st.text(max_size=80))
    value = draw(json_value)
    if kind == 2:
        return value                                     # an object in place of a string (or any JSON value)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), allow_nan=True)
    if kind == 3:
        return text
    return _mutate(text, random.Random(draw(st.integers(0, 2**32))))


def _check_tool_call(tc: ToolCall) -> None:
    assert isinstance(tc.name, str)
    if tc.arguments is None:
        assert isinstance(tc.parse_error, str) and tc.parse_error, tc
    else:
        assert isinstance(tc.arguments, dict) and tc.parse_error is None, tc
        json.dumps(tc.arguments, allow_nan=True)         # data, storable


_ODD_TEXT = ["", " ", "é", "名前", "\u202e", "\u0000", "\ud800", "\U0001f600", "\ufeff", "x" * 3000,
             "__import__('os').system('true')", "'; DROP TABLE episodes; --", "<script>alert(1)</script>"]


def _rand_text(rnd: random.Random) -> str:
    if rnd.random() < 0.4:
        return rnd.choice(_ODD_TEXT)
    return "".join(chr(rnd.choice([rnd.randrange(32, 127), rnd.randrange(0x80, 0x3000), rnd.randrange(0, 32)]))
                   for _ in range(rnd.randrange(12)))


def _rand_json(rnd: random.Random, depth: int = 0) -> Any:
    """A random JSON value (cheap to make: hypothesis draws the seed, this makes thousands)."""
    k = rnd.randrange(10 if depth < 4 else 8)
    if k == 0:
        return None
    if k == 1:
        return rnd.random() < 0.5
    if k == 2:
        return rnd.choice([0, -1, 1, 2**31, -(2**63), 10**30, rnd.randrange(-1000, 1000)])
    if k == 3:
        return rnd.choice([0.5, -0.0, 1e308, float("nan"), float("inf"), rnd.uniform(-1e6, 1e6)])
    if k in (4, 5, 6, 7):
        return _rand_text(rnd)
    if k == 8:
        return [_rand_json(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {_rand_text(rnd): _rand_json(rnd, depth + 1) for _ in range(rnd.randrange(4))}


def _rand_raw(rnd: random.Random) -> Any:
    """Raw tool-call arguments as a model or a broken server might send them."""
    kind = rnd.randrange(6)
    if kind == 0:
        return rnd.choice(SPECIAL_RAW)
    if kind == 1:
        return _rand_text(rnd)
    value = _rand_json(rnd) if rnd.random() < 0.3 else {_rand_text(rnd): _rand_json(rnd) for _ in range(3)}
    if kind == 2:
        return value
    text = json.dumps(value, ensure_ascii=rnd.random() < 0.5, allow_nan=True)
    return text if kind == 3 else _mutate(text, rnd)


# --------------------------------------------------------------------------- ToolCall.from_raw


@fuzz(500)
@given(raw=raw_arguments(), name=st.text(max_size=30))
def test_from_raw_never_raises_and_classifies(raw: Any, name: str) -> None:
    _check_tool_call(ToolCall.from_raw("call_0", name, raw))


#: cases per hypothesis example in the batch tests (hypothesis draws the seed; plain
#: ``random`` makes the cases, which is ~50x cheaper than drawing each from a strategy)
BATCH = 100


@fuzz(30)
@given(seed=st.integers(0, 2**32))
def test_from_raw_batches(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(BATCH):
        _check_tool_call(ToolCall.from_raw("call_0", _rand_text(rnd), _rand_raw(rnd)))


def test_from_raw_special_cases() -> None:
    for raw in SPECIAL_RAW + HOSTILE_RAW + [None, 1, 1.5, [1], b"{}", {1, 2}, {"a": {1, 2}}, object(), float("nan")]:
        _check_tool_call(ToolCall.from_raw("call_0", "t", raw))
    deep = ToolCall.from_raw("c", "t", "{\"a\": " + "[" * 900 + "]" * 900 + "}")
    assert deep.arguments is None and "nest deeper" in (deep.parse_error or "")
    big = ToolCall.from_raw("c", "t", "{\"a\": " + "1" * 5000 + "}")
    assert big.arguments is None and "not valid JSON" in (big.parse_error or "")
    dup = ToolCall.from_raw("c", "t", "{\"a\": 1, \"a\": 2}")
    assert dup.arguments == {"a": 2}                     # JSON's last-wins rule, as every server parses it


# --------------------------------------------------------------------------- text-call recovery

TEXT_PIECES = ["<tool_call>", "</tool_call>", "```json\n", "```", "[TOOL_CALLS]", "<|python_tag|>",
               '{"name": "keep", "arguments": {"mode": "a"}}', '{"name": "keep", "arguments": "{\\"mode\\": 1}"}',
               '{"function": {"name": "x", "arguments": {}}}', '[{"name": "a", "parameters": {}}]',
               '{"name": ', '"arguments": {', "}", "]", "{", "[", "\n", " ", "\ud800", "名前", "x" * 5000]


@st.composite
def model_text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(TEXT_PIECES) | st.text(max_size=20)
                          | raw_arguments().map(lambda r: r if isinstance(r, str) else json.dumps(r)),
                          max_size=8))
    return "".join(parts)


def _check_recovery(text: str) -> None:
    textcalls = pytest.importorskip("toolbias.providers.textcalls")
    # the internal finder, not only the public never-raises wrapper: an exception there
    # would silently lose every call in the text
    found = textcalls._find(text, "call_")
    assert len(found.calls) == len(found.formats) <= textcalls.MAX_CALLS
    for tc in found.calls:
        _check_tool_call(tc)
        assert tc.name.strip() or tc.parse_error
    calls, remaining = textcalls.recover_tool_calls(text)
    assert isinstance(remaining, str) and len(calls) == len(found.calls)


@fuzz(300)
@given(text=model_text())
def test_text_call_recovery_never_raises(text: str) -> None:
    _check_recovery(text)


@fuzz(20)
@given(seed=st.integers(0, 2**32))
def test_text_call_recovery_batches(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(BATCH):
        parts = []
        for _ in range(rnd.randrange(8)):
            r = rnd.random()
            raw = _rand_raw(rnd) if r < 0.3 else None
            parts.append(rnd.choice(TEXT_PIECES) if r >= 0.6 else _rand_text(rnd) if raw is None
                         else raw if isinstance(raw, str) else json.dumps(raw, allow_nan=True, default=str))
        _check_recovery("".join(parts))


def test_text_call_recovery_hostile_inputs() -> None:
    textcalls = pytest.importorskip("toolbias.providers.textcalls")
    for text in HOSTILE_RAW:
        for tc in textcalls._find(text, "call_").calls:
            _check_tool_call(tc)


# --------------------------------------------------------------------------- decoder of every variant


def _check_decoded(d: Decoded, catalog: Catalog, strict: bool) -> None:
    assert isinstance(d, Decoded)
    assert d.outcome in (Outcome.NATIVE, Outcome.REPLY, Outcome.REJECTION)
    if d.outcome is Outcome.REJECTION:
        assert d.rejection_kind is not None and d.message, d
    if d.outcome is Outcome.NATIVE:
        assert d.actions, d
        for a in d.actions:  # every accepted call reaches native actions only
            assert validate_action(catalog, a) is None, (d, validate_action(catalog, a))
    record_json(d.to_dict())                              # storable as it is


def _names(codec: Codec, domain: str) -> list[str]:
    variant = [t.name for t in codec.tools_for(domain)]
    native = [t.name for t in codec.catalog.domain(domain).tools]
    return variant + native + [n.upper() for n in variant[:3]] + ["", " ", "unknown_tool", "a::b", "名前",
                                                                   "__import__('os').system('true')"]


def _arg_keys(codec: Codec, domain: str) -> list[str]:
    keys: list[str] = []
    for t in codec.tools_for(domain) + list(codec.catalog.domain(domain).tools):
        keys.extend(t.properties)
    return sorted(set(keys)) or ["a"]


def _sequence(rnd: random.Random, codec: Codec, tasks: list[Task]) -> tuple[str, list[Call]]:
    """Calls for one session: a damaged oracle encoding of a task's gold (wrong types,
    missing or unknown arguments, unknown or miscased tools, null arguments, lost,
    repeated and reordered protocol steps) plus free-form calls."""
    task = rnd.choice(tasks)
    domain = task.domain
    names, keys = _names(codec, domain), _arg_keys(codec, domain)
    calls: list[Call] = []
    for c in codec.encode(task.gold):
        args: dict[str, Any] = dict(c.arguments)
        op = rnd.randrange(8)
        if op == 1 and args:                              # a wrong type
            args[rnd.choice(sorted(args))] = _rand_json(rnd)
        elif op == 2 and args:                            # a missing argument
            args.pop(rnd.choice(sorted(args)))
        elif op == 3:                                     # an unknown argument
            args[_rand_text(rnd)] = _rand_json(rnd)
        elif op == 4:                                     # an unknown or miscased tool
            c = Call(rnd.choice(names), c.arguments)
        elif op == 5:                                     # null / non-object arguments
            odd: Any = rnd.choice([None, [], "x", 1])
            calls.append(Call(c.name, odd))
            continue
        elif op == 6:                                     # lost (a skipped protocol step)
            continue
        calls.append(Call(c.name, args))
        if rnd.random() < 0.1:                            # repeated (double commit, twice the action)
            calls.append(Call(c.name, args))
    for _ in range(rnd.randrange(4)):                     # free-form calls
        args = {(rnd.choice(keys) if rnd.random() < 0.7 else _rand_text(rnd)): _rand_json(rnd)
                for _ in range(rnd.randrange(4))}
        calls.append(Call(rnd.choice(names), args))
    if rnd.random() < 0.2:                                # out of order
        rnd.shuffle(calls)
    return domain, calls


#: sequences decoded per hypothesis example (hypothesis draws the seed and the control)
SEQUENCES_PER_EXAMPLE = 8


def _decode_all(codec: Codec, domain: str, calls: list[Call], control: str) -> list[Decoded]:
    session = codec.session(domain, control)
    out = []
    for call in calls:
        out.append(session.decode(call))
    for flag in session.finish():
        assert flag.kind.value
    return out


def _fuzz_decoder(catalog: Catalog, tasks: list[Task], examples: int) -> int:
    codecs = _codecs(catalog)
    assert codecs
    decoded = [0]

    def fuzz_one(codec: Codec) -> None:
        @fuzz(examples)
        @given(seed=st.integers(0, 2**32), control=st.sampled_from(["strict", "lenient"]))
        def check(seed: int, control: str) -> None:
            rnd = random.Random(seed)
            for _ in range(SEQUENCES_PER_EXAMPLE):
                domain, calls = _sequence(rnd, codec, tasks)
                for d in _decode_all(codec, domain, calls, control):
                    _check_decoded(d, catalog, control == "strict")
                    decoded[0] += 1

        check()

    for codec in codecs:
        fuzz_one(codec)
    return decoded[0]


def test_decoder_of_every_variant_classifies_malformed_calls(task_catalog: Catalog) -> None:
    per_variant = max(4, 400 // max(1, len(registry())))
    decoded = _fuzz_decoder(task_catalog, list(task_catalog.tasks), per_variant)
    assert decoded >= 5000, decoded


def test_decoder_on_a_wild_catalog(wild_catalog: Catalog) -> None:
    gold = (NativeAction("wild", "keep", {"mode": "a", "blob": {"x": [1, 2]}, "items": [1], "obj": {"k": None}}),
            NativeAction("wild", "ünïcødé_tøøl", {"text": "ok", "flag": True}))
    tasks = [Task(id="w1", domain="wild", query="keep it", gold=gold[:1]),
             Task(id="w2", domain="wild", query="both", gold=gold)]
    assert _fuzz_decoder(wild_catalog, tasks, 10) >= 500


def test_decoder_special_arguments(wild_catalog: Catalog) -> None:
    for codec in _codecs(wild_catalog):
        for name in _names(codec, "wild")[:2]:                     # a megabyte value, once per variant
            _check_decoded(codec.session("wild").decode(Call(name, {"mode": "a", "blob": HUGE})), wild_catalog, True)
        odd_args: tuple[Any, ...] = (None, [], "x", 1, {"mode": "a", "blob": "\ud800"},
                                     {"mode": "a", "blob": json.loads("[" * 900 + "]" * 900)},
                                     {"mode": "a", "n": float("nan")}, {"mode": "a", "n": 10**400},
                                     {"mode": None}, {"mode": "a", "obj": {"": {"": {"": None}}}})
        for args in odd_args:
            for name in _names(codec, "wild"):
                session = codec.session("wild")
                d = session.decode(Call(name, args))
                _check_decoded(d, wild_catalog, True)
                if args is not None and not isinstance(args, dict):
                    assert d.outcome is Outcome.REJECTION and d.rejection_kind is not None


def test_deep_arguments_are_a_parse_error_not_a_crash(wild_catalog: Catalog) -> None:
    deep = json.loads("[" * 900 + "]" * 900)  # json accepts it; copying or validating it recursively would not
    for codec in _codecs(wild_catalog):
        d = codec.session("wild").decode(Call(codec.tools_for("wild")[0].name, {"mode": "a", "blob": deep}))
        assert d.outcome is Outcome.REJECTION and "nest deeper" in d.message


def test_lone_surrogates_are_stored_and_exported(tmp_path: Path, task_catalog: Catalog) -> None:
    """A broken escape (``"\\ud83d"``) in model output must not stop the store (SQLite and UTF-8
    files refuse lone surrogates): the record is kept, with the same value read back."""
    from toolbias.store import Store, export
    from toolbias.study.runner import StudyConfig, build_study, run_study

    task = sorted(task_catalog.tasks, key=lambda t: t.id)[0]
    provider = ScriptedProvider(script={"default": [
        {"content": "half an emoji \ud83d", "tool_calls": [{"name": "x", "arguments": '{"a": "\\ud800"}'}]}]})
    study = build_study(StudyConfig(model="scripted", catalog=task_catalog.name, variants="native"), provider,
                        tasks=[task])
    run_study(study, str(tmp_path / "s.db"))
    with Store(tmp_path / "s.db") as s:
        (row,) = list(s.rows())
    assert row.record["messages"][2]["content"] == "half an emoji \ud83d"
    assert row.record["calls"][0]["tool_call"]["arguments"] == {"a": "\ud800"}
    assert export(tmp_path / "s.db", "jsonl", tmp_path / "s.jsonl") == 1
    assert json.loads((tmp_path / "s.jsonl").read_text(encoding="utf-8"))["record"]["calls"][0]["tool_call"][
        "arguments"] == {"a": "\ud800"}


# --------------------------------------------------------------------------- whole episodes


def _rand_turns(rnd: random.Random, names: list[str]) -> list[dict[str, Any]]:
    turns = []
    for _ in range(rnd.randrange(1, 4)):
        calls = [{"name": rnd.choice(names) if rnd.random() < 0.8 else _rand_text(rnd), "arguments": _rand_raw(rnd)}
                 for _ in range(rnd.randrange(4))]
        turns.append({"content": rnd.choice([None, _rand_text(rnd)]), "tool_calls": calls})
    return turns


#: episodes played per hypothesis example
EPISODES_PER_EXAMPLE = 6


def _episodes(catalog: Catalog, tasks: list[Task], examples: int) -> int:
    from toolbias.study.runner import Study, StudyConfig, row_for

    played = [0]

    def fuzz_one(codec: Codec) -> None:
        names = sorted({n for t in tasks for n in _names(codec, t.domain)})
        study = Study(StudyConfig(model="scripted"), catalog, [codec], tasks, ScriptedProvider(script={}), "x")

        async def play(rnd: random.Random) -> None:
            for _ in range(EPISODES_PER_EXAMPLE):
                task = rnd.choice(tasks)
                provider = ScriptedProvider(script={"default": _rand_turns(rnd, names)})
                rec = await run_episode(task, codec, provider, EpisodeConfig(turn_limit=4))
                assert rec.turns >= 1 and rec.termination.value in ("answered", "turn_limit")
                for call in rec.calls:
                    assert call.message                     # every call got an answer the model can read
                    if call.decoded is None:
                        assert call.tool_call.parse_error
                row: EpisodeRow = row_for(study, "k", rec)
                assert row.status == "done" and row.success in (True, False)
                stored = json.loads(row.values()[23])      # the record column, as SQLite gets it
                assert stored["task_id"] == task.id
                played[0] += 1

        @fuzz(examples)
        @given(seed=st.integers(0, 2**32))
        def check(seed: int) -> None:
            asyncio.run(play(random.Random(seed)))

        check()

    for codec in _codecs(catalog):
        fuzz_one(codec)
    return played[0]


def test_whole_episodes_with_garbage_output(task_catalog: Catalog, wild_catalog: Catalog) -> None:
    tasks = sorted(task_catalog.tasks, key=lambda t: t.id)[:40]
    n = _episodes(task_catalog, tasks, max(2, 150 // max(1, len(registry()))))
    wild_tasks = [Task(id="w1", domain="wild", query="keep it",
                       gold=(NativeAction("wild", "keep", {"mode": "a"}),))]
    n += _episodes(wild_catalog, wild_tasks, 5)
    assert n >= 600, n
