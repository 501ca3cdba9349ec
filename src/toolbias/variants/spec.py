"""A variant as data: a named, ordered list of operator steps (``{"name", "steps": [{"op", ...}]}``).

:func:`~toolbias.variants.resolve.build_codec` composes one into a codec; the named ones live in
:mod:`toolbias.variants.named`, one file per operator family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.jsonfile import read_json
from ..errors import VariantError
from ..operators import OPERATORS


def is_artifact_spec(data: Any) -> bool:
    """True for the paper artifact's spec forms: ``{"arm", "groups"}`` or ``{"ops": [...]}`` whose
    ops name a ``tool``/``tools`` and a ``group`` (toolbias specs have ``steps`` or bare ops)."""
    if not isinstance(data, Mapping):
        return False
    if "groups" in data and "arm" in data:
        return True
    ops = data.get("ops")
    if "steps" in data or not isinstance(ops, list) or not ops:
        return False
    return all(isinstance(o, Mapping) and ("tool" in o or "tools" in o) and "group" in o for o in ops)


@dataclass(frozen=True)
class VariantSpec:
    """A named composition of operator steps (first step is applied to the native catalog)."""

    name: str
    steps: tuple[Mapping[str, Any], ...] = ()
    description: str = ""
    #: the paper registry entry this reproduces (its ``name`` in registry.json), if any
    paper: str | None = None
    #: tags such as "representative", "ladder", "control"
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: the file this spec was read from, named in errors (not part of its identity)
    source: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "steps": [dict(s) for s in self.steps], "description": self.description,
                "paper": self.paper, "tags": list(self.tags)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "<variant spec>") -> VariantSpec:
        if not isinstance(d, Mapping):
            raise VariantError("a variant spec must be a JSON object", where=where,
                               fix='write {"name": "...", "steps": [{"op": "merge", ...}]}')
        if is_artifact_spec(d):  # the paper artifact's forms: built as the artifact builds them (the paper operator)
            stem = Path(where).stem
            step = ({"op": "paper", "build": "groups", "groups": list(d["groups"])} if "groups" in d
                    else {"op": "paper", "build": "ops", "ops": list(d["ops"])})
            return cls(name=str(d.get("name", stem)), steps=(step,),
                       description=f"the paper artifact's {d.get('arm') or stem} spec", tags=("artifact",),
                       source=None if where == "<variant spec>" else where)
        if {"class_semantic", "n_dispatchers"} <= set(d) or "r03" in d:
            raise VariantError("an assignment file of the artifact, not a variant spec", where=where,
                               fix="use the arm's own spec file (class_semantic.json, mix_r03_flat.json, ...)")
        steps = d.get("steps", d.get("ops", []))
        if not isinstance(steps, list) or not all(isinstance(s, Mapping) and "op" in s for s in steps):
            raise VariantError("'steps' must be a list of objects each with an 'op'", where=where,
                               fix=f"known ops: {', '.join(sorted(OPERATORS))}")
        tags = d.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise VariantError("'tags' must be a list of strings", where=where, fix='write "tags": ["ladder"]')
        return cls(name=str(d.get("name", Path(where).stem)), steps=tuple(dict(s) for s in steps),
                   description=str(d.get("description", "")), paper=d.get("paper"),
                   tags=tuple(tags), source=None if where == "<variant spec>" else where)

    @classmethod
    def from_file(cls, path: str | Path) -> VariantSpec:
        p = Path(path)
        data = read_json(p, error=VariantError,
                         missing_fix="check the path, or name a registered variant (toolbias variants)")
        return cls.from_dict(data, where=str(p))
