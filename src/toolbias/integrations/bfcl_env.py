"""The environment of a BFCL multi-turn entry: BFCL's own API classes, imported at run time.

Each episode gets fresh instances of the entry's ``involved_classes``, initialised from its
``initial_config`` (``_load_scenario``, as BFCL does). A decoded native action runs as a
method call with the decoded arguments (``getattr(instance, tool)(**arguments)``: no call
string is ever built or evaluated). A second set of instances replays the gold calls of each
user turn when that turn ends, and the turn is checked as BFCL's multi-turn checker does:

* **state**: every public attribute (no leading ``_``) of every instance equals the gold
  instance's after the turn;
* **results**: every result the turn's gold calls produced is among the results the agent's
  calls produced so far (a multiset, in any order);
* a turn with gold calls in which the agent called nothing fails.

The episode succeeds when every turn passes (``check()``; stored as the record's
``state_check`` and read by :func:`toolbias.study.success.succeeded`).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from ..catalog.model import Catalog, NativeAction, Task
from ..catalog.validation import validate_action
from ..study.env import EpisodeEnvironment
from .bfcl_multi import api_class


def _result_text(value: Any) -> str:
    """A method's result as BFCL compares results: strings as they are, anything else as JSON
    (or its text when it is not JSON-able)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _json_result(value: Any) -> Any:
    """A method's result as the tool message shows it."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _instances(info: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    config = info.get("initial_config") or {}
    for name in info.get("involved_classes") or []:
        instance = api_class(name)()
        if hasattr(instance, "_load_scenario") and name in config:
            instance._load_scenario(copy.deepcopy(config[name]), long_context=False)
        out[name] = instance
    return out


def _state(instance: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


class BfclMultiEnvironment(EpisodeEnvironment):
    """Runs one BFCL multi-turn entry (see the module doc)."""

    @classmethod
    def for_task(cls, catalog: Catalog, task: Task, user_model: Any = None) -> BfclMultiEnvironment:
        return cls(catalog, task)

    def __init__(self, catalog: Catalog, task: Task) -> None:
        self.catalog = catalog
        self.domain = task.domain
        info = dict(task.meta.get("bfcl_multi") or {})
        self.owner = {t.name: t.cls for t in catalog.domain(task.domain).tools}
        self.model = _instances(info)
        self.reference = _instances(info)
        counts = list(task.meta.get("gold_turns") or [len(task.gold)])
        self.gold_turns: list[list[NativeAction]] = []
        at = 0
        for n in counts:
            self.gold_turns.append(list(task.gold[at:at + n]))
            at += n
        self.log: list[NativeAction] = []
        self.turn = 0
        self.calls_this_turn = 0
        self.results: list[str] = []
        self.turn_checks: list[dict[str, Any]] = []

    def _run(self, instances: dict[str, Any], action: NativeAction) -> tuple[bool, Any]:
        owner = self.owner.get(action.tool)
        method = getattr(instances.get(owner), action.tool, None) if owner else None
        if method is None or action.tool.startswith("_"):
            return False, f"no function '{action.tool}' in this environment"
        try:
            return True, method(**copy.deepcopy(dict(action.arguments)))
        except Exception as exc:  # BFCL's classes raise on bad input: an error result, as in BFCL
            return False, f"Error during execution: {exc}"

    def execute(self, action: NativeAction, *, trusted: bool = False) -> dict[str, Any]:
        if action.domain != self.domain:
            return {"ok": False, "error": f"tool '{action.tool}' belongs to domain '{action.domain}'"}
        if not trusted:
            err = validate_action(self.catalog, action)
            if err is not None:
                return {"ok": False, "error": err.message, "kind": err.kind.value}
        self.calls_this_turn += 1
        ok, value = self._run(self.model, action)
        self.results.append(_result_text(value))
        if not ok:
            return {"ok": False, "error": str(value)}
        self.log.append(action)
        return {"ok": True, "tool": action.tool, "result": _json_result(value)}

    def end_turn(self) -> None:
        """The agent finished the current user turn: replay its gold and check the turn."""
        if self.turn >= len(self.gold_turns):
            return
        gold = self.gold_turns[self.turn]
        produced = [_result_text(self._run(self.reference, a)[1]) for a in gold]
        differing = sorted(f"{name}.{attr}" for name, inst in self.reference.items()
                           for attr, value in _state(inst).items()
                           if getattr(self.model[name], attr, None) != value)
        missing = Counter(produced) - Counter(self.results)
        called = bool(self.calls_this_turn) or not gold
        self.turn_checks.append({"turn": self.turn, "state": not differing, "results": not missing,
                                 "called": called, "differences": differing[:10],
                                 "missing_results": sorted(missing)[:5]})
        self.turn += 1
        self.calls_this_turn = 0

    def check(self) -> dict[str, Any]:
        """Every turn checked (the open one closed; turns never reached fail)."""
        if self.turn < len(self.gold_turns):  # the episode ended inside a turn (the turn limit)
            self.end_turn()
        checks = list(self.turn_checks)
        for t in range(len(checks), len(self.gold_turns)):
            checks.append({"turn": t, "state": False, "results": False, "called": False, "differences": [],
                           "missing_results": [], "reached": False})
        ok = all(c["state"] and c["results"] and c["called"] for c in checks)
        return {"ok": ok, "turns": checks}


__all__ = ["BfclMultiEnvironment"]
