"""``toolbias reproduce selection``: the paper's protocol on a new model, placed in the paper's table.

:func:`reproduce_selection` runs the model under ``--paper`` settings (:mod:`.backbones`: the
backbone's prompt, presentation, stop, token cap, re-ask rule, thinking switch, temperature 0.5,
top-p 1, no seed, 3 runs) on a benchmark (the authors' ``biasbusters:DIR``, or a sample of it:
the first N queries of each cluster), stores every record (resumable), and reports:

- ``main``: δ_API, δ_pos, δ_model (mean over runs, population std over runs, as the paper's table)
  with 95% bootstrap intervals over queries (:mod:`.intervals`), beside the paper's seven models
  (:func:`paper_values`: ``data/paper_values.json``, each value with its source);
- where run: one row per temperature (the paper's temperature figure), per system prompt (its
  prompt figure) and per perturbation (TV of the API distribution to the base run's, the paper's
  perturbation figure, the authors' replayed files under ``--paper``), each beside the paper's values.

Nothing here prints; the CLI (:mod:`toolbias.cli.reproduce_selection`) formats the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ..providers.base import ModelAPI
from . import study
from .intervals import with_intervals
from .metrics import BiasReport
from .records import SelectionRecord
from .runner import report_of
from .settings import RunSettings
from .store import SelectionStore
from .types import Benchmark

Note = Callable[[str], None]


@lru_cache(maxsize=1)
def paper_values() -> dict[str, Any]:
    """The paper's published values (``selection/data/paper_values.json``), each section with its ``source``."""
    text = resources.files("toolbias.selection").joinpath("data/paper_values.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _report(records: Sequence[SelectionRecord], label: str) -> BiasReport | None:
    if not any(r.ok for r in records):
        return None
    sels = [s for s in (r.to_selection() for r in records) if s is not None]
    return with_intervals(report_of(records, label=label), sels, key=label)


def _row(report: BiasReport | None) -> dict[str, Any]:
    if report is None:
        return {"delta_api": None, "delta_pos": None, "delta_model": None, "error": "no parsed selection"}
    return {"delta_api": report.delta_api, "delta_pos": report.delta_pos, "delta_model": report.delta_model,
            "std": dict(report.std), "intervals": report.extra.get("intervals", {}),
            "n_runs": report.n_runs, "n_selections": report.n_selections, "n_unparsed": report.n_unparsed}


@dataclass
class Reproduction:
    """A model's run of the paper's protocol and the paper's values beside it."""

    model: str
    backbone: str
    benchmark: str
    queries_per_cluster: int | None
    settings: dict[str, Any]
    main: dict[str, Any]
    temperature: list[dict[str, Any]] = field(default_factory=list)
    prompt: list[dict[str, Any]] = field(default_factory=list)
    perturbation: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def main_table(self) -> list[dict[str, Any]]:
        """The paper's seven rows and this model's, sorted by δ_model as the paper's table."""
        rows = [{**r, "source": "paper"} for r in paper_values()["main_table"]["rows"]]
        mine = {"model": self.model, "backbone": self.backbone, **self.main, "source": "this run"}
        return sorted([*rows, mine], key=lambda r: (r["delta_model"] is None, r["delta_model"] or 0.0))

    def to_dict(self) -> dict[str, Any]:
        values = paper_values()
        out: dict[str, Any] = {
            "model": self.model, "backbone": self.backbone, "benchmark": self.benchmark,
            "queries_per_cluster": self.queries_per_cluster, "settings": self.settings, "main": self.main,
            "main_table": self.main_table(), "main_table_source": values["main_table"]["source"],
            "notes": list(self.notes)}
        for name, rows, paper in (("temperature", self.temperature, values["temperature"]),
                                  ("prompt", self.prompt, values["system_prompt"]),
                                  ("perturbation", self.perturbation, values["perturbation"])):
            if rows:
                out[name] = {"rows": rows, "paper": paper}
        return out


def _paper_temperature(t: float) -> float | None:
    return next((r["delta_model"] for r in paper_values()["temperature"]["rows"] if abs(r["temperature"] - t) < 1e-9),
                None)


def _paper_prompt(name: str) -> dict[str, Any] | None:
    return next((r for r in paper_values()["system_prompt"]["rows"] if r["prompt"] == name), None)


def _paper_perturbation(condition: str) -> dict[str, Any] | None:
    return next((r for r in paper_values()["perturbation"]["rows"] if r["condition"] == condition), None)


def reproduce_selection(model: ModelAPI, bench: Benchmark, settings: RunSettings, *, store: SelectionStore,
                        queries_per_cluster: int | None = None, temperatures: Sequence[float] = (),
                        prompts: Sequence[str] = (), perturbations: Sequence[str] = (), concurrency: int = 8,
                        progress: study.GroupProgress | None = None,
                        on_note: Note | None = None) -> Reproduction:
    """Run the paper's protocol (``settings``: :func:`.backbones.resolve_paper`'s) and the optional rows."""
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        if on_note is not None:
            on_note(text)

    base = study.run_sweep(model, bench, settings, store=store, concurrency=concurrency, progress=progress)[0]
    main = _row(_report(base.records, f"{model.spec} (paper protocol)"))
    result = Reproduction(model=model.spec, backbone=settings.backbone_label, benchmark=bench.name,
                          queries_per_cluster=queries_per_cluster, settings=settings.to_dict(), main=main,
                          notes=notes)
    if settings.backbone is not None and settings.backbone.name != "function" and (temperatures or prompts):
        note("the paper's temperature and prompt rows are GPT-3.5 runs with native function calling "
             "(--backbone function); this model ran the " + settings.backbone.name + " backbone")
    for t in temperatures:
        group = study.run_sweep(model, bench, settings, store=store, temperatures=[t], concurrency=concurrency,
                                progress=progress)[0]
        result.temperature.append({"temperature": t, **_row(_report(group.records, f"T={t:g}")),
                                   "paper_delta_model": _paper_temperature(t)})
    for p in prompts:
        one = replace(settings, prompt=p, backbone=settings.backbone.with_overrides(prompt=p)
                      if settings.backbone is not None else None)
        group = study.run_sweep(model, bench, one, store=store, concurrency=concurrency, progress=progress)[0]
        paper = _paper_prompt(p)
        result.prompt.append({"prompt": p, **_row(_report(group.records, f"prompt={p}")),
                              "paper": {k: paper[k] for k in ("delta_api", "delta_pos", "delta_model")}
                              if paper else None})
    if perturbations:
        found = study.in_session([model], lambda: study.aperturb(model, bench, settings, list(perturbations),
                                                                 store=store, concurrency=concurrency))
        for effect in found.effects:
            cond = effect.condition.removesuffix("[paper]")
            paper = _paper_perturbation(cond)
            result.perturbation.append({"condition": effect.condition, "label": effect.label,
                                        "tv_to_base": effect.tv_to_base, "tv_to_base_std": effect.tv_to_base_std,
                                        "tv_to_uniform": effect.tv_to_uniform,
                                        "n_selections": effect.n_selections,
                                        "paper_tv_vs_base": paper["tv_vs_base"] if paper else None})
        missing = [c for c in perturbations if not any(e.condition.removesuffix("[paper]") == c
                                                       for e in found.effects)]
        if missing:
            note(f"no parsed selection under: {', '.join(missing)}")
    return result


__all__ = ["Reproduction", "paper_values", "reproduce_selection"]
