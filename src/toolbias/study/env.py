"""The generic executable state engine that runs native actions.

A domain is data: each tool may carry an ``effect`` telling the engine what it
does to the domain's state. The state is ``{class: {instance: {attribute: value}}}``:

* ``{"kind": "set", "target": ["zone"]}`` (the default) - the ``target`` arguments
  name the instance; every other argument becomes an attribute of it.
* ``{"kind": "append", "target": [...], "list": "queue"}`` - append the other
  arguments (as one record) to a list attribute.
* ``{"kind": "remove", "target": [...], "list": "queue"}`` - remove matching records.
* ``{"kind": "event", "target": [...]}`` - a momentary action: counted and logged.

Tools without an effect (imported catalogs) use ``set`` with no target, so any
OpenAI-format catalog is executable. Every valid action changes state
deterministically and returns a JSON-able result; invalid ones return an error
result and change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..base.plugins import Plugin, Registry
from ..catalog.model import Catalog, NativeAction, Task, Tool, json_copy
from ..catalog.validation import validate_action
from ..errors import CatalogError

DEFAULT_EFFECT: Mapping[str, Any] = {"kind": "set", "target": []}


def _instance(tool: Tool, effect: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    target = effect.get("target") or []
    return "/".join(str(args[t]) for t in target) if target else "_"


def _apply_set(obj: dict[str, Any], attrs: dict[str, Any], effect: Mapping[str, Any]) -> None:
    obj.update(attrs)


def _apply_append(obj: dict[str, Any], attrs: dict[str, Any], effect: Mapping[str, Any]) -> None:
    obj.setdefault(effect.get("list", "items"), []).append(attrs)


def _apply_remove(obj: dict[str, Any], attrs: dict[str, Any], effect: Mapping[str, Any]) -> None:
    items = obj.setdefault(effect.get("list", "items"), [])
    obj[effect.get("list", "items")] = [i for i in items if i != attrs]


def _apply_event(obj: dict[str, Any], attrs: dict[str, Any], effect: Mapping[str, Any]) -> None:
    obj["count"] = int(obj.get("count", 0)) + 1
    obj["last"] = attrs


#: how each of the catalog format's EFFECT_KINDS changes an object's state
EFFECTS = {"set": _apply_set, "append": _apply_append, "remove": _apply_remove, "event": _apply_event}


def _snapshot(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of an object's state for a result (later actions change the object): attribute
    values are mostly scalars, so copy the dict at once and only containers one by one."""
    out = obj.copy()
    for k, v in out.items():
        if isinstance(v, (dict, list, tuple)):
            out[k] = json_copy(v)
    return out


class User(Protocol):
    """The other side of a multi-turn task (a user simulator): opens the conversation and
    answers each agent reply; ``None`` ends the conversation. May raise InfraError."""

    async def open(self) -> str: ...

    async def respond(self, messages: list[Any]) -> str | None: ...


@dataclass(frozen=True)
class PaperHarness:
    """An environment's own harness as the artifact's adapter runs it (tau2-bench's orchestrator):
    a dialogue ends after ``max_steps`` steps (each user message, agent message and environment
    reply is one; checked whenever the next message is not for the environment) or ``max_errors``
    tool errors, instead of a cap on agent turns; ``greeting`` is the agent's first message, said
    before the user speaks."""

    max_steps: int
    max_errors: int
    greeting: str | None = None


class EpisodeEnvironment:
    """Every hook an episode calls on the environment its decoded native actions run in, each
    with its default; an environment kind overrides what it has (the generic state engine only
    ``execute``; BFCL multi-turn ``end_turn`` and ``check``; tau2 ``tool_text``, ``evaluate`` and
    its own ``user``). Built per episode by :meth:`for_task`."""

    #: the native actions executed so far, in order
    log: list[NativeAction]
    #: the environment's own user simulator (tau2-bench); None: the task's query is the only user turn
    user: User | None = None
    #: episodes of one task should share a worker: the environment memoises per task (tau2)
    memoises_per_task: ClassVar[bool] = False

    @classmethod
    def for_task(cls, catalog: Catalog, task: Task, user_model: Any = None) -> EpisodeEnvironment:
        """A fresh environment for one episode of ``task`` (``user_model``: the study's user
        simulator model, for kinds that have one)."""
        raise NotImplementedError(f"{cls.__name__}.for_task")

    @classmethod
    def paper_harness(cls) -> PaperHarness | None:
        """How the schema-bias artifact's adapter plays this environment under ``--protocol paper``
        (its own harness's budget and first words), or None: the paper's protocol does not play it."""
        return None

    @classmethod
    def paper_adapter(cls, plan: Any, domain: str) -> Any:
        """The artifact's adapter tools (:class:`~toolbias.study.paper_seam.AdapterTools`) for ``plan``
        (an :class:`~toolbias.study.paper_seam.AdapterPlan`) on this harness's own tools in ``domain``;
        only environments with a :meth:`paper_harness` have them."""
        raise NotImplementedError(f"{cls.__name__}.paper_adapter")

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]:
        """Run one native action: ``{"ok": bool, ...}`` (an error is a result, not an exception)."""
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def tool_text(self, results: list[dict[str, Any]]) -> str | None:
        """The tool message for the results of one executed call, or None for their JSON."""
        return None

    def end_turn(self) -> None:
        """The agent ended a user turn (answered without a tool call)."""

    def check(self) -> dict[str, Any] | None:
        """The environment's own success check (``{"ok": bool, ...}``, stored as the record's
        ``state_check``), or None to score by the executed actions."""
        return None

    def evaluate(self, record: Any) -> dict[str, Any] | None:
        """The environment's own judgement of a finished episode (``{"reward": ...}``), or None."""
        return None


class Environment(EpisodeEnvironment):
    """Executable state for one domain of a catalog."""

    def __init__(self, catalog: Catalog, domain: str) -> None:
        self.catalog = catalog
        self.domain = domain
        self.state: dict[str, Any] = json_copy(dict(catalog.domain(domain).initial_state))
        self.log: list[NativeAction] = []

    @classmethod
    def for_task(cls, catalog: Catalog, task: Task, user_model: Any = None) -> Environment:
        return cls(catalog, task.domain)

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]:
        """Run ``action``; return ``{"ok": True, ...}`` or ``{"ok": False, "error": ...}``.

        ``trusted``: the action comes from a codec session, whose level-0 check has just
        validated it against the same native schema, so it is not validated again."""
        if action.domain != self.domain:
            return {"ok": False, "error": f"tool '{action.tool}' belongs to domain '{action.domain}', "
                                          f"not '{self.domain}'"}
        tool = self.catalog.tool(action.domain, action.tool) if trusted else None
        if tool is None:
            err = validate_action(self.catalog, action)
            if err is not None:
                return {"ok": False, "error": err.message, "kind": err.kind.value}
            tool = self.catalog.tool(action.domain, action.tool)
            assert tool is not None  # validate_action checked it
        effect = tool.effect or DEFAULT_EFFECT
        kind = effect.get("kind", "set")
        target = set(effect.get("target") or [])
        attrs = {k: v for k, v in action.arguments.items() if k not in target}
        obj_class = tool.cls or tool.name
        instance = _instance(tool, effect, action.arguments)
        obj = self.state.setdefault(obj_class, {}).setdefault(instance, {})
        EFFECTS[kind](obj, attrs, effect)
        self.log.append(action)
        return {"ok": True, "tool": tool.name, "object": obj_class, "instance": instance,
                "state": _snapshot(obj)}


#: environments a catalog may name in ``meta["environment"]`` (they wrap third-party code,
#: installed as an extra, and are imported when first used)
ENVIRONMENT_KINDS: Registry[type[EpisodeEnvironment]] = Registry("environment", {
    "bfcl-multi": Plugin("toolbias.integrations.bfcl_env:BfclMultiEnvironment", extra="bfcl"),
    "tau2": Plugin("toolbias.integrations.tau2:Tau2Environment", extra="tau2"),
    "mcp": Plugin("toolbias.integrations.mcp_live:McpEnvironment", extra="mcp"),
}, error=CatalogError)


def environment_kind(catalog: Catalog) -> type[EpisodeEnvironment]:
    """The environment class ``catalog``'s tasks run in: the one it names, else the state engine."""
    kind = catalog.meta.get("environment")
    return ENVIRONMENT_KINDS.resolve(str(kind), where=catalog.name) if kind else Environment


def make_environment(catalog: Catalog, task: Task, user_model: Any = None) -> EpisodeEnvironment:
    """The environment one episode of ``task`` runs in: the generic state engine, or the one its catalog names."""
    return environment_kind(catalog).for_task(catalog, task, user_model)
