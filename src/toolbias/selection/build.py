"""Build a selection benchmark from your own tools (``select build --method threshold``): embed, cluster by a
similarity threshold, confirm, generate queries. The authors' own method (seed tools, nearest endpoint per
provider, outlier rounds) is :mod:`.build_paper` (``--method paper``).

1. **Embed** each tool's ``name: description`` (the packaged all-MiniLM-L6-v2, :mod:`.embed`; or TF-IDF).
2. **Cluster** candidates: tools joined when their cosine similarity is at least ``threshold``
   (connected components); components of ``min_size`` or more tools are candidates, cut to the
   ``max_size`` tools most similar to the rest.
3. **Confirm** each candidate with the model: it lists the tools that are functionally
   equivalent (JSON ``{"equivalent": [names]}``); a cluster keeps them when there are at least
   ``min_size``.
4. **Generate** ``queries`` user requests per cluster with the model (JSON list of strings) that
   every tool of the cluster can serve and that name no provider.

The result is a benchmark file in the built-in format (``select run --benchmark FILE``) with a
``build`` entry recording the model, the similarity, the thresholds and what each step kept.
Tools come in any format the catalog reader takes (:mod:`toolbias.catalog.formats`: OpenAI chat or
Responses, Anthropic, Gemini function declarations, MCP ``tools/list`` results, JSON-RPC envelopes).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..catalog.model import json_copy
from ..errors import CatalogError, ToolbiasError
from ..providers.base import GenerateConfig, ModelAPI
from ..providers.textcalls import first_json
from .embed import minilm_embedder, tfidf_similarity
from .types import Benchmark, Cluster, SelectionTool, validate_benchmark

CONFIRM_PROMPT = ("Several API tools are listed below. Which of them are functionally equivalent, that is, each of "
                  "them alone can serve the same user requests? Answer with JSON only: {\"equivalent\": [\"<exact "
                  "tool name>\", ...]} listing the largest such group ([] if none).\n\nTools:\n")
QUERY_PROMPT = ("The API tools below are functionally equivalent. Write {n} varied, realistic user requests that "
                "each of them can serve on its own. Do not name any tool or provider. Answer with a JSON list of "
                "strings only.\n\nTools:\n")


@dataclass(frozen=True)
class BuildSettings:
    similarity: str = "minilm"
    threshold: float = 0.6
    min_size: int = 2
    max_size: int = 5
    queries: int = 20
    config: GenerateConfig = GenerateConfig(temperature=0.7, max_tokens=2048)

    def to_dict(self) -> dict[str, Any]:
        return {"similarity": self.similarity, "threshold": self.threshold, "min_size": self.min_size,
                "max_size": self.max_size, "queries": self.queries, "config": self.config.to_dict()}


def read_tools(path: str | Path) -> list[SelectionTool]:
    """A tool list in any format the catalog reader takes (:mod:`toolbias.catalog.formats`), as selection tools."""
    from ..catalog.formats import read_tools as read_any
    from ..catalog.openai_format import read_json

    p = Path(path)
    tools = [SelectionTool(name=t.name, api_description=t.description, parameters=json_copy(t.parameters),
                           provider=t.name) for t in read_any(read_json(p), domain=p.stem, source=str(p))]
    if len({t.name for t in tools}) != len(tools):
        raise CatalogError("tool names must be unique", where=str(p))
    return tools


def catalog_tools(spec: str, domains: Sequence[str] = ()) -> list[SelectionTool]:
    """The tools of a catalog (any spec: ``mcp-config:FILE.json`` lists live servers), each domain a
    provider (an MCP server); a name two domains share is qualified as ``DOMAIN_NAME``."""
    from ..catalog import load_catalog

    catalog = load_catalog(spec)
    chosen = [catalog.domain(d) for d in domains] if domains else list(catalog.domains)
    counts = Counter(t.name for d in chosen for t in d.tools)
    tools = [SelectionTool(name=t.name if counts[t.name] == 1 else f"{d.name}_{t.name}",
                           api_description=t.description, parameters=json_copy(t.parameters), provider=d.name)
             for d in chosen for t in d.tools]
    if len({t.name for t in tools}) != len(tools):
        raise CatalogError("tool names must be unique (also once qualified by their domain)", where=spec,
                           fix="choose fewer domains with --domains")
    return tools


def similarity(tools: Sequence[SelectionTool], kind: str) -> np.ndarray:
    texts = [f"{t.name}: {t.description}" for t in tools]
    if kind == "tfidf":
        return tfidf_similarity(texts, texts)
    if kind != "minilm":
        raise ToolbiasError(f"unknown similarity '{kind}'", fix="use minilm or tfidf")
    vectors = minilm_embedder()(texts)
    return np.asarray(vectors @ vectors.T)


def candidates(sim: np.ndarray, settings: BuildSettings) -> list[list[int]]:
    """Connected components of the ``sim >= threshold`` graph, of at least ``min_size``, cut to ``max_size``."""
    n = len(sim)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if sim[i, j] >= settings.threshold:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    out = []
    for members in groups.values():
        if len(members) < settings.min_size:
            continue
        centrality = {i: float(np.mean([sim[i, j] for j in members if j != i])) for i in members}
        out.append(sorted(sorted(members, key=lambda i: -centrality[i])[: settings.max_size]))
    return sorted(out)


def _listing(tools: Sequence[SelectionTool]) -> str:
    return "\n".join(f"- {t.name}: {t.description or '(no description)'}" for t in tools)


async def abuild(model: ModelAPI, tools: Sequence[SelectionTool], *, name: str = "custom",
                 settings: BuildSettings | None = None) -> tuple[Benchmark, dict[str, Any]]:
    """The benchmark and the build record (settings and what each step kept)."""
    settings = settings or BuildSettings()
    sim = similarity(tools, settings.similarity)
    record: dict[str, Any] = {"model": model.spec, **settings.to_dict(), "tools": len(tools), "candidates": [],
                              "clusters": []}
    clusters: list[Cluster] = []
    for members in candidates(sim, settings):
        group = [tools[i] for i in members]
        out = await model.generate([{"role": "user", "content": CONFIRM_PROMPT + _listing(group)}], [], None,
                                   settings.config)
        answer = first_json(out.content)
        named = answer.get("equivalent") if isinstance(answer, Mapping) else answer
        names = {t.name for t in group}
        kept = [t for t in group if isinstance(named, list) and t.name in named]
        record["candidates"].append({"tools": sorted(names), "confirmed": [t.name for t in kept]})
        if len(kept) < settings.min_size:
            continue
        out = await model.generate([{"role": "user", "content": QUERY_PROMPT.replace("{n}", str(settings.queries))
                                     + _listing(kept)}], [], None, settings.config)
        queries = first_json(out.content)
        queries = [q.strip() for q in queries if isinstance(q, str) and q.strip()] if isinstance(queries, list) else []
        queries = [q for q in dict.fromkeys(queries) if not any(t.name.casefold() in q.casefold() for t in kept)]
        if not queries:
            record["candidates"][-1]["queries"] = 0
            continue
        cid = f"c{len(clusters) + 1}"
        clusters.append(Cluster(id=cid, tools=tuple(kept), queries=tuple(queries[: settings.queries]),
                                name=", ".join(t.name for t in kept)))
        record["clusters"].append({"id": cid, "tools": [t.name for t in kept], "queries": len(clusters[-1].queries)})
    if not clusters:
        raise ToolbiasError("no cluster of equivalent tools was confirmed",
                            fix="lower --threshold, check the tool descriptions, or use a stronger model")
    bench = Benchmark(name=name, clusters=tuple(clusters),
                      description=f"built from {len(tools)} tools with {model.spec} (toolbias select build)")
    validate_benchmark(bench)
    return bench, record


def write_benchmark(bench: Benchmark, record: Mapping[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.write_text(json.dumps({**bench.to_dict(), "build": dict(record)}, indent=1, ensure_ascii=False) + "\n",
                 encoding="utf-8")
    return p
