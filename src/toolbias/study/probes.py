"""Compliance probes (paper Table 10): can the model express one isolated operation in
a variant's schema, with no task story around it?

Probes are derived from the catalog's native schema, so every variant gets the
*same* probes and compliance rates compare across variants. ``n`` probes (paper: 36)
are spread round-robin over domains and, within a domain, over its operations
(seeded order); argument values come from a gold action of that tool in the
catalog's query set when there is one (realistic values), else they are drawn
from the schema (enum values, ranges, types). Each probe is a :class:`Task` whose
query is an explicit one-action instruction and whose gold is that one action.

Scoring a probe episode (documented contract):

* **compliant**: the first call that decodes to a native action comes before any
  rejection (protocol replies such as a transaction handle are fine);
* **exact call**: that first native action equals the instructed action (after the
  scoring normalisation), whatever came before it;
* the stored ``success`` is the ordinary exact success of the one-action episode.

Under ``--protocol paper`` a probe is an episode of the artifact's evaluation, played as ``toolbias
run --protocol paper`` plays a task (:mod:`toolbias.study.paper_episode`: the domain's system prompt
and the artifact's tool instruction, its environment's replies, hard / loose control, 16 turns,
1,024 tokens): a rejection is the artifact's (a name the variant lacks, a dispatcher's wrong
operation, transaction misuse), and the exact call and success use the artifact's success rule
(``MatchRule.PAPER``; the record says which rule). The artifact has no probe runner of its own:
the probes (their operations, values and instruction text) are toolbias's, the episode is the
artifact's. Such probes are stored under ``<condition>@paper``, apart from toolbias's.

Probe episodes run through the normal runner (the batch engine's episode jobs) with
``kind="probe"`` and are stored beside task episodes (the store's ``kind`` column keeps
them apart).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from ..catalog.model import Catalog, NativeAction, Task, Tool
from ..catalog.validation import validate_action
from .scoring import action_key
from .stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, CellKey, bootstrap_ci, group_rows
from .success import MatchRule

if TYPE_CHECKING:  # the runner (and the providers it loads) only when probes are run
    from ..providers.base import ModelAPI
    from ..store import Store
    from .runner import Progress, ProgressFn, Study, StudyConfig

DEFAULT_PROBES = 36
PROBE_PREFIX = "probe"
#: a probe's turns and tokens per turn under toolbias's protocol (the paper's protocol keeps its own)
PROBE_TURN_LIMIT = 4
PROBE_MAX_TOKENS = 512


# -- building probes ----------------------------------------------------------

def _synth_value(schema: Mapping[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A valid value for a (supported-subset) JSON schema, or raise ValueError."""
    if "enum" in schema and schema["enum"]:
        return rng.choice(list(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if t in ("integer", "number"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is None and isinstance(schema.get("exclusiveMinimum"), (int, float)):
            lo = math.floor(schema["exclusiveMinimum"]) + 1
        if hi is None and isinstance(schema.get("exclusiveMaximum"), (int, float)):
            hi = math.ceil(schema["exclusiveMaximum"]) - 1
        lo = 0 if lo is None else lo
        hi = lo + 10 if hi is None else hi
        if t == "integer":
            return rng.randint(int(math.ceil(lo)), int(math.floor(hi)))
        return round(rng.uniform(float(lo), float(hi)), 1)
    if t == "boolean":
        return rng.choice([True, False])
    if t == "string":
        return rng.choice(["morning", "guest", "blue", "daily", "backup"])
    if t == "array" and depth < 3:
        items = schema.get("items") or {"type": "string"}
        return [_synth_value(items, rng, depth + 1)]
    if (t == "object" or "properties" in schema) and depth < 3:
        return _synth_args(schema, rng, depth + 1)
    raise ValueError(f"cannot draw a value for schema {schema!r}")


def _synth_args(schema: Mapping[str, Any], rng: random.Random, depth: int = 0) -> dict[str, Any]:
    props: Mapping[str, Any] = schema.get("properties", {}) or {}
    return {name: _synth_value(props[name], rng, depth) for name in schema.get("required", []) or []
            if name in props}


def _gold_examples(catalog: Catalog) -> dict[str, list[NativeAction]]:
    out: dict[str, list[NativeAction]] = {}
    for task in catalog.tasks:
        for a in task.gold:
            out.setdefault(a.uid, []).append(a)
    return out


def _humanise(name: str) -> str:
    return name.replace("_", " ").replace(".", " ").strip()


def _value_text(v: Any) -> str:
    import json

    return json.dumps(v, ensure_ascii=False)


def probe_instruction(tool: Tool, action: NativeAction) -> str:
    """An explicit one-action instruction: the operation (in words, with its description)
    and every argument value; no task story."""
    desc = tool.description.strip().rstrip(".")
    what = _humanise(tool.name) + (f" ({desc[0].lower() + desc[1:]})" if desc else "")
    args = ", ".join(f"{k} = {_value_text(v)}" for k, v in action.arguments.items())
    with_args = f", with {args}" if args else " (no arguments)"
    return (f"Do exactly one thing: {what}{with_args}. "
            "Make that one call with the available tools, nothing else, then reply briefly.")


def make_probes(catalog: Catalog, n: int = DEFAULT_PROBES, seed: int = 0) -> list[Task]:
    """``n`` single-operation probes spread across domains and operations (deterministic per seed).

    Probes go one at a time to the domain that can still take an unused operation,
    has the fewest probes so far, and has the most operations (then by name); so 36
    probes over 12 domains are 3 distinct operations each, and an operation repeats
    only when every operation of every domain is used."""
    if n <= 0:
        return []
    rng = random.Random(f"probes:{seed}")
    examples = _gold_examples(catalog)
    ops: dict[str, list[Tool]] = {}
    for d in sorted(catalog.domains, key=lambda d: d.name):
        tools = sorted(d.tools, key=lambda t: t.name)
        rng.shuffle(tools)
        usable = [t for t in tools if _probe_action(catalog, t, examples.get(t.uid, []), random.Random(0), set())]
        if usable:
            ops[d.name] = usable
    if not ops:
        return []
    count = dict.fromkeys(ops, 0)
    order: list[str] = []
    for _ in range(n):
        dom = min(ops, key=lambda d: (count[d] >= len(ops[d]), count[d], -len(ops[d]), d))
        order.append(dom)
        count[dom] += 1
    used: set[str] = set()
    position = dict.fromkeys(ops, 0)
    probes: list[Task] = []
    for i, dom in enumerate(order):
        tools = ops[dom]
        tool = tools[position[dom] % len(tools)]
        position[dom] += 1
        action = _probe_action(catalog, tool, examples.get(tool.uid, []), rng, used)
        assert action is not None  # usable tools always give one
        used.add(action_key(action))
        probes.append(Task(id=f"{PROBE_PREFIX}-{i:03d}-{dom}-{tool.name}", domain=dom,
                           query=probe_instruction(tool, action), gold=(action,),
                           meta={"probe": True, "operation": tool.name, "seed": seed}))
    return probes


def _probe_action(catalog: Catalog, tool: Tool, examples: Sequence[NativeAction], rng: random.Random,
                  used: set[str]) -> NativeAction | None:
    candidates: list[NativeAction] = []
    pool = list(examples)
    rng.shuffle(pool)
    candidates.extend(pool[:8])
    for _ in range(8):
        try:
            candidates.append(NativeAction(tool.domain, tool.name, _synth_args(tool.parameters, rng)))
        except ValueError:
            break
    for a in candidates:
        if action_key(a) not in used and validate_action(catalog, a) is None:
            return a
    for a in candidates:  # a repeat is better than no probe for this operation
        if validate_action(catalog, a) is None:
            return a
    return None


# -- scoring probe episodes ---------------------------------------------------

@dataclass(frozen=True)
class ProbeOutcome:
    compliant: bool
    exact_call: bool
    first_action: NativeAction | None
    rejections_before: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["first_action"] = self.first_action.to_dict() if self.first_action else None
        return d


def probe_outcome(record: Mapping[str, Any]) -> ProbeOutcome:
    """Compliance and exact call for a stored probe episode record."""
    gold = [NativeAction.from_dict(a) for a in record.get("gold", [])]
    rule = record.get("match") or MatchRule.EXACT.value  # the paper's protocol: the artifact's rule
    rejections = 0
    for call in record.get("calls", []):
        dec = call.get("decoded")
        if dec is None or dec.get("outcome") == "rejection":
            rejections += 1
            continue
        if dec.get("outcome") == "native" and dec.get("actions"):
            first = NativeAction.from_dict(dec["actions"][0])
            exact = bool(gold) and action_key(first, rule) == action_key(gold[0], rule)
            return ProbeOutcome(rejections == 0, exact, first, rejections)
    return ProbeOutcome(False, False, None, rejections)


@dataclass
class ProbeCell:
    """Compliance of one (model, variant, control, condition), next to full-task success."""

    model: str
    variant: str
    control: str
    condition: str
    n: int
    compliance: float
    compliance_low: float
    compliance_high: float
    exact_call: float
    probe_success: float
    task_success: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compliance_cells(rows: Iterable[Mapping[str, Any]], *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                     confidence: float = DEFAULT_CONFIDENCE,
                     task_success: Mapping[CellKey, float] | None = None) -> list[ProbeCell]:
    """Per cell: compliance (with a bootstrap interval over probes), exact-call rate and probe
    success. ``rows`` are probe episodes with their ``record``; ``task_success`` maps cell keys
    to full-task success for the Table-10 comparison."""
    out = []
    for key, items in group_rows(list(rows)).items():
        outcomes = [probe_outcome(r["record"]) for r in items]
        comp = [float(o.compliant) for o in outcomes]
        ci = bootstrap_ci(comp, confidence=confidence, n_resamples=n_resamples, seed=seed, key=("probe", *key))
        out.append(ProbeCell(*key, n=len(items), compliance=ci.estimate, compliance_low=ci.low,
                             compliance_high=ci.high,
                             exact_call=sum(o.exact_call for o in outcomes) / len(outcomes),
                             probe_success=sum(bool(r["success"]) for r in items) / len(items),
                             task_success=(task_success or {}).get(key)))
    return out


# -- running ------------------------------------------------------------------

def probe_study(cfg: StudyConfig, *, n: int = DEFAULT_PROBES, probe_seed: int | None = None,
                model: ModelAPI | None = None) -> Study:
    """A built :class:`~toolbias.study.runner.Study` of compliance probes for ``cfg``'s model,
    catalog and variants (``cfg.kind`` is set to ``"probe"``)."""
    from .runner import build_study, study_catalog

    cfg = replace(cfg, kind="probe", tasks=None, sample=None)
    catalog = study_catalog(cfg)  # a task file's gold calls are the probes' examples
    probes = make_probes(catalog, n=n, seed=cfg.seed if probe_seed is None else probe_seed)
    if not probes:
        from ..errors import ToolbiasError

        raise ToolbiasError(f"no probe could be derived from catalog '{cfg.catalog}'",
                            fix="use a catalog whose tools have schemas with drawable values")
    return build_study(cfg, model, tasks=probes, catalog=catalog)


def run_probes(cfg: StudyConfig, store: Store | str = "toolbias.db", *, n: int = DEFAULT_PROBES,
               model: ModelAPI | None = None, on_progress: ProgressFn | None = None, check: bool = True) -> Progress:
    """Build and run a probe study through the batch engine (resumable like any study); returns
    the runner's Progress."""
    from .runner import run_study

    study = probe_study(cfg, n=n, model=model)
    return run_study(study, store, on_progress=on_progress, check=check)


__all__ = ["DEFAULT_PROBES", "PROBE_MAX_TOKENS", "PROBE_TURN_LIMIT", "ProbeCell", "ProbeOutcome", "compliance_cells", "make_probes", "probe_instruction",
           "probe_outcome", "probe_study", "run_probes"]
