"""The built-in catalog, written for this project: 12 executable domains and their tasks.

Each domain is one JSON file in ``domains/`` (tools with class, parameters, a
state ``effect`` and templated ``phrases``; a ``lexicon`` of colloquial synonyms).
``tasks.jsonl`` is generated from them by ``tools/gen_builtin_catalog.py`` (a build-time
tool outside the package; seeded, deterministic) and versioned in the repository; ``TASKS_VERSION`` and the
file's hash identify the set.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ..model import Catalog, Domain, Task
from ..openai_format import parse_tool

TASKS_FILE = "tasks.jsonl"


def _data_dir() -> Any:
    return resources.files(__name__)


def load_domain_files() -> list[dict[str, Any]]:
    """The raw domain definitions, sorted by file name."""
    folder = _data_dir() / "domains"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]


def domain_from_dict(raw: dict[str, Any]) -> Domain:
    name = raw["name"]
    tools = tuple(parse_tool(t, name, f"builtin/{name}/{t.get('name')}", cls=t.get("class")) for t in raw["tools"])
    return Domain(name=name, tools=tools, system=raw.get("system", ""), title=raw.get("title", name),
                  initial_state=raw.get("initial_state", {}))


def load_tasks() -> list[Task]:
    path = _data_dir() / TASKS_FILE
    if not path.is_file():
        return []
    return [Task.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]


@lru_cache(maxsize=1)
def load_builtin() -> Catalog:
    domains = tuple(domain_from_dict(raw) for raw in load_domain_files())
    return Catalog(name="builtin", domains=domains, tasks=tuple(load_tasks()))
