"""Shared fixtures: the third-party test data (``../shared/data``), skipping when absent, and the
embedded model behind ``python -m llama_cpp.server``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import shared_path
from tests.support.servers import LlamaCppServer, llama_server_skip_reason

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


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaCppServer]:
    """``python -m llama_cpp.server`` with the embedded model, started once for the whole session
    (loading the model is most of a start) and shared by the tests that only send it requests
    (skipped with the reason where it cannot run)."""
    reason = llama_server_skip_reason()
    if reason:
        pytest.skip(reason)
    with LlamaCppServer() as srv:
        yield srv
