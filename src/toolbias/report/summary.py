"""The short account of one study printed after a run: success and top failure per variant,
and why episodes hit infrastructure errors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..store import Store


@dataclass(frozen=True)
class VariantSummary:
    variant: str
    episodes: int
    successes: int
    #: the most frequent failure mode and its count (None: no failures)
    top_failure: tuple[str, int] | None

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


def study_summary(store: Store, study: str) -> list[VariantSummary]:
    """One line per variant, in the order the store first holds them."""
    totals: dict[str, list[int]] = {}
    modes: dict[str, Counter[str]] = {}
    for r in store.rows(study=study, with_record=False):
        cell = totals.setdefault(r.variant, [0, 0])
        cell[0] += int(bool(r.success))
        cell[1] += 1
        if r.failure_mode:
            modes.setdefault(r.variant, Counter())[r.failure_mode] += 1
    return [VariantSummary(v, n, ok, modes[v].most_common(1)[0] if v in modes else None)
            for v, (ok, n) in totals.items()]


def infra_error_reasons(store: Store, study: str) -> dict[tuple[str, str], int]:
    """``(variant, error message) -> episodes``, so a user can tell a transient fault (re-run)
    from one that will recur (a prompt longer than the context window)."""
    reasons: Counter[tuple[str, str]] = Counter()
    for row in store.rows(study=study, status="infra_error"):
        reasons[(row.variant, str(row.record.get("infra_error") or "unknown error"))] += 1
    return dict(sorted(reasons.items()))


__all__ = ["VariantSummary", "infra_error_reasons", "study_summary"]
