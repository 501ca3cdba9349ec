"""The schema-bias paper's artifact's own code, imported from ``../shared/reference/ToolSchemaSpace``
as a test oracle (never by toolbias itself). A missing copy skips with one clear line."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import SHARED

#: the artifact's repository beside this one
ARTIFACT = SHARED / "reference" / "ToolSchemaSpace"
#: its rendered schemas of the representative variants
SCHEMAS = ARTIFACT / "benchmarks" / "synthetic" / "data" / "schemas"


def missing_reason(path: Path) -> str:
    return f"needs the paper artifact ../shared/reference/ToolSchemaSpace (looked at {path}); not present"


def needs_artifact() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not (ARTIFACT / "toolschema").is_dir(), reason=missing_reason(ARTIFACT))


@contextmanager
def artifact_settings(env: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[None]:
    """The artifact's runners read their settings from the environment when imported: ``env`` set,
    ``unset`` removed, and the artifact's root first on ``sys.path``, for the ``with`` block only."""
    old = {k: os.environ.get(k) for k in (*unset, *env)}
    for k in unset:
        os.environ.pop(k, None)
    os.environ.update(env)
    sys.path.insert(0, str(ARTIFACT))
    try:
        yield
    finally:
        sys.path.remove(str(ARTIFACT))
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def imported_afresh(name: str) -> ModuleType:
    """``name`` imported, or run again where an earlier test imported it (its settings are read anew)."""
    module = sys.modules.get(name)
    return importlib.import_module(name) if module is None else importlib.reload(module)


def runner_afresh(module: str, env: Mapping[str, str], base_url: str, model: str, *, unset: Iterable[str] = (),
                  api: str = "chat") -> ModuleType:
    """The artifact's runner ``module`` (``eval.run_agentic``, ``eval.run_hierarchy`` ...) imported afresh
    under :func:`artifact_settings`, its OpenAI client on ``base_url`` asking for ``model``: chat
    completions, or (``api="responses"``) the Responses API."""
    from openai import OpenAI

    with artifact_settings(env, unset):
        adapter = importlib.import_module("toolschema.schema_adapter")
        adapter.SchemaAdapter._cached = False  # from_env caches the first variant it built
        common = importlib.import_module("eval.common")
        common.client = OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)  # a retry would hide a fault
        common.MODEL = model
        common.API = api
        return imported_afresh(module)


def artifact_module(name: str) -> ModuleType:
    """``toolschema.<name>`` of the artifact (its root put on ``sys.path``), or a skip."""
    if not (ARTIFACT / "toolschema" / f"{name}.py").is_file():
        pytest.skip(missing_reason(ARTIFACT / "toolschema" / f"{name}.py"))
    if str(ARTIFACT) not in sys.path:
        sys.path.append(str(ARTIFACT))
    return importlib.import_module(f"toolschema.{name}")
