"""Shared fixtures: the third-party test data (``../shared/data``), skipping when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import shared_path


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (the test is skipped when it is absent)."""
    return shared_path()


@pytest.fixture
def toolschemaspace_dir() -> Path:
    """The schema-bias paper's artifact copy (skipped when absent)."""
    return shared_path("toolschemaspace")
