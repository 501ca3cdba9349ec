"""The self-contained HTML report: one file, figures embedded as base64 PNG, no script.

Sections: the grid (one table per control/condition, with failure-composition bars),
paired differences, the schema-form gap, compliance probes, difficulty prediction,
one section per variant (``#variant-<name>``), and an episode drill-down
(``#ep-<key>``) showing the conversation, every call, how it decoded and why the
episode failed.

Safety: every piece of model or catalog text goes through :func:`html.escape`; the
page also carries a Content-Security-Policy that forbids scripts, so even a missed
escape could not run code. Fragments from :mod:`toolbias.selection` (see
:func:`selection_fragments`) are inserted as given: they must be static HTML that
escapes its own model text.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..store import Store
from ..study.scoring import FAILURE_ORDER, FAILURE_RULES, explain_failure
from .figures import MODE_COLORS, all_figures, mode_color, png_base64
from .grid import EpisodeView, ReportData, select_episodes
from .live import LEGEND, TEXT_COLUMNS, live_table_rows
from .stored import format_steps
from .tables import pct, pp
from .tau2_table import paper_table_rows

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde2ea; --bg:#fbfcfe; --ok:#1a7f37; --bad:#b42318; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { margin: 0 0 4px; font-size: 24px; } h2 { margin-top: 34px; border-bottom: 2px solid var(--line); }
h3 { margin: 18px 0 6px; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 8px 20px;
      z-index: 2; font-size: 13px; }
nav a { margin-right: 12px; }
a { color: #1f5fbf; text-decoration: none; } a:hover { text-decoration: underline; }
table { border-collapse: collapse; margin: 8px 0 14px; background: #fff; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f1f4f9; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.muted { color: var(--muted); } .ok { color: var(--ok); font-weight: 600; } .bad { color: var(--bad); font-weight: 600; }
.cell .rate { font-size: 16px; font-weight: 700; }
.bar { display: flex; height: 10px; width: 140px; border: 1px solid #888; background: #fff; margin: 3px 0; }
.bar span { display: block; height: 100%; }
.chip { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 12px; }
.legend span.chip { margin-right: 6px; }
figure { margin: 10px 0; } figure img { max-width: 100%; border: 1px solid var(--line); background: #fff; }
article.ep { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
article.ep:target { outline: 3px solid #f0b429; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font: 12px/1.4 ui-monospace, monospace; }
.msg { border-left: 3px solid var(--line); padding: 2px 8px; margin: 4px 0; }
.msg.user { border-color: #1f5fbf; } .msg.assistant { border-color: #7c3aed; } .msg.tool { border-color: #0f766e; }
.msg .role { font-size: 11px; text-transform: uppercase; color: var(--muted); }
ul.why { margin: 4px 0; }
"""


def e(value: Any) -> str:
    """Escape anything for HTML text or attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def variant_anchor(name: str) -> str:
    return f"variant-{slug(name)}"


def _chip(mode: str) -> str:
    return f'<span class="chip" style="background:{mode_color(mode)}">{e(mode.replace("_", " "))}</span>'


def _bar(success: float, modes: Mapping[str, int], total: int) -> str:
    parts = [f'<span style="width:{100 * success:.2f}%;background:#fff" title="success {pct(success)}%"></span>']
    for mode, k in modes.items():
        share = k / max(total, 1)
        parts.append(f'<span style="width:{100 * share:.2f}%;background:{mode_color(mode)}" '
                     f'title="{e(mode)}: {k}"></span>')
    return f'<div class="bar">{"".join(parts)}</div>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], num_cols: Iterable[int] = ()) -> str:
    nums = set(num_cols)
    out = ["<table><thead><tr>", *(f"<th>{e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in nums else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _fmt_action(a: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in (a.get("arguments") or {}).items())
    return f"{a.get('tool')}({args})"


# -- sections -----------------------------------------------------------------

def _grid_section(data: ReportData) -> str:
    out = ['<section id="grid"><h2>Model x variant grid</h2>',
           '<p class="muted">Exact success (%) with a 95% task-bootstrap interval; the bar is the cell\'s '
           "composition: white = success, colours = failure modes (absolute rates).</p>", _legend()]
    for control, condition in data.conditions:
        models = [m for m in data.models if any(data.cell(m, v, control, condition) for v in data.variants)]
        rows = []
        for v in data.variants:
            cells = [data.cell(m, v, control, condition) for m in models]
            if not any(cells):
                continue
            row = [f'<a href="#{variant_anchor(v)}">{e(v)}</a>']
            for c in cells:
                if c is None:
                    row.append("")
                    continue
                dom = c.dominant_failure
                row.append(f'<div class="cell"><span class="rate">{pct(c.success)}</span> '
                           f'<span class="muted">[{pct(c.ci_low, 0)}, {pct(c.ci_high, 0)}] n={c.n}</span>'
                           f"{_bar(c.success, c.failure_modes, c.episodes)}"
                           f'{_chip(dom) if dom else ""}</div>')
            rows.append(row)
        out.append(f"<h3>control = {e(control)}, condition = {e(condition)}</h3>")
        out.append(_table(["variant", *models], rows))
    return "".join(out) + "</section>"


def _legend() -> str:
    return '<p class="legend">' + "".join(_chip(m.value) for m in FAILURE_ORDER) + "</p>"


def _figures_section(figs: Mapping[str, str]) -> str:
    if not figs:
        return ""
    out = ['<section id="figures"><h2>Figures</h2>']
    for name, b64 in figs.items():
        out.append(f'<figure id="fig-{e(slug(name))}"><img alt="{e(name)}" src="data:image/png;base64,{b64}">'
                   f"<figcaption class=\"muted\">{e(name)}</figcaption></figure>")
    return "".join(out) + "</section>"


def _diff_rows(diffs: Sequence[Any], first: Callable[[Any], str]) -> list[list[str]]:
    rows = []
    for d in diffs:
        cls = "bad" if d.ci_high < 0 else "ok" if d.ci_low > 0 else ""
        rows.append([e(d.a["model"]), e(first(d)),
                     e(f"{d.a['control']}/{d.a['condition']}"), str(d.n), pct(d.success_a), pct(d.success_b),
                     f'<span class="{cls}">{pp(d.diff)}</span>', f"[{pp(d.ci_low)}, {pp(d.ci_high)}]"])
    return rows


def _differences_section(data: ReportData) -> str:
    if not data.variant_diffs and not data.model_diffs:
        return ""
    out = ['<section id="differences"><h2>Paired differences</h2>',
           '<p class="muted">Paired task bootstrap, 95% intervals; green/red when the interval excludes 0.</p>']
    if data.variant_diffs:
        out.append(f"<h3>variant - {e(data.settings.baseline)}</h3>")
        out.append(_table(["model", "variant", "control/condition", "tasks", "variant %",
                           f"{data.settings.baseline} %", "diff (pp)", "95% CI"],
                          _diff_rows(data.variant_diffs, lambda d: d.a["variant"]), num_cols=(3, 4, 5, 6, 7)))
    if data.model_diffs:
        out.append("<h3>model A - model B</h3>")
        out.append(_table(["A", "B / variant", "control/condition", "tasks", "A %", "B %", "diff (pp)", "95% CI"],
                          _diff_rows(data.model_diffs, lambda d: f"{d.b['model']} / {d.a['variant']}"),
                          num_cols=(3, 4, 5, 6, 7)))
    return "".join(out) + "</section>"


def _gap_section(data: ReportData) -> str:
    if not data.gap:
        return ""
    rows = [[e(d.a["model"]), f'<a href="#{variant_anchor(d.a["variant"])}">{e(d.a["variant"])}</a>',
             e(d.a["condition"]), str(d.n), pct(d.success_b), pct(d.success_a), pp(d.diff),
             f"[{pp(d.ci_low)}, {pp(d.ci_high)}]"] for d in data.gap]
    return ('<section id="gap"><h2>Schema-form gap</h2><p class="muted">Success under lenient control (off-schema '
            "calls executed as the native action they decode to) minus strict (rejected, agent may retry). "
            "Positive: schema-form failures.</p>"
            + _table(["model", "variant", "condition", "tasks", "strict %", "lenient %", "gap (pp)", "95% CI"],
                     rows, num_cols=(3, 4, 5, 6, 7)) + "</section>")


def _probes_section(data: ReportData) -> str:
    if not data.probes:
        return ""
    rows = [[e(p.model), f'<a href="#{variant_anchor(p.variant)}">{e(p.variant)}</a>',
             e(f"{p.control}/{p.condition}"), str(p.n), pct(p.compliance),
             f"[{pct(p.compliance_low, 0)}, {pct(p.compliance_high, 0)}]", pct(p.exact_call), pct(p.probe_success),
             pct(p.task_success)] for p in data.probes]
    return ('<section id="probes"><h2>Compliance probes</h2><p class="muted">Single-operation probes derived from '
            "the schema (no task story). Compliance: the first native action arrives with no rejection; exact "
            "call: it equals the instructed action. Shown next to full-task exact success (paper Table 10).</p>"
            + _table(["model", "variant", "control/condition", "probes", "compliance %", "95% CI", "exact call %",
                      "probe success %", "task success %"], rows, num_cols=(3, 4, 5, 6, 7, 8)) + "</section>")


def _difficulty_section(data: ReportData) -> str:
    if not data.difficulty:
        return ""
    n = data.settings.sample_n

    def num(x: float | None) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"

    summary = [[e(s.model), e(f"{s.control}/{s.condition}"),
                e(f"sample n={n}" if s.predictor == "sample" else "probe compliance"), str(s.variants),
                f"{100 * s.mae:.1f}", f"{100 * s.max_abs_error:.1f}", pct(s.coverage, 0), pct(s.repeat_coverage, 0),
                num(s.pearson), num(s.spearman)] for s in data.prediction]
    est = [[e(x.model), f'<a href="#{variant_anchor(x.variant)}">{e(x.variant)}</a>',
            e(f"{x.control}/{x.condition}"), f"{x.n_sample}/{x.n_full}", pct(x.full), pct(x.estimate),
            f"[{pct(x.ci_low, 0)}, {pct(x.ci_high, 0)}]", pp(x.error), "yes" if x.covered else "no",
            f"{100 * x.mean_abs_error:.1f}", pct(x.coverage, 0), pct(x.compliance)] for x in data.difficulty]
    return (f'<section id="difficulty"><h2>Difficulty prediction</h2><p class="muted">A variant\'s success '
            f"estimated from a random sample of {n} tasks (bootstrap interval), against the full-set score; "
            f"repeats: {data.settings.repeats} independent draws. Compliance as a predictor for comparison.</p>"
            + _table(["model", "control/condition", "predictor", "variants", "MAE (pp)", "max |err| (pp)",
                      "CI coverage %", "coverage over repeats %", "Pearson", "Spearman"], summary,
                     num_cols=(3, 4, 5, 6, 7, 8, 9))
            + _table(["model", "variant", "control/condition", "sample/full", "full %", "estimate %", "95% CI",
                      "error (pp)", "covered", "mean |err| (pp)", "coverage %", "compliance %"], est,
                     num_cols=(3, 4, 5, 6, 7, 9, 10, 11)) + "</section>")


def _variant_sections(data: ReportData, episodes: Sequence[EpisodeView]) -> str:
    diffs = {(d.a["model"], d.a["variant"], d.a["control"], d.a["condition"]): d for d in data.variant_diffs}
    gaps = {(d.a["model"], d.a["variant"], d.a["condition"]): d for d in data.gap}
    probes = {(p.model, p.variant, p.control, p.condition): p for p in data.probes}
    out = ['<section id="variants"><h2>Variants</h2>']
    for v in data.variants:
        cells = [c for c in data.cells if c.variant == v]
        out.append(f'<section id="{variant_anchor(v)}"><h3>{e(v)}</h3>')
        if v in data.function_ratios:
            out.append(f'<p class="muted">function-count ratio vs {e(data.settings.baseline)}: '
                       f"{data.function_ratios[v]:.2f}</p>")
        if v in data.variant_steps:
            out.append(f'<p class="muted">steps: {e(format_steps(data.variant_steps[v]))}</p>')
        rows = []
        for c in cells:
            d = diffs.get(c.key)
            g = gaps.get((c.model, c.variant, c.condition)) if c.control == "lenient" else None
            p = probes.get(c.key)
            modes = " ".join(f"{_chip(m)}&nbsp;{k}" for m, k in c.failure_modes.items())
            rows.append([e(c.model), e(f"{c.control}/{c.condition}"), str(c.n), pct(c.success),
                         f"[{pct(c.ci_low, 0)}, {pct(c.ci_high, 0)}]",
                         f"{pp(d.diff)} [{pp(d.ci_low)}, {pp(d.ci_high)}]" if d else "-",
                         f"{pp(g.diff)}" if g else "-", pct(p.compliance) if p else "-",
                         _bar(c.success, c.failure_modes, c.episodes) + modes])
        if rows:
            out.append(_table(["model", "control/condition", "tasks", "success %", "95% CI",
                               f"vs {data.settings.baseline} (pp)", "gap (pp)", "compliance %", "failure modes"],
                              rows, num_cols=(2, 3, 4)))
        mine = [ep for ep in episodes if ep.variant == v]
        if mine:
            items = []
            for ep in mine:
                status = '<span class="ok">success</span>' if ep.success else _chip(ep.failure_mode or "failed")
                items.append(f'<li><a href="#{ep.anchor}">{e(ep.kind)} {e(ep.task_id)}</a> - {e(ep.model)} '
                             f"({e(ep.control)}/{e(ep.condition)}) {status}</li>")
            out.append(f"<details><summary>{len(mine)} episodes in the drill-down</summary><ul>"
                       + "".join(items) + "</ul></details>")
        out.append("</section>")
    return "".join(out) + "</section>"


def _message_html(m: Mapping[str, Any]) -> str:
    role = str(m.get("role", "?"))
    parts = [f'<div class="msg {e(slug(role))}"><div class="role">{e(role)}'
             + (f" - {e(m.get('name'))}" if m.get("name") else "") + "</div>"]
    if m.get("content"):
        parts.append(f"<pre>{e(m['content'])}</pre>")
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", {})
        parts.append(f"<pre>-&gt; {e(fn.get('name'))}({e(fn.get('arguments'))})</pre>")
    return "".join(parts) + "</div>"


def _call_row(c: Mapping[str, Any]) -> list[str]:
    tc = c.get("tool_call", {})
    dec = c.get("decoded")
    raw = tc.get("raw_arguments") or tc.get("arguments") or ""
    raw_text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    if dec is None:
        how = '<span class="bad">parse error</span>'
        detail = e(tc.get("parse_error") or c.get("message", ""))
    else:
        outcome = dec.get("outcome")
        cls = "bad" if outcome == "rejection" else "ok" if outcome == "native" else ""
        how = f'<span class="{cls}">{e(outcome)}</span>'
        bits = []
        if dec.get("actions"):
            bits.append("native: " + "; ".join(e(_fmt_action(a)) for a in dec["actions"]))
        if dec.get("reply") is not None:
            bits.append("reply: " + e(json.dumps(dec["reply"], ensure_ascii=False)))
        if dec.get("rejection_kind"):
            bits.append(f"rejected ({e(dec['rejection_kind'])}): {e(dec.get('message'))}")
        if dec.get("flags"):
            bits.append("flags: " + ", ".join(e(f"{f.get('kind')} {f.get('detail', '')}") for f in dec["flags"]))
        if dec.get("routes"):
            bits.append(f"route: {e(', '.join(dec['routes']))} (class {e(', '.join(dec.get('route_classes') or []))})")
        if dec.get("lenient"):
            bits.append(f"lenient: {e(dec['lenient'])}")
        detail = "<br>".join(bits)
    return [str(int(c.get("turn", 0)) + 1), f"<pre>{e(tc.get('name'))}</pre>", f"<pre>{e(raw_text)}</pre>", how,
            detail, f"<pre>{e(c.get('message', ''))}</pre>"]


def _episode_html(ep: EpisodeView, classes: Mapping[str, str] | None) -> str:
    r = ep.record
    status = ('<span class="ok">success</span>' if ep.success
              else f'<span class="bad">failed</span> {_chip(ep.failure_mode or "unknown")}')
    out = [f'<article class="ep" id="{ep.anchor}"><h3>{e(ep.kind)} {e(ep.task_id)} {status}</h3>',
           f'<p class="muted">model {e(ep.model)} - variant <a href="#{variant_anchor(ep.variant)}">'
           f"{e(ep.variant)}</a> - {e(ep.control)}/{e(ep.condition)} - {e(r.get('turns'))} turns - "
           f"ended: {e(r.get('termination'))}</p>",
           f"<p><b>Query:</b> {e(r.get('query'))}</p>",
           "<p><b>Gold:</b> " + "; ".join(e(_fmt_action(a)) for a in r.get("gold", [])) + "<br><b>Executed:</b> "
           + ("; ".join(e(_fmt_action(a)) for a in r.get("executed", [])) or "(nothing)") + "</p>"]
    if not ep.success:
        why = explain_failure(r, classes) or [f"{ep.failure_mode}"]
        out.append('<p><b>Why it failed:</b></p><ul class="why">' + "".join(f"<li>{e(w)}</li>" for w in why)
                   + "</ul>")
    calls = r.get("calls", [])
    if calls:
        out.append("<p><b>Calls</b></p>" + _table(["turn", "call", "arguments (raw)", "decoded", "detail",
                                                    "tool message"], [_call_row(c) for c in calls]))
    msgs = r.get("messages", [])
    if msgs:
        system = [m for m in msgs if m.get("role") == "system"]
        rest = [m for m in msgs if m.get("role") != "system"]
        conv = "".join(_message_html(m) for m in rest)
        sys_html = "".join(_message_html(m) for m in system)
        out.append(f"<details open><summary>Conversation ({len(rest)} messages)</summary>{conv}"
                   f"<details><summary>system prompt</summary>{sys_html}</details></details>")
    return "".join(out) + "</article>"


def _episodes_section(episodes: Sequence[EpisodeView], left_out: int, classes: Mapping[str, str] | None) -> str:
    if not episodes:
        return ""
    note = (f'<p class="muted">{len(episodes)} episodes shown (per cell, a few of every failure mode and a '
            f"success); {left_out} more are in the store (<code>toolbias export</code>).</p>")
    return ('<section id="episodes"><h2>Episode drill-down</h2>' + note
            + "".join(_episode_html(ep, classes) for ep in episodes) + "</section>")


def _paper_tables_section(data: ReportData) -> str:
    tables = paper_table_rows(data.paper_tables)
    if not tables:
        return ""
    out = ['<section id="paper-tables"><h2>Paper tables (Tables 6-9)</h2>']
    for title, (head, rows) in tables.items():  # cells are text (model names are user data): escaped
        out.append(f"<h3>{e(title)}</h3>" + _table(head, [[e(c) for c in row] for row in rows],
                                                    num_cols=range(1, len(head))))
    return "".join(out) + "</section>"


def _live_section(data: ReportData) -> str:
    tables = live_table_rows(data.live)
    if not tables:
        return ""
    out = ['<section id="live"><h2>Live conversations</h2><p class="muted">Agents run through '
           f"<code>toolbias proxy --store</code>, one row per study and variant. {e(LEGEND)}</p>"]
    for title, (head, rows) in tables.items():  # rejection messages are model output: escaped
        nums = [i for i, h in enumerate(head) if i and h not in TEXT_COLUMNS]
        out.append(f"<h3>{e(title)}</h3>" + _table(head, [[e(c) for c in row] for row in rows], num_cols=nums))
    return "".join(out) + "</section>"


def _rules_section() -> str:
    rows = [[_chip(m.value), e(FAILURE_RULES[m][0]), e(FAILURE_RULES[m][1])] for m in FAILURE_ORDER]
    return ('<section id="failure-modes"><h2>Failure modes</h2><p class="muted">Each failed episode gets the first '
            "mode whose rule fires (paper Table 2).</p>" + _table(["mode", "rule", "what went wrong"], rows)
            + "</section>")


def selection_fragments(store: str) -> list[tuple[str, str]]:
    """The tool-selection sections of the store (:func:`toolbias.report.selection.html_fragments`: title
    and a static HTML fragment each), appended to the report. Failures become a note."""
    from . import selection

    fn = selection.html_fragments
    try:
        items = list(fn(store))
    except Exception as exc:  # a broken optional section must not break the report
        return [("Selection bias", f'<p class="muted">selection fragments failed: {e(exc)}</p>')]
    out: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, str):
            out.append(("Selection bias", item))
        else:
            title, body = item
            out.append((str(title), str(body)))
    return out


def render_html(data: ReportData, store: str | Path | Store | None = None, *, per_mode: int = 5,
                successes: int = 1, limit: int = 1000, figures: bool | Mapping[str, bytes] = True,
                fragments: Sequence[tuple[str, str]] | None = None, classes: Mapping[str, str] | None = None) -> str:
    """The report as one HTML string. ``figures``: True renders them, False leaves them out,
    a mapping (name -> PNG bytes, e.g. files ``save_figures`` wrote) embeds those."""
    source: str | Path | Store = store if store is not None else data.store
    episodes, left_out = select_episodes(source, per_mode=per_mode, successes=successes, limit=limit,
                                         study=data.study)
    if classes is None:
        classes = _classes(data)
    if isinstance(figures, Mapping):
        figs = {name: base64.b64encode(png).decode("ascii") for name, png in figures.items()}
    else:
        figs = {name: png_base64(fig) for name, fig in all_figures(data).items()} if figures else {}
    if fragments is not None:
        extra = list(fragments)
    else:
        from .mitigation import mitigation_fragments

        extra = selection_fragments(str(data.store)) + mitigation_fragments(source, study=data.study)
    n_task = sum(c.episodes for c in data.cells)
    n_probe = sum(p.n for p in data.probes)
    n_live = sum(r["conversations"] for r in data.live)
    # a store of live conversations only names its models and catalogs through them
    models = data.models or sorted({str(r["model"]) for r in data.live})
    catalogs = data.catalogs or sorted({str(c) for r in data.live for c in r["catalogs"]})
    nav = [("grid", "Grid") if data.cells else None, ("figures", "Figures") if figs else None,
           ("differences", "Differences") if data.variant_diffs or data.model_diffs else None,
           ("gap", "Schema-form gap") if data.gap else None, ("probes", "Probes") if data.probes else None,
           ("difficulty", "Difficulty") if data.difficulty else None,
           ("paper-tables", "Tables 6-9") if paper_table_rows(data.paper_tables) else None,
           ("live", "Live conversations") if data.live else None, ("variants", "Variants") if data.variants else None,
           ("episodes", "Episodes") if episodes else None, ("failure-modes", "Failure modes")]
    nav += [(f"extra-{i}", title) for i, (title, _) in enumerate(extra)]
    links = "".join(f'<a href="#{a}">{e(t)}</a>' for item in nav if item for a, t in [item])
    vlinks = " ".join(f'<a href="#{variant_anchor(v)}">{e(v)}</a>' for v in data.variants)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>toolbias report - {e(Path(str(data.store)).name)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>toolbias report</h1><p class=\"muted\">store {e(data.store)} - {n_task} task episodes, "
        f"{n_probe} probe episodes, {n_live} live conversations - models: {e(', '.join(models) or '-')} - catalogs: {e(', '.join(catalogs) or '-')}"
        f" - generated {e(now)}</p></header>",
        f"<nav>{links}" + (f"<br><span class=\"muted\">variants:</span> {vlinks}" if vlinks else "") + "</nav><main>",
    ]
    if data.notes:
        body.append("<ul class=\"muted\">" + "".join(f"<li>{e(n)}</li>" for n in data.notes) + "</ul>")
    body += [_grid_section(data) if data.cells else "", _figures_section(figs), _differences_section(data), _gap_section(data),
             _probes_section(data), _difficulty_section(data), _paper_tables_section(data),
             _live_section(data), _variant_sections(data, episodes) if data.variants else "",
             _episodes_section(episodes, left_out, classes), _rules_section()]
    for i, (title, fragment) in enumerate(extra):
        body.append(f'<section id="extra-{i}"><h2>{e(title)}</h2>{fragment}</section>')
    body.append(f"</main><footer class=\"muted\"><p>toolbias - colours: "
                f"{e(', '.join(f'{k}={v}' for k, v in MODE_COLORS.items()))}</p></footer></body></html>")
    return "\n".join(body)


def _classes(data: ReportData) -> dict[str, str] | None:
    """Native uid -> class for the store's catalog (for wrong-class explanations): as the studies
    stored it, else from the catalog if loadable."""
    if data.classes is not None:
        return data.classes
    if len(data.catalogs) != 1:
        return None
    try:
        from ..catalog import load_catalog

        return {t.uid: t.cls for t in load_catalog(data.catalogs[0]).tools}
    except Exception:
        return None


def write_html(data: ReportData, path: str | Path, store: str | Path | Store | None = None, **kw: Any) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(data, store, **kw), encoding="utf-8")
    return out


__all__ = ["CSP", "render_html", "selection_fragments", "variant_anchor", "write_html"]
