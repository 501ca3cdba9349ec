"""The paper's own numbers, recomputed from the authors' logged selections (PROTOCOL.md 1.9, 3, 6).

``selection_stats.json`` holds every per-run record ``[query_id, cluster_id, api_in_cluster,
position_in_list]`` (1-based) under the run's file stem; ``tv_results_vary_k.json`` the K
sweep's δ per ordering, K and run. From them:

- :func:`main_table`: δ_API, δ_pos, δ_model per model, mean and population std (ddof 0) over
  the three runs, exactly as the paper's table;
- :func:`sweep`: the temperature, top-p, model-size, system-prompt and order sweeps (mean
  δ_model over runs, std ddof 1, as the sweep figures);
- :func:`perturbation_table`: TV to the base distribution per perturbation for Gemini and
  GPT-4.1 mini (the perturbation figure);
- :func:`k_sweep`: δ divided by its maximum 1 - 1/K, in %, mean and std (ddof 1) over runs,
  the random K = 5 point copied to both ranked orders (the K-sweep figure);
- :func:`model_agreement`: Pearson r between the models' 50 per-API selection rates (the
  model-correlation heatmap).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from .metrics import Agreement, BiasReport, Selection, agreement, bias_report
from .perturb import PerturbationEffect, distribution_effect

STATS_FILE = "selection_stats.json"
K_FILE = "tv_results_vary_k.json"
PREFIX = "api_selection_stats_"
Stats = Mapping[str, list[Selection]]


def _x3(stem: str) -> list[str]:
    return [stem, f"{stem}-2", f"{stem}-3"]


#: the paper's main table: model -> its three runs
MAIN_TABLE: dict[str, list[str]] = {
    "Qwen3 235B": _x3("qwen-235b"), "GPT-3.5-turbo": _x3("chatgpt_no_func"), "Gemini 2.5 Flash": _x3("gemini"),
    "ToolLLaMA": _x3("toolllama"), "Claude 3.5 Sonnet": _x3("claude"), "DeepSeek-V3.2-Exp": _x3("deepseek"),
    "GPT-4.1 mini": _x3("chatgpt_4")}

#: sweeps: name -> (x label, [(x, runs)])
SWEEPS: dict[str, tuple[str, list[tuple[str, list[str]]]]] = {
    "temperature": ("temperature", [("0", ["chatgpt-temp-0", "chatgpt-temp-0-1", "chatgpt-temp-0-2"]),
                                    ("0.5", ["chatgpt_base", "chatgpt-temp-0.5-2", "chatgpt-temp-0.5-3"]),
                                    ("1", _x3("chatgpt-temp-1")), ("2", ["chatgpt-temp-2", "chatgpt-temp-2-2"])]),
    "top_p": ("top-p", [("0.7", ["chatgpt-top-p-0.7"]), ("0.9", ["chatgpt-top-p-0.9"]), ("1", ["chatgpt_base"])]),
    "model_size": ("Qwen3 size", [("1.7B", _x3("qwen-1.7b")), ("4B", _x3("qwen-4b")), ("8B", _x3("qwen-8b")),
                                  ("14B", _x3("qwen-14b")), ("32B", _x3("qwen-32b")),
                                  ("235B", ["old/api_selection_stats_qwen-235b-old"])]),
    "system_prompt": ("system prompt", [("base", ["chatgpt_base"]), ("similar", ["chatgpt_sim"]),
                                        ("adj", ["chatgpt_adj"])]),
    "order": ("order", [("cyclic", ["chatgpt_base"]), ("random", ["chatgpt_random"])]),
    "presentation": ("GPT-3.5 presentation", [("text", ["chatgpt_no_func"]), ("function calling", ["chatgpt_base"])]),
    "mitigation": ("GPT-4.1 mini", [("base", ["chatgpt_4"]), ("mitigated", ["chatgpt_4_mitigated"])]),
}

#: the perturbation figure: label -> (Gemini runs, GPT-4.1 mini runs)
PERTURBATIONS: dict[str, tuple[list[str], list[str]]] = {
    "Rand. Name": (_x3("gemini-rand-id"), _x3("chatgpt-rand-id")),
    "Shuff. Name": (_x3("gemini-shuffle-name"), _x3("chatgpt-shuffle-name")),
    "Targ. Name": (_x3("gemini-rand-id-prom"), _x3("chatgpt-rand-id-prom")),
    "Desc. + Param.": (_x3("gemini-desc-param-scramble"), _x3("chatgpt-desc-param-scramble")),
    "Desc.": (_x3("gemini-desc-scramble"), _x3("chatgpt-desc-scramble")),
    "Targ. Desc.": (_x3("gemini_desc_prom"), _x3("chatgpt_desc_prom")),
    "Param.": (_x3("gemini-param-scramble"), _x3("chatgpt-param-scramble")),
    "Swap. Desc.": (["answer_gemini_desc_swap", "answer_gemini_desc_swap-2", "gemini_desc_swap-3"],
                    _x3("chatgpt_desc_swap")),
    "Full": (["gemini_full_scramble"], ["chatgpt_full_scramble"]),
    "AbO": (["gemini_abo"], []),
}
PERTURBATION_BASES = ("gemini", "chatgpt_4")

#: the model-correlation heatmap: label -> run-1 file
AGREEMENT_RUNS = {"GPT-3.5 (Func.)": "chatgpt_base", "GPT-4.1 mini": "chatgpt_4", "Claude": "claude",
                  "Gemini": "gemini", "DeepSeek": "deepseek", "Qwen3 235B": "qwen-235b", "ToolLLaMA": "toolllama"}


def load_selection_stats(path: str | Path) -> dict[str, list[Selection]]:
    """run (file stem without the ``api_selection_stats_`` prefix) -> its selections (0-based api/position)."""
    p = Path(path)
    if p.is_dir():
        p = p / STATS_FILE
    if not p.is_file():
        raise ToolbiasError("selection stats not found", where=str(p),
                            fix=f"point at the folder holding {STATS_FILE} (../shared/data/biasbusters)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        runs = data["runs"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ToolbiasError(f"not a selection-stats file ({exc})", where=str(p)) from None
    out: dict[str, list[Selection]] = {}
    for stem, rows in runs.items():
        name = stem.removeprefix(PREFIX)
        out[name] = [Selection(run=name, cluster=str(c), query=str(q), api=int(a) - 1, position=int(pos) - 1, k=5)
                     for q, c, a, pos in rows]
    return out


def _runs(stats: Stats, stems: Sequence[str]) -> list[Selection]:
    missing = [s for s in stems if s not in stats]
    if missing:
        raise ToolbiasError(f"runs missing from the stats: {missing}")
    return [sel for s in stems for sel in stats[s]]


def report(stats: Stats, stems: Sequence[str], label: str = "") -> BiasReport:
    """The bias report over the given runs (empty runs, e.g. the missing third GPT-4.1 mini runs, left out)."""
    return bias_report(_runs(stats, [s for s in stems if stats.get(s)]), label=label)


def main_table(stats: Stats) -> dict[str, BiasReport]:
    return {model: report(stats, stems, model) for model, stems in MAIN_TABLE.items()}


def _sd(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def sweep(stats: Stats, name: str) -> list[dict[str, Any]]:
    """One point per setting: mean δ_API, δ_pos, δ_model over runs and the std of δ_model (ddof 1)."""
    if name not in SWEEPS:
        raise ToolbiasError(f"unknown sweep '{name}'", fix=f"use one of: {', '.join(SWEEPS)}")
    points = []
    for x, stems in SWEEPS[name][1]:
        rep = report(stats, stems, x)
        models = [v["delta_model"] for v in rep.per_run.values()]
        points.append({"x": x, "runs": rep.n_runs, "delta_api": rep.delta_api, "delta_pos": rep.delta_pos,
                       "delta_model": rep.delta_model, "std_delta_model": _sd(models)})
    return points


def _counts_by_cluster(sels: Sequence[Selection]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for s in sels:
        out.setdefault(s.cluster, [0.0] * s.k)[s.api] += 1
    return out


def perturbation_table(stats: Stats) -> dict[str, dict[str, PerturbationEffect]]:
    """label -> {"Gemini"|"GPT-4.1 mini": effect} (TV to the base model's run 1, as the paper's figure)."""
    out: dict[str, dict[str, PerturbationEffect]] = {}
    for (model, base_stem), idx in zip((("Gemini", PERTURBATION_BASES[0]), ("GPT-4.1 mini", PERTURBATION_BASES[1])),
                                       (0, 1), strict=True):
        base = {c: [x / sum(v) for x in v] for c, v in _counts_by_cluster(stats[base_stem]).items()}
        for label, runs in PERTURBATIONS.items():
            stems = [s for s in runs[idx] if stats.get(s)]
            if not stems:
                continue
            per_run = {s: _counts_by_cluster(stats[s]) for s in stems}
            out.setdefault(label, {})[model] = distribution_effect(label, base, per_run,
                                                                   n_selections=sum(len(stats[s]) for s in stems))
    return out


def load_k_results(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / K_FILE
    if not p.is_file():
        raise ToolbiasError("K-sweep results not found", where=str(p), fix=f"point at the folder holding {K_FILE}")
    data: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    return data


def k_sweep(results: Mapping[str, Any]) -> dict[str, dict[int, dict[str, float]]]:
    """order -> K -> mean and std (ddof 1) over runs of δ_API, δ_pos and δ_model in % of their maximum 1 - 1/K."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for order, by_k in results.items():
        for k_text, runs in by_k.items():
            k = int(k_text)
            scale = 100 / (1 - 1 / k)
            api = [r["api_tv"] * scale for r in runs.values()]
            pos = [r["pos_tv"] * scale for r in runs.values()]
            model = [(a + b) / 2 for a, b in zip(api, pos, strict=True)]
            out.setdefault(order, {})[k] = {"api": sum(api) / len(api), "api_std": _sd(api),
                                            "pos": sum(pos) / len(pos), "pos_std": _sd(pos),
                                            "model": sum(model) / len(model), "model_std": _sd(model),
                                            "runs": len(runs)}
    if "random" in out and 5 in out["random"]:
        for order in ("b2w", "w2b"):
            out.setdefault(order, {}).setdefault(5, dict(out["random"][5]))
    return {o: dict(sorted(v.items())) for o, v in out.items()}


def model_agreement(stats: Stats) -> Agreement:
    """Pearson (and Spearman) r between the models' per-API selection rates (run-1 files)."""
    return agreement({label: dict(report(stats, [stem]).api_rates()) for label, stem in AGREEMENT_RUNS.items()})
