"""A tiny hand-written catalog with tasks, for tests that must not depend on the built-in one."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from toolbias.catalog.model import Catalog, Domain, NativeAction, Task, Tool


def _tool(name: str, cls: str, props: dict, domain: str = "home") -> Tool:
    return Tool(name=name, description=f"{name} tool", domain=domain, cls=cls,
                parameters={"type": "object", "properties": props, "required": list(props)},
                effect={"kind": "set", "target": [next(iter(props))]} if props else None)


ROOM = {"type": "string", "enum": ["kitchen", "office", "bedroom"], "description": "Which room."}


def mini_catalog() -> Catalog:
    home = Domain("home", (
        _tool("set_light", "light", {"room": ROOM, "state": {"type": "string", "enum": ["on", "off"]}}),
        _tool("set_brightness", "light", {"room": ROOM, "level": {"type": "integer", "minimum": 0, "maximum": 100}}),
        _tool("set_fan", "fan", {"room": ROOM, "speed": {"type": "string", "enum": ["low", "medium", "high"]}}),
        _tool("announce", "speaker", {"message": {"type": "string"}, "loud": {"type": "boolean"}}),
    ), system="You control a home.")
    car = Domain("car", (
        _tool("set_light", "cabin_light", {"zone": {"type": "string", "enum": ["front", "rear"]},
                                           "state": {"type": "string", "enum": ["on", "off"]}}, "car"),
        _tool("set_seat_heat", "seat", {"seat": {"type": "string", "enum": ["driver", "passenger"]},
                                        "level": {"type": "integer", "minimum": 0, "maximum": 3}}, "car"),
    ))
    tasks = []
    for i, room in enumerate(["kitchen", "office", "bedroom"]):
        tasks.append(Task(f"home-{i}", "home", f"turn on the {room} light",
                          (NativeAction("home", "set_light", {"room": room, "state": "on"}),)))
        tasks.append(Task(f"home-{i + 3}", "home", f"{room} fan high and light off",
                          (NativeAction("home", "set_fan", {"room": room, "speed": "high"}),
                           NativeAction("home", "set_light", {"room": room, "state": "off"}))))
    tasks.append(Task("car-0", "car", "driver seat heat 2",
                      (NativeAction("car", "set_seat_heat", {"seat": "driver", "level": 2}),)))
    tasks.append(Task("car-1", "car", "rear light on, passenger seat heat 3",
                      (NativeAction("car", "set_light", {"zone": "rear", "state": "on"}),
                       NativeAction("car", "set_seat_heat", {"seat": "passenger", "level": 3}))))
    return Catalog("mini", (home, car), tuple(tasks))


#: one OpenAI chat tool (a thermostat) for provider tests: an enum and a number, both required
THERMOSTAT_TOOLS = [{"type": "function", "function": {
    "name": "set_temperature", "description": "Set the target temperature of a zone",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "enum": ["living_room", "bedroom", "kitchen"]},
        "celsius": {"type": "number"}}, "required": ["zone", "celsius"]}}}]


def covering_sample(tasks: Sequence[Task], kind: Callable[[Task], Hashable] | None = None) -> list[Task]:
    """The tasks, in their order, that a property of how one task's gold is played needs to meet
    every case of a catalog once: a task of every (domain, gold length), then tasks until every
    tool a gold calls is called, and a gold that calls one tool twice in every domain that has one.
    A test of such a property over a whole catalog checks as much on this sample (a few dozen
    tasks of thousands), since each task plays alone: what a trace or an encoding does depends on
    its domain's tools, the calls and their number, not on which task asks for them. ``kind``: a
    task of each of its values too (what else a catalog's tasks differ in, e.g. how one is scored)."""
    wanted: dict[str, set[Any]] = {"stratum": set(), "tool": set(), "repeat": set(), "kind": set()}
    for t in tasks:
        names = [a.tool for a in t.gold]
        wanted["stratum"].add((t.domain, len(t.gold)))
        wanted["kind"].add((t.domain, kind(t)) if kind else None)
        wanted["tool"].update((t.domain, n) for n in names)
        if len(set(names)) < len(names):
            wanted["repeat"].add(t.domain)
    picked = []
    for t in tasks:
        names = [a.tool for a in t.gold]
        meets = {"stratum": {(t.domain, len(t.gold))}, "tool": {(t.domain, n) for n in names},
                 "repeat": {t.domain} if len(set(names)) < len(names) else set(),
                 "kind": {(t.domain, kind(t)) if kind else None}}
        if any(meets[k] & wanted[k] for k in wanted):
            picked.append(t)
            for k in wanted:
                wanted[k] -= meets[k]
    return picked
