"""The one-sentence finding under the grid: the largest variant-minus-native difference whose paired
bootstrap interval excludes zero, computed as ``toolbias report`` computes its differences."""

from __future__ import annotations

from typing import Any

from toolbias.report.finding import headline, study_finding
from toolbias.study.stats import variant_differences


def rows(variant: str, successes: list[bool]) -> list[dict[str, Any]]:
    return [{"model": "local", "variant": variant, "control": "strict", "condition": "base", "task_id": f"t{i}",
             "success": ok} for i, ok in enumerate(successes)]


N = 24
NATIVE = [i % 2 == 0 for i in range(N)]                    # 50%
MERGED = [False] * N                                        # 0%: a clear drop
NESTED = [i % 2 == 0 or i == 1 for i in range(N)]          # one task better: within chance


def test_the_largest_difference_whose_interval_excludes_zero_is_the_finding() -> None:
    found = study_finding(rows("native", NATIVE) + rows("nested_args", NESTED) + rows("fully_merged", MERGED))
    assert found is not None and found.significant
    assert (found.variant, found.baseline, found.n) == ("fully_merged", "native", N)
    assert found.diff == -0.5 and found.high < 0 and found.low < found.diff
    assert (found.success, found.baseline_success) == (0.0, 0.5)
    sentence = found.sentence()
    assert sentence.startswith("fully_merged: -50 pp vs native [") and "n = 24 paired tasks" in sentence
    assert "(native 50%, fully_merged 0%)" in sentence


def test_no_finding_beyond_chance_is_said_plainly() -> None:
    found = study_finding(rows("native", NATIVE) + rows("nested_args", NESTED))
    assert found is not None and not found.significant
    assert found.low <= 0 <= found.high
    assert found.sentence().startswith("no variant differs from native beyond chance at n = 24 paired tasks")
    assert "nested_args: +4 pp vs native" in found.sentence()


def test_the_finding_is_the_reports_difference() -> None:
    data = rows("native", NATIVE) + rows("fully_merged", MERGED)
    (diff,) = variant_differences(data)
    found = headline([diff])
    assert found is not None and (found.diff, found.low, found.high) == (diff.diff, diff.ci_low, diff.ci_high)


def test_without_native_there_is_no_finding() -> None:
    assert study_finding(rows("fully_merged", MERGED)) is None
    assert headline([]) is None


def test_identical_arms_are_said_to_be_identical() -> None:
    found = study_finding(rows("native", NATIVE) + rows("strip_descriptions", NATIVE))
    assert found is not None and not found.significant
    assert found.sentence() == ("no variant differs from native: every paired difference is zero, n = 24 paired "
                                "tasks (native 50%)")
