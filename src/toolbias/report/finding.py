"""A study's finding in one plain sentence: the variant whose success differs most from the
baseline's (native), with its paired task-bootstrap interval.

Only differences whose interval excludes zero count as findings; among those the largest
in absolute size is told. Without one, the sentence says so and names the largest
difference seen, so a small study is not read as "no bias".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..study.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, Difference, variant_differences


@dataclass(frozen=True)
class Finding:
    """The headline difference of a study (``variant`` minus ``baseline``, success as a fraction)."""

    variant: str
    baseline: str
    diff: float
    low: float
    high: float
    n: int
    success: float
    baseline_success: float
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.low > 0 or self.high < 0

    def sentence(self) -> str:
        """E.g. ``fully_merged: -38 pp vs native [-55, -20], n = 24 paired tasks (native 62%, fully_merged 24%)``."""
        text = (f"{self.variant}: {100 * self.diff:+.0f} pp vs {self.baseline} [{100 * self.low:+.0f}, "
                f"{100 * self.high:+.0f}], n = {self.n} paired tasks ({self.baseline} "
                f"{100 * self.baseline_success:.0f}%, {self.variant} {100 * self.success:.0f}%)")
        if self.significant:
            return text
        if self.low == self.high == self.diff == 0:
            return (f"no variant differs from {self.baseline}: every paired difference is zero, n = {self.n} "
                    f"paired tasks ({self.baseline} {100 * self.baseline_success:.0f}%)")
        return (f"no variant differs from {self.baseline} beyond chance at n = {self.n} paired tasks "
                f"({100 * self.confidence:.0f}% intervals all include zero); the largest difference: {text}")


def headline(diffs: Iterable[Difference], confidence: float = DEFAULT_CONFIDENCE) -> Finding | None:
    """The largest variant-minus-baseline difference whose interval excludes zero, else the largest
    difference (``significant`` False); None without any paired difference."""
    usable = [d for d in diffs if d.kind == "variant_vs_native" and d.n and not math.isnan(d.diff)]
    if not usable:
        return None

    def size(d: Difference) -> tuple[bool, float, str]:
        excludes = d.ci_low > 0 or d.ci_high < 0
        return (excludes, abs(d.diff), d.a["variant"])

    best = max(usable, key=size)
    return Finding(variant=best.a["variant"], baseline=best.b["variant"], diff=best.diff, low=best.ci_low,
                   high=best.ci_high, n=best.n, success=best.success_a, baseline_success=best.success_b,
                   confidence=confidence)


def study_finding(rows: Sequence[Mapping[str, Any]], *, baseline: str = "native", seed: int = 0,
                  n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE) -> Finding | None:
    """The headline of finished episodes (mappings with model, variant, control, condition,
    task_id, success), paired over tasks exactly as ``toolbias report`` pairs them."""
    diffs: Sequence[Difference] = variant_differences(list(rows), baseline=baseline, seed=seed,
                                                      n_resamples=n_resamples, confidence=confidence)
    return headline(diffs, confidence)


__all__ = ["Finding", "headline", "study_finding"]
