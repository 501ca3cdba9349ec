"""Metadata perturbations (BiasBusters section 5): rewrite a benchmark's tool metadata, keep
its canonical order, and compare the model's selection distribution with the unperturbed one.

Every condition is a seeded, deterministic function ``Benchmark -> Benchmark``. The
tool at canonical index i stays the same API (same ``api`` in the records), so its
selection rate under a condition is directly comparable with the base rate.

Conditions (``CONDITIONS``):

==========================  =====================================================================
``random_names``            every tool gets a random opaque name (``t`` + 11 lowercase letters/digits)
``shuffled_names``          names permuted within the cluster (a derangement: no tool keeps its name)
``random_names_top``        random names for the most-selected tool(s) of each cluster only *
``desc_param_scramble``     words of tool + endpoint descriptions and of parameter descriptions shuffled
``desc_scramble``           words of tool + endpoint descriptions shuffled
``param_desc_scramble``     words of every parameter description shuffled
``targeted_desc_scramble``  description words shuffled for the most-selected tool(s) only *
``desc_swap``               descriptions swapped between the most- and the least-selected tool *
``full_scramble``           random names and every description (tool, endpoint, parameters) scrambled
==========================  =====================================================================

\\* targeted conditions need the base selection rates (``base_rates``: cluster -> per-API
rates, e.g. ``BiasReport.api_rates()`` of the base run). Ties are broken by canonical index.

"Scramble" shuffles the words of a text (same words, same length, no meaning); a one-word
description is unchanged by it. Two file-driven conditions replay the BiasBusters
experiment mappings: ``names:FILE`` (provider or tool name -> new name, e.g.
``experiments/tool_to_id_1.json``, ``tool_to_shuffled_tool_1.json``) and ``desc_swap:FILE``
(provider -> provider whose descriptions it takes, e.g. ``desc_swap_1.json``).

Effects are reported as TV(P_condition, P_base) and TV(P_condition, U) over APIs
(:func:`perturbation_effects`).
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .metrics import BiasReport, tv_distance, tv_from_uniform
from .types import NAME_RE, Benchmark, Cluster, SelectionTool, validate_benchmark

Rates = Mapping[str, Sequence[float]]

CONDITIONS = ("random_names", "shuffled_names", "random_names_top", "desc_param_scramble", "desc_scramble",
              "param_desc_scramble", "targeted_desc_scramble", "desc_swap", "full_scramble")
TARGETED = ("random_names_top", "targeted_desc_scramble", "desc_swap")


def _rng(seed: int, *parts: object) -> random.Random:
    h = hashlib.sha256(json.dumps([seed, *[str(p) for p in parts]]).encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def scramble_text(text: str, rng: random.Random) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    original = list(words)
    for _ in range(10):
        rng.shuffle(words)
        if words != original:
            break
    return " ".join(words)


def random_name(rng: random.Random) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "t" + "".join(rng.choice(alphabet) for _ in range(11))


def _scramble_params(params: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    out = json.loads(json.dumps(dict(params)))
    for schema in (out.get("properties") or {}).values():
        if isinstance(schema, dict) and isinstance(schema.get("description"), str):
            schema["description"] = scramble_text(schema["description"], rng)
    return out


def _scramble_desc(t: SelectionTool, rng: random.Random) -> SelectionTool:
    return replace(t, tool_description=scramble_text(t.tool_description, rng),
                   api_description=scramble_text(t.api_description, rng))


def _ranked(c: Cluster, rates: Rates | None, condition: str) -> list[int]:
    """Canonical indices, most-selected first (ties: lower index first)."""
    if rates is None or c.id not in rates:
        raise ToolbiasError(f"condition '{condition}' needs the base selection rates of cluster '{c.id}'",
                            fix="run the base condition first (same model, store) or pass base rates")
    r = list(rates[c.id])
    if len(r) != c.k:
        raise ToolbiasError(f"base rates of cluster '{c.id}' have {len(r)} entries, the cluster has {c.k} tools")
    return sorted(range(c.k), key=lambda i: (-r[i], i))


def _fresh_names(c: Cluster, idx: Sequence[int], rng: random.Random) -> dict[int, str]:
    taken = {t.name.casefold() for t in c.tools}
    out: dict[int, str] = {}
    for i in idx:
        name = random_name(rng)
        while name.casefold() in taken:
            name = random_name(rng)
        taken.add(name.casefold())
        out[i] = name
    return out


def _derangement(k: int, rng: random.Random) -> list[int]:
    perm = list(range(k))
    while True:
        rng.shuffle(perm)
        if all(p != i for i, p in enumerate(perm)):
            return perm


def perturb_cluster(c: Cluster, condition: str, *, seed: int = 0, base_rates: Rates | None = None,
                    top: int = 1) -> Cluster:
    if condition not in CONDITIONS:
        raise ToolbiasError(f"unknown perturbation '{condition}'", fix=f"use one of: {', '.join(CONDITIONS)}")
    rng = _rng(seed, condition, c.id)
    tools = list(c.tools)
    if condition in ("random_names", "full_scramble"):
        names = _fresh_names(c, range(c.k), rng)
        tools = [replace(t, name=names[i]) for i, t in enumerate(tools)]
    if condition == "shuffled_names":
        perm = _derangement(c.k, rng)
        tools = [replace(t, name=c.tools[perm[i]].name) for i, t in enumerate(tools)]
    elif condition == "random_names_top":
        top_idx = _ranked(c, base_rates, condition)[:top]
        names = _fresh_names(c, top_idx, rng)
        tools = [replace(t, name=names[i]) if i in names else t for i, t in enumerate(tools)]
    if condition in ("desc_scramble", "desc_param_scramble", "full_scramble"):
        tools = [_scramble_desc(t, rng) for t in tools]
    if condition in ("param_desc_scramble", "desc_param_scramble", "full_scramble"):
        tools = [replace(t, parameters=_scramble_params(t.parameters, rng)) for t in tools]
    if condition == "targeted_desc_scramble":
        targets = set(_ranked(c, base_rates, condition)[:top])
        tools = [_scramble_desc(t, rng) if i in targets else t for i, t in enumerate(tools)]
    elif condition == "desc_swap":
        ranked = _ranked(c, base_rates, condition)
        hi, lo = ranked[0], ranked[-1]
        a, b = tools[hi], tools[lo]
        tools[hi] = replace(a, tool_description=b.tool_description, api_description=b.api_description)
        tools[lo] = replace(b, tool_description=a.tool_description, api_description=a.api_description)
    return c.with_tools(tools)


def _load_mapping(path: str) -> dict[str, str]:
    p = Path(path)
    if not p.is_file():
        raise ToolbiasError("mapping file not found", where=path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ToolbiasError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
    if not isinstance(data, dict):
        raise ToolbiasError("expected a JSON object mapping names to names", where=path)
    return {str(k).strip(): str(v).strip() for k, v in data.items()}


def map_names(bench: Benchmark, mapping: Mapping[str, str]) -> Benchmark:
    """Rename tools by provider (or tool name) -> new name; BiasBusters tools get ``<api>_for_<new>``."""
    from .importers import standardize, toolbench_name

    clusters = []
    for c in bench.clusters:
        tools = []
        for t in c.tools:
            new = mapping.get(t.provider.strip()) or mapping.get(t.name)
            if new is None:
                tools.append(t)
                continue
            api_name = t.metadata.get("api_name")
            name = toolbench_name(new, str(api_name)) if api_name else (new if NAME_RE.match(new)
                                                                         else standardize(new)[:64])
            tools.append(replace(t, name=name))
        clusters.append(c.with_tools(tools))
    out = bench.with_clusters(clusters)
    validate_benchmark(out)
    return out


def swap_descriptions(bench: Benchmark, mapping: Mapping[str, str]) -> Benchmark:
    """Each tool whose provider is a key takes the descriptions of the tool named by the value
    (searched in the same cluster); pairs are swapped both ways."""
    clusters = []
    for c in bench.clusters:
        by_provider = {t.provider.strip(): i for i, t in enumerate(c.tools)}
        tools = list(c.tools)
        for a, b in mapping.items():
            if a in by_provider and b in by_provider:
                i, j = by_provider[a], by_provider[b]
                ti, tj = c.tools[i], c.tools[j]
                tools[i] = replace(ti, tool_description=tj.tool_description, api_description=tj.api_description)
                tools[j] = replace(tj, tool_description=ti.tool_description, api_description=ti.api_description)
        clusters.append(c.with_tools(tools))
    return bench.with_clusters(clusters)


def apply_condition(bench: Benchmark, condition: str, *, seed: int = 0, base_rates: Rates | None = None,
                    top: int = 1) -> Benchmark:
    """The benchmark under one condition (``base`` returns it unchanged)."""
    if condition in ("", "base"):
        return bench
    kind, _, arg = condition.partition(":")
    if kind == "names" and arg:
        return map_names(bench, _load_mapping(arg))
    if kind == "desc_swap" and arg:
        return swap_descriptions(bench, _load_mapping(arg))
    out = bench.with_clusters([perturb_cluster(c, condition, seed=seed, base_rates=base_rates, top=top)
                               for c in bench.clusters])
    validate_benchmark(out)
    return out


def condition_label(condition: str) -> str:
    """A stable label for records: file conditions keep only the file name."""
    kind, _, arg = condition.partition(":")
    return f"{kind}:{Path(arg).name}" if arg else condition


@dataclass(frozen=True)
class PerturbationEffect:
    condition: str
    tv_to_base: float
    tv_to_uniform: float
    delta_pos: float
    per_cluster: Mapping[str, Mapping[str, float]]
    n_selections: int
    n_unparsed: int

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "tv_to_base": self.tv_to_base, "tv_to_uniform": self.tv_to_uniform,
                "delta_pos": self.delta_pos, "per_cluster": {k: dict(v) for k, v in self.per_cluster.items()},
                "n_selections": self.n_selections, "n_unparsed": self.n_unparsed}


def perturbation_effects(base: BiasReport, conditions: Mapping[str, BiasReport]) -> list[PerturbationEffect]:
    """TV of each condition's pooled API distribution to the base one and to uniform, per cluster
    and averaged over the clusters both have. ``tv_to_uniform`` is the condition's delta_api."""
    out = []
    for name, rep in conditions.items():
        per: dict[str, dict[str, float]] = {}
        for c, v in rep.per_cluster.items():
            if c not in base.per_cluster:
                continue
            per[c] = {"tv_to_base": tv_distance(v["api_counts"], base.per_cluster[c]["api_counts"]),
                      "tv_to_uniform": tv_from_uniform(v["api_counts"]),
                      "base_tv_to_uniform": tv_from_uniform(base.per_cluster[c]["api_counts"])}
        if not per:
            raise ToolbiasError(f"condition '{name}' shares no cluster with the base run")
        out.append(PerturbationEffect(condition=name, tv_to_base=sum(p["tv_to_base"] for p in per.values()) / len(per),
                                      tv_to_uniform=rep.delta_api, delta_pos=rep.delta_pos, per_cluster=per,
                                      n_selections=rep.n_selections, n_unparsed=rep.n_unparsed))
    return out

