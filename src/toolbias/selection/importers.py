"""Importers for the BiasBusters tool-selection files (never copied into this repository).

``load_biasbusters(DIR)`` reads ``duplicate_api_clusters.json`` (a list of clusters, each a
list of RapidAPI endpoints), ``cluster_queries.json`` (``[{cluster_id, queries}]``) and,
when present, ``api_definitions.json`` (the authors' full ToolBench definitions of 35 of
the 50 endpoints: clusters 1, 3, 4, 6, 7, 8, 9) and ``correct_api_meta.json`` (whose
``tool_desc`` is exactly the tool blurb of the paper's prompts, and whose
``num_parameters`` counts each endpoint's parameters in the authors' main file).

Each tool keeps its ToolBench definition in ``metadata["toolbench"]`` (rendered by
:mod:`.toolbench`), and its function name ``<api>_for_<tool>`` (standardised, only the
last 64 characters kept). For clusters 2, 5 and 10 no full definition exists anywhere
(PROTOCOL.md section 2): their definition is built from ``duplicate_api_clusters.json``,
whose parameter lists are partial; ``metadata["definition"]`` says which source was used
and ``metadata["parameters_known"]`` / ``["parameters_total"]`` how many parameters are
missing (the prompts of those clusters cannot be reproduced byte for byte).

``load_biasbusters_filter_set(FILE)`` reads ``api_subset_selection_ground_truth.json``
(queries with ``correct_apis``, ``distractor_apis`` and ``correct_indices`` into an
8-candidate list) for the filter-quality evaluation of :mod:`.mitigate`. The file
does not say which correct API sat at which correct index, so the candidate list is
rebuilt with the correct APIs at ``correct_indices`` in file order and the
distractors in the other slots; the scores do not depend on that order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CatalogError
from .toolbench import ToolbenchAPI, function_name, standardize
from .types import Benchmark, Cluster, FilterExample, SelectionTool, validate_benchmark

if TYPE_CHECKING:
    from .mitigate import FilterScores

CLUSTERS_FILE = "duplicate_api_clusters.json"
QUERIES_FILE = "cluster_queries.json"
META_FILE = "correct_api_meta.json"
DEFINITIONS_FILE = "api_definitions.json"
FEATURES_FILE = "final_features.json"
GROUND_TRUTH_FILE = "api_subset_selection_ground_truth.json"

_TYPES = {"STRING": "string", "NUMBER": "number", "INTEGER": "integer", "BOOLEAN": "boolean", "ARRAY": "array",
          "OBJECT": "object", "ENUM": "string", "DATE (YYYY-MM-DD)": "string", "TIME (24-HOUR HH:MM)": "string"}

__all__ = ["load_biasbusters", "load_biasbusters_filter_set", "standardize", "toolbench_name"]


def toolbench_name(tool: str, api_name: str) -> str:
    """``<api>_for_<tool>``, only its last 64 characters kept (ToolBench's cut)."""
    return function_name(tool, api_name)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise CatalogError("file not found", where=str(path),
                           fix="point biasbusters:DIR at the folder holding the BiasBusters JSON files")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None


def _text(value: Any) -> str:
    if value is None:
        return ""
    s = str(value).strip()
    return "" if s == "None" else s


def _parameters(definition: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-schema parameters (the ``tools`` presentation): required then optional, in file order; a
    ToolBench default becomes an ``(example: ...)`` note in the description."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for group, is_required in (("required_parameters", True), ("optional_parameters", False)):
        for p in definition.get(group) or []:
            name = str(p.get("name", "")).strip()
            if not name or name in props:
                continue
            schema: dict[str, Any] = {"type": _TYPES.get(str(p.get("type", "STRING")).upper(), "string"),
                                      "description": _text(p.get("description"))}
            default = p.get("default")
            if default not in (None, ""):
                schema["description"] = (schema["description"] + f" (example: {default})").strip()
            props[name] = schema
            if is_required:
                required.append(name)
    return {"type": "object", "properties": props, "required": required}


def _ages(root: Path) -> dict[tuple[int, int], float | None]:
    """(cluster id, 0-based api) -> the tool's age in days as the authors measured it (``final_features.json``)."""
    if not (root / FEATURES_FILE).is_file():
        return {}
    return {(int(r["cluster_id"]), int(r["api"])): r.get("age_days") for r in _read_json(root / FEATURES_FILE)}


def _definitions(root: Path) -> dict[tuple[int, int], Mapping[str, Any]]:
    """(cluster id, 0-based api) -> the authors' ToolBench definition, where one exists."""
    if not (root / DEFINITIONS_FILE).is_file():
        return {}
    out = {}
    for row in _read_json(root / DEFINITIONS_FILE):
        if isinstance(row, Mapping) and isinstance(row.get("definition"), Mapping):
            out[(int(row["cluster_id"]), int(row["api"]))] = row["definition"]
    return out


def _endpoint_key(tool: str, api_name: str) -> tuple[str, str]:
    return (tool.strip(), api_name.strip())


def _tool(ep: Mapping[str, Any], meta: Mapping[str, Any], full: Mapping[str, Any] | None) -> SelectionTool:
    tool, api_name = _text(ep.get("tool")), _text(ep.get("api_name"))
    blurb_text = str(meta.get("tool_desc", ep.get("tool_desc", "")) or "")
    if full is not None:
        definition, source = dict(full), DEFINITIONS_FILE
    else:  # clusters 2, 5, 10: the cluster file's (partial) parameters; no optional ones are known
        definition = {"category_name": _text(ep.get("category")), "tool_name": tool, "api_name": api_name,
                      "api_description": str(ep.get("api_desc", "") or ""),
                      "required_parameters": list(ep.get("required_parameters") or []),
                      "optional_parameters": list(ep.get("optional_parameters") or [])}
        source = CLUSTERS_FILE
    api = ToolbenchAPI.from_dict(definition, tool_description=blurb_text)
    known = len(api.required_parameters) + len(api.optional_parameters)
    metadata: dict[str, Any] = {"category": _text(ep.get("category")), "tool": tool, "api_name": api_name,
                                "toolbench": api.to_dict(), "definition": source, "parameters_known": known}
    if "num_parameters" in meta:
        metadata["parameters_total"] = int(meta["num_parameters"])
    if meta.get("url"):
        metadata["url"] = meta["url"]
    return SelectionTool(name=api.function_name, tool_description=_text(blurb_text),
                         api_description=_text(definition.get("api_description")), parameters=_parameters(definition),
                         provider=tool, metadata=metadata)


def load_biasbusters(directory: str | Path) -> Benchmark:
    """The BiasBusters benchmark (10 clusters x 5 RapidAPI endpoints, 100 queries each) from DIR."""
    root = Path(directory)
    clusters_raw = _read_json(root / CLUSTERS_FILE)
    queries_raw = _read_json(root / QUERIES_FILE)
    meta: dict[tuple[int, int], Mapping[str, Any]] = {}
    if (root / META_FILE).is_file():
        for m in _read_json(root / META_FILE):
            meta[(int(m["cluster_id"]), int(m["api"]))] = m
    if not isinstance(clusters_raw, list) or not all(isinstance(c, list) for c in clusters_raw):
        raise CatalogError("expected a list of clusters, each a list of endpoints", where=str(root / CLUSTERS_FILE))
    by_id = {int(q["cluster_id"]): [str(x) for x in q["queries"]] for q in queries_raw}
    definitions = _definitions(root)
    ages = _ages(root)
    clusters = []
    for index, endpoints in enumerate(clusters_raw):
        cid = index + 1
        tools = []
        for api, ep in enumerate(endpoints):
            tool = _tool(ep, meta.get((cid, api), {}), definitions.get((cid, api)))
            if ages.get((cid, api)) is not None:
                tool = replace(tool, metadata={**tool.metadata, "age_days": ages[(cid, api)]})
            tools.append(tool)
        queries = by_id.get(cid)
        if not queries:
            raise CatalogError(f"no queries for cluster {cid}", where=str(root / QUERIES_FILE))
        category = tools[0].metadata.get("category", "") if tools else ""
        clusters.append(Cluster(id=str(cid), tools=tuple(tools), queries=tuple(queries),
                                name=f"cluster {cid} ({tools[0].metadata.get('api_name', '')}, {category})"))
    bench = Benchmark(name="biasbusters", clusters=tuple(clusters),
                      description=f"BiasBusters duplicate-API clusters imported from {root}")
    validate_benchmark(bench)
    return bench


def endpoint_index(bench: Benchmark) -> dict[tuple[str, str], tuple[str, SelectionTool]]:
    """(tool, api_name) -> (cluster id, tool) for a benchmark imported by :func:`load_biasbusters`."""
    out: dict[tuple[str, str], tuple[str, SelectionTool]] = {}
    for c in bench.clusters:
        for t in c.tools:
            key = _endpoint_key(str(t.metadata.get("tool", "")), str(t.metadata.get("api_name", "")))
            out[key] = (c.id, t)
    return out


def load_biasbusters_filter_set(path: str | Path, bench: Benchmark | None = None) -> list[FilterExample]:
    """Filter-evaluation examples (:class:`~toolbias.selection.mitigate.FilterExample`) from the
    ground-truth file; ``bench`` (default: the clusters beside the file) supplies tool metadata."""
    file = Path(path)
    if file.is_dir():
        file = file / GROUND_TRUTH_FILE
    rows = _read_json(file)
    bench = bench or load_biasbusters(file.parent)
    index = endpoint_index(bench)
    examples = []
    for row in rows:
        where = f"{file}: query_id {row.get('query_id')}"

        def lookup(e: Mapping[str, Any], where: str = where) -> SelectionTool:
            key = _endpoint_key(str(e.get("tool", "")), str(e.get("api_name", "")))
            if key not in index:
                raise CatalogError(f"unknown endpoint {key}", where=where)
            return index[key][1]

        correct = [lookup(e) for e in row["correct_apis"]]
        distractors = [lookup(e) for e in row["distractor_apis"]]
        n = len(correct) + len(distractors)
        slots = sorted(int(i) for i in row.get("correct_indices") or range(len(correct)))
        if len(slots) != len(correct) or any(not 0 <= i < n for i in slots):
            slots = list(range(len(correct)))
        candidates: list[SelectionTool | None] = [None] * n
        for i, t in zip(slots, correct, strict=True):
            candidates[i] = t
        rest = iter(distractors)
        for i in range(n):
            if candidates[i] is None:
                candidates[i] = next(rest)
        tools = tuple(t for t in candidates if t is not None)
        examples.append(FilterExample(id=str(row.get("query_id")), query=str(row["query"]), candidates=tools,
                                      correct=frozenset(slots), cluster=str(row.get("cluster_id", ""))))
    return examples


PREDICTIONS_FILE = "subset_preds.jsonl"


def score_biasbusters_predictions(predictions: str | Path, ground_truth: str | Path | None = None) -> FilterScores:
    """Score the authors' filter predictions (``subset_preds.jsonl``: ``{query_id, selected_tools}``) as their
    evaluation did (PROTOCOL.md 5): predicted names against gold ``<api>_for_<tool>`` names as sets; queries
    without a prediction line are skipped."""
    from .mitigate import score_sets

    path = Path(predictions)
    gt_path = Path(ground_truth) if ground_truth else path.parent / GROUND_TRUTH_FILE
    gold = {int(r["query_id"]): frozenset(function_name(e["tool"], e["api_name"]) for e in r["correct_apis"])
            for r in _read_json(gt_path)}
    golds, preds = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            qid, names = int(row["query_id"]), row["selected_tools"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise CatalogError("not a prediction line {query_id, selected_tools}", where=f"{path}:{lineno}") from None
        if qid in gold:
            golds.append(gold[qid])
            preds.append(frozenset(str(n) for n in names))
    return score_sets(golds, preds)
