"""``select build --method paper``: a selection benchmark built the authors' way (BiasBusters section 3).

1. **Seed tools**: hand-written descriptions of a functionality (a JSON list of ``{"name", "description"}``),
   one per wanted cluster.
2. **Nearest endpoint per provider**: every seed is embedded with every endpoint (``name: description``;
   all-MiniLM-L6-v2 or TF-IDF); each provider contributes its one endpoint nearest to the seed, and the
   ``pool`` providers whose nearest endpoint is most similar form the candidate group.
3. **Outlier removal**: the model is shown the seed and the group and names the endpoints that cannot serve
   the seed's requests (JSON ``{"outliers": [names]}``); they are removed, for up to ``rounds`` (5) rounds,
   stopping early at a round that removes nothing.
4. **Groups of more than three**: a group is kept when more than ``min_tools - 1`` (3) endpoints remain,
   cut to the ``max_size`` (5) most similar to the seed.
5. **Queries**: the model writes requests in batches of ``batch`` at temperature 0.7, each giving a concrete
   sample value for every required parameter of the group's endpoints (listed with their types), until
   ``queries`` distinct requests that name no provider are collected (at most ``max_batches`` calls).

Providers: a tools file may be ``{"providers": {"<provider>": [tools in any catalog format]}}``; a plain
tool list makes each tool its own provider. The result is a benchmark in the built-in format with a
``build`` record (method, settings, each group's rounds and batches).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CatalogError, ToolbiasError
from ..providers.base import GenerateConfig, ModelAPI
from ..providers.textcalls import first_json
from .build import read_tools
from .embed import minilm_embedder, tfidf_similarity
from .types import Benchmark, Cluster, SelectionTool, validate_benchmark

OUTLIER_PROMPT = ("A functionality and candidate API endpoints from different providers are listed below. Which "
                  "endpoints can NOT serve the requests this functionality describes (outliers)? Answer with JSON "
                  "only: {\"outliers\": [\"<exact endpoint name>\", ...]} ([] if every endpoint fits).\n\n"
                  "Functionality: ")
QUERY_PROMPT = ("The API endpoints below are functionally equivalent. Write {n} varied, realistic user requests "
                "that each of them can serve on its own. Every request must give a concrete sample value for each "
                "required parameter listed. Do not name any endpoint or provider. Answer with a JSON list of "
                "strings only.\n\nEndpoints:\n")


@dataclass(frozen=True)
class PaperBuildSettings:
    similarity: str = "minilm"
    pool: int = 8
    rounds: int = 5
    min_tools: int = 4
    max_size: int = 5
    queries: int = 100
    batch: int = 20
    max_batches: int = 20
    config: GenerateConfig = field(default_factory=lambda: GenerateConfig(temperature=0.7, max_tokens=4096))

    def to_dict(self) -> dict[str, Any]:
        return {"method": "paper", "similarity": self.similarity, "pool": self.pool, "rounds": self.rounds,
                "min_tools": self.min_tools, "max_size": self.max_size, "queries": self.queries,
                "batch": self.batch, "max_batches": self.max_batches, "config": self.config.to_dict()}


@dataclass(frozen=True)
class Seed:
    name: str
    description: str


def read_seeds(path: str | Path) -> list[Seed]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read the seed tools: {exc}", where=str(p),
                           fix='write a JSON list of {"name", "description"}') from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and d.get("name") and d.get("description")
                                             for d in data):
        raise CatalogError("seed tools must be a list of {\"name\", \"description\"}", where=str(p))
    return [Seed(str(d["name"]), str(d["description"])) for d in data]


def read_provider_tools(path: str | Path) -> list[SelectionTool]:
    """``{"providers": {name: tools}}`` (each tool's provider set) or a plain tool list (each its own provider)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read the tools: {exc}", where=str(p)) from None
    if not (isinstance(data, dict) and isinstance(data.get("providers"), dict)):
        return read_tools(p)
    import tempfile

    out: list[SelectionTool] = []
    for provider, tools in data["providers"].items():
        with tempfile.TemporaryDirectory() as tmp:  # the catalog reader takes a file
            one = Path(tmp) / f"{p.stem}.json"
            one.write_text(json.dumps(tools), encoding="utf-8")
            out += [replace(t, provider=str(provider)) for t in read_tools(one)]
    if len({t.name for t in out}) != len(out):
        raise CatalogError("endpoint names must be unique across providers", where=str(p))
    return out


def _similarities(seeds: Sequence[Seed], tools: Sequence[SelectionTool], kind: str) -> np.ndarray:
    left = [f"{s.name}: {s.description}" for s in seeds]
    right = [f"{t.name}: {t.description}" for t in tools]
    if kind == "tfidf":
        return np.asarray(tfidf_similarity(left, right))
    if kind != "minilm":
        raise ToolbiasError(f"unknown similarity '{kind}'", fix="use minilm or tfidf")
    embed = minilm_embedder()
    return np.asarray(embed(left) @ embed(right).T)


def nearest_per_provider(scores: np.ndarray, tools: Sequence[SelectionTool], pool: int) -> list[int]:
    """Each provider's endpoint nearest to the seed, the ``pool`` most similar providers, best first."""
    best: dict[str, int] = {}
    for i, t in enumerate(tools):
        key = t.provider or t.name
        if key not in best or scores[i] > scores[best[key]]:
            best[key] = i
    return sorted(best.values(), key=lambda i: -scores[i])[:pool]


def _listing(tools: Sequence[SelectionTool]) -> str:
    return "\n".join(f"- {t.name}: {t.description or '(no description)'}" for t in tools)


def _required(tools: Sequence[SelectionTool]) -> str:
    lines = []
    for t in tools:
        props = t.parameters.get("properties") or {}
        req = [str(r) for r in (t.parameters.get("required") or [])]
        parts = [f"{r} ({(props.get(r) or {}).get('type', 'string') if isinstance(props.get(r), dict) else 'string'})"
                 for r in req]
        lines.append(f"- {t.name}: {t.description or '(no description)'}; required parameters: "
                     + (", ".join(parts) or "none"))
    return "\n".join(lines)


async def abuild_paper(model: ModelAPI, tools: Sequence[SelectionTool], seeds: Sequence[Seed], *,
                       name: str = "custom", settings: PaperBuildSettings | None = None,
                       ) -> tuple[Benchmark, dict[str, Any]]:
    """The benchmark and its build record (see the module doc)."""
    settings = settings or PaperBuildSettings()
    if not seeds:
        raise ToolbiasError("no seed tools given", fix="write one {\"name\", \"description\"} per cluster")
    scores = _similarities(seeds, tools, settings.similarity)
    record: dict[str, Any] = {"model": model.spec, **settings.to_dict(), "tools": len(tools),
                              "providers": len({t.provider or t.name for t in tools}), "seeds": []}
    clusters: list[Cluster] = []
    for si, seed in enumerate(seeds):
        group = [tools[i] for i in nearest_per_provider(scores[si], tools, settings.pool)]
        entry: dict[str, Any] = {"seed": seed.name, "nearest": [t.name for t in group], "rounds": []}
        record["seeds"].append(entry)
        for _ in range(settings.rounds):
            out = await model.generate([{"role": "user", "content": OUTLIER_PROMPT + seed.description
                                         + "\n\nEndpoints:\n" + _listing(group)}], [], None, settings.config)
            answer = first_json(out.content)
            named = answer.get("outliers") if isinstance(answer, Mapping) else answer
            drop = {str(n) for n in named} if isinstance(named, list) else set()
            removed = [t.name for t in group if t.name in drop]
            entry["rounds"].append(removed)
            if not removed:
                break
            group = [t for t in group if t.name not in drop]
        if len(group) < settings.min_tools:
            entry["kept"] = False
            continue
        group = group[: settings.max_size]
        queries: list[str] = []
        batches = 0
        while len(queries) < settings.queries and batches < settings.max_batches:
            n = min(settings.batch, settings.queries - len(queries))
            out = await model.generate([{"role": "user", "content": QUERY_PROMPT.replace("{n}", str(n))
                                         + _required(group)}], [], None, settings.config)
            batches += 1
            got = first_json(out.content)
            for q in got if isinstance(got, list) else []:
                if isinstance(q, str) and q.strip() and q.strip() not in queries and not any(
                        t.name.casefold() in q.casefold() or (t.provider and t.provider.casefold() in q.casefold())
                        for t in group):
                    queries.append(q.strip())
        entry.update(kept=bool(queries), tools=[t.name for t in group], batches=batches, queries=len(queries))
        if not queries:
            continue
        clusters.append(Cluster(id=f"c{len(clusters) + 1}", tools=tuple(group),
                                queries=tuple(queries[: settings.queries]), name=seed.name))
    if not clusters:
        raise ToolbiasError("no seed kept a group of more than three endpoints",
                            fix="add providers, widen --pool, or check the seed descriptions")
    bench = Benchmark(name=name, clusters=tuple(clusters),
                      description=f"built the paper's way from {len(seeds)} seeds and {len(tools)} endpoints with "
                                  f"{model.spec} (toolbias select build --method paper)")
    validate_benchmark(bench)
    return bench, record


__all__ = ["PaperBuildSettings", "Seed", "abuild_paper", "nearest_per_provider", "read_provider_tools",
           "read_seeds"]
