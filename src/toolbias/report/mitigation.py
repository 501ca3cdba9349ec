"""Mitigations as the paper reports them: Table 3 (base success, then each mitigation's change)
and Table 14 (how much of a training run's gain carries to held-out domains).

Table 3 (:func:`mitigation_table`): one row per variant. ``Base`` is the base model's
success without intervention (condition ``base``); every other column is a paired change
from it over the tasks both share, with a task-bootstrap interval:

* training-free mitigations - the same model under the stored conditions ``instruction``
  (the variant's calling-convention instruction, Table 11) and ``required`` (the first call
  constrained to the schema);
* training runs - other models declared as trained from the base (``--trained LABEL=MODEL``,
  optionally ``@MANIFEST`` the splits manifest ``toolbias train-data`` wrote). A variant in
  the run's training mixture is marked ``*`` (Table 3's red frames).

A change of at least 2.5 standard errors (paired: the standard deviation of the per-task
differences over the square root of their number) is marked ``+``/``-`` (Table 3's shading).

Table 14 (:func:`transfer_rows`): for each training run with a manifest, each variant's gain
over the base on the training domains' evaluation tasks and on the held-out domains, and
the share of the gain kept on held-out domains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ToolbiasError
from ..store import Tally
from ..study.splits import Splits
from ..study.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, bootstrap_ci, paired_bootstrap, task_success
from . import tally
from .grid import variant_order

MITIGATIONS = ("instruction", "required")
MARK_SE = 2.5


@dataclass(frozen=True)
class TrainedRun:
    """A model trained from the base, and (optionally) what its training data held."""

    label: str
    model: str
    splits: Splits | None = None

    @classmethod
    def parse(cls, text: str) -> TrainedRun:
        """``LABEL=MODEL`` or ``LABEL=MODEL@MANIFEST.json``."""
        label, eq, rest = text.partition("=")
        if not eq or not label.strip() or not rest.strip():
            raise ToolbiasError(f"cannot read training run {text!r}", where="--trained",
                                fix="write LABEL=MODEL or LABEL=MODEL@SPLITS.json, e.g. "
                                    "'SFT mixed=openai:qwen3-4b-sft@sft.splits.json'")
        model, at, manifest = rest.rpartition("@") if rest.endswith(".json") else (rest, "", "")
        return cls(label.strip(), model.strip(), Splits.from_file(manifest) if at else None)


@dataclass
class Delta:
    column: str
    kind: str  # "mitigation" or "training"
    estimate: float
    low: float
    high: float
    se: float
    n: int
    marked: bool
    trained_on: bool | None = None  # training runs with a manifest: the variant was in the mixture

    @property
    def sign(self) -> str:
        return ("+" if self.estimate > 0 else "-") if self.marked else ""


@dataclass
class MitigationRow:
    variant: str
    base: float
    n: int
    deltas: dict[str, Delta] = field(default_factory=dict)


@dataclass
class TransferRow:
    run: str
    variant: str
    label: str              # seen / held_out_variant (by the run's manifest)
    gain_train_domains: float
    gain_held_out_domains: float
    kept: float | None      # held-out gain / training-domain gain (when that gain is positive)
    n_train: int
    n_held_out: int


@dataclass
class MitigationTable:
    base_model: str
    control: str
    columns: list[tuple[str, str]]  # (column, kind)
    rows: list[MitigationRow]
    transfer: list[TransferRow]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"base_model": self.base_model, "control": self.control, "mark_se": MARK_SE,
                "columns": [{"column": c, "kind": k} for c, k in self.columns],
                "rows": [{"variant": r.variant, "base": r.base, "n": r.n,
                          "deltas": {c: asdict(d) for c, d in r.deltas.items()}} for r in self.rows],
                "transfer": [asdict(t) for t in self.transfer], "notes": self.notes}


def _paired(a: Mapping[str, float], b: Mapping[str, float], column: str, kind: str, *, seed: int,
            n_resamples: int, confidence: float) -> Delta | None:
    common = sorted(set(a) & set(b))
    if not common:
        return None
    diffs = [a[t] - b[t] for t in common]
    n = len(diffs)
    mean = sum(diffs) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else 0.0
    ci = paired_bootstrap({t: a[t] for t in common}, {t: b[t] for t in common}, seed=seed,
                          n_resamples=n_resamples, confidence=confidence, key=("mitigation", column))
    marked = se > 0 and abs(mean) >= MARK_SE * se
    return Delta(column, kind, mean, ci.low, ci.high, se, n, marked)


def mitigation_table(rows: Sequence[Mapping[str, Any]], *, base_model: str | None = None,
                     trained: Sequence[TrainedRun] = (), control: str = "strict", seed: int = 0,
                     n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                     ) -> MitigationTable | None:
    """Table 3 and Table 14 from finished task episodes (dicts with model, variant, control,
    condition, task_id, domain, success). None when the store holds no mitigation to compare."""
    done = (r for r in rows if r.get("status", "done") == "done")
    return tallied_mitigation_table(tally.tallies_of_rows(done), base_model=base_model, trained=trained,
                                    control=control, seed=seed, n_resamples=n_resamples, confidence=confidence)


def tallied_mitigation_table(tallies: Sequence[Tally], *, base_model: str | None = None,
                             trained: Sequence[TrainedRun] = (), control: str = "strict", seed: int = 0,
                             n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                             ) -> MitigationTable | None:
    """:func:`mitigation_table` of finished task episodes counted (:mod:`toolbias.report.tally`):
    episodes without a success value are left out."""
    table = tally.cell_table(tallies, scored_only=True)
    cells = {k: c.per_task() for k, c in table.items()}
    models = list(dict.fromkeys(k[0] for k in table))
    trained_models = {t.model for t in trained}
    missing = sorted(trained_models - set(models))
    if base_model is None:
        candidates = [m for m in models if m not in trained_models
                      and any(k[0] == m and k[2] == control and k[3] != "base" for k in cells)]
        base_model = candidates[0] if candidates else next((m for m in models if m not in trained_models), None)
    if base_model is None:
        return None
    base_cells = {k[1]: v for k, v in cells.items() if k[0] == base_model and k[2] == control and k[3] == "base"}
    conditions = [c for c in MITIGATIONS if any(k[0] == base_model and k[2] == control and k[3] == c for k in cells)]
    runs = [t for t in trained if t.model in models]
    if not base_cells or (not conditions and not runs):
        return None
    columns = [(c, "mitigation") for c in conditions] + [(t.label, "training") for t in runs]
    out_rows = []
    opts: dict[str, Any] = {"seed": seed, "n_resamples": n_resamples, "confidence": confidence}
    for variant in variant_order(base_cells):
        base = base_cells[variant]
        row = MitigationRow(variant, sum(base.values()) / len(base), len(base))
        for c in conditions:
            other = cells.get((base_model, variant, control, c))
            d = _paired(other, base, c, "mitigation", **opts) if other else None
            if d is not None:
                row.deltas[c] = d
        for t in runs:
            other = cells.get((t.model, variant, control, "base"))
            d = _paired(other, base, t.label, "training", **opts) if other else None
            if d is not None:
                d.trained_on = (variant in t.splits.train_variants) if t.splits else None
                row.deltas[t.label] = d
        out_rows.append(row)
    domains = tally.task_domains(tallies, scored_only=True)
    notes = [f"training run model(s) not in the store: {', '.join(missing)}"] if missing else []
    return MitigationTable(base_model, control, columns, out_rows, transfer_rows(cells, base_model, runs, domains,
                                                                                 control), notes)


def transfer_rows(cells: Mapping[tuple[str, str, str, str], Mapping[str, float]], base_model: str,
                  runs: Sequence[TrainedRun], domains: Mapping[str, str], control: str = "strict"
                  ) -> list[TransferRow]:
    """Table 14's domain transfer: per run with a manifest and per variant, the gain over the base
    on training-domain tasks and on held-out-domain tasks (paired over shared tasks)."""
    out = []
    for t in runs:
        if t.splits is None or not t.splits.held_out_domains:
            continue
        for (model, variant, ctl, cond), per_task in cells.items():
            if model != t.model or ctl != control or cond != "base":
                continue
            base = cells.get((base_model, variant, control, "base"))
            if not base:
                continue
            shared = set(per_task) & set(base)
            seen = [per_task[x] - base[x] for x in shared if t.splits.trains_on(domains.get(x, ""))]
            held = [per_task[x] - base[x] for x in shared if not t.splits.trains_on(domains.get(x, ""))]
            if not seen or not held:
                continue
            g_seen, g_held = sum(seen) / len(seen), sum(held) / len(held)
            label = "seen" if variant in t.splits.train_variants else "held_out_variant"
            out.append(TransferRow(t.label, variant, label, g_seen, g_held, g_held / g_seen if g_seen > 0 else None, len(seen), len(held)))
    return out


@dataclass
class SplitCell:
    """Results of one model and variant on the tasks of one split label."""

    model: str
    variant: str
    control: str
    condition: str
    label: str  # one of toolbias.study.splits.LABELS
    success: float
    low: float
    high: float
    n: int


@dataclass
class SplitView:
    splits: str
    cells: list[SplitCell]
    training_tasks_evaluated: int  # episodes on the manifest's training tasks (should be 0)

    def to_dict(self) -> dict[str, Any]:
        return {"splits": self.splits, "cells": [asdict(c) for c in self.cells],
                "training_tasks_evaluated": self.training_tasks_evaluated}


def split_view(rows: Sequence[Mapping[str, Any]], splits: Splits, *, seed: int = 0,
               n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE) -> SplitView:
    """Each model x variant's success by what a model trained under ``splits`` had seen: ``seen``
    (training domain and variant, an evaluation task), ``held_out_variant``, ``held_out_domain``,
    ``held_out_both``; and how many evaluated episodes were training tasks (left out of the cells)."""
    from ..catalog.model import Task

    groups: dict[tuple[str, str, str, str, str], list[Mapping[str, Any]]] = {}
    leaked = 0
    for r in rows:
        if r.get("status", "done") != "done" or r.get("success") is None:
            continue
        if splits.part(Task(str(r["task_id"]), str(r["domain"]), "", ())) == "train":
            leaked += 1
            continue
        key = (str(r["model"]), str(r["variant"]), str(r["control"]), str(r["condition"]),
               splits.label(str(r["domain"]), str(r["variant"])))
        groups.setdefault(key, []).append(r)
    order = {v: i for i, v in enumerate(variant_order({k[1] for k in groups}))}
    cells = []
    for key, members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2] != "strict", kv[0][3] != "base",
                                                               kv[0][2], kv[0][3], order[kv[0][1]], kv[0][4])):
        per_task = task_success(members)
        ci = bootstrap_ci(list(per_task.values()), seed=seed, n_resamples=n_resamples, confidence=confidence,
                          key=("split", *key))
        cells.append(SplitCell(*key, ci.estimate, ci.low, ci.high, ci.n))
    return SplitView(splits.name, cells, leaked)


def split_view_from_store(store: Any, spec: str, catalogs: Sequence[str], *, study: str | None = None,
                          **kw: Any) -> SplitView:
    """:func:`split_view` of a store's task episodes; ``spec`` a manifest file, or a named split
    (``default``, ``table4``, ``builtin``) checked against the store's catalog."""
    from ..catalog import load_catalog
    from ..store import episodes_dataframe
    from ..study.splits import load_splits

    if spec.endswith(".json"):
        manifest = Splits.from_file(spec)
    elif len(catalogs) == 1:
        manifest = load_splits(spec, load_catalog(catalogs[0]))
    else:
        raise ToolbiasError(f"the store holds {len(catalogs)} catalogs: cannot pick the '{spec}' split",
                            where="--splits", fix="pass a splits manifest file (train-data writes one)")
    df = episodes_dataframe(store, kind="task")
    if study is not None:
        df = df[df["study"].str.startswith(study)]
    return split_view(df.to_dict("records"), manifest, **kw)


def print_split_view(view: SplitView, console: Any) -> None:
    from rich.table import Table

    t = Table(title=f"Results by what training saw (splits '{view.splits}')", title_justify="left")
    for col in ("model", "ctl/cond", "variant", "split", "success", "95% CI", "tasks"):
        t.add_column(col, justify="left" if col in ("model", "ctl/cond", "variant", "split") else "right")
    for c in view.cells:
        t.add_row(c.model, f"{c.control}/{c.condition}", c.variant, c.label.replace("_", " "), f"{100 * c.success:.1f}",
                  f"[{100 * c.low:.1f}, {100 * c.high:.1f}]", str(c.n))
    console.print(t)
    if view.training_tasks_evaluated:
        console.print(f"[yellow]{view.training_tasks_evaluated} evaluated episodes are training tasks of this "
                      "manifest and are left out; run with --split eval[/]")


# -- presentation ------------------------------------------------------------------------

def _pp(x: float) -> str:
    return f"{100 * x:+.1f}"


def delta_text(d: Delta | None) -> str:
    if d is None:
        return "-"
    frame = "*" if d.trained_on else ""
    return f"{_pp(d.estimate)}{d.sign}{frame} [{_pp(d.low)}, {_pp(d.high)}]"


def print_mitigations(table: MitigationTable, console: Any) -> None:
    """Table 3 (and Table 14 when present) in the terminal."""
    from rich.table import Table

    t = Table(title=f"Mitigations (paper Table 3): {table.base_model}, {table.control} control - base success, "
                    f"then change in points [95% CI]; +/- : at least {MARK_SE} standard errors; * : in the training "
                    "mixture", title_justify="left")
    t.add_column("variant")
    t.add_column("base", justify="right")
    for c, _ in table.columns:
        t.add_column(c, justify="right")
    for r in table.rows:
        t.add_row(r.variant, f"{100 * r.base:.1f} (n={r.n})", *[delta_text(r.deltas.get(c)) for c, _ in table.columns])
    console.print(t)
    if table.transfer:
        x = Table(title="Transfer of training gains (paper Table 14): gain over the base, points",
                  title_justify="left")
        for col in ("run", "variant", "variant seen", "training domains", "held-out domains", "kept"):
            x.add_column(col, justify="left" if col in ("run", "variant", "variant seen") else "right")
        for tr in table.transfer:
            x.add_row(tr.run, tr.variant, "yes" if tr.label == "seen" else "held out",
                      f"{_pp(tr.gain_train_domains)} (n={tr.n_train})",
                      f"{_pp(tr.gain_held_out_domains)} (n={tr.n_held_out})",
                      "-" if tr.kept is None else f"{100 * tr.kept:.0f}%")
        console.print(x)
    for note in table.notes:
        console.print(f"[dim]note: {note}[/]")


def mitigation_html(table: MitigationTable) -> str:
    """Table 3 (and 14) as an HTML fragment (every value escaped)."""
    from html import escape

    def cell(d: Delta | None) -> str:
        if d is None:
            return "<td>-</td>"
        colour = "" if not d.marked else (' style="background:#d7f0d0"' if d.estimate > 0
                                          else ' style="background:#f6d3d0"')
        border = ' class="trained"' if d.trained_on else ""
        return f"<td{colour}{border}>{escape(delta_text(d))}</td>"

    head = "".join(f"<th>{escape(c)}</th>" for c, _ in table.columns)
    rows = "".join(f"<tr><td>{escape(r.variant)}</td><td>{100 * r.base:.1f}</td>"
                   + "".join(cell(r.deltas.get(c)) for c, _ in table.columns) + "</tr>" for r in table.rows)
    out = (f'<p class="muted">Base: {escape(table.base_model)} ({escape(table.control)} control). Changes in '
           f"points with 95% paired task-bootstrap intervals; shaded: at least {MARK_SE} standard errors; "
           "* (framed): the variant is in that run's training mixture.</p>"
           f'<table><thead><tr><th>variant</th><th>base %</th>{head}</tr></thead><tbody>{rows}</tbody></table>')
    if table.transfer:
        trs = "".join(f"<tr><td>{escape(t.run)}</td><td>{escape(t.variant)}</td><td>{escape(t.label)}</td>"
                      f"<td>{_pp(t.gain_train_domains)}</td><td>{_pp(t.gain_held_out_domains)}</td>"
                      f"<td>{'-' if t.kept is None else f'{100 * t.kept:.0f}%'}</td></tr>" for t in table.transfer)
        out += ("<h3>Transfer (paper Table 14)</h3><table><thead><tr><th>run</th><th>variant</th><th>variant</th>"
                "<th>gain, training domains</th><th>gain, held-out domains</th><th>kept</th></tr></thead>"
                f"<tbody>{trs}</tbody></table>")
    return out


def mitigation_fragments(store: Any, *, study: str | None = None, trained: Sequence[TrainedRun] = (),
                         base_model: str | None = None) -> list[tuple[str, str]]:
    """The HTML report's mitigation section, when the store holds mitigations to compare."""
    table = mitigation_table_from_store(store, study=study, trained=trained, base_model=base_model,
                                        n_resamples=2000)
    return [("Mitigations (Table 3)", mitigation_html(table))] if table is not None else []


def mitigation_table_from_store(store: Any, *, study: str | None = None, trained: Sequence[TrainedRun] = (),
                                base_model: str | None = None, **kw: Any) -> MitigationTable | None:
    """:func:`mitigation_table` of a store's task episodes (of the studies whose names start with
    ``study``), counted in SQL."""
    from ..store import Store

    st = store if isinstance(store, Store) else Store(store)
    try:
        counted = tally.select(st.tallies(kind="task"), study, prefix=True)
    finally:
        if st is not store:
            st.close()
    return tallied_mitigation_table(counted, base_model=base_model, trained=trained, **kw)


__all__ = ["MARK_SE", "MITIGATIONS", "Delta", "MitigationRow", "MitigationTable", "SplitCell", "SplitView",
           "TrainedRun", "TransferRow", "print_split_view", "split_view", "split_view_from_store",
           "mitigation_fragments", "mitigation_html", "mitigation_table", "mitigation_table_from_store",
           "tallied_mitigation_table",
           "print_mitigations", "transfer_rows"]
