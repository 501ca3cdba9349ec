"""BFCL function docs as a native catalog: ``bfcl:DIR``.

Reads whichever ``BFCL_v4_*.json`` category files ``DIR`` holds (JSON Lines despite
the suffix: ``{"id", "question", "function": [...]}``) and, when present,
``DIR/possible_answer/`` (``{"id", "ground_truth": [{fn: {param: [acceptable values]}}]}``).

* **Domains**: one per entry (BFCL shows each question only its own function list): the
  domain is named after the entry's id and holds the entry's functions, and the catalog is
  marked ``isolated_domains``, so a variant is built per entry (:mod:`toolbias.variants.isolated`: a
  catalog-scope operator spans the entry's functions only). ``bfcl:DIR?domains=category``
  gives the old layout instead: one domain per category file holding every function of the
  file, deduplicated (two different definitions under one name become ``name`` and ``name_2``);
  not how BFCL presents a question.
* **Types**: BFCL's ``dict`` -> ``object``, ``float`` -> ``number``, ``tuple`` ->
  ``array``, ``any`` -> no type (any value); Python spellings (``int``, ``str``,
  ``bool``, ``list``) too. The non-standard ``optional`` key is dropped;
  ``required`` names without a property are dropped.
* **Names**: dotted and other invalid function names become valid ones
  (``math.factorial`` -> ``math_factorial``); ``Catalog.meta["bfcl"]["names"]`` maps
  each tool uid back to its BFCL name.
* **Tasks**: one per entry with an answer. ``Task.meta["accept"]`` holds BFCL's possible
  answers (per gold call: the tool and, per parameter, every acceptable value, ``""`` = may be
  omitted), so success accepts any listed value, an omission where ``""`` is listed, and the
  calls in any order (:mod:`toolbias.study.success`). The gold (what the oracle plays) takes, per
  parameter, the first listed value the schema accepts (``""`` first on an optional parameter:
  omitted). Entries whose gold cannot be built (an unknown function, a required parameter with
  no acceptable value, no listed value the schema accepts) are skipped and counted by reason in
  ``Catalog.meta["bfcl"]["skipped"]``. ``Task.meta`` also keeps the BFCL id, category and the
  entry's own function list (``functions``).
* **Strings** compare as BFCL's checker compares them (``Catalog.meta["match"] = "bfcl"``: the
  default success rule of studies on this catalog; ``--match exact`` overrides it).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..catalog.formats import infer_class
from ..catalog.model import ISOLATED_DOMAINS, Catalog, Domain, NativeAction, Task, Tool, canonical_json
from ..catalog.openai_format import read_jsonl
from ..catalog.validation import arguments_error
from ..errors import CatalogError

TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "str": "string",
            "bool": "boolean", "list": "array", "double": "number", "long": "integer", "String": "string",
            "Boolean": "boolean", "object": "object", "number": "number", "integer": "integer",
            "string": "string", "boolean": "boolean", "array": "array", "null": "null"}
_BAD = re.compile(r"[^a-zA-Z0-9_-]")
FILE_RE = re.compile(r"^BFCL_v4_(.+)\.json$")


def convert_schema(schema: Any, notes: Counter[str]) -> dict[str, Any]:
    """A BFCL parameter schema as JSON Schema (see the module doc)."""
    if not isinstance(schema, Mapping):
        notes["non-object schema replaced by any"] += 1
        return {}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":
            continue
        if key == "type":
            if value == "any":
                continue
            mapped = TYPE_MAP.get(str(value))
            if mapped is None:
                notes[f"unknown type '{value}' dropped"] += 1
                continue
            out["type"] = mapped
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {str(p): convert_schema(sub, notes) for p, sub in value.items()}
        elif key == "items":
            out["items"] = convert_schema(value, notes)
        else:
            out[key] = copy.deepcopy(value)
    if "enum" in out:
        enum = out["enum"]
        kinds = {type(v).__name__ if not isinstance(v, (int, float)) or isinstance(v, bool) else "number"
                 for v in enum} if isinstance(enum, list) else set()
        if not isinstance(enum, list) or not enum or len(kinds) > 1:
            notes["unusable enum dropped"] += 1
            del out["enum"]
        elif out.get("type") == "array" and "list" not in kinds:
            # BFCL's meaning: each item is one of these (its answers list arrays of them, e.g.
            # [["temperature"]]); as written no array could be valid, and every sample would fail
            raw_items = out.get("items")
            items: dict[str, Any] = raw_items if isinstance(raw_items, dict) else {}
            out["items"] = {**items, "enum": out.pop("enum")} if "enum" not in items else items
            notes["enum of an array moved to its items"] += 1
    if "required" in out:
        props = out.get("properties") or {}
        req = out["required"] if isinstance(out["required"], list) else []
        kept = [r for r in req if r in props]
        if len(kept) != len(req) or not isinstance(out["required"], list):
            notes["required name without property dropped"] += 1
        if kept:
            out["required"] = kept
        else:
            del out["required"]
    if out.get("type") == "object" and "properties" not in out and "required" in out:
        del out["required"]
    return out


def tool_name(name: str) -> str:
    """A valid function name for a BFCL name (``math.factorial`` -> ``math_factorial``)."""
    out = _BAD.sub("_", name) or "function"
    return out[:64]


def _question(entry: Mapping[str, Any]) -> str:
    q = entry.get("question")
    turns = q if isinstance(q, list) else [q]
    first = turns[0] if turns else []
    messages = first if isinstance(first, list) else [first]
    parts = [m.get("content", "") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    if not parts:
        parts = [m if isinstance(m, str) else m.get("content", "") for m in messages if isinstance(m, (str, Mapping))]
    return "\n".join(str(p) for p in parts if p)


def _listed(values: Any) -> list[Any]:
    return values if isinstance(values, list) else [values]


def _concrete(value: Any) -> Any:
    """One concrete value for a listed value: an acceptable object (per key, its listed values)
    becomes an object of each key's first listed value, keys whose first value is ``""`` omitted."""
    if isinstance(value, Mapping):
        out = {}
        for k, sub in value.items():
            first = _listed(sub)[0] if _listed(sub) else ""
            if first != "":
                out[str(k)] = _concrete(first)
        return out
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def load_bfcl(root: str | Path, per_entry: bool = True) -> Catalog:
    """The catalog of the BFCL category files in ``root`` (see the module doc)."""
    base = Path(root)
    if not base.is_dir():
        raise CatalogError("not a directory", where=str(base), fix="point bfcl: at the folder with BFCL_v4_*.json files")
    files = sorted(p for p in base.iterdir() if FILE_RE.match(p.name))
    if not files:
        raise CatalogError("no BFCL_v4_*.json files", where=str(base),
                           fix="use the bfcl_eval/data folder of gorilla's berkeley-function-call-leaderboard")
    notes: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    domains: list[Domain] = []
    tasks: list[Task] = []
    names: dict[str, str] = {}
    for path in files:
        category = FILE_RE.match(path.name).group(1)  # type: ignore[union-attr]
        answers: dict[str, Any] = {}
        answer_file = base / "possible_answer" / path.name
        if answer_file.is_file():
            answers = {str(r.get("id")): r.get("ground_truth") for r in read_jsonl(answer_file)}
        tools: dict[str, Tool] = {}             # domain tool name -> tool (category domains)
        by_def: dict[tuple[str, str], str] = {}  # (bfcl name, canonical definition) -> tool name
        for lineno, entry in enumerate(read_jsonl(path), 1):
            where = f"{path}:{lineno}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("function"), list):
                raise CatalogError("entry needs an 'id' and a 'function' list", where=where,
                                   fix='write each line as {"id": ..., "question": [[...]], "function": [{"name": ...}]} '
                                       "(BFCL's format)")
            eid = str(entry.get("id", f"{category}_{lineno}"))
            domain = eid if per_entry else category
            if per_entry:
                tools, by_def = {}, {}
            entry_map: dict[str, str] = {}  # bfcl name -> tool name in this domain
            for fn in entry["function"]:
                if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                    raise CatalogError("function without a name", where=where,
                                       fix="give each entry of 'function' an object with a string 'name'")
                bname = fn["name"]
                params = convert_schema(fn.get("parameters") or {"type": "dict", "properties": {}}, notes)
                params.setdefault("type", "object")
                params.setdefault("properties", {})
                desc = fn.get("description", "")
                key = (bname, canonical_json([desc, params]))
                name = by_def.get(key)
                if name is None:
                    stem = tool_name(bname)
                    name, i = stem, 2
                    while name in tools:
                        name = f"{stem[:60]}_{i}"
                        i += 1
                    if name != stem:
                        notes["same name, different definition: renamed"] += 1
                    tools[name] = Tool(name, desc if isinstance(desc, str) else str(desc), params, domain=domain,
                                       cls=infer_class(bname))
                    by_def[key] = name
                    names[f"{domain}::{name}"] = bname
                entry_map[bname] = name
            if per_entry:
                domains.append(Domain(domain, tuple(tools.values()), title=eid))
            gold_raw = answers.get(eid)
            if gold_raw is None:
                if answers:
                    skipped["no answer"] += 1
                continue
            gold = _gold(domain, gold_raw, entry_map, tools, skipped)
            if gold is None:
                continue
            tasks.append(Task(id=eid, domain=domain, query=_question(entry), gold=gold,
                              meta={"source": "bfcl", "category": category, "bfcl_id": eid,
                                    "functions": list(dict.fromkeys(entry_map.values())),
                                    "accept": _accept(gold_raw, entry_map)}))
        if not per_entry:
            domains.append(Domain(category, tuple(tools.values()), title=f"BFCL {category}"))
    meta = {"bfcl": {"categories": [FILE_RE.match(p.name).group(1) for p in files],  # type: ignore[union-attr]
                     "names": names, "skipped": dict(skipped), "notes": dict(notes), "tasks": len(tasks)},
            ISOLATED_DOMAINS: per_entry, "match": "bfcl"}
    spec = f"bfcl:{root}" + ("" if per_entry else "?domains=category")
    return Catalog(name=spec, domains=tuple(domains), tasks=tuple(tasks), meta=meta)


def _accept(raw: list[Any], entry_map: Mapping[str, str]) -> list[dict[str, Any]]:
    """BFCL's possible answers under toolbias's tool names (see :mod:`toolbias.study.success`)."""
    out = []
    for call in raw:
        (bname, args), = call.items()
        out.append({"tool": entry_map[bname], "arguments": {str(p): _listed(v) for p, v in args.items()}})
    return out


def _fits(tool: Tool, param: str, value: Any) -> bool:
    schema = tool.properties.get(param)
    if schema is None:
        return False
    return arguments_error({"type": "object", "properties": {param: schema}}, {param: value}) is None


def _gold(domain: str, raw: Any, entry_map: Mapping[str, str], tools: Mapping[str, Tool],
          skipped: Counter[str]) -> tuple[NativeAction, ...] | None:
    if not isinstance(raw, list) or not raw:
        skipped["empty or malformed answer"] += 1
        return None
    gold: list[NativeAction] = []
    for call in raw:
        if not isinstance(call, Mapping) or len(call) != 1:
            skipped["malformed answer call"] += 1
            return None
        (bname, args), = call.items()
        name = entry_map.get(bname)
        if name is None or not isinstance(args, Mapping):
            skipped["answer names a function the entry lacks"] += 1
            return None
        tool = tools[name]
        out: dict[str, Any] = {}
        for p, values in args.items():
            listed = _listed(values)
            required = p in tool.required
            if listed and listed[0] == "" and not required:
                continue  # optional, and BFCL lists omission first
            chosen = [v for v in (_concrete(x) for x in listed if x != "") if _fits(tool, str(p), v)]
            if chosen:
                out[str(p)] = chosen[0]
            elif required or "" not in listed:
                skipped["no listed value fits the schema" if any(x != "" for x in listed)
                        else "required parameter may be omitted (ambiguous)"] += 1
                return None
        err = arguments_error(tool.parameters, out)
        if err is not None:
            skipped[f"gold fails the schema ({err.kind.value})"] += 1
            return None
        gold.append(NativeAction(domain, name, out))
    return tuple(gold)


def load_bfcl_spec(arg: str) -> Catalog:
    """The ``bfcl:DIR[?domains=category]`` catalog kind."""
    root, _, query = arg.partition("?")
    per_entry = True
    if query:
        if query not in ("domains=entry", "domains=category"):
            raise CatalogError(f"unknown option '{query}'", where=f"bfcl:{arg}",
                               fix="use bfcl:DIR (one domain per entry, as BFCL presents it) or "
                                   "bfcl:DIR?domains=category")
        per_entry = query == "domains=entry"
    return load_bfcl(root, per_entry=per_entry)


__all__ = ["convert_schema", "load_bfcl", "load_bfcl_spec", "tool_name"]
