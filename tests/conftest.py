"""Shared fixtures: where the third-party test data lives (``../shared/data``), skipping when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ``../shared/data`` beside the repository (never copied into it)
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """A path under ``../shared/data``; skips the calling test with a clear reason if it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs the third-party data copy at {path} (../shared/data/{'/'.join(parts)}); not present")
    return path


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (the test is skipped when it is absent)."""
    return shared_path()


@pytest.fixture
def toolschemaspace_dir() -> Path:
    """The schema-bias paper's artifact copy (skipped when absent)."""
    return shared_path("toolschemaspace")
