"""Shared fixtures: the third-party test data (``../shared/data``), skipping when absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.paths import shared_path

# Hermetic runs: the embedded model never loads prompt prefixes an earlier run saved on disk
# (tests/providers/test_kv_prefixes.py turns the store on, in a folder of its own).
os.environ.setdefault("TOOLBIAS_KV_CACHE", "off")


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (the test is skipped when it is absent)."""
    return shared_path()


@pytest.fixture
def toolschemaspace_dir() -> Path:
    """The schema-bias paper's artifact copy (skipped when absent)."""
    return shared_path("toolschemaspace")
