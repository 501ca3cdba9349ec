"""The mitigation's end-to-end figures with intervals (PROTOCOL.md 5; :mod:`.mitigate`).

:func:`mitigation_figures` takes the records of the plain run ("before") and of the mitigated run
("after") and gives:

- ``delta``: δ_API, δ_pos and δ_model before and after, each with its bootstrap interval over
  queries (:func:`.intervals.delta_intervals`), and the change after - before;
- ``positions``: the share of selections at each list position (pooled over clusters), before and
  after, with Wilson intervals; the per-cluster API and position rates are the two reports'
  ``per_cluster`` tables;
- ``coverage``: Wilson intervals of the share of mitigated trials whose filter kept a candidate
  (``filter_kept``), the share that ended in a selected tool of the cluster (``task``: the trial was
  served end to end), and, end to end, the share whose selecting model took the drawn function
  (``took_draw``, over the trials with a drawn function);
- ``filter``: the filter's micro precision, micro recall and exact match against the cluster (every
  tool of a cluster serves its queries), with bootstrap intervals over trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .intervals import delta_intervals, filter_intervals, interval_dict, wilson
from .metrics import METRICS
from .records import SelectionRecord, Status


def _selections(records: Sequence[SelectionRecord], rule: str) -> list[Any]:
    return [s for s in (r.to_selection(rule) for r in records if r.status is not Status.ERROR) if s is not None]


def position_shares(records: Sequence[SelectionRecord], rule: str = "exact") -> list[dict[str, Any]]:
    """The share of selections at each list position (pooled over clusters), with Wilson intervals."""
    sels = _selections(records, rule)
    if not sels:
        return []
    width = max(s.k for s in sels)
    counts = [0] * width
    for s in sels:
        counts[s.position] += 1
    return [interval_dict(wilson(c, len(sels))) for c in counts]


def mitigation_figures(before: Sequence[SelectionRecord], after: Sequence[SelectionRecord], *,
                       rule: str = "exact", seed: int = 0) -> dict[str, Any]:
    """The figures of the module doc, as JSON-ready values."""
    b = delta_intervals(_selections(before, rule), seed=seed, key="before")
    a = delta_intervals(_selections(after, rule), seed=seed, key="after")
    delta = {m: {"before": interval_dict(b[m]), "after": interval_dict(a[m]),
                 "change": a[m].estimate - b[m].estimate} for m in METRICS}
    answered = [r for r in after if r.status is not Status.ERROR]
    kept = sum(1 for r in answered if r.extra.get("filter", "kept") == "kept")
    served = sum(1 for r in answered if r.to_selection(rule) is not None)
    drawn = [r for r in answered if "took_draw" in r.extra]
    took = sum(1 for r in drawn if r.extra.get("took_draw"))
    coverage = {"filter_kept": interval_dict(wilson(kept, len(answered))),
                "task": interval_dict(wilson(served, len(answered)))}
    if drawn:
        coverage["took_draw"] = interval_dict(wilson(took, len(drawn)))
    golds = [frozenset(range(r.k)) for r in answered]
    preds: list[frozenset[int] | None] = [frozenset(r.extra.get("subset") or ()) if r.extra.get("filter") != "unparsed"
                                          else None for r in answered]
    filt = {k: interval_dict(v) for k, v in filter_intervals(golds, preds, seed=seed, key="filter").items()}
    return {"rule": rule, "delta": delta,
            "positions": {"before": position_shares(before, rule), "after": position_shares(after, rule)},
            "coverage": coverage, "filter": filt}


__all__ = ["mitigation_figures", "position_shares"]
