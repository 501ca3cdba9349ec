"""Differential: ``toolbias run --protocol paper`` against the schema-bias artifact's own runner.

Both harnesses play the same deterministic scripted agent, served by one real OpenAI-compatible
server on loopback (:class:`~tests.support.servers.FakeOpenAIServer`): the artifact's
``eval/run_agentic.py`` (imported from ``../shared/reference/ToolSchemaSpace``, its OpenAI client
pointed at the server; skipped with the reason when absent) and toolbias's command line. The
agent answers from the request alone (the query names the task, the tool list the variant, the
last tool message the environment's verdict), so both harnesses see the same answers exactly
when they send the same requests.

Compared, per variant (native, fully merged) and control (hard = ``--control strict``, loose =
``lenient``), over a query sample with one query of every domain and gold length: every request
body (messages, tools, sampling settings), and every episode's exact success, executed actions,
turns, calls, rejections and flags. The agent errs as models do: wrong case, numbers as strings,
null and empty extra arguments, missing arguments, names off the schema (a typo, the native name
on a merged variant), wrong and missing operations, malformed and non-object JSON, empty argument
text, non-ASCII values, a call repeated until the turn limit, and corrections after an error.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.api_servers import FakeAPIServer, responses_answer
from tests.support.cli import run_cli
from tests.support.paper_runners import CONTROLS
from tests.support.paper_runners import runner_skip_reason as _skip_reason
from tests.support.paths import SHARED_DATA
from tests.support.reference_artifact import ARTIFACT, artifact_settings, runner_afresh
from tests.support.servers import FakeOpenAIServer, Reply
from toolbias.store import Store
from toolbias.study.paper_env import Dispatch

REFERENCE = ARTIFACT  # ../shared/reference/ToolSchemaSpace
DATA = SHARED_DATA / "toolschemaspace"
MODEL = "fake-model"
#: how the artifact builds each variant: its ladder index (SCHEMA_VARIANT with SCHEMA_K=10: 5 is native,
#: 0 fully merged) or its spec file (SCHEMA_SPEC)
ARTIFACT = {"native": ("SCHEMA_VARIANT", "5"), "fully_merged": ("SCHEMA_VARIANT", "0"),
            "strip_descriptions": ("SCHEMA_SPEC", "s_nodesc.json"), "reorder_arguments": ("SCHEMA_SPEC", "s_shuffle.json"),
            "transaction": ("SCHEMA_SPEC", "curry.json")}
#: the artifact's own renderings of Figure 2's per-domain variants (``paper.<name>``), where toolbias has them
PAPER_RENDERINGS = {"paper.native": ("SCHEMA_VARIANT", "5"), "paper.fully_merged": ("SCHEMA_VARIANT", "0"),
                    "paper.fully_split": ("SCHEMA_VARIANT", "9"), "paper.interval_split": ("SCHEMA_SPEC", "pred.json"),
                    "paper.nested_args": ("SCHEMA_SPEC", "pack.json"),
                    "paper.strip_descriptions": ("SCHEMA_SPEC", "s_nodesc.json"),
                    "paper.reorder_arguments": ("SCHEMA_SPEC", "s_shuffle.json"),
                    "paper.transaction": ("SCHEMA_SPEC", "curry.json"),
                    "paper.reference_resolution": ("SCHEMA_SPEC", "indirect.json"),
                    "paper.composed": ("SCHEMA_SPEC", "mixed.json")}
#: toolbias's own constructions that share an artifact variant's name: the artifact's rendering is
#: ``paper.<name>``, so these differ from it by design (and are never called the paper's)
OWN_CONSTRUCTIONS = {"fully_merged", "reorder_arguments", "transaction"}


def _has_renderings() -> bool:
    try:
        importlib.import_module("toolbias.variants.paper")
    except ImportError:
        return False
    return True


if _has_renderings():
    ARTIFACT.update(PAPER_RENDERINGS)
#: the artifact's runners read these at import time
_ENV = ("SCHEMA_VARIANT", "SCHEMA_SPEC", "SCHEMA_CONTROL", "SCHEMA_K", "SYN_QUERIES", "MAX_TURNS", "SYN_MODEL",
        "SYN_MAX_TOKENS", "SYN_NOTE", "SYN_TOOLCHOICE", "SYN_SEED", "SYN_EXTRA_BODY", "SYN_API", "HIER_ARM")


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


#: the scripted agent's ways to err (see :func:`agent`), one a query
PERSONAS = ("clean", "sequential", "wrong_case", "numbers_as_text", "null_extras", "missing_argument",
            "off_schema_then_fix", "malformed_then_fix", "not_an_object", "wrong_operation", "livelock",
            "answer_only", "native_name", "no_operation", "empty_arguments", "non_ascii", "retry_on_error",
            "reversed", "no_commit", "twice")


def _sample() -> list[dict[str, Any]]:
    """The smallest sample with every domain, every gold length and every persona, in file order:
    each query whose domain or gold length is not in yet, then queries of (domain, gold length)
    pairs not in yet until every persona has one (20 queries: each differential run below plays
    them all under two harnesses, so the sample's size is the file's time)."""
    if _skip_reason() is not None:
        return []
    rows = [json.loads(line) for line in (DATA / "queries.sample.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    out: list[dict[str, Any]] = []
    domains: set[str] = set()
    lengths: set[int] = set()
    pairs: set[tuple[str, int]] = set()
    for q in rows:
        if q["domain"] not in domains or len(q["gold_calls"]) not in lengths:
            out.append(q)
            domains.add(q["domain"])
            lengths.add(len(q["gold_calls"]))
            pairs.add((q["domain"], len(q["gold_calls"])))
    for q in rows:
        if len(out) >= len(PERSONAS):
            break
        if (q["domain"], len(q["gold_calls"])) not in pairs:
            out.append(q)
            pairs.add((q["domain"], len(q["gold_calls"])))
    return out


SAMPLE = _sample()
BY_QUERY = {q["query"]: q for q in SAMPLE}


# -- the scripted agent ------------------------------------------------------------------------

def persona(q: dict[str, Any]) -> str:
    """Each query's way to err: the personas in turn over the sample (sorted by id)."""
    return PERSONA_OF[q["id"]]


PERSONA_OF = {q["id"]: PERSONAS[i % len(PERSONAS)] for i, q in enumerate(sorted(SAMPLE, key=lambda q: q["id"]))}


def _names(tools: list[dict[str, Any]]) -> set[str]:
    return {t.get("function", t)["name"] for t in tools}


#: the artifact's own encoder of the variant being played (its oracle), when the test sets one
ENCODER: dict[str, Any] = {}


def _artifact_form(domain: str, calls: list[tuple[str, dict[str, Any]]], begun: int) -> list[tuple[str, Any]] | None:
    """The calls as the artifact's oracle writes them in the variant (resolver lookups, begin / set
    / commit, baked names), transaction handles counted on from ``begun``; None where it cannot."""
    ra = ENCODER.get("ra")
    if ra is None:
        return None
    try:
        if hasattr(ra, "COMP"):  # the whole-catalog runner: its compiled arm's oracle
            seq = ra.COMP.encode_episode(domain, [{"name": n, "arguments": a} for n, a in calls])
        elif ra.adapter.spec is not None:
            ops = importlib.import_module("toolschema.operators")
            canon = importlib.import_module("toolschema.schema_adapter")._canonicalize
            comp = ops.compile_spec([canon(t) for t in ra.ev.NATIVE[domain]], ra.adapter.spec, group=domain)
            seq = comp.encode_episode([{"name": n, "arguments": a} for n, a in calls])
        else:
            seq = [_ladder_form(ra.VARIANT[domain][1], n, a) for n, a in calls]
    except (AssertionError, KeyError, TypeError, ValueError):
        return None
    out = []
    for name, args in seq:
        if isinstance(args, dict) and str(args.get("txn_id", "")).startswith("txn_"):
            args = {**args, "txn_id": f"txn_{int(args['txn_id'][4:]) + begun}"}
        out.append((name, args))
    return out


def _ladder_form(call_map: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    for vname, e in call_map.items():
        if e.get("namespaced") and name in (e.get("ops") or []):
            return vname, {"operation": name, **{f"{name}::{k}": v for k, v in args.items()}}
        fixed = e.get("fixed") or {}
        if e.get("op") == name and all(k in args and args[k] == v for k, v in fixed.items()):
            return vname, {k: v for k, v in args.items() if k not in fixed}
    raise KeyError(name)


def _encode(tools: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]], begun: int,
            domain: str = "") -> list[tuple[str, Any]]:
    """Native calls in the variant's form: the artifact's oracle where the test set it, else the
    flat dispatcher of a merged variant, begin / set / commit for a tool in a transaction (handles
    counted on from ``begun`` earlier begins), the native call otherwise."""
    form = _artifact_form(domain, calls, begun)
    if form is not None:
        return form
    names = _names(tools)
    out: list[tuple[str, Any]] = []
    for name, args in calls:
        if "execute" in names:
            out.append(("execute", {"operation": name, **{f"{name}::{k}": v for k, v in args.items()}}))
        elif f"begin_{name}" in names:
            begun += 1
            out += [(f"begin_{name}", {}), *((f"set_{name}__{k}", {"txn_id": f"txn_{begun}", k: v})
                                             for k, v in args.items()), (f"commit_{name}", {"txn_id": f"txn_{begun}"})]
        else:
            out.append((name, args))
    return out


def _perturbed(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    if kind == "wrong_case":
        return {k: v.upper() if isinstance(v, str) else v for k, v in out.items()}
    if kind == "numbers_as_text":
        return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in out.items()}
    if kind == "null_extras":
        return {**out, "note": None, "label": ""}
    if kind == "missing_argument" and out:
        out.pop(sorted(out)[-1])
    if kind == "non_ascii":
        return {**out, "label": "Küche – ☕"}
    return out


def _wire(calls: list[tuple[str, Any]]) -> Reply:
    return Reply.calls(*((n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls))


def agent(body: dict[str, Any]) -> Reply:
    """The next turn for a request: a function of the request alone."""
    messages = body["messages"]
    q = BY_QUERY[messages[1]["content"]]
    tools = body.get("tools") or []
    kind = persona(q)
    turn = sum(1 for m in messages if m["role"] == "assistant")
    begun = sum(1 for m in messages for c in m.get("tool_calls") or [] if c["function"]["name"].startswith("begin_"))
    last = messages[-1]["content"] if messages[-1]["role"] == "tool" else ""
    gold = [(g["name"], dict(g.get("arguments") or {})) for g in q["gold_calls"]]

    def _encode_q(tools: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]], begun: int) -> list[Any]:
        return _encode(tools, calls, begun, q["domain"])

    right = _encode_q(tools, gold, begun)
    done = Reply.text("Done.")
    if kind == "answer_only":
        return Reply.text("I cannot help with that.")
    if kind == "livelock":
        return _wire(_encode_q(tools, gold[:1], begun))
    if kind == "sequential":  # one call of the variant's form per turn
        whole = _encode_q(tools, gold, 0)
        return _wire(whole[turn:turn + 1]) if turn < len(whole) else done
    if turn > 1 or (turn == 1 and kind not in ("off_schema_then_fix", "malformed_then_fix", "retry_on_error",
                                               "reversed")):
        return done
    if turn == 1:  # a correction, when the environment said no (retry_on_error, reversed: only then)
        if kind in ("retry_on_error", "reversed") and "error" not in last:
            return done
        return _wire(right)
    first, rest = right[0], right[1:]
    if kind == "off_schema_then_fix":
        return _wire([(f"do_{gold[0][0]}", gold[0][1])])
    if kind == "malformed_then_fix":
        return _wire([(first[0], '{"operation": "x", ')])
    if kind == "not_an_object":
        return _wire([(first[0], "[1, 2]"), *rest])
    if kind == "empty_arguments":
        return _wire([(first[0], ""), *rest])
    if kind == "native_name":
        return _wire(gold)
    if kind == "wrong_operation":
        return _wire(_encode_q(tools, [(gold[0][0] + "_now", gold[0][1])], begun) + _encode_q(tools, gold[1:], begun + 1))
    if kind == "no_operation":
        args = dict(first[1]) if isinstance(first[1], dict) else {}
        args.pop("operation", None)
        args.pop("txn_id", None)
        return _wire([(first[0], args), *rest])
    if kind == "retry_on_error":
        return _wire(_encode_q(tools, [(gold[0][0], _perturbed("missing_argument", gold[0][1]))], begun)
                     + [(f"{gold[0][0]}_v2", {})])
    if kind == "reversed":  # protocol steps out of order (a transaction's commit before its begin)
        return _wire(right[::-1])
    if kind == "no_commit":
        return _wire([c for c in right if not c[0].startswith("commit_")] or right[:1])
    if kind == "twice":
        return _wire(right + right[-1:])
    return _wire(_encode_q(tools, [(n, _perturbed(kind, a)) for n, a in gold], begun))


def _chat_form(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request read back as the chat request it stands for (what :func:`agent` reads)."""
    messages: list[dict[str, Any]] = []
    for item in body["input"]:
        if item.get("type") == "function_call":
            if not (messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]):
                messages.append({"role": "assistant", "content": "", "tool_calls": []})
            messages[-1]["tool_calls"].append({"id": item["call_id"], "type": "function", "function": {
                "name": item["name"], "arguments": item["arguments"]}})
        elif item.get("type") == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        else:
            messages.append({"role": item["role"], "content": item["content"]})
    return {"messages": messages, "tools": body.get("tools") or []}


def responses_agent(path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = agent(_chat_form(body))
    return responses_answer(reply.content, [(c["function"]["name"], c["function"]["arguments"])
                                            for c in reply.tool_calls], model=MODEL)


# -- the two harnesses ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(models=(MODEL,), responder=agent) as srv:
        yield srv


@pytest.fixture(scope="module")
def query_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("paper") / "queries.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in SAMPLE), encoding="utf-8")
    return path


def _runner(module: str, env: dict[str, str], base_url: str, queries: Path, api: str = "chat") -> ModuleType:
    """The artifact's runner ``module`` imported afresh with ``env`` (every other setting it reads unset)."""
    return runner_afresh(module, {**env, "SYN_QUERIES": str(queries), "SYN_MODEL": MODEL}, base_url, MODEL,
                         unset=_ENV, api=api)


def artifact_runner(variant: str, control: str, base_url: str, queries: Path, api: str = "chat") -> ModuleType:
    """``eval.run_agentic`` for one variant and control."""
    key, value = ARTIFACT[variant]
    if key == "SCHEMA_SPEC":  # the shared copy of the artifact's specs has all it reports (indirect, mixed)
        value = str(DATA / "specs" / value)
    return _runner("eval.run_agentic", {key: value, "SCHEMA_CONTROL": CONTROLS[control]}, base_url, queries, api)


def _key(body: dict[str, Any]) -> tuple[str, int]:
    """An episode turn's request: its query and how long its conversation is (chat or Responses form)."""
    items = body["messages"] if "messages" in body else body["input"]
    return items[1]["content"], len(items)


def _by_key(requests: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for body in requests:
        assert _key(body) not in out, "two requests of one episode turn"
        out[_key(body)] = body
    return out


def toolbias_run(capsys: pytest.CaptureFixture[str], variant: str, control: str, base_url: str, queries: Path,
                 store: Path, kind: str = "openai") -> dict[str, dict[str, Any]]:
    code, out, err = run_cli(capsys, "run", "--model", f"{kind}:{MODEL}", "--base-url", base_url, "--catalog",
                             f"toolschemaspace:{DATA}", "--task-file", str(queries), "--variants", variant,
                             "--control", control, "--protocol", "paper", "--store", str(store), "--concurrency", "4")
    assert code == 0, out + err
    with Store(store) as st:
        return {r.task_id: {"success": bool(r.success), **r.record} for r in st.rows()}


def play_both(ra: ModuleType, variant: str, control: str, server: FakeOpenAIServer, queries: Path, store: Path,
              capsys: pytest.CaptureFixture[str], *, oracle: bool) -> tuple[dict[str, Any], dict[str, Any],
                                                                           dict[Any, Any], dict[Any, Any]]:
    """The artifact's runner ``ra`` and ``toolbias run`` over the sample, on one server: their
    episodes, ours, their requests and ours (by episode turn); the agent writes the variant's calls
    with the artifact's own encoder where ``oracle``."""
    ENCODER.clear()
    if oracle:
        ENCODER["ra"] = ra
    server.requests.clear()
    theirs = {q["id"]: ra.run_episode(q) for q in SAMPLE}
    their_requests = _by_key(list(server.requests))
    assert all(r["err"] is None for r in theirs.values()), [r["err"] for r in theirs.values() if r["err"]][:3]
    server.requests.clear()
    ours = toolbias_run(capsys, variant, control, server.base_url, queries, store)
    our_requests = _by_key(list(server.requests))
    assert set(ours) == set(theirs)
    return theirs, ours, their_requests, our_requests


def assert_requests_equal(ours: dict[Any, Any], theirs: dict[Any, Any], *, tools: bool = True) -> None:
    """Every episode turn's request body equal (but for the tool list, where not ``tools``)."""
    assert set(ours) == set(theirs)
    for key, body in theirs.items():
        mine = ours[key]
        if not tools:
            mine, body = {k: v for k, v in mine.items() if k != "tools"}, {k: v for k, v in body.items() if k != "tools"}
        assert mine == body, f"request {key[1]} of {BY_QUERY[key[0]]['id']}"


@pytest.mark.parametrize("control", list(CONTROLS))
@pytest.mark.parametrize("variant", list(ARTIFACT))
def test_requests_and_episodes_equal_the_artifacts(variant: str, control: str, server: FakeOpenAIServer,
                                                   query_file: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ra = artifact_runner(variant, control, server.base_url, query_file)
    theirs, ours, their_requests, our_requests = play_both(ra, variant, control, server, query_file, tmp_path / "s.db",
                                                           capsys, oracle=variant.startswith("paper."))
    # toolbias's own constructions have their own tool lists: test_tool_lists_equal_the_artifacts
    assert_requests_equal(our_requests, their_requests, tools=variant not in OWN_CONSTRUCTIONS)
    for tid, t in theirs.items():
        o = ours[tid]
        got = {"exact": int(o["success"]), "actions": [[a["tool"], a["arguments"]] for a in o["executed"]],
               "turns": o["turns"], "n_calls": o["paper"]["n_calls"], "n_rejected": o["paper"]["n_rejected"],
               "flags": o["paper"]["flags"], "argument_parse_errors": o["paper"]["argument_parse_errors"],
               "livelock": o["termination"] == "turn_limit"}
        want = {k: t[k] for k in ("exact", "actions", "turns", "n_calls", "n_rejected", "flags",
                                  "argument_parse_errors")} | {"livelock": t["turns"] >= ra.MAX_TURNS}
        assert got == want, f"{tid} ({persona(BY_QUERY_ID[tid])})"
    # not a vacuous agreement: both outcomes, rejections (hard control) or off-schema executions
    # (loose), unreadable arguments and livelocks all occur
    rows = list(theirs.values())
    assert {r["exact"] for r in rows} == {0, 1}
    assert any(r["argument_parse_errors"] for r in rows) and any(r["turns"] >= ra.MAX_TURNS for r in rows)
    if control == "strict":
        assert sum(r["n_rejected"] for r in rows) >= 3  # an off-schema name, a wrong operation, a retry's new name
    else:
        assert any(n.startswith("do_") for r in rows for n, _ in r["actions"])
    if variant == "fully_merged" and control == "lenient":
        assert any("bad_operation" in r["flags"] for r in rows)
    if variant == "transaction":
        flags = {f for r in rows for f in r["flags"]}
        assert {"dangling_txn", "commit_unknown_txn", "set_unknown_txn"} <= flags, flags


BY_QUERY_ID = {q["id"]: q for q in SAMPLE}


@pytest.mark.parametrize("variant", list(ARTIFACT))
def test_tool_lists_equal_the_artifacts(variant: str, server: FakeOpenAIServer, query_file: Path) -> None:
    from toolbias.catalog import load_catalog
    from toolbias.variants import build_codec, resolve_variants

    ra = artifact_runner(variant, "strict", server.base_url, query_file)
    catalog = load_catalog(f"toolschemaspace:{DATA}")
    codec = build_codec(catalog, resolve_variants(variant)[0])
    differ = [d for d, (tools, _) in ra.VARIANT.items() if codec.schema(d) != tools]
    if variant in OWN_CONSTRUCTIONS:
        assert differ, f"{variant} is toolbias's own construction, yet renders as the artifact's"
        paper = build_codec(catalog, resolve_variants(f"paper.{variant}")[0])
        differ = [d for d, (tools, _) in ra.VARIANT.items() if paper.schema(d) != tools]
    assert differ == []


def test_the_sample_covers_every_domain_gold_length_and_persona() -> None:
    domains = {q["domain"] for q in SAMPLE}
    assert len(domains) == 12
    lengths = {len(q["gold_calls"]) for q in SAMPLE}
    assert lengths >= {1, 2, 3, 4, 5}
    assert {persona(q) for q in SAMPLE} == set(PERSONAS)


@pytest.mark.parametrize("variant", ["native", "transaction"])
def test_the_responses_api_path_equals_the_artifacts(variant: str, query_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The artifact's SYN_API=responses against ``openai-responses:`` under --protocol paper: the same
    Responses request bodies (no temperature or store, tools marked non-strict) and episodes."""
    with FakeAPIServer(responses_agent, models=(MODEL,)) as srv:
        ra = artifact_runner(variant, "strict", srv.base_url, query_file, api="responses")
        try:
            theirs = {q["id"]: ra.run_episode(q) for q in SAMPLE}
        finally:
            ra.ev.API = "chat"
        their_requests = _by_key([b for _, b in srv.requests])
        srv.requests.clear()
        ours = toolbias_run(capsys, variant, "strict", srv.base_url, query_file, tmp_path / "s.db",
                            kind="openai-responses")
        our_requests = _by_key([b for p, b in srv.requests if p.endswith("/responses") and "tools" in b])
    assert all(r["err"] is None for r in theirs.values())
    assert_requests_equal(our_requests, their_requests, tools=variant not in OWN_CONSTRUCTIONS)
    for tid, t in theirs.items():
        o = ours[tid]
        assert (int(o["success"]), [[a["tool"], a["arguments"]] for a in o["executed"]], o["turns"],
                o["paper"]["n_rejected"], o["paper"]["flags"]) == \
            (t["exact"], t["actions"], t["turns"], t["n_rejected"], t["flags"]), tid


_values = st.one_of(st.none(), st.just(""), st.integers(-3, 3), st.sampled_from(["a", "b", "x", ""]),
                    st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 2), max_size=2),
                    st.lists(st.integers(0, 2), max_size=2))
_keys = st.sampled_from(["operation", "arguments", "a", "b", "c", "a::x", "b::y", "x"])


@settings(max_examples=600, deadline=None, derandomize=True)
@given(st.sampled_from(["flat", "nested", "union"]), st.dictionaries(_keys, _values, max_size=4),
       st.sampled_from([None, "a", "b", "c", 3]))
def test_dispatchers_read_calls_as_the_artifacts_merge_encodings(encoding: str, args: dict[str, Any],
                                                                 operation: Any) -> None:
    """Dispatch.problem / read against the artifact's validate_merged / decode_merged, on any arguments."""
    with artifact_settings({}):
        merge = importlib.import_module("toolschema.merge_encodings")
    if operation is not None:
        args = {**args, "operation": operation}
    ops, params = ["a", "b"], {"a": ["x"], "b": ["y"]}
    ours = Dispatch(encoding, list(ops), {o: o for o in ops}, params)
    theirs = {"encoding": encoding, "ops": ops, "op_params": params}
    assert ours.problem(args) == merge.validate_merged(theirs, args)
    assert ours.read(args) == merge.decode_merged(theirs, args)


def assert_whole_catalog_episodes_agree(theirs: dict[str, Any], ours: dict[str, Any], facts: tuple[str, ...]) -> None:
    """Each episode's exact success, executed actions (qualified by class), turns and ``facts`` of
    the paper's record agree; both outcomes occur."""
    for tid, t in theirs.items():
        o = ours[tid]
        actions = [[f"{a['domain']}.{a['tool']}" if a["domain"] else a["tool"], a["arguments"]] for a in o["executed"]]
        assert (int(o["success"]), actions, o["turns"], *(o["paper"][k] for k in facts)) == \
            (t["exact"], t["actions"], t["turns"], *(t[k] for k in facts)), f"{tid} ({persona(BY_QUERY_ID[tid])})"
    assert {r["exact"] for r in theirs.values()} == {0, 1}


#: the artifact's whole-catalog renderings, played by its eval/run_hierarchy.py (HIER_ARM)
HIERARCHY = {"paper.class_dispatch": "dispatch", "paper.namespaced_names": "qualified",
             "paper.schema_discovery": "disclose", "paper.native_whole_catalog": "flat"}


def hierarchy_runner(arm: str, control: str, base_url: str, queries: Path) -> ModuleType:
    """``eval.run_hierarchy`` for one arm and control."""
    return _runner("eval.run_hierarchy", {"HIER_ARM": arm, "SCHEMA_CONTROL": CONTROLS[control]}, base_url, queries)


@pytest.mark.skipif(not _has_renderings(), reason="needs the artifact's own renderings (paper.<name> variants)")
@pytest.mark.parametrize("control", list(CONTROLS))
@pytest.mark.parametrize("variant", list(HIERARCHY))
def test_whole_catalog_runs_equal_the_artifacts_hierarchy_runner(variant: str, control: str, server: FakeOpenAIServer,
                                                                 query_file: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The hierarchy arms (class dispatch, namespaced names, schema discovery, the whole native
    catalog) against eval/run_hierarchy.py: its prompt, the whole catalog in every request, native
    actions qualified by class."""
    ra = hierarchy_runner(HIERARCHY[variant], control, server.base_url, query_file)
    theirs, ours, their_requests, our_requests = play_both(ra, variant, control, server, query_file, tmp_path / "s.db",
                                                           capsys, oracle=True)
    assert_requests_equal(our_requests, their_requests)
    assert_whole_catalog_episodes_agree(theirs, ours, ("n_calls", "n_rejected", "argument_parse_errors"))


#: Table 8's whole-catalog groupings, played by its eval/run_class_grouping.py (SCHEMA_SPEC)
CLASS_GROUPING = {"paper.merge_catalog_class_names": "class_semantic.json",
                  "paper.merge_catalog_neutral_names": "class_neutral.json",
                  "paper.merge_catalog_random_classes": "random_neutral_r0.json",
                  "paper.merge_catalog_anti_classes": "anti_class_neutral_r0.json"}


def class_grouping_runner(spec: str, control: str, base_url: str, queries: Path) -> ModuleType:
    """``eval.run_class_grouping`` for one grouping file and control."""
    return _runner("eval.run_class_grouping", {"SCHEMA_SPEC": str(DATA / "specs" / spec),
                                               "SCHEMA_CONTROL": CONTROLS[control]}, base_url, queries)


@pytest.mark.skipif(not _has_renderings(), reason="needs the artifact's own renderings (paper.<name> variants)")
@pytest.mark.parametrize("control", list(CONTROLS))
@pytest.mark.parametrize("variant", list(CLASS_GROUPING))
def test_table8_runs_equal_the_artifacts_class_grouping_runner(variant: str, control: str, server: FakeOpenAIServer,
                                                               query_file: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Table 8's whole-catalog groupings against eval/run_class_grouping.py: its prompt, every
    dispatcher in every request, actions qualified by class, its flags."""
    ra = class_grouping_runner(CLASS_GROUPING[variant], control, server.base_url, query_file)
    theirs, ours, their_requests, our_requests = play_both(ra, variant, control, server, query_file, tmp_path / "s.db",
                                                           capsys, oracle=True)
    assert_requests_equal(our_requests, their_requests)
    assert_whole_catalog_episodes_agree(theirs, ours, ("n_calls", "n_rejected", "flags", "argument_parse_errors"))
