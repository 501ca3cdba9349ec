"""Splits: which tasks, domains and variants training may see, so no evaluated task is a
training task and every result says what the trained model had seen.

A manifest (JSON) names the training domains, the held-out domains, the variants the
training data uses and the share of each training domain's tasks kept back for
evaluation. Every task gets one part:

* ``train``: a task of a training domain outside the kept-back share;
* ``eval``: the kept-back share of a training domain, and every task of a held-out domain.

``toolbias train-data`` draws only ``train`` tasks; ``toolbias run --split eval`` only
``eval`` tasks; ``toolbias report --splits`` marks each result ``seen`` (training
domain and variant, unseen task), ``held_out_variant``, ``held_out_domain`` or
``held_out_both``.

Defaults: on the schema-bias paper's artifact (``toolschemaspace:DIR``) the training
domains are Table 4's RQ4 ``train`` rows (car cabin, HVAC/climate, media player,
kitchen, laundry, security) and the other six are held out; the built-in catalog
mirrors Table 4 (its first six domains are the same six; lighting, TV, robot vacuum,
garden, fitness watch and pool/spa are held out). Training variants default to the
paper's seven-variant mixture. Another catalog gets every domain for training and
the task share kept back. The kept-back share is a hash of (seed, task id): the same
for every variant, every run and every machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.jsonfile import read_json
from ..catalog.model import Catalog, Task
from ..errors import ToolbiasError

PARTS = ("train", "eval")
LABELS = ("seen", "held_out_variant", "held_out_domain", "held_out_both")

#: the paper's seven-variant training mixture (Table 13 caption)
PAPER_MIXTURE = ("native", "fully_merged", "transaction", "reference_resolution", "schema_discovery",
                 "opaque_names", "split_one_enum")

#: Table 4: the RQ4 intervention-training domains of the paper's artifact (domain ids of tools.json)
TABLE4_TRAIN = ("car_cabin", "climate", "media_player", "kitchen", "laundry", "security")
TABLE4_HELD_OUT = ("smart_home", "calendar", "tv", "vacuum", "smartwatch", "navigation")
#: the built-in catalog's equivalent: the same six training domains, its six others held out
BUILTIN_TRAIN = ("car_cabin", "home_hvac", "media_player", "kitchen", "laundry", "security")
BUILTIN_HELD_OUT = ("lighting", "tv", "robot_vacuum", "garden", "fitness_watch", "pool_spa")


class SplitError(ToolbiasError):
    """A splits manifest that cannot be read or does not fit the catalog."""


@dataclass(frozen=True)
class Splits:
    """A splits manifest (see the module doc)."""

    name: str
    train_domains: tuple[str, ...] = ()
    held_out_domains: tuple[str, ...] = ()
    train_variants: tuple[str, ...] = PAPER_MIXTURE
    #: share of each training domain's tasks kept back for evaluation
    eval_fraction: float = 0.5
    seed: int = 0
    #: the file it was read from (named in errors; not part of its identity)
    source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        where = self.source or f"splits '{self.name}'"
        if not 0.0 <= self.eval_fraction < 1.0:
            raise SplitError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}", where=where,
                             fix="write e.g. \"eval_fraction\": 0.5")
        both = sorted(set(self.train_domains) & set(self.held_out_domains))
        if both:
            raise SplitError(f"domain(s) both trained on and held out: {', '.join(both)}", where=where,
                             fix="list each domain in one of train_domains / held_out_domains")

    # -- parts ---------------------------------------------------------------------
    def trains_on(self, domain: str) -> bool:
        """Training domains; with no domains listed, every domain not held out."""
        if domain in self.held_out_domains:
            return False
        return not self.train_domains or domain in self.train_domains

    def kept_back(self, task_id: str) -> bool:
        digest = hashlib.sha256(f"{self.seed}\0{task_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.eval_fraction

    def part(self, task: Task) -> str:
        """``train`` or ``eval`` (see the module doc)."""
        return "train" if self.trains_on(task.domain) and not self.kept_back(task.id) else "eval"

    def tasks(self, tasks: Iterable[Task], part: str) -> list[Task]:
        if part not in PARTS:
            raise SplitError(f"unknown split part '{part}'", fix=f"use one of: {', '.join(PARTS)}")
        return [t for t in tasks if self.part(t) == part]

    def label(self, domain: str, variant: str) -> str:
        """What a trained model had seen of an evaluation result (one of :data:`LABELS`)."""
        new_domain = not self.trains_on(domain)
        new_variant = variant not in self.train_variants
        if new_domain and new_variant:
            return "held_out_both"
        return "held_out_domain" if new_domain else "held_out_variant" if new_variant else "seen"

    def check(self, catalog: Catalog) -> None:
        """Refuse a manifest naming domains the catalog lacks (a typo would silently hold out nothing)."""
        known = {d.name for d in catalog.domains}
        unknown = sorted((set(self.train_domains) | set(self.held_out_domains)) - known)
        if unknown:
            raise SplitError(f"domain(s) not in catalog '{catalog.name}': {', '.join(unknown)}",
                             where=self.source or f"splits '{self.name}'",
                             fix=f"use domains of the catalog: {', '.join(sorted(known))}")

    # -- files ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "train_domains": list(self.train_domains),
                "held_out_domains": list(self.held_out_domains), "train_variants": list(self.train_variants),
                "eval_fraction": self.eval_fraction, "seed": self.seed}

    def with_variants(self, variants: Sequence[str]) -> Splits:
        return Splits(self.name, self.train_domains, self.held_out_domains, tuple(variants), self.eval_fraction,
                      self.seed, self.source)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "<splits>") -> Splits:
        if not isinstance(d, Mapping):
            raise SplitError("a splits manifest must be a JSON object", where=where,
                             fix='write {"name": ..., "train_domains": [...], "held_out_domains": [...]}')
        lists = {}
        for key in ("train_domains", "held_out_domains", "train_variants"):
            value = d.get(key, [] if key != "train_variants" else list(PAPER_MIXTURE))
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SplitError(f"'{key}' must be a list of names", where=where, fix=f'write "{key}": ["..."]')
            lists[key] = tuple(value)
        unknown = sorted(set(d) - {"name", "eval_fraction", "seed", *lists})
        if unknown:
            raise SplitError(f"unknown key(s): {', '.join(unknown)}", where=where,
                             fix="keys: name, train_domains, held_out_domains, train_variants, eval_fraction, seed")
        try:
            fraction, seed = float(d.get("eval_fraction", 0.5)), int(d.get("seed", 0))
        except (TypeError, ValueError):
            raise SplitError("eval_fraction must be a number and seed an integer", where=where) from None
        return cls(str(d.get("name", Path(where).stem)), lists["train_domains"], lists["held_out_domains"],
                   lists["train_variants"], fraction, seed, None if where == "<splits>" else where)

    @classmethod
    def from_file(cls, path: str | Path) -> Splits:
        p = Path(path)
        data = read_json(p, error=SplitError, missing_fix="check the path, or use 'default' (the catalog's own split)")
        return cls.from_dict(data, where=str(p))

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


TABLE4 = Splits("table4", TABLE4_TRAIN, TABLE4_HELD_OUT)
BUILTIN = Splits("builtin", BUILTIN_TRAIN, BUILTIN_HELD_OUT)


def default_splits(catalog: Catalog) -> Splits:
    """The catalog's default manifest (see the module doc)."""
    if catalog.name == "builtin":
        return BUILTIN
    if catalog.name.startswith("toolschemaspace:"):
        return TABLE4
    return Splits(f"tasks-of-{catalog.name}")


def load_splits(spec: str, catalog: Catalog) -> Splits:
    """``default`` (the catalog's), ``table4``, ``builtin`` or a manifest file; checked against ``catalog``."""
    named = {"table4": TABLE4, "builtin": BUILTIN}
    splits = default_splits(catalog) if spec == "default" else named.get(spec) or Splits.from_file(spec)
    splits.check(catalog)
    return splits


__all__ = ["BUILTIN", "LABELS", "PAPER_MIXTURE", "PARTS", "SplitError", "Splits", "TABLE4", "default_splits",
           "load_splits"]
