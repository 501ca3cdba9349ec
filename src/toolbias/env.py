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

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .catalog.model import Catalog, NativeAction, Task, Tool, json_copy
from .catalog.validation import validate_action
from .errors import CatalogError
from .plugins import Plugin, Registry

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


class Environment:
    """Executable state for one domain of a catalog."""

    def __init__(self, catalog: Catalog, domain: str) -> None:
        self.catalog = catalog
        self.domain = domain
        self.state: dict[str, Any] = json_copy(dict(catalog.domain(domain).initial_state))
        self.log: list[NativeAction] = []

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


class EpisodeEnvironment(Protocol):
    """What an episode needs of an environment. One that also has ``end_turn()`` (called when
    the agent ends a user turn) and ``check() -> {"ok": bool, ...}`` (its own success check,
    stored as the record's ``state_check``) scores episodes by state."""

    log: list[NativeAction]

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]: ...


#: environments a catalog may name in ``meta["environment"]`` (they wrap third-party code,
#: installed as an extra, and are imported when first used)
ENVIRONMENT_KINDS: Registry[Callable[[Catalog, Task], EpisodeEnvironment]] = Registry("environment", {
    "bfcl-multi": Plugin("toolbias.env_bfcl:BfclMultiEnvironment", extra="bfcl"),
}, error=CatalogError)


def make_environment(catalog: Catalog, task: Task) -> EpisodeEnvironment:
    """The environment ``task`` runs in: the generic state engine, or the one its catalog names."""
    kind = catalog.meta.get("environment")
    if not kind:
        return Environment(catalog, task.domain)
    factory = ENVIRONMENT_KINDS.resolve(str(kind), where=catalog.name)
    return factory(catalog, task)
