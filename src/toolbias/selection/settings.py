"""Run settings of a selection study, and the paper's preset.

:class:`RunSettings` gathers what a run varies: presentation, system prompt, tool_choice,
sampling (temperature, top-p, max tokens, seed) and the number of runs. :data:`PAPER` is
the paper's main-table setting (PROTOCOL.md 1.3, 1.6, 1.7): the ToolBench text prompt with
the ``base`` AutoGPT template, no tool_choice, temperature 0.5, top-p 1, 512 tokens, no
seed, 3 runs. :meth:`RunSettings.resolve` starts from the defaults (or the preset) and
applies only what the user gave.

Not reproduced: the paper's stop sequence ``End Action`` (the provider interface sends no
stop sequences; the first action is parsed either way) and the per-model quirks of
PROTOCOL.md 1.6 (Claude's and Gemini's own APIs, ToolLLaMA's raw string).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig
from .present import PRESENTATIONS, check_presentation

TOOL_CHOICES = ("required", "auto", "none")


@dataclass(frozen=True)
class RunSettings:
    presentation: str = "tools"
    prompt: str | None = None
    tool_choice: str | None = "required"
    temperature: float = 0.5
    top_p: float | None = 1.0
    max_tokens: int = 256
    seed: int | None = 0
    runs: int = 1
    #: the paper's backbone (:mod:`.backbones`) whose wire settings the model sends; None: none
    backbone: Any = None

    def __post_init__(self) -> None:
        check_presentation(self.presentation)
        if self.tool_choice is not None and self.tool_choice not in TOOL_CHOICES:
            raise ToolbiasError(f"unknown tool_choice '{self.tool_choice}'",
                                fix=f"use {', '.join(TOOL_CHOICES)} or leave it unset")
        if self.runs < 1:
            raise ToolbiasError(f"runs must be at least 1, got {self.runs}")
        if not 0 <= self.temperature <= 2:
            raise ToolbiasError(f"temperature {self.temperature} outside 0..2")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ToolbiasError(f"top-p {self.top_p} outside (0, 1]")

    @property
    def effective_tool_choice(self) -> str | None:
        """tool_choice is only sent in the ``tools`` presentation."""
        return self.tool_choice if self.presentation == "tools" else None

    def config(self) -> GenerateConfig:
        return GenerateConfig(temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                              seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["backbone"] = self.backbone.to_dict() if self.backbone is not None else None
        return d

    @property
    def backbone_label(self) -> str:
        return self.backbone.label if self.backbone is not None else ""

    @classmethod
    def resolve(cls, *, paper: bool = False, **given: Any) -> RunSettings:
        """The defaults (``paper``: :data:`PAPER`) with every option in ``given`` that is not None applied;
        ``tool_choice="none"``/``seed=-1`` given explicitly mean unset."""
        base = PAPER if paper else cls()
        unknown = set(given) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        changes = {k: v for k, v in given.items() if v is not None}
        if changes.get("tool_choice") == "unset":
            changes["tool_choice"] = None
        if changes.get("seed") == -1:
            changes["seed"] = None
        return replace(base, **changes)

    def sweep(self, *, temperatures: Sequence[float] = (), top_ps: Sequence[float] = ()) -> list[RunSettings]:
        """One setting per (temperature, top-p) pair of the lists (an empty list keeps this setting's value)."""
        return [replace(self, temperature=t, top_p=p)
                for t in (temperatures or [self.temperature])
                for p in (list(top_ps) if top_ps else [self.top_p])]


PAPER = RunSettings(presentation="toolbench", prompt="base", tool_choice=None, temperature=0.5, top_p=1.0,
                    max_tokens=512, seed=None, runs=3)

__all__ = ["PAPER", "PRESENTATIONS", "TOOL_CHOICES", "RunSettings"]
