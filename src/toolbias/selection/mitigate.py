"""Filter-then-uniform-sampling (BiasBusters section 6) and filter-quality evaluation.

A **filter model** (any provider) sees the query and the numbered candidates and
returns, as JSON, the subset able to serve the query::

    {"tools": ["<exact tool name>", ...]}

(a bare JSON list, other keys such as ``apis``/``selected_tools``, and 1-based list
numbers are accepted too; names must match a candidate exactly, as in :mod:`.parse`;
unknown entries are dropped and counted). A **seeded uniform draw** then picks one
tool of the subset: the draw's seed is derived from (seed, run, cluster, query,
rotation), so a mitigated run is reproducible. An answer with no JSON subset, or an
empty subset, is an *unparsed* record (counted, out of the denominators).

Filter quality is scored against ground-truth subsets: micro precision
(sum TP / sum |predicted|), micro recall (sum TP / sum |correct|) and exact match,
overall and by K = |correct|. An unparseable filter answer counts as an empty
prediction there (it lowers recall and exact match) and is reported in
``n_unparsed``. The built-in evaluation set (:func:`builtin_filter_set`) mixes K = 2..5
tools of the query's cluster with 8 - K distractors from other clusters.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine import JobKind, Row, Writer, play
from ..providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput
from .benchmark import Benchmark, SelectionTool
from .parse import match_name, strip_reasoning
from .records import SelectionRecord, Status, canonical, trial_key
from .runner import PROMPT_VERSION, SelectionRunner, Trial, describe_parameters, plan_trials, run_config
from .store import SelectionStore, filter_row

FILTER_SYSTEM = ("You filter tools for a user request. From the numbered candidate tools, return every tool that can "
                 "serve the request on its own, and no other. Answer with JSON only, in the form "
                 "{\"tools\": [\"<exact tool name>\", ...]}.")
SUBSET_KEYS = ("tools", "apis", "selected_tools", "selected", "subset", "names", "candidates")


@dataclass(frozen=True)
class FilterExample:
    """A query, candidate tools (in presented order) and the positions of the correct ones."""

    id: str
    query: str
    candidates: tuple[SelectionTool, ...]
    correct: frozenset[int]
    cluster: str = ""

    @property
    def k(self) -> int:
        return len(self.correct)


@dataclass(frozen=True)
class Subset:
    """A parsed filter answer: positions (0-based) in the candidate list, or None when unparsed."""

    positions: frozenset[int] | None
    reason: str = ""
    n_unknown: int = 0


def filter_messages(query: str, candidates: Sequence[SelectionTool]) -> list[Message]:
    lines = []
    for i, t in enumerate(candidates, 1):
        lines.append(f"{i}. {t.name}: {t.description or '(no description)'}")
        lines.append(f"   parameters: {describe_parameters(t)}")
    user = (f"Request: {query}\n\nCandidate tools:\n" + "\n".join(lines)
            + "\n\nWhich of these tools can serve the request? Answer with JSON only: "
              "{\"tools\": [\"<exact tool name>\", ...]}")
    return [{"role": "system", "content": FILTER_SYSTEM}, {"role": "user", "content": user}]


def _json_values(text: str) -> Any:
    """The first JSON object or array in the text (after removing reasoning and code fences)."""
    body = re.sub(r"```(?:json)?", "", strip_reasoning(text))
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", body):
        try:
            value, _ = decoder.raw_decode(body[m.start():])
        except json.JSONDecodeError:
            continue
        return value
    return None


def parse_subset(text: str | None, names: Sequence[str]) -> Subset:
    if not text or not text.strip():
        return Subset(None, "empty answer")
    value = _json_values(text)
    if isinstance(value, dict):
        items = next((value[k] for k in SUBSET_KEYS if isinstance(value.get(k), list)), None)
        if items is None:
            return Subset(None, f"JSON object without a list under {SUBSET_KEYS[0]!r}")
    elif isinstance(value, list):
        items = value
    else:
        return Subset(None, "no JSON subset in the answer")
    chosen: set[int] = set()
    unknown = 0
    for item in items:
        if isinstance(item, dict):
            item = item.get("name") or item.get("tool") or item.get("api")
        hit: int | None = None
        if isinstance(item, str):
            hit = match_name(item.strip(), names)
            if hit is None and item.strip().isdigit() and 1 <= int(item.strip()) <= len(names):
                hit = int(item.strip()) - 1
        elif isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= len(names):
            hit = item - 1
        if hit is None:
            unknown += 1
        else:
            chosen.add(hit)
    return Subset(frozenset(chosen), "" if not unknown else f"{unknown} unknown entries dropped", unknown)


async def filter_subset(model: ModelAPI, query: str, candidates: Sequence[SelectionTool],
                        config: GenerateConfig) -> tuple[Subset, ModelOutput]:
    out = await model.generate(filter_messages(query, candidates), [], None, config)
    return parse_subset(out.content, [t.name for t in candidates]), out


def draw_seed(seed: int, *parts: object) -> int:
    return int(hashlib.sha256(canonical([seed, *parts]).encode()).hexdigest()[:16], 16)


# --- filter-then-uniform on a benchmark -------------------------------------------------------------------


class MitigationRunner(SelectionRunner):
    """Each trial: the filter model picks the able subset of the rotated list; a seeded uniform draw picks one."""

    presentations = ("filter",)

    def __init__(self, filter_model: ModelAPI, *, seed: int = 0, **options: Any) -> None:
        options.setdefault("condition", "mitigated")
        super().__init__(filter_model, presentation="filter", tool_choice=None, **options)
        self.seed = seed

    def key(self, trial: Trial) -> str:
        return trial_key(settings=self.model.settings(), cluster_fingerprint=trial.cluster.fingerprint(),
                         query=trial.query, order=trial.order, presentation=self.presentation,
                         condition=self.condition, run=trial.run, config=run_config(self.config, trial.run).to_dict(),
                         tool_choice=None, prompt_version=PROMPT_VERSION, salt=f"filter-uniform:{self.seed}")

    async def run_trial(self, trial: Trial, key: str) -> SelectionRecord:
        tools = trial.cluster.presented(trial.order)
        base: dict[str, Any] = dict(key=key, model=self.model.spec, benchmark=self.benchmark_name, condition=self.condition,
                    presentation=self.presentation, run=trial.run, cluster=trial.cluster.id,
                    query_index=trial.query_index, query=trial.query, rotation=trial.rotation, order=trial.order)
        start = time.perf_counter()
        try:
            subset, out = await filter_subset(self.model, trial.query, tools, run_config(self.config, trial.run))
        except InfraError as exc:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR,
                                   reason=f"infrastructure: {exc}", latency_s=time.perf_counter() - start)
        latency = out.latency_s or (time.perf_counter() - start)
        if not subset.positions:
            reason = subset.reason if subset.positions is None else "the filter kept no candidate"
            return SelectionRecord(**base, api=None, position=None, status=Status.UNPARSED, reason=reason,
                                   output=out.to_dict(), latency_s=latency)
        rng = random.Random(draw_seed(self.seed, trial.run, trial.cluster.id, trial.query_index, trial.rotation))
        pos = rng.choice(sorted(subset.positions))
        return SelectionRecord(**base, api=trial.order[pos], position=pos, status=Status.OK, via="filter-uniform",
                               reason=subset.reason, output=out.to_dict(),
                               extra={"subset": sorted(subset.positions),
                                      "subset_apis": sorted(trial.order[p] for p in subset.positions)},
                               latency_s=latency)


async def arun_mitigation(filter_model: ModelAPI, bench: Benchmark, *, runs: int = 1, seed: int = 0,
                          config: GenerateConfig | None = None, concurrency: int = 8,
                          store: SelectionStore | None = None,
                          on_record: Callable[[SelectionRecord], None] | None = None) -> list[SelectionRecord]:
    runner = MitigationRunner(filter_model, seed=seed, benchmark_name=bench.name,
                              config=config or GenerateConfig(temperature=0.0), concurrency=concurrency, store=store,
                              on_record=on_record)
    return await runner.run(plan_trials(bench, runs))


# --- filter-quality evaluation ----------------------------------------------------------------------------


def builtin_filter_set(bench: Benchmark, *, per_cluster: int = 20, n_candidates: int = 8, seed: int = 0,
                       ks: Sequence[int] = (2, 3, 4, 5)) -> list[FilterExample]:
    """K correct tools (the query's cluster) + n_candidates - K distractors (other clusters), shuffled;
    K cycles through ``ks`` over each cluster's first ``per_cluster`` queries."""
    rng = random.Random(seed)
    out = []
    for c in bench.clusters:
        others = [t for o in bench.clusters if o.id != c.id for t in o.tools]
        for qi, query in enumerate(c.queries[:per_cluster]):
            k = min(ks[qi % len(ks)], c.k, n_candidates)
            correct = rng.sample(list(c.tools), k)
            names = {t.name.casefold() for t in correct}
            pool = [t for t in others if t.name.casefold() not in names]
            distractors: list[SelectionTool] = []
            for t in rng.sample(pool, len(pool)):
                if len(distractors) == n_candidates - k:
                    break
                if t.name.casefold() not in names:
                    names.add(t.name.casefold())
                    distractors.append(t)
            cands = correct + distractors
            rng.shuffle(cands)
            correct_ids = {id(t) for t in correct}
            out.append(FilterExample(id=f"{c.id}:{qi}", query=query, candidates=tuple(cands),
                                     correct=frozenset(i for i, t in enumerate(cands) if id(t) in correct_ids),
                                     cluster=c.id))
    return out


@dataclass(frozen=True)
class FilterScores:
    n: int
    n_unparsed: int
    micro_precision: float
    micro_recall: float
    exact_match: float
    by_k: Mapping[int, Mapping[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "n_unparsed": self.n_unparsed, "micro_precision": self.micro_precision,
                "micro_recall": self.micro_recall, "exact_match": self.exact_match,
                "by_k": {str(k): dict(v) for k, v in self.by_k.items()}}


def _score(pairs: Iterable[tuple[frozenset[int], frozenset[int] | None]]) -> dict[str, float]:
    tp = npred = ngold = exact = n = unparsed = 0
    for gold, pred in pairs:
        p = pred or frozenset()
        unparsed += pred is None
        tp += len(p & gold)
        npred += len(p)
        ngold += len(gold)
        exact += p == gold
        n += 1
    return {"n": n, "n_unparsed": unparsed, "micro_precision": tp / npred if npred else 0.0,
            "micro_recall": tp / ngold if ngold else 0.0, "exact_match": exact / n if n else 0.0}


def score_filter(examples: Sequence[FilterExample], predictions: Sequence[frozenset[int] | None]) -> FilterScores:
    """Micro precision/recall and exact match, overall and by K (None = unparsed = empty prediction)."""
    if len(examples) != len(predictions):
        raise ValueError("one prediction per example")
    pairs = [(e.correct, p) for e, p in zip(examples, predictions, strict=True)]
    overall = _score(pairs)
    groups: dict[int, list[tuple[frozenset[int], frozenset[int] | None]]] = defaultdict(list)
    for e, p in zip(examples, predictions, strict=True):
        groups[e.k].append((e.correct, p))
    by_k = {k: _score(v) for k, v in sorted(groups.items())}
    return FilterScores(n=int(overall["n"]), n_unparsed=int(overall["n_unparsed"]),
                        micro_precision=overall["micro_precision"], micro_recall=overall["micro_recall"],
                        exact_match=overall["exact_match"], by_k=by_k)


class FilterJobs(JobKind[FilterExample, dict[str, Any]]):
    """The engine's job kind for the filter-quality evaluation: one example, one filter answer."""

    def __init__(self, filter_model: ModelAPI, eval_set: str, config: GenerateConfig) -> None:
        self.model, self.eval_set, self.config = filter_model, eval_set, config
        self.settings = filter_model.settings()

    def key(self, item: FilterExample) -> str:
        payload = {"settings": self.settings, "set": self.eval_set, "example": item.id, "query": item.query,
                   "candidates": [t.to_openai() for t in item.candidates], "config": self.config.to_dict(),
                   "prompt": PROMPT_VERSION}
        return hashlib.sha256(canonical(payload).encode()).hexdigest()

    async def run_one(self, item: FilterExample, key: str) -> dict[str, Any]:
        head = {"key": key, "model": self.model.spec, "eval_set": self.eval_set, "example": item.id, "k": item.k}
        try:
            subset, out = await filter_subset(self.model, item.query, item.candidates, self.config)
        except InfraError as exc:
            return {**head, "status": Status.ERROR.value, "reason": f"infrastructure: {exc}", "predicted": None,
                    "correct": sorted(item.correct), "output": None}
        ok = subset.positions is not None
        return {**head, "status": (Status.OK if ok else Status.UNPARSED).value, "reason": subset.reason,
                "predicted": sorted(subset.positions) if subset.positions is not None else None,
                "correct": sorted(item.correct), "output": out.to_dict()}

    def row(self, item: FilterExample, key: str, result: dict[str, Any]) -> Row:
        return filter_row(result)


async def aevaluate_filter(filter_model: ModelAPI, examples: Sequence[FilterExample], *, eval_set: str = "builtin",
                           config: GenerateConfig | None = None, concurrency: int = 8,
                           store: SelectionStore | None = None) -> tuple[FilterScores, list[dict[str, Any]]]:
    """Run the filter on every example (resumable through the store) and score it."""
    jobs = FilterJobs(filter_model, eval_set, config or GenerateConfig(temperature=0.0))
    keys = [jobs.key(e) for e in examples]
    answers = {r["key"]: r for r in (store.filter_rows() if store else [])
               if r.get("status") != Status.ERROR.value}
    todo = [(k, e) for k, e in zip(keys, examples, strict=True) if k not in answers]

    def on_row(row: Row) -> None:
        answer = json.loads(row[-1])
        answers[answer["key"]] = answer

    await play(jobs, todo, Writer(store.put_filter_rows if store else (lambda rows: None), on_row=on_row),
               concurrency=max(1, concurrency))
    rows = [answers[k] for k in keys]
    scored = [(e, r) for e, r in zip(examples, rows, strict=True) if r["status"] != Status.ERROR.value]
    preds = [frozenset(r["predicted"]) if r["predicted"] is not None else None for _, r in scored]
    return score_filter([e for e, _ in scored], preds), rows
