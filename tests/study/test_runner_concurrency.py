"""How many episodes a study plays at once: what the user asked, else what the model takes at once
(the embedded model: its batch), else 8, never more than the model takes."""

from __future__ import annotations

import pytest

from toolbias.study.defaults import study_config
from toolbias.study.runner import DEFAULT_CONCURRENCY, episodes_at_once


@pytest.mark.parametrize(("requested", "model_max", "expected"), [
    (None, None, DEFAULT_CONCURRENCY),  # a server: 8 unless asked
    (None, 16, 16),  # the embedded model: its batch
    (None, 1, 1),  # the one-sequence path
    (4, 16, 4),  # fewer, as asked
    (32, 16, 16),  # never more than the model decodes at once
    (32, None, 32),
])
def test_episodes_at_once(requested: int | None, model_max: int | None, expected: int) -> None:
    assert episodes_at_once(requested, model_max) == expected


def test_a_study_leaves_concurrency_to_the_model_unless_asked() -> None:
    assert study_config(model="oracle").concurrency is None
    assert study_config(model="oracle", concurrency=3).concurrency == 3
