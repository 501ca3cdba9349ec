"""The values a selection run produces: one :class:`SelectionRecord` per (run, query, rotation).

A record's ``key`` (:func:`trial_key`) is its resume key: SHA-256 of the canonical JSON of
the model's settings, the cluster's fingerprint (tools as shown, canonical order), the
query text, the presented order, the presentation, the condition, the run index, the
generate config, the tool_choice and the prompt version. Re-running the same command
skips keys already stored as ``ok`` or ``unparsed`` and retries ``error`` ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..base.canonical import sha256_of
from .metrics import Selection

#: the prompt of records written before prompts and sampling settings were stored, this project's own
#: (their temperature, top_p and tool_choice read as None: "not recorded")
LEGACY_PROMPT = "toolbias"


@dataclass(frozen=True)
class GroupKey:
    """What makes two records comparable: same model, benchmark, presentation, prompt, condition and
    sampling settings (temperature, top-p, tool_choice)."""

    model: str
    benchmark: str
    presentation: str
    prompt: str
    condition: str
    temperature: float | None
    top_p: float | None
    tool_choice: str | None
    #: the paper's backbone label (:mod:`.backbones`), "" for runs without one
    backbone: str = ""

    @property
    def label(self) -> str:
        return " | ".join([self.model, self.benchmark, self.presentation, self.condition, self.settings_label])

    @property
    def settings_label(self) -> str:
        def num(x: float | None) -> str:
            return "?" if x is None else f"{x:g}"
        return (f"prompt={self.prompt} T={num(self.temperature)} top_p={num(self.top_p)} "
                f"tool_choice={self.tool_choice or 'none'}" + (f" backbone={self.backbone}" if self.backbone else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "benchmark": self.benchmark, "presentation": self.presentation,
                "prompt": self.prompt, "condition": self.condition, "temperature": self.temperature,
                "top_p": self.top_p, "tool_choice": self.tool_choice, **({"backbone": self.backbone} if self.backbone
                                                                         else {})}


class Status(str, Enum):
    OK = "ok"                #: parsed: api and position are set
    UNPARSED = "unparsed"    #: the model answered but named no single candidate (kept out of denominators)
    ERROR = "error"          #: infrastructure failure after retries (re-run on resume)


@dataclass(frozen=True)
class SelectionRecord:
    key: str
    model: str
    benchmark: str
    condition: str
    presentation: str
    run: int
    cluster: str
    query_index: int
    query: str
    rotation: int
    order: tuple[int, ...]
    api: int | None
    position: int | None
    status: Status
    reason: str = ""
    via: str = ""
    output: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    #: the system prompt's name and the sampling settings: part of the result group (:attr:`group`)
    prompt: str = ""
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: str | None = None
    #: the paper's reading of the same answer (PROTOCOL.md 1.8; :mod:`.paper_parse`), None when it reads none
    paper_api: int | None = None
    paper_position: int | None = None
    #: the paper's backbone label (:mod:`.backbones`), "" for runs without one; part of the result group
    backbone: str = ""

    @property
    def group(self) -> GroupKey:
        """The result group: records of different groups are never pooled."""
        return GroupKey(self.model, self.benchmark, self.presentation, self.prompt, self.condition,
                        self.temperature, self.top_p, self.tool_choice, self.backbone)

    @property
    def k(self) -> int:
        return len(self.order)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_selection(self, rule: str = "exact") -> Selection | None:
        """The parsed selection under the exact rule, or (``rule="paper"``) the paper's reading."""
        if rule == "paper":
            if self.status is Status.ERROR or self.paper_api is None or self.paper_position is None:
                return None
            return Selection(run=str(self.run), cluster=self.cluster, query=str(self.query_index),
                             api=self.paper_api, position=self.paper_position, k=self.k)
        if self.status is not Status.OK or self.api is None or self.position is None:
            return None
        return Selection(run=str(self.run), cluster=self.cluster, query=str(self.query_index), api=self.api,
                         position=self.position, k=self.k)

    def to_metrics_dict(self) -> dict[str, Any]:
        """The documented metrics record (:mod:`.metrics`); unparsed answers carry ``api: null``."""
        d: dict[str, Any] = {"run": str(self.run), "cluster": self.cluster, "query": self.query_index,
                             "api": self.api if self.ok else None, "position": self.position if self.ok else None,
                             "k": self.k}
        if not self.ok:
            d["status"] = self.status.value
        return d

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "model": self.model, "benchmark": self.benchmark, "condition": self.condition,
                "presentation": self.presentation, "run": self.run, "cluster": self.cluster,
                "query_index": self.query_index, "query": self.query, "rotation": self.rotation,
                "order": list(self.order), "k": self.k, "api": self.api, "position": self.position,
                "status": self.status.value, "reason": self.reason, "via": self.via,
                "output": dict(self.output) if self.output is not None else None, "extra": dict(self.extra),
                "latency_s": self.latency_s, "prompt": self.prompt, "temperature": self.temperature,
                "top_p": self.top_p, "tool_choice": self.tool_choice, "paper_api": self.paper_api,
                "paper_position": self.paper_position, **({"backbone": self.backbone} if self.backbone else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SelectionRecord:
        return cls(key=d["key"], model=d["model"], benchmark=d["benchmark"], condition=d["condition"],
                   presentation=d["presentation"], run=int(d["run"]), cluster=str(d["cluster"]),
                   query_index=int(d["query_index"]), query=d["query"], rotation=int(d["rotation"]),
                   order=tuple(int(i) for i in d["order"]), api=d.get("api"), position=d.get("position"),
                   status=Status(d["status"]), reason=d.get("reason", ""), via=d.get("via", ""),
                   output=d.get("output"), extra=d.get("extra") or {}, latency_s=float(d.get("latency_s", 0.0)),
                   prompt=str(d.get("prompt") or LEGACY_PROMPT), temperature=d.get("temperature"),
                   top_p=d.get("top_p"), tool_choice=d.get("tool_choice"), paper_api=d.get("paper_api"),
                   paper_position=d.get("paper_position"), backbone=str(d.get("backbone") or ""))


def trial_key(*, settings: Mapping[str, Any], cluster_fingerprint: str, query: str, order: Sequence[int],
              presentation: str, condition: str, run: int, config: Mapping[str, Any], tool_choice: str | None,
              prompt_version: str, salt: str = "") -> str:
    payload = {"settings": settings, "cluster": cluster_fingerprint, "query": query, "order": list(order),
               "presentation": presentation, "condition": condition, "run": run, "config": config,
               "tool_choice": tool_choice, "prompt": prompt_version, "salt": salt}
    return sha256_of(payload)
