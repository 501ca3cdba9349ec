"""Filter-then-uniform-sampling (BiasBusters section 6) and filter-quality evaluation.

A **filter model** (any provider) sees the query and the candidates and returns the subset
able to serve the query. Two filter prompts (``filter_style``):

- ``toolbias``: numbered candidates, JSON answer ``{"tools": ["<exact tool name>", ...]}``
  (a bare JSON list, other keys such as ``apis``/``selected_tools``, and 1-based list
  numbers are accepted too; names must match a candidate exactly; unknown entries are
  dropped and counted);
- ``paper``: the paper's prompt and candidates (PROTOCOL.md 5): the subset-selector text,
  then ``These are the APIs: `` and the Python ``str()`` of the ToolBench function dicts,
  sent as ``System: ... User: ... Assistant:`` in one user turn; the answer is read as the
  paper reads it (the whole reply as a JSON list, else the double-quoted strings inside the
  first ``[...]``, else an empty list).

A **seeded uniform draw** then picks one name of the subset (seed derived from (seed, run,
cluster, query, rotation): reproducible). Every trial is counted, whatever the filter
answered (``extra["filter"]``: ``kept``, ``empty``, ``unparsed`` or ``unknown`` when the drawn
name is no candidate); :func:`~toolbias.selection.study.coverage` reports the shares.
When the filter keeps nothing (``on_empty``):

- ``paper`` (default, the paper's end-to-end run): the selecting model is shown all the
  candidates and its own choice is recorded (``via="filter-empty-model"``); without a
  selecting model this falls back to ``uniform``;
- ``uniform``: a seeded uniform draw over all the candidates (the stated fallback);
- ``drop``: the trial is an unparsed record (out of the denominators, still counted).

**End to end** (``pick="model"``, the default when a selecting model is given; the paper's
``--mitigation --forward`` run): the selecting model is then asked the trial again, shown only
the drawn function (and, in the ToolBench presentations, Finish; the text prompt without the
tool blurb list, PROTOCOL.md 5), and the stored selection is *its parsed answer*, read against
all the trial's presented names (exact rule and the paper's reading, as a plain run); the draw
is kept in ``extra["drawn"]``. A drawn name that matches no candidate shows the model only
Finish (ToolBench presentations; elsewhere the trial is unparsed without a call). Records are
stored under the condition ``mitigated-e2e``. ``pick="draw"`` records the draw itself as the
selection (condition ``mitigated``; a drawn name that matches no candidate is unparsed).

Filter quality is scored against ground-truth subsets: micro precision
(sum TP / sum |predicted|), micro recall (sum TP / sum |correct|) and exact match,
overall and by K = |correct|. An unparseable filter answer counts as an empty
prediction there (it lowers recall and exact match) and is reported in
``n_unparsed``. The built-in evaluation set (:func:`builtin_filter_set`) mixes K = 2..5
tools of the query's cluster with 8 - K distractors from other clusters.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.canonical import sha256_of
from ..base.engine import JobKind, Row, Writer, play
from ..errors import ToolbiasError
from ..providers.base import GenerateConfig, InfraError, Message, ModelAPI, ModelOutput
from ..providers.textcalls import first_json
from . import toolbench
from .parse import match_name
from .present import TOOLBENCH_PRESENTATIONS, Prompt, build, describe_parameters
from .prompts import PAPER_FILTER
from .records import SelectionRecord, Status, trial_key
from .runner import PROMPT_VERSION, SelectionRunner, Trial, plan_trials, run_config
from .store import SelectionStore, filter_row
from .types import Benchmark, FilterExample, SelectionTool

FILTER_STYLES = ("toolbias", "paper")
ON_EMPTY = ("paper", "uniform", "drop")
#: what a mitigated trial records: the selecting model's answer to the drawn function (end to end), or the draw
PICKS = ("model", "draw")
PAPER_APIS_INTRO = "\nThese are the APIs: "

FILTER_SYSTEM = ("You filter tools for a user request. From the numbered candidate tools, return every tool that can "
                 "serve the request on its own, and no other. Answer with JSON only, in the form "
                 "{\"tools\": [\"<exact tool name>\", ...]}.")
SUBSET_KEYS = ("tools", "apis", "selected_tools", "selected", "subset", "names", "candidates")


@dataclass(frozen=True)
class Subset:
    """A parsed filter answer: positions (0-based) in the candidate list, or None when unparsed."""

    positions: frozenset[int] | None
    reason: str = ""
    n_unknown: int = 0


def paper_filter_messages(query: str, candidates: Sequence[SelectionTool]) -> list[Message]:
    """The paper's filter prompt (PROTOCOL.md 5): one user turn after an empty system message."""
    functions = [toolbench.function_dict(toolbench.api_of(t)) for t in candidates]
    system = PAPER_FILTER + PAPER_APIS_INTRO + str(functions)
    prompt = f"System: {system}\nUser: {toolbench.user_message(query)}\nAssistant:\n"
    return [{"role": "system", "content": ""}, {"role": "user", "content": prompt}]


def paper_filter_names(text: str | None) -> list[str] | None:
    """The paper's reading of a filter answer: a JSON list, else the quoted strings in the first [...], else []."""
    body = (text or "").strip()
    try:
        value = json.loads(body)
        if isinstance(value, list):
            return [str(v) for v in value]
    except (json.JSONDecodeError, RecursionError):
        pass
    m = re.search(r"\[(.*?)\]", body, re.S)
    if m:
        return re.findall(r'"([^"]*)"', m.group(1))
    return []


def filter_messages(query: str, candidates: Sequence[SelectionTool], style: str = "toolbias") -> list[Message]:
    if style == "paper":
        return paper_filter_messages(query, candidates)
    if style != "toolbias":
        raise ToolbiasError(f"unknown filter style '{style}'", fix=f"use {' or '.join(FILTER_STYLES)}")
    lines = []
    for i, t in enumerate(candidates, 1):
        lines.append(f"{i}. {t.name}: {t.description or '(no description)'}")
        lines.append(f"   parameters: {describe_parameters(t)}")
    user = (f"Request: {query}\n\nCandidate tools:\n" + "\n".join(lines)
            + "\n\nWhich of these tools can serve the request? Answer with JSON only: "
              "{\"tools\": [\"<exact tool name>\", ...]}")
    return [{"role": "system", "content": FILTER_SYSTEM}, {"role": "user", "content": user}]


def parse_subset(text: str | None, names: Sequence[str]) -> Subset:
    if not text or not text.strip():
        return Subset(None, "empty answer")
    value = first_json(text)
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


def shown_names(candidates: Sequence[SelectionTool], style: str) -> list[str]:
    return [toolbench.api_of(t).function_name if style == "paper" else t.name for t in candidates]


def read_subset(text: str | None, names: Sequence[str], style: str) -> tuple[Subset, list[str]]:
    """(the parsed subset, the raw names the paper draws from) of a filter answer."""
    if style != "paper":
        return parse_subset(text, names), []
    raw = paper_filter_names(text) or []
    hits = {i for i, n in enumerate(names) if n in raw}
    unknown = sum(1 for n in raw if n not in names)
    return Subset(frozenset(hits), "" if not unknown else f"{unknown} unknown entries", unknown), raw


async def filter_subset(model: ModelAPI, query: str, candidates: Sequence[SelectionTool],
                        config: GenerateConfig, style: str = "toolbias") -> tuple[Subset, ModelOutput]:
    out = await model.generate(filter_messages(query, candidates, style), [], None, config)
    return read_subset(out.content, shown_names(candidates, style), style)[0], out


def draw_seed(seed: int, *parts: object) -> int:
    return int(sha256_of([seed, *parts], 16), 16)


# --- filter-then-uniform on a benchmark -------------------------------------------------------------------


class MitigationRunner(SelectionRunner):
    """Each trial: the filter model picks the able subset of the rotated list; a seeded uniform draw picks one.
    ``chooser`` (a :class:`SelectionRunner`) answers the trials whose filter output is empty (``on_empty="paper"``)."""

    presentations = ("filter",)

    def __init__(self, filter_model: ModelAPI, *, seed: int = 0, filter_style: str = "toolbias",
                 on_empty: str = "paper", chooser: SelectionRunner | None = None, pick: str = "model",
                 **options: Any) -> None:
        if filter_style not in FILTER_STYLES:
            raise ToolbiasError(f"unknown filter style '{filter_style}'", fix=f"use {' or '.join(FILTER_STYLES)}")
        if on_empty not in ON_EMPTY:
            raise ToolbiasError(f"unknown empty-filter handling '{on_empty}'", fix=f"use {', '.join(ON_EMPTY)}")
        if pick not in PICKS:
            raise ToolbiasError(f"unknown mitigated pick '{pick}'", fix=f"use {' or '.join(PICKS)}")
        #: end to end only with a selecting model to ask
        self.pick = pick if chooser is not None else "draw"
        options.setdefault("condition", "mitigated-e2e" if self.pick == "model" else "mitigated")
        super().__init__(filter_model, presentation="filter", tool_choice=None, **options)
        self.seed = seed
        self.filter_style = filter_style
        self.prompt_name = f"filter-{filter_style}"
        self.on_empty = on_empty if on_empty != "paper" or chooser is not None else "uniform"
        self.chooser = chooser

    def key(self, trial: Trial) -> str:
        salt = f"filter-uniform:{self.seed}"
        if self.filter_style != "toolbias" or self.on_empty != "paper":
            salt += f":{self.filter_style}:{self.on_empty}"
        if self.chooser is not None and (self.on_empty == "paper" or self.pick == "model"):
            salt += f":chooser={self.chooser.key(trial)}"
        if self.pick == "model":
            salt += ":pick=model"
        return trial_key(settings=self.model.settings(), cluster_fingerprint=trial.cluster.fingerprint(),
                         query=trial.query, order=trial.order, presentation=self.presentation,
                         condition=self.condition, run=trial.run, config=run_config(self.config, trial.run).to_dict(),
                         tool_choice=None, prompt_version=PROMPT_VERSION, salt=salt)

    def _draw(self, trial: Trial, options: Sequence[Any]) -> Any:
        rng = random.Random(draw_seed(self.seed, trial.run, trial.cluster.id, trial.query_index, trial.rotation))
        return rng.choice(list(options))

    async def run_trial(self, trial: Trial, key: str) -> SelectionRecord:
        tools = trial.cluster.presented(trial.order)
        base: dict[str, Any] = dict(key=key, model=self.model.spec, benchmark=self.benchmark_name,
                                    condition=self.condition, presentation=self.presentation, run=trial.run,
                                    cluster=trial.cluster.id, query_index=trial.query_index, query=trial.query,
                                    rotation=trial.rotation, order=trial.order, **self.settings_fields())
        start = time.perf_counter()
        config = run_config(self.config, trial.run)
        try:
            out = await self.model.generate(filter_messages(trial.query, tools, self.filter_style), [], None, config)
        except InfraError as exc:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR,
                                   reason=f"infrastructure: {exc}", latency_s=time.perf_counter() - start)
        latency = out.latency_s or (time.perf_counter() - start)
        names = shown_names(tools, self.filter_style)
        subset, raw = read_subset(out.content, names, self.filter_style)
        kind = "unparsed" if subset.positions is None else "empty" if not (raw or subset.positions) else "kept"
        extra: dict[str, Any] = {"filter": kind}
        if kind == "kept":
            if self.filter_style == "paper":  # the paper draws a name from the raw list; an unknown one selects nothing
                drawn = self._draw(trial, raw)
                if drawn not in names:
                    unknown = {"filter": "unknown", "subset": sorted(subset.positions or ()), "subset_names": raw,
                               "drawn_name": str(drawn)[:200]}
                    if self.pick == "model" and self.chooser is not None \
                            and self.chooser.presentation in TOOLBENCH_PRESENTATIONS:
                        return await self._answer(trial, key, base, out, None, unknown, latency)
                    return SelectionRecord(**base, api=None, position=None, status=Status.UNPARSED,
                                           reason=f"drawn name '{str(drawn)[:80]}' is no candidate",
                                           output=out.to_dict(), extra=unknown, latency_s=latency)
                pos = names.index(drawn)
            else:
                pos = self._draw(trial, sorted(subset.positions or ()))
            assert subset.positions is not None
            if self.pick == "model":
                return await self._answer(trial, key, base, out, pos,
                                          {**extra, "subset": sorted(subset.positions),
                                           "subset_apis": sorted(trial.order[p] for p in subset.positions)},
                                          latency)
            return SelectionRecord(**base, api=trial.order[pos], position=pos, status=Status.OK, via="filter-uniform",
                                   reason=subset.reason, output=out.to_dict(),
                                   extra={**extra, "subset": sorted(subset.positions),
                                          "subset_apis": sorted(trial.order[p] for p in subset.positions)},
                                   latency_s=latency)
        reason = subset.reason if subset.positions is None else "the filter kept no candidate"
        if self.on_empty == "drop":
            return SelectionRecord(**base, api=None, position=None, status=Status.UNPARSED, reason=reason,
                                   output=out.to_dict(), extra=extra, latency_s=latency)
        if self.on_empty == "uniform":
            pos = self._draw(trial, range(len(tools)))
            return SelectionRecord(**base, api=trial.order[pos], position=pos, status=Status.OK,
                                   via="filter-empty-uniform", reason=reason, output=out.to_dict(), extra=extra,
                                   latency_s=latency)
        assert self.chooser is not None
        chosen = await self.chooser.run_trial(trial, key)
        if chosen.status is Status.ERROR:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR, reason=chosen.reason,
                                   latency_s=latency)
        return SelectionRecord(**base, api=chosen.api, position=chosen.position, status=chosen.status,
                               via="filter-empty-model", reason=chosen.reason or reason, output=out.to_dict(),
                               extra={**extra, "chooser": chosen.model, "chooser_output": chosen.output},
                               latency_s=latency + chosen.latency_s)

    async def _answer(self, trial: Trial, key: str, base: Mapping[str, Any], filter_out: ModelOutput,
                      pos: int | None, extra: Mapping[str, Any], latency: float) -> SelectionRecord:
        """End to end: the selecting model sees only the drawn function (``pos``; None: none, Finish alone)
        and its answer, read against every presented name, is the selection."""
        chooser = self.chooser
        assert chooser is not None and isinstance(chooser.prompt, Prompt)
        tools = trial.cluster.presented(trial.order)
        req = build(trial.query, [tools[pos]] if pos is not None else [], chooser.presentation,
                    prompt=chooser.prompt, tool_choice=chooser.tool_choice)
        messages = req.messages
        if chooser.presentation == "toolbench":   # the authors removed the blurb list from the text prompt
            messages = [*messages[:-1], {**messages[-1],
                                         "content": toolbench.without_blurbs(str(messages[-1]["content"]))}]
        start = time.perf_counter()
        more = {**extra, "drawn": trial.order[pos] if pos is not None else None, "drawn_position": pos,
                "chooser": chooser.model.spec, "filter_output": filter_out.to_dict()}
        try:
            answer = await chooser.model.generate(messages, req.tools, req.tool_choice,
                                                  run_config(chooser.config, trial.run))
        except InfraError as exc:
            return SelectionRecord(**base, api=None, position=None, status=Status.ERROR,
                                   reason=f"infrastructure (selecting model): {exc}",
                                   latency_s=latency + time.perf_counter() - start)
        read = chooser.record(trial, key, answer)
        more["took_draw"] = bool(read.ok and pos is not None and read.position == pos)
        return SelectionRecord(**base, api=read.api, position=read.position, status=read.status,
                               reason=read.reason, via=f"filter-uniform-model:{read.via}" if read.via else "",
                               output=read.output, extra={**read.extra, **more}, paper_api=read.paper_api,
                               paper_position=read.paper_position,
                               latency_s=latency + (answer.latency_s or time.perf_counter() - start))


async def arun_mitigation(filter_model: ModelAPI, bench: Benchmark, *, runs: int = 1, seed: int = 0,
                          config: GenerateConfig | None = None, concurrency: int = 8,
                          store: SelectionStore | None = None,
                          on_record: Callable[[SelectionRecord], None] | None = None, filter_style: str = "toolbias",
                          on_empty: str = "paper", chooser: SelectionRunner | None = None,
                          pick: str = "model") -> list[SelectionRecord]:
    """Filter, draw and (``pick="model"`` with a ``chooser``) the selecting model's answer to the drawn function."""
    runner = MitigationRunner(filter_model, seed=seed, benchmark_name=bench.name,
                              config=config or GenerateConfig(temperature=0.0), concurrency=concurrency, store=store,
                              on_record=on_record, filter_style=filter_style, on_empty=on_empty, chooser=chooser,
                              pick=pick)
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


def _score(pairs: Iterable[tuple[frozenset[Any], frozenset[Any] | None]]) -> dict[str, float]:
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


def score_sets(golds: Sequence[frozenset[Any]], predictions: Sequence[frozenset[Any] | None]) -> FilterScores:
    """Micro precision/recall and exact match of predicted sets (positions or names; None = unparsed = empty),
    overall and by K = |gold|."""
    if len(golds) != len(predictions):
        raise ValueError("one prediction per example")
    pairs = list(zip(golds, predictions, strict=True))
    overall = _score(pairs)
    groups: dict[int, list[tuple[frozenset[Any], frozenset[Any] | None]]] = defaultdict(list)
    for gold, pred in pairs:
        groups[len(gold)].append((gold, pred))
    by_k = {k: _score(v) for k, v in sorted(groups.items())}
    return FilterScores(n=int(overall["n"]), n_unparsed=int(overall["n_unparsed"]),
                        micro_precision=overall["micro_precision"], micro_recall=overall["micro_recall"],
                        exact_match=overall["exact_match"], by_k=by_k)


def score_filter(examples: Sequence[FilterExample], predictions: Sequence[frozenset[int] | None]) -> FilterScores:
    """Micro precision/recall and exact match, overall and by K (None = unparsed = empty prediction)."""
    return score_sets([e.correct for e in examples], predictions)


class FilterJobs(JobKind[FilterExample, dict[str, Any]]):
    """The engine's job kind for the filter-quality evaluation: one example, one filter answer."""

    def __init__(self, filter_model: ModelAPI, eval_set: str, config: GenerateConfig,
                 filter_style: str = "toolbias") -> None:
        self.model, self.eval_set, self.config, self.style = filter_model, eval_set, config, filter_style
        self.settings = filter_model.settings()

    def key(self, item: FilterExample) -> str:
        payload = {"settings": self.settings, "set": self.eval_set, "example": item.id, "query": item.query,
                   "candidates": [t.to_openai() for t in item.candidates], "config": self.config.to_dict(),
                   "prompt": PROMPT_VERSION if self.style == "toolbias" else f"filter-{self.style}"}
        return sha256_of(payload)

    async def run_one(self, item: FilterExample, key: str) -> dict[str, Any]:
        head = {"key": key, "model": self.model.spec, "eval_set": self.eval_set, "example": item.id, "k": item.k}
        try:
            subset, out = await filter_subset(self.model, item.query, item.candidates, self.config, self.style)
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
                           store: SelectionStore | None = None,
                           filter_style: str = "toolbias") -> tuple[FilterScores, list[dict[str, Any]]]:
    """Run the filter on every example through the batch engine (resumable through the store) and
    score it (``filter_style="paper"``: the paper's prompt, candidates and answer reading)."""
    jobs = FilterJobs(filter_model, eval_set, config or GenerateConfig(temperature=0.0), filter_style)
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
