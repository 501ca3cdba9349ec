"""Metadata perturbations (BiasBusters section 5, PROTOCOL.md 3): rewrite what the model sees of each
tool, keep the canonical order, and compare the selection distribution with the unperturbed one.

A condition is a deterministic function ``Benchmark -> Benchmark`` (:func:`apply_condition`).
The tool at canonical index i stays the same API (same ``api`` in the records). Names are
mapped once per condition (seeded); scrambles are only marked here and drawn afresh for
every prompt when the request is built (:mod:`.scramble`).

Conditions (:data:`CONDITIONS`; the paper's label in brackets):

==========================  =====================================================================
``random_names``            [Rand. Name] every tool name -> a 20-character random id (lowercase
                            letters and digits), wherever the tool name appears *
``shuffled_names``          [Shuff. Name] tool names permuted within the cluster (one may keep its own)
``random_names_top``        [Targ. Name] random ids for the most-selected tool of each cluster only **
``desc_param_scramble``     [Desc. + Param.] description, parameter and blurb scramble
``desc_scramble``           [Desc.] description and blurb scramble
``param_desc_scramble``     [Param.] parameter-description scramble
``targeted_desc_scramble``  [Targ. Desc.] description and blurb scramble of the most-selected tool only **
``desc_swap``               [Swap. Desc.] most- and least-selected tool exchange the text after the first
                            sentence of their function descriptions, and their blurbs **
``full_scramble``           [Full] random ids and every scramble
==========================  =====================================================================

\\* For a ToolBench tool the id replaces the tool name in the three places the paper's mapping
does (tool-list label, the ``_for_<tool>`` suffix, the subfunction sentence); the API part of
the function name and names inside description text stay. A tool of this project's own format
takes the id as its name. \\** targeted conditions need the base selection rates
(``base_rates``: cluster -> per-API rates), ties broken by canonical index.

File conditions replay the authors' experiments (``../shared/data/biasbusters/experiments``):
``names:FILE`` (tool -> new name: ``tool_to_id_<run>.json``, ``tool_to_shuffled_tool_<run>.json``,
``tool_to_id_prom_<run>.json``), ``desc_swap:FILE`` (``desc_swap_<run>.json`` pairs),
``desc_scramble:FILE`` (the keys of a mapping file: Targ. Desc.) and ``all_but_one:FILE``
(``tool_to_id_abo_1.json``: tools mapped to themselves are held out, all others get the mapped
id and every scramble).

Effects (:func:`perturbation_effects`) follow the paper's figure: per cluster, the condition's
API distribution averaged over its runs, TV to the base distribution and to uniform, mean and
std (ddof 1) over clusters; and the spread over runs (each run's TV to the base).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.plugins import Registry
from ..errors import ToolbiasError
from .metrics import BiasReport, tv_distance, tv_from_uniform
from .toolbench import api_of, standardize
from .types import NAME_RE, Benchmark, Cluster, SelectionTool, validate_benchmark

Rates = Mapping[str, Sequence[float]]

TARGETED = ("random_names_top", "targeted_desc_scramble", "desc_swap")
FILE_CONDITIONS = ("names", "desc_swap", "desc_scramble", "all_but_one")
PAPER_LABELS = {"random_names": "Rand. Name", "shuffled_names": "Shuff. Name", "random_names_top": "Targ. Name",
                "desc_param_scramble": "Desc. + Param.", "desc_scramble": "Desc.", "param_desc_scramble": "Param.",
                "targeted_desc_scramble": "Targ. Desc.", "desc_swap": "Swap. Desc.", "full_scramble": "Full",
                "all_but_one": "AbO"}
_MARKS = {"desc_param_scramble": ("desc", "blurb", "params"), "desc_scramble": ("desc", "blurb"),
          "param_desc_scramble": ("params",), "targeted_desc_scramble": ("desc", "blurb"),
          "full_scramble": ("desc", "blurb_spaced", "params"), "all_but_one": ("desc", "blurb_spaced", "params")}
ID_ALPHABET = string.ascii_lowercase + string.digits


def _rng(seed: int, *parts: object) -> random.Random:
    h = hashlib.sha256(json.dumps([seed, *[str(p) for p in parts]]).encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def random_id(rng: random.Random) -> str:
    """A 20-character id of lowercase letters and digits (the paper's tool-to-id names)."""
    return "".join(rng.choice(ID_ALPHABET) for _ in range(20))


def tool_label(t: SelectionTool) -> str:
    """The tool (provider) name a mapping file keys on."""
    return str(t.metadata.get("tool") or t.provider or t.name).strip()


def _own_name(t: SelectionTool) -> str:
    """The name a tool is shown under: its ToolBench tool name, or the name of a tool of this project's format."""
    return tool_label(t) if "toolbench" in t.metadata else t.name


def rename(t: SelectionTool, new: str) -> SelectionTool:
    """The tool shown under another tool name (see the module doc)."""
    if "toolbench" in t.metadata:
        api = api_of(t)
        mapped = replace(api, tool_name=new, described_as=api.described_as or api.function_name)
        meta = {**t.metadata, "toolbench": mapped.to_dict()}
        meta.setdefault("toolbench_original", api.to_dict())
        return replace(t, name=mapped.function_name, metadata=meta)
    name = new if NAME_RE.match(new) else standardize(new)[:64]
    return replace(t, name=name, provider=new, metadata={**t.metadata, "original_name": t.name})


def mark(t: SelectionTool, marks: Sequence[str]) -> SelectionTool:
    have = tuple(t.metadata.get("scramble") or ())
    return replace(t, metadata={**t.metadata, "scramble": tuple(dict.fromkeys([*have, *marks]))})


def swap_pair(a: SelectionTool, b: SelectionTool) -> tuple[SelectionTool, SelectionTool]:
    """Exchange the text after the first sentence of the function descriptions, and the blurbs."""
    def take(x: SelectionTool, y: SelectionTool) -> SelectionTool:
        ax, ay = api_of(x), api_of(y)
        api = replace(ax, rest=ay.description_rest(), tool_description=ay.tool_description,
                      api_description=ay.api_description)
        return replace(x, tool_description=y.tool_description, api_description=y.api_description,
                       metadata={**x.metadata, "toolbench": api.to_dict()})
    return take(a, b), take(b, a)


def ranked_tools(c: Cluster, rates: Rates | None, condition: str) -> list[int]:
    """Canonical indices, most-selected first (ties: lower index first)."""
    if rates is None or c.id not in rates:
        raise ToolbiasError(f"condition '{condition}' needs the base selection rates of cluster '{c.id}'",
                            fix="run the base condition first (same model, settings and store) or pass base rates")
    r = list(rates[c.id])
    if len(r) != c.k:
        raise ToolbiasError(f"base rates of cluster '{c.id}' have {len(r)} entries, the cluster has {c.k} tools")
    return sorted(range(c.k), key=lambda i: (-r[i], i))


def _fresh_ids(c: Cluster, idx: Sequence[int], rng: random.Random) -> dict[int, str]:
    taken = {_own_name(t).casefold() for t in c.tools}
    out: dict[int, str] = {}
    for i in idx:
        name = random_id(rng)
        while name in taken:
            name = random_id(rng)
        taken.add(name)
        out[i] = name
    return out


Perturb = Callable[[Cluster, random.Random, "Rates | None", int], Cluster]


def _random_names(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    ids = _fresh_ids(c, range(c.k), rng)
    return c.with_tools([rename(t, ids[i]) for i, t in enumerate(c.tools)])


def _shuffled_names(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    perm = list(range(c.k))
    rng.shuffle(perm)
    return c.with_tools([rename(t, _own_name(c.tools[perm[i]])) for i, t in enumerate(c.tools)])


def _random_names_top(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    ids = _fresh_ids(c, ranked_tools(c, rates, "random_names_top")[:top], rng)
    return c.with_tools([rename(t, ids[i]) if i in ids else t for i, t in enumerate(c.tools)])


def _scrambles(marks: tuple[str, ...]) -> Perturb:
    def perturb(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
        return c.with_tools([mark(t, marks) for t in c.tools])
    return perturb


def _targeted_desc_scramble(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    targets = set(ranked_tools(c, rates, "targeted_desc_scramble")[:top])
    return c.with_tools([mark(t, _MARKS["targeted_desc_scramble"]) if i in targets else t
                         for i, t in enumerate(c.tools)])


def _desc_swap(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    ranked = ranked_tools(c, rates, "desc_swap")
    hi, lo = ranked[0], ranked[-1]
    tools = list(c.tools)
    tools[hi], tools[lo] = swap_pair(tools[hi], tools[lo])
    return c.with_tools(tools)


def _full_scramble(c: Cluster, rng: random.Random, rates: Rates | None, top: int) -> Cluster:
    renamed = _random_names(c, rng, rates, top)
    return renamed.with_tools([mark(t, _MARKS["full_scramble"]) for t in renamed.tools])


desc_param_scramble = _scrambles(_MARKS["desc_param_scramble"])
desc_scramble = _scrambles(_MARKS["desc_scramble"])
param_desc_scramble = _scrambles(_MARKS["param_desc_scramble"])

_HERE = "toolbias.selection.perturb"
#: the built-in conditions, in the paper's order (the one registry idiom, :mod:`toolbias.base.plugins`)
PERTURBATIONS: Registry[Perturb] = Registry("selection perturbation", {
    "random_names": f"{_HERE}:_random_names", "shuffled_names": f"{_HERE}:_shuffled_names",
    "random_names_top": f"{_HERE}:_random_names_top", "desc_param_scramble": f"{_HERE}:desc_param_scramble",
    "desc_scramble": f"{_HERE}:desc_scramble", "param_desc_scramble": f"{_HERE}:param_desc_scramble",
    "targeted_desc_scramble": f"{_HERE}:_targeted_desc_scramble", "desc_swap": f"{_HERE}:_desc_swap",
    "full_scramble": f"{_HERE}:_full_scramble",
})
CONDITIONS = tuple(PERTURBATIONS)


def perturb_cluster(c: Cluster, condition: str, *, seed: int = 0, base_rates: Rates | None = None,
                    top: int = 1) -> Cluster:
    perturb = PERTURBATIONS.resolve(condition, where=f"condition '{condition}'",
                                    fix=f"use one of: {', '.join(CONDITIONS)}, or "
                                        f"{', '.join(FILE_CONDITIONS)}:FILE")
    return perturb(c, _rng(seed, condition, c.id), base_rates, top)


def _load_json(path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ToolbiasError("mapping file not found", where=path, fix="give the path of a JSON mapping file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ToolbiasError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None


def _load_mapping(path: str) -> dict[str, str]:
    data = _load_json(path)
    if not isinstance(data, dict):
        raise ToolbiasError("expected a JSON object mapping tool names to names", where=path)
    return {str(k).strip(): str(v).strip() for k, v in data.items()}


def _lookup(mapping: Mapping[str, str], t: SelectionTool) -> str | None:
    return mapping.get(tool_label(t)) or mapping.get(t.name)


def map_names(bench: Benchmark, mapping: Mapping[str, str]) -> Benchmark:
    """Rename tools by tool (provider) name or function name -> new tool name (see :func:`rename`)."""
    out = bench.with_clusters([c.with_tools([rename(t, new) if (new := _lookup(mapping, t)) else t
                                             for t in c.tools]) for c in bench.clusters])
    validate_benchmark(out)
    return out


def swap_descriptions(bench: Benchmark, mapping: Mapping[str, str]) -> Benchmark:
    """Each pair (key, value) of tools in one cluster exchanges descriptions and blurbs (:func:`swap_pair`)."""
    clusters = []
    for c in bench.clusters:
        index = {tool_label(t): i for i, t in enumerate(c.tools)}
        tools = list(c.tools)
        for a, b in mapping.items():
            if a in index and b in index:
                i, j = index[a], index[b]
                tools[i], tools[j] = swap_pair(c.tools[i], c.tools[j])
        clusters.append(c.with_tools(tools))
    return bench.with_clusters(clusters)


def scramble_named(bench: Benchmark, names: Sequence[str], marks: Sequence[str] = ("desc", "blurb")) -> Benchmark:
    """Targeted scramble: mark the tools whose tool name is in ``names``."""
    wanted = {n.strip() for n in names}
    return bench.with_clusters([c.with_tools([mark(t, marks) if tool_label(t) in wanted else t for t in c.tools])
                                for c in bench.clusters])


def all_but_one(bench: Benchmark, mapping: Mapping[str, str]) -> Benchmark:
    """Every tool not mapped to itself gets its mapped id and every scramble; the held-out ones keep all."""
    clusters = []
    for c in bench.clusters:
        tools = []
        for t in c.tools:
            new = _lookup(mapping, t)
            if new is not None and new == tool_label(t):
                tools.append(t)
                continue
            tools.append(mark(rename(t, new) if new else t, _MARKS["all_but_one"]))
        clusters.append(c.with_tools(tools))
    out = bench.with_clusters(clusters)
    validate_benchmark(out)
    return out


def apply_condition(bench: Benchmark, condition: str, *, seed: int = 0, base_rates: Rates | None = None,
                    top: int = 1) -> Benchmark:
    """The benchmark under one condition (``base`` returns it unchanged)."""
    if condition in ("", "base"):
        return bench
    kind, _, arg = condition.partition(":")
    if arg:
        replay = FILE_PERTURBATIONS.resolve(kind, where=f"condition '{condition}'",
                                            fix=f"use {', '.join(FILE_CONDITIONS)}:FILE")
        return replay(bench, arg)
    out = bench.with_clusters([perturb_cluster(c, condition, seed=seed, base_rates=base_rates, top=top)
                               for c in bench.clusters])
    validate_benchmark(out)
    return out


def _names_file(bench: Benchmark, path: str) -> Benchmark:
    return map_names(bench, _load_mapping(path))


def _desc_swap_file(bench: Benchmark, path: str) -> Benchmark:
    return swap_descriptions(bench, _load_mapping(path))


def _desc_scramble_file(bench: Benchmark, path: str) -> Benchmark:
    data = _load_json(path)
    return scramble_named(bench, list(data) if isinstance(data, (dict, list)) else [])


def _all_but_one_file(bench: Benchmark, path: str) -> Benchmark:
    return all_but_one(bench, _load_mapping(path))


#: conditions replayed from the authors' files (``KIND:FILE``)
FILE_PERTURBATIONS: Registry[Callable[[Benchmark, str], Benchmark]] = Registry("file perturbation", {
    "names": f"{_HERE}:_names_file", "desc_swap": f"{_HERE}:_desc_swap_file",
    "desc_scramble": f"{_HERE}:_desc_scramble_file", "all_but_one": f"{_HERE}:_all_but_one_file",
})


def perturbation_label(condition: str) -> str:
    """A stable label for records: file conditions keep only the file name."""
    kind, _, arg = condition.partition(":")
    return f"{kind}:{Path(arg).name}" if arg else condition


@dataclass(frozen=True)
class PerturbationEffect:
    """TV of a condition's API distribution to the base one and to uniform.

    ``tv_to_base``/``tv_to_uniform``: mean over clusters (the paper's figure: each cluster's
    distribution averaged over the condition's runs), ``*_std``: std over clusters (ddof 1);
    ``tv_to_base_runs``: each run's TV to the base (mean over clusters), ``tv_to_base_run_std``
    their std (ddof 1; NaN with one run)."""

    condition: str
    tv_to_base: float
    tv_to_uniform: float
    delta_pos: float
    per_cluster: Mapping[str, Mapping[str, float]]
    n_selections: int
    n_unparsed: int
    tv_to_base_std: float = float("nan")
    tv_to_uniform_std: float = float("nan")
    tv_to_base_runs: Mapping[str, float] = field(default_factory=dict)

    @property
    def tv_to_base_run_std(self) -> float:
        return _sd(list(self.tv_to_base_runs.values()))

    @property
    def label(self) -> str:
        return PAPER_LABELS.get(self.condition.partition(":")[0].removesuffix("[paper]"), self.condition)

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "paper_label": self.label, "tv_to_base": self.tv_to_base,
                "tv_to_base_std": _none(self.tv_to_base_std), "tv_to_uniform": self.tv_to_uniform,
                "tv_to_uniform_std": _none(self.tv_to_uniform_std), "tv_to_base_runs": dict(self.tv_to_base_runs),
                "tv_to_base_run_std": _none(self.tv_to_base_run_std), "delta_pos": self.delta_pos,
                "per_cluster": {k: dict(v) for k, v in self.per_cluster.items()},
                "n_selections": self.n_selections, "n_unparsed": self.n_unparsed}


def _none(x: float) -> float | None:
    return None if math.isnan(x) else x


def _sd(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def mean_distribution(per_run_counts: Sequence[Sequence[float]]) -> list[float]:
    """The average over runs of each run's normalised distribution."""
    dists = [[c / sum(counts) for c in counts] for counts in per_run_counts if sum(counts) > 0]
    return [sum(d[i] for d in dists) / len(dists) for i in range(len(dists[0]))]


def distribution_effect(condition: str, base: Mapping[str, Sequence[float]],
                        runs: Mapping[str, Mapping[str, Sequence[float]]], *, delta_pos: float = float("nan"),
                        n_selections: int = 0, n_unparsed: int = 0) -> PerturbationEffect:
    """The effect of a condition given the base distribution per cluster and the condition's API counts per
    run and cluster (the paper's measure; see :class:`PerturbationEffect`)."""
    clusters = sorted({c for r in runs.values() for c in r if c in base}, key=lambda x: (len(x), x))
    if not clusters:
        raise ToolbiasError(f"condition '{condition}' shares no cluster with the base run")
    per: dict[str, dict[str, float]] = {}
    for c in clusters:
        dist = mean_distribution([r[c] for r in runs.values() if c in r])
        per[c] = {"tv_to_base": tv_distance(dist, base[c]), "tv_to_uniform": tv_from_uniform(dist),
                  "base_tv_to_uniform": tv_from_uniform(base[c])}
    by_run = {}
    for run, counts in runs.items():
        shared = [c for c in clusters if c in counts and sum(counts[c]) > 0]
        if shared:
            by_run[run] = sum(tv_distance(counts[c], base[c]) for c in shared) / len(shared)
    to_base = [p["tv_to_base"] for p in per.values()]
    to_uniform = [p["tv_to_uniform"] for p in per.values()]
    return PerturbationEffect(condition=condition, tv_to_base=sum(to_base) / len(to_base),
                              tv_to_uniform=sum(to_uniform) / len(to_uniform), delta_pos=delta_pos,
                              per_cluster=per, n_selections=n_selections, n_unparsed=n_unparsed,
                              tv_to_base_std=_sd(to_base), tv_to_uniform_std=_sd(to_uniform), tv_to_base_runs=by_run)


def perturbation_effects(base: BiasReport, conditions: Mapping[str, BiasReport]) -> list[PerturbationEffect]:
    """Each condition against the base (its distribution averaged over the base's runs)."""
    base_dist = {c: mean_distribution(list(runs.values())) for c, runs in _run_counts(base).items()}
    out = []
    for name, rep in conditions.items():
        per_run: dict[str, dict[str, Sequence[float]]] = {}
        for c, runs in _run_counts(rep).items():
            for run, counts in runs.items():
                per_run.setdefault(run, {})[c] = counts
        out.append(distribution_effect(name, base_dist, per_run, delta_pos=rep.delta_pos,
                                       n_selections=rep.n_selections, n_unparsed=rep.n_unparsed))
    return out


def _run_counts(rep: BiasReport) -> dict[str, dict[str, Sequence[float]]]:
    """cluster -> run -> API counts (reports without per-run counts: the pooled counts as one run)."""
    out: dict[str, dict[str, Sequence[float]]] = {}
    for c, v in rep.per_cluster.items():
        runs = v.get("api_counts_by_run") or {"all": v["api_counts"]}
        out[c] = {str(r): counts for r, counts in runs.items()}
    return out
