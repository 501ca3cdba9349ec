"""Selection benchmarks: clusters of functionally equivalent tools and the queries they all serve.

A :class:`Cluster` holds ``k`` tools in a **canonical order** (index 0..k-1: the
``api`` of a selection record) and queries that every tool can serve. The runner
shows each query in every cyclic rotation of that order (:func:`rotations`), so
each tool appears once at each position.

Benchmarks come from a spec string (:func:`load_benchmark`):

- ``builtin``: the benchmark written for this project (``data/builtin.json``):
  12 clusters x 5 tools in varied marketplace styles, 60 queries each;
- ``biasbusters:DIR``: the BiasBusters files in DIR (see :mod:`.importers`);
- ``PATH.json``: a file in the built-in format (``Benchmark.to_dict``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from ..errors import CatalogError
from .importers import load_biasbusters
from .types import NAME_RE, Benchmark, Cluster, SelectionTool, rotations, validate_benchmark

__all__ = ["NAME_RE", "Benchmark", "Cluster", "SelectionTool", "builtin_benchmark", "load_benchmark", "rotations",
           "validate_benchmark"]


def builtin_benchmark() -> Benchmark:
    """The benchmark written for this project (12 clusters x 5 tools, 60 queries each)."""
    text = resources.files("toolbias.selection").joinpath("data/builtin.json").read_text(encoding="utf-8")
    return Benchmark.from_dict(json.loads(text), name="builtin")


def load_benchmark(spec: str = "builtin") -> Benchmark:
    """``builtin``, ``biasbusters:DIR`` or a JSON file in the built-in format."""
    if spec in ("", "builtin"):
        return builtin_benchmark()
    if spec.startswith("biasbusters:"):
        return load_biasbusters(spec.partition(":")[2] or ".")
    path = Path(spec)
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CatalogError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
        if not isinstance(data, dict) or "clusters" not in data:
            raise CatalogError("not a selection benchmark (no 'clusters')", where=str(path),
                               fix="write {\"name\", \"clusters\": [{\"id\", \"tools\", \"queries\"}]}")
        return Benchmark.from_dict(data, name=str(data.get("name") or path.stem))
    raise CatalogError(f"unknown selection benchmark '{spec}'",
                       fix="use builtin, biasbusters:DIR or a benchmark JSON file")
