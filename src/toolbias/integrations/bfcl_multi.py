"""BFCL's multi-turn categories from an installed ``bfcl-eval``: ``bfcl-multi:base``.

``bfcl-multi:base`` reads ``BFCL_v4_multi_turn_base.json`` (200 entries), its possible
answers and the function docs of the API classes the entries use, all from the installed
``bfcl_eval`` package (``pip install 'toolbias[bfcl]'``, or ``--no-deps bfcl-eval`` plus ``mpmath``); nothing of BFCL's is copied here.

* **Domains**: one per entry (isolated, as BFCL presents each entry): the functions of the
  entry's ``involved_classes`` minus its ``excluded_function`` s, converted as
  :mod:`toolbias.integrations.bfcl` converts single-turn docs; ``Tool.cls`` is the API class.
* **Tasks**: one per entry. ``query`` is the first user turn; ``meta["turns"]`` the later user
  turns (fed one at a time: the next when the agent answers without a tool call);
  ``meta["gold_turns"]`` the number of gold calls of each turn; ``gold`` the gold calls of
  all turns in order. BFCL writes its gold as Python call strings (``cd(folder='doc')``): they
  are parsed (``ast``, literals only, positional arguments named from the method's signature),
  never evaluated. ``meta["bfcl_multi"]`` keeps the entry's ``initial_config`` and classes for
  the environment (:mod:`toolbias.integrations.bfcl_env`), which runs BFCL's own classes.
* **Success** is BFCL's state check, per user turn (see :mod:`toolbias.integrations.bfcl_env`).
"""

from __future__ import annotations

import ast
import inspect
import json
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog.model import ISOLATED_DOMAINS, Catalog, Domain, NativeAction, Task, Tool
from ..catalog.validation import arguments_error
from ..errors import CatalogError
from .bfcl import convert_schema

#: the categories this loader reads, by spec name
CATEGORIES = {"base": "multi_turn_base"}
INSTALL_HINT = ("install toolbias[bfcl]: pip install 'toolbias[bfcl]', or, where bfcl-eval's pinned dependencies "
                "conflict: pip install --no-deps bfcl-eval && pip install mpmath")
#: Catalog.meta value naming the environment that runs this catalog's actions (toolbias.study.env)
ENVIRONMENT = "bfcl-multi"


def bfcl_eval_root() -> Path:
    """The installed ``bfcl_eval`` package folder; a clear error when it is missing."""
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError("the BFCL multi-turn catalog needs the bfcl-eval package, which is not installed",
                           where="bfcl-multi", fix=INSTALL_HINT)
    return Path(list(spec.submodule_search_locations)[0])


def api_class(name: str) -> type:
    """BFCL's API class ``name`` (imported from the installed package at run time)."""
    import importlib

    try:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[name])
    except ImportError as exc:
        raise CatalogError(f"cannot import BFCL's {name}: {exc}", where="bfcl-multi", fix=INSTALL_HINT) from None
    except KeyError:
        raise CatalogError(f"unknown BFCL API class '{name}'", where="bfcl-multi",
                           fix="use a bfcl-eval release whose multi-turn data matches its classes") from None
    cls: type = getattr(module, name)
    return cls


def _read_jsonl(path: Path) -> list[Any]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read {path.name}: {exc}", where=str(path),
                           fix=f"reinstall bfcl-eval ({INSTALL_HINT})") from None


@lru_cache(maxsize=1)
def _function_docs(root: str) -> dict[str, list[dict[str, Any]]]:
    """API class -> its function docs (BFCL's own files)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    folder = Path(root) / "data" / "multi_turn_func_doc"
    return {cls: _read_jsonl(folder / file) for cls, file in MULTI_TURN_FUNC_DOC_FILE_MAPPING.items()
            if (folder / file).is_file()}


def parse_call(text: str, signatures: Mapping[str, inspect.Signature]) -> tuple[str, dict[str, Any]]:
    """``name(args)`` from a BFCL gold string: literals only (``ast.literal_eval``), positional
    arguments named from the method's signature. Raises ValueError for anything else."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    args: dict[str, Any] = {}
    if node.args:
        sig = signatures.get(name)
        if sig is None:
            raise ValueError(f"positional arguments for unknown function {name!r}")
        params = [p for p in sig.parameters if p != "self"]
        if len(node.args) > len(params):
            raise ValueError(f"too many positional arguments in {text!r}")
        for p, value in zip(params, node.args, strict=False):
            args[p] = ast.literal_eval(value)
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"**kwargs in {text!r}")
        args[kw.arg] = ast.literal_eval(kw.value)
    return name, args


def load_bfcl_multi(category: str = "base") -> Catalog:
    """The catalog of one BFCL multi-turn category (see the module doc)."""
    if category not in CATEGORIES:
        raise CatalogError(f"unknown BFCL multi-turn category '{category}'", where=f"bfcl-multi:{category}",
                           fix=f"use one of: {', '.join(CATEGORIES)}")
    root = bfcl_eval_root()
    name = CATEGORIES[category]
    entries = _read_jsonl(root / "data" / f"BFCL_v4_{name}.json")
    answers = {str(a.get("id")): a.get("ground_truth") for a in
               _read_jsonl(root / "data" / "possible_answer" / f"BFCL_v4_{name}.json")}
    docs = _function_docs(str(root))
    notes: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    domains: list[Domain] = []
    tasks: list[Task] = []
    for entry in entries:
        eid = str(entry["id"])
        classes = list(entry.get("involved_classes") or [])
        excluded = set(entry.get("excluded_function") or [])
        tools: list[Tool] = []
        signatures: dict[str, inspect.Signature] = {}
        for cls_name in classes:
            cls = api_class(cls_name)
            for fn in docs.get(cls_name, []):
                if fn["name"] in excluded or any(t.name == fn["name"] for t in tools):
                    continue
                params = convert_schema(fn.get("parameters") or {"type": "dict", "properties": {}}, notes)
                params.setdefault("type", "object")
                params.setdefault("properties", {})
                tools.append(Tool(fn["name"], str(fn.get("description", "")), params, domain=eid, cls=cls_name))
                method = getattr(cls, fn["name"], None)
                if method is not None:
                    signatures[fn["name"]] = inspect.signature(method)
        domains.append(Domain(eid, tuple(tools), title=eid))
        turns = [" ".join(str(m.get("content", "")) for m in turn if isinstance(m, Mapping) and m.get("role") == "user")
                 for turn in entry.get("question") or []]
        gold_raw = answers.get(eid)
        if not turns or not isinstance(gold_raw, list) or len(gold_raw) != len(turns):
            skipped["answer turns do not match the question turns"] += 1
            continue
        by_name = {t.name: t for t in tools}
        gold: list[NativeAction] = []
        per_turn: list[int] = []
        problem = None
        for calls in gold_raw:
            per_turn.append(len(calls))
            for text in calls:
                try:
                    fname, args = parse_call(text, signatures)
                except (ValueError, SyntaxError):
                    problem = "a gold call is not a plain call of literals"
                    break
                tool = by_name.get(fname)
                if tool is None:
                    problem = "a gold call names a function the entry does not offer"
                    break
                if arguments_error(tool.parameters, args) is not None:
                    problem = "a gold call fails its function's schema"
                    break
                gold.append(NativeAction(eid, fname, args))
            if problem:
                break
        if problem:
            skipped[problem] += 1
            continue
        tasks.append(Task(id=eid, domain=eid, query=turns[0], gold=tuple(gold),
                          meta={"source": "bfcl-multi", "category": name, "bfcl_id": eid, "turns": turns[1:],
                                "gold_turns": per_turn,
                                "bfcl_multi": {"initial_config": entry.get("initial_config") or {},
                                               "involved_classes": classes}}))
    meta = {"bfcl": {"categories": [name], "skipped": dict(skipped), "notes": dict(notes), "tasks": len(tasks)},
            ISOLATED_DOMAINS: True, "environment": ENVIRONMENT}
    return Catalog(name=f"bfcl-multi:{category}", domains=tuple(domains), tasks=tuple(tasks), meta=meta)


__all__ = ["CATEGORIES", "ENVIRONMENT", "api_class", "bfcl_eval_root", "load_bfcl_multi", "parse_call"]
