"""A tiny hand-written catalog with tasks, for tests that must not depend on the built-in one."""

from __future__ import annotations

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
