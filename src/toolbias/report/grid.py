"""Everything a report shows, computed once from a store: the grid cells, paired
differences, the schema-form gap, compliance probes, difficulty prediction and the
variant/native function-count ratios. Tables, figures, JSON and HTML all read a
:class:`ReportData`; none of them touches the store again (except the HTML
drill-down, which fetches the few episode records it shows)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import StoreError, ToolbiasError
from ..integrations.tau2_results import TAU2_KIND
from ..store import Store, episodes_dataframe
from ..study.probes import ProbeCell, compliance_cells
from ..study.scoring import FAILURE_ORDER
from ..study.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    CellStats,
    Difference,
    PredictionSummary,
    SampleEstimate,
    cell_stats,
    difficulty_prediction,
    model_differences,
    schema_form_gap,
    variant_differences,
)
from . import tally
from .live import live_table, load_conversations
from .paper_tables import paper_tables, query_weighted_ratio
from .stored import stored_classes, stored_function_ratios, stored_steps, stored_weighted_ratios
from .tau2_table import TABLE_KEY, TAU2_CATALOG, tau2_table

FAILURE_MODES: tuple[str, ...] = tuple(m.value for m in FAILURE_ORDER)
#: the store kinds whose records are toolbias episodes (the HTML drill-down shows these)
DRILL_DOWN_KINDS = ("task", "probe")


@dataclass
class ReportSettings:
    seed: int = 0
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    sample_n: int = 36
    repeats: int = 200
    baseline: str = "native"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ReportData:
    store: str
    settings: ReportSettings
    cells: list[CellStats]
    variant_diffs: list[Difference]
    model_diffs: list[Difference]
    gap: list[Difference]
    probes: list[ProbeCell]
    difficulty: list[SampleEstimate]
    prediction: list[PredictionSummary]
    function_ratios: dict[str, float]
    models: list[str]
    variants: list[str]
    catalogs: list[str]
    notes: list[str] = field(default_factory=list)
    #: the study filter the report was built with (None: every study in the store)
    study: str | None = None
    #: native tool uid -> class, as the studies stored it (None: not stored, or catalogs disagree)
    classes: dict[str, str] | None = None
    #: variant -> its steps ``[[op, params], ...]`` as the studies ran them (older studies: absent)
    variant_steps: dict[str, list[Any]] = field(default_factory=dict)
    #: the paper's arm-comparison tables (:mod:`toolbias.report.paper_tables`): merge_encodings
    #: (Table 6), convention_mixture (Table 7), class_controls (Table 8); tau2_bench (Table 9,
    #: :mod:`toolbias.report.tau2_table`)
    paper_tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: live conversations through ``toolbias proxy --store``, per study and variant (:mod:`toolbias.report.live`)
    live: list[dict[str, Any]] = field(default_factory=list)

    # -- lookups ----------------------------------------------------------------
    @property
    def conditions(self) -> list[tuple[str, str]]:
        """(control, condition) pairs present among task cells, strict/base first."""
        pairs = dict.fromkeys((c.control, c.condition) for c in self.cells)
        return sorted(pairs, key=lambda p: (p[0] != "strict", p[1] != "base", p))

    def cell(self, model: str, variant: str, control: str, condition: str) -> CellStats | None:
        index: dict[tuple[str, str, str, str], CellStats] | None = self.__dict__.get("_cell_index")
        if index is None:
            index = self.__dict__["_cell_index"] = {c.key: c for c in self.cells}
        return index.get((model, variant, control, condition))

    # -- machine-readable ---------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return _clean({
            "store": self.store,
            "settings": self.settings.to_dict(),
            "models": self.models,
            "variants": self.variants,
            "catalogs": self.catalogs,
            "failure_mode_order": list(FAILURE_MODES),
            "cells": [c.to_dict() for c in self.cells],
            "differences": {"variant_vs_native": [d.to_dict() for d in self.variant_diffs],
                            "model_vs_model": [d.to_dict() for d in self.model_diffs]},
            "gap": [_gap_dict(d) for d in self.gap],
            "probes": [p.to_dict() for p in self.probes],
            "difficulty": {"n": self.settings.sample_n, "repeats": self.settings.repeats,
                           "estimates": [e.to_dict() for e in self.difficulty],
                           "summaries": [s.to_dict() for s in self.prediction]},
            "function_ratios": self.function_ratios,
            "variant_steps": self.variant_steps,
            **self.paper_tables,
            "live": self.live,
            "notes": self.notes,
        })


def _gap_dict(d: Difference) -> dict[str, Any]:
    out = d.to_dict()
    out.update(model=d.a["model"], variant=d.a["variant"], condition=d.a["condition"], lenient=d.success_a,
               strict=d.success_b, gap=d.diff)
    return out


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(data: ReportData) -> str:
    return json.dumps(data.to_json(), indent=2, ensure_ascii=False, allow_nan=False)


# -- building -----------------------------------------------------------------

def open_store(path: str | Path) -> Store:
    """Open an existing store (never create an empty one by mistake)."""
    p = Path(path)
    if not p.exists():
        raise StoreError("store not found", where=str(p), fix="run `toolbias run --store FILE` first or pass --store")
    return Store(p)


def variant_order(names: Iterable[str], baseline: str = "native") -> list[str]:
    """Registry order (the paper's order) for registered names, then the rest as given."""
    names = list(dict.fromkeys(names))
    try:
        from ..variants import registry

        reg = list(registry())
    except Exception:  # a broken registry must not stop a report
        reg = []
    rank = {n: i for i, n in enumerate(reg)}
    first = [baseline] if baseline in names else []
    rest = [n for n in names if n != baseline]
    return first + sorted(rest, key=lambda n: (n not in rank, rank.get(n, 0), names.index(n)))


def function_ratios(catalog_spec: str, variants: Sequence[str], baseline: str = "native",
                    weights: Mapping[str, float] | None = None,
                    steps: Mapping[str, Sequence[Any]] | None = None) -> tuple[dict[str, float], list[str]]:
    """variant -> the x-axis of Figure 3 on the study's catalog: with ``weights`` (domain ->
    the study's tasks there), the paper's query-weighted mean over domains of the functions an
    episode sees per native function (:func:`~toolbias.report.paper_tables.query_weighted_ratio`);
    without, ``function_count(variant) / function_count(native)`` (every distinct tool once).
    A variant is built from its stored ``steps`` (``[[op, params], ...]`` as the study ran it),
    else from the registry; one with neither is skipped with a note."""
    from ..catalog import load_catalog
    from ..variants import build_codec, get_variant, registry
    from ..variants.codec import Codec
    from ..variants.spec import VariantSpec

    notes: list[str] = []
    try:
        catalog = load_catalog(catalog_spec)
    except ToolbiasError as exc:
        return {}, [f"function-count ratios need the study's catalog: {exc.what}"]
    native = Codec(catalog, []).function_count()
    if native == 0:
        return {}, notes
    out: dict[str, float] = {}
    def ratio(spec: VariantSpec) -> float:
        codec = build_codec(catalog, spec)
        weighted = query_weighted_ratio(codec, weights) if weights else None
        return weighted if weighted is not None else codec.function_count() / native

    for name in variants:
        ran = (steps or {}).get(name)
        candidates = [VariantSpec(name, tuple({"op": op, **(params or {})} for op, params in ran))] if ran else []
        # a rule-built variant (a recipe) stores the steps its rule gave on the first domain; on a
        # catalog of isolated domains (BFCL entries) the registry's spec rebuilds it per domain
        if name in registry():
            candidates.append(get_variant(name))
        for spec in candidates:
            try:
                out[name] = ratio(spec)
                break
            except ToolbiasError:
                continue
        else:
            notes.append(f"variant '{name}' cannot be rebuilt on this catalog: no function-count ratio")
    return out, notes


def build_report(store: str | Path | Store, *, settings: ReportSettings | None = None,
                 catalog: str | None = None, study: str | None = None) -> ReportData:
    """Compute every section of the report from a store. Task episodes are counted in SQL
    (:mod:`toolbias.report.tally`), never loaded one by one; probes, live conversations and
    tau2-bench episodes (Table 9) are read as rows."""
    settings = settings or ReportSettings()
    own = not isinstance(store, Store)
    st = open_store(store) if not isinstance(store, Store) else store
    try:
        everything = st.tallies(kind="task")
        counted = tally.select(everything, study)
        imported = episodes_dataframe(st, kind=TAU2_KIND)  # tau2 results files (Table 9 only)
        # tau2-bench in process (Table 9): read as rows, where the tallies name a tau2 catalog
        in_process = any(t.catalog.startswith(TAU2_CATALOG) for t in everything)
        tau2 = episodes_dataframe(st, kind="task", catalog_prefix=TAU2_CATALOG) if in_process else imported[:0]
        probe_rows = [r.__dict__ for r in st.rows(kind="probe")]
        infra = st.count("infra_error")
        metas = st.study_meta()
        conversations = load_conversations(st, study)  # the proxy's live conversations
    finally:
        if own:
            st.close()
    if study is not None:
        tau2 = tau2[tau2["study"] == study]
        imported = imported[imported["study"] == study]
        probe_rows = [r for r in probe_rows if r["study"].startswith(study)]
    table = tally.cell_table(counted)
    notes: list[str] = []
    if infra:
        notes.append(f"{infra} episodes ended in infrastructure errors and are left out; re-run the same "
                     "command to retry them")
    seed, n_res, conf = settings.seed, settings.n_resamples, settings.confidence
    cells = cell_stats(table, seed=seed, n_resamples=n_res, confidence=conf)
    # cells come in the order their first episodes were stored: so do their variants and models
    df_variants = list(dict.fromkeys(k[1] for k in table))
    models = list(dict.fromkeys([k[0] for k in table] + [str(r["model"]) for r in probe_rows]))
    variants = variant_order(df_variants + [str(r["variant"]) for r in probe_rows],
                             settings.baseline)
    order_v = {v: i for i, v in enumerate(variants)}
    order_m = {m: i for i, m in enumerate(models)}
    cells.sort(key=lambda c: (c.control != "strict", c.condition != "base", c.control, c.condition,
                              order_v[c.variant], order_m[c.model]))
    success = {c.key: c.success for c in cells}
    probes = compliance_cells(probe_rows, task_success=success, seed=seed, n_resamples=n_res, confidence=conf)
    probes.sort(key=lambda p: (order_m[p.model], order_v[p.variant], p.control, p.condition))
    compliance = {p_key(p): p.compliance for p in probes}
    difficulty, prediction = difficulty_prediction(
        table, n=settings.sample_n, seed=settings.seed, repeats=settings.repeats, confidence=settings.confidence,
        compliance=compliance) if table else ([], [])
    catalogs = sorted({str(t.catalog) for t in counted} | {str(r["catalog"]) for r in probe_rows})
    if len(catalogs) > 1:
        notes.append(f"the store mixes catalogs ({', '.join(catalogs)}): cells pool them by task id")
    task_variants = [v for v in variants if v in set(df_variants)]
    task_studies = sorted({str(t.study) for t in counted})
    ratios: dict[str, float] = {}
    if catalog is None and table:  # what the studies stored; rebuilt from the registry for older studies
        ratios, more = stored_function_ratios(metas, task_studies, task_variants)
        notes.extend(more)
    all_studies = task_studies + sorted({str(r["study"]) for r in probe_rows})
    steps, more = stored_steps(metas, all_studies, variants)
    notes.extend(more)
    spec = catalog or (catalogs[0] if len(catalogs) == 1 else None)
    weights = tally.tasks_per_domain(counted) if table else None  # queries per domain: Figure 3's weights
    # the paper's query-weighted ratio needs per-domain counts: the ones the studies stored (of one
    # catalog, none given instead); else rebuilt (from the stored steps) where the catalog loads; the
    # stored whole-catalog ratio otherwise
    weighted = stored_weighted_ratios(metas, task_studies, task_variants, weights) \
        if weights and spec and catalog is None else {}
    missing = [v for v in task_variants if v not in weighted] if weights else [v for v in task_variants
                                                                                if v not in ratios]
    rebuilt: dict[str, float] = {}
    if spec and missing:
        rebuilt, more = function_ratios(spec, missing, settings.baseline, weights, steps)
        notes.extend(more)
    if spec and (weighted or missing):
        ratios = {v: weighted[v] if v in weighted else rebuilt[v] if v in rebuilt else ratios[v]
                  for v in task_variants if v in weighted or v in rebuilt or v in ratios}
    if len(imported):
        notes.append(f"Table 9 includes {len(imported)} simulations imported from tau2 results files; the other "
                     "sections show toolbias's own episodes")
    if table and settings.baseline not in set(df_variants):
        notes.append(f"no '{settings.baseline}' episodes: no variant-minus-native differences")
    return ReportData(
        store=str(st.path), settings=settings, cells=cells,
        variant_diffs=variant_differences(table, baseline=settings.baseline, seed=seed, n_resamples=n_res,
                                          confidence=conf),
        model_diffs=model_differences(table, seed=seed, n_resamples=n_res, confidence=conf),
        gap=schema_form_gap(table, seed=seed, n_resamples=n_res, confidence=conf), probes=probes,
        difficulty=difficulty, prediction=prediction, function_ratios=ratios, models=models, variants=variants,
        catalogs=catalogs, notes=notes, study=study,
        classes=stored_classes(metas, all_studies), variant_steps=steps,
        paper_tables={**paper_tables(table, seed=seed, n_resamples=n_res, confidence=conf),
                      TABLE_KEY: tau2_table(tau2, imported, seed=seed, n_resamples=n_res, confidence=conf)},
        live=live_table(conversations, order=variant_order([c["variant"] for c in conversations], settings.baseline),
                        seed=seed, n_resamples=n_res, confidence=conf))


def p_key(p: ProbeCell) -> tuple[str, str, str, str]:
    return (p.model, p.variant, p.control, p.condition)


# -- episodes for the drill-down ------------------------------------------------

@dataclass
class EpisodeView:
    """One stored episode as the drill-down shows it."""

    key: str
    kind: str
    model: str
    variant: str
    control: str
    condition: str
    task_id: str
    success: bool
    failure_mode: str | None
    record: dict[str, Any]

    @property
    def anchor(self) -> str:
        return f"ep-{self.key[:16]}"


class _Candidate(NamedTuple):
    key: str
    kind: str
    model: str
    variant: str
    control: str
    condition: str
    task_id: str
    success: bool | None
    failure_mode: str | None


def _drill_down_candidates(st: Store, *, per_mode: int, successes: int,
                           study: str | None) -> tuple[list[_Candidate], int]:
    """In the order they were stored, the first ``per_mode`` episodes of each cell, kind and
    failure mode and the first ``successes`` successes of each cell and kind (chosen in SQL: no
    row but these is read), and how many finished episodes of :data:`DRILL_DOWN_KINDS` there are."""
    where = f"status='done' AND kind IN ({','.join('?' * len(DRILL_DOWN_KINDS))})"
    args: list[Any] = list(DRILL_DOWN_KINDS)
    if study is not None:
        where += " AND substr(study, 1, ?)=?"
        args += [len(study), study]
    ok = "COALESCE(success, 0) != 0"
    fields = "key, kind, model, variant, control, condition, task_id, success, failure_mode"
    q = (f"SELECT {fields} FROM (SELECT rowid AS rid, {fields}, ROW_NUMBER() OVER (PARTITION BY kind, model, "
         f"variant, control, condition, {ok}, CASE WHEN {ok} THEN NULL ELSE failure_mode END ORDER BY rowid) "
         f"AS nth FROM episodes WHERE {where}) WHERE nth <= CASE WHEN {ok} THEN ? ELSE ? END ORDER BY rid")
    chosen = [_Candidate(key, kind, model, variant, control, condition, task_id,
                         None if success is None else bool(success), mode)
              for key, kind, model, variant, control, condition, task_id, success, mode
              in st.query(q, [*args, successes, per_mode])]
    total = int(st.query(f"SELECT COUNT(*) FROM episodes WHERE {where}", args)[0][0])
    return chosen, total


def select_episodes(store: str | Path | Store, *, per_mode: int = 5, successes: int = 1,
                    limit: int = 1000, study: str | None = None) -> tuple[list[EpisodeView], int]:
    """Episodes worth showing: per cell (and kind), up to ``per_mode`` of each failure mode
    (so every mode present appears) and ``successes`` successes; at most ``limit`` in all.
    Returns the views and how many finished episodes were left out. Only toolbias's own
    episode records (:data:`DRILL_DOWN_KINDS`): a proxy's live conversation or an imported tau2
    simulation has another shape (and no gold to explain a failure against)."""
    own = not isinstance(store, Store)
    st = open_store(store) if not isinstance(store, Store) else store
    try:
        chosen, total = _drill_down_candidates(st, per_mode=per_mode, successes=successes, study=study)
        # a limit never hides a mode: first the first episode of every failure mode, then the
        # first of every (cell, mode), then other failures, then successes
        seen_modes: set[str] = set()
        seen_slots: set[tuple[Any, ...]] = set()
        ranks = []
        for r in chosen:
            slot = (r.kind, r.model, r.variant, r.control, r.condition, r.failure_mode)
            if r.success:
                rank = 3
            elif str(r.failure_mode) not in seen_modes:
                rank = 0
            elif slot not in seen_slots:
                rank = 1
            else:
                rank = 2
            seen_modes.add(str(r.failure_mode))
            seen_slots.add(slot)
            ranks.append(rank)
        order = sorted(range(len(chosen)), key=lambda i: (ranks[i], i))
        chosen = [chosen[i] for i in order[:limit]]
        views = []
        for i in range(0, len(chosen), 500):
            batch = chosen[i:i + 500]
            marks = ",".join("?" * len(batch))
            found = dict(st.db.execute(f"SELECT key, record FROM episodes WHERE key IN ({marks})",
                                       [r.key for r in batch]).fetchall())
            for r in batch:
                views.append(EpisodeView(r.key, r.kind, r.model, r.variant, r.control, r.condition, r.task_id,
                                         bool(r.success), r.failure_mode, json.loads(st.unpack_record(found[r.key]))))
        return views, total - len(views)
    finally:
        if own:
            st.close()


__all__ = ["FAILURE_MODES", "EpisodeView", "ReportData", "ReportSettings", "build_report", "dumps",
           "function_ratios", "open_store", "select_episodes", "variant_order"]
