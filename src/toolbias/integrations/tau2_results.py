"""tau2-bench's own results file (what ``tau2 run`` writes), read without tau2 installed and
imported into a toolbias store, so runs of tau2's runner through ``toolbias proxy`` reach the
same report (paper Table 9) as in-process ``--catalog tau2:DOMAIN`` runs.

The file: ``tau2 run`` saves ``Results`` (``tau2.data_model.simulation``) as JSON under
``--results-dir`` (default: tau2's ``data/simulations/``) as ``<save-to>.json``, beside a
``<save-to>_results.json`` summary and a ``<save-to>_termination_summary.json``. What is read:
``info`` (the domain, the agent's and user's LLMs, the seed), ``tasks`` (gold action counts)
and each of ``simulations`` (task id, trial, ``reward_info.reward``, termination, messages).
A small typed reader checks exactly these fields, so a wrong file fails with what is wrong,
where (``simulations[3].reward_info.reward``) and how to fix it.

Each simulation becomes an episode row of kind ``tau2`` (:data:`TAU2_KIND`): success is tau2's
own rule (reward within 1e-6 of 1); a sample tau2 skipped after an error (``skipped``, reward
0) counts as a failure, as tau2 and the paper score it (failure mode :data:`SKIPPED`); one without ``reward_info`` (never evaluated) is left
out. The row key hashes ``[run id, task id, trial]``, the run id being the file's creation
timestamp and ``info``: importing the same file again adds nothing, and a resumed run adds only
its new simulations.

The schema (variant): the proxy marks every reply with ``"toolbias": {"variant": ...}``; tau2
keeps each assistant message's ``raw_data`` (litellm's ``choices[0]``), in which litellm keeps a
choice- or message-level field under ``provider_specific_fields`` but drops a top-level one.
A mark found there names the variant; otherwise the caller must name it (``--tau2-variant``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.canonical import sha256_of
from ..base.jsonfile import read_json
from ..errors import ToolbiasError
from ..store import EpisodeRow, Store

#: the store's ``kind`` of an imported tau2 simulation
TAU2_KIND = "tau2"
#: the ``failure_mode`` of a sample tau2 skipped after an error (scored as a failure, reward 0)
SKIPPED = "skipped_after_error"
#: tau2's success rule (``tau2.metrics.agent_metrics.is_successful``)
SUCCESS_TOLERANCE = 1e-6
#: litellm provider prefixes that are an OpenAI-compatible server, as toolbias's ``openai:``
_OPENAI_PREFIXES = ("openai/", "hosted_vllm/")


class Tau2ResultsError(ToolbiasError):
    """A tau2 results file that cannot be imported."""


@dataclass(frozen=True)
class Tau2Simulation:
    """One simulation of a tau2 results file: what the import needs of it."""

    id: str
    task_id: str
    trial: int
    seed: int | None
    #: ``reward_info.reward``; None: tau2 never evaluated it
    reward: float | None
    termination: str
    duration: float
    skipped: bool
    messages: tuple[dict[str, Any], ...]
    reward_info: dict[str, Any] | None
    agent_cost: float | None
    user_cost: float | None
    #: variants the proxy's replies named (``raw_data``), usually none or one
    variant_marks: frozenset[str] = frozenset()

    @property
    def success(self) -> bool:
        return self.reward is not None and abs(self.reward - 1.0) <= SUCCESS_TOLERANCE


@dataclass(frozen=True)
class Tau2Results:
    """A tau2 results file: its run's identity and settings, and its simulations."""

    path: str
    timestamp: str | None
    domain: str
    agent_implementation: str | None
    agent_llm: str | None
    user_implementation: str | None
    user_llm: str | None
    num_trials: int | None
    seed: int | None
    git_commit: str | None
    #: hash of the file's creation timestamp and ``info``: one run, however often it is imported
    run_id: str
    #: task id -> the number of gold actions the agent should take
    gold_counts: dict[str, int]
    simulations: tuple[Tau2Simulation, ...]

    def variant_marks(self) -> set[str]:
        return {v for s in self.simulations for v in s.variant_marks}


# -- the typed reader -----------------------------------------------------------------------

class _Reader:
    """Typed access to parsed JSON that names the file and the field path in every error."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, what: str, fix: str) -> Tau2ResultsError:
        return Tau2ResultsError(what, where=f"{self.path}: {where}" if where else self.path, fix=fix)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a JSON object, got {_kind(value)}",
                            fix="pass the results file `tau2 run` wrote, unchanged")
        return value

    def get(self, d: Mapping[str, Any], key: str, where: str, types: tuple[type, ...], *,
            required: bool = True, default: Any = None) -> Any:
        here = f"{where}.{key}" if where else key
        if key not in d or d[key] is None:
            if required:
                raise self.fail(here, "missing", fix="pass the results file `tau2 run` wrote, unchanged "
                                "(a hand-made file needs this field too)")
            return default
        value = d[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if float in types and isinstance(value, float) and not math.isfinite(value):
            ok = False
        if not ok:
            names = "a number" if float in types else " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise self.fail(here, f"expected {names}, got {_kind(value)} {_short(value)}",
                            fix="pass the results file `tau2 run` wrote, unchanged")
        return value


_TYPE_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string", bool: "true/false",
                                 type(None): "null", int: "an integer", float: "a number"}


def _kind(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _summary_fix(path: Path, top: Mapping[str, Any]) -> str | None:
    """The fix for the two summary files ``tau2 run`` writes beside the results file."""
    for suffix, keys in (("_results", ("metrics", "num_simulations")),
                         ("_termination_summary", ("termination_reasons", "total_simulations"))):
        if all(k in top for k in keys):
            stem = path.stem[:-len(suffix)] if path.stem.endswith(suffix) else "<name>"
            return (f"this is tau2's summary file ({suffix}.json), which holds no simulations: pass the "
                    f"results file beside it, {path.with_name(stem + '.json')}")
    return None


def read_tau2_results(path: str | Path) -> Tau2Results:
    """Read and check a tau2 results file (no tau2 needed); raises :class:`Tau2ResultsError`."""
    p = Path(path)
    data = read_json(p, error=Tau2ResultsError,
                     missing_fix="pass the JSON file `tau2 run` wrote (under its --results-dir, by default "
                                 "tau2's data/simulations/)")
    r = _Reader(str(p))
    if not isinstance(data, dict):
        raise r.fail("", f"not a tau2 results file: the file holds {_kind(data)}, not an object with "
                         "'info' and 'simulations'", fix="pass the results file `tau2 run` wrote")
    fix = _summary_fix(p, data)
    if fix:
        raise r.fail("", "not a tau2 results file", fix=fix)
    if "simulations" not in data or "info" not in data:
        missing = " and ".join(repr(k) for k in ("info", "simulations") if k not in data)
        raise r.fail("", f"not a tau2 results file: no {missing} (found keys: {', '.join(sorted(data)) or 'none'})",
                     fix="pass the results file `tau2 run` wrote (tau2's Results: info, tasks, simulations)")
    info = r.obj(data["info"], "info")
    env = r.obj(r.get(info, "environment_info", "info", (dict,)), "info.environment_info")
    domain = r.get(env, "domain_name", "info.environment_info", (str,))
    agent = r.obj(r.get(info, "agent_info", "info", (dict,), required=False, default={}), "info.agent_info")
    user = r.obj(r.get(info, "user_info", "info", (dict,), required=False, default={}), "info.user_info")
    timestamp = r.get(data, "timestamp", "", (str,), required=False)
    sims = r.get(data, "simulations", "", (list,))
    tasks = r.get(data, "tasks", "", (list,), required=False, default=[])
    return Tau2Results(
        path=str(p), timestamp=timestamp, domain=domain,
        agent_implementation=r.get(agent, "implementation", "info.agent_info", (str,), required=False),
        agent_llm=r.get(agent, "llm", "info.agent_info", (str,), required=False),
        user_implementation=r.get(user, "implementation", "info.user_info", (str,), required=False),
        user_llm=r.get(user, "llm", "info.user_info", (str,), required=False),
        num_trials=r.get(info, "num_trials", "info", (int,), required=False),
        seed=r.get(info, "seed", "info", (int,), required=False),
        git_commit=r.get(info, "git_commit", "info", (str,), required=False),
        run_id=sha256_of({"timestamp": timestamp, "info": info}, 16),
        gold_counts=_gold_counts(r, tasks),
        simulations=tuple(_simulation(r, s, f"simulations[{i}]") for i, s in enumerate(sims)))


def _gold_counts(r: _Reader, tasks: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, t in enumerate(tasks):
        where = f"tasks[{i}]"
        task = r.obj(t, where)
        task_id = r.get(task, "id", where, (str, int))
        criteria = r.obj(r.get(task, "evaluation_criteria", where, (dict,), required=False, default={}),
                         f"{where}.evaluation_criteria")
        actions = r.get(criteria, "actions", f"{where}.evaluation_criteria", (list,), required=False, default=[])
        out[str(task_id)] = sum(1 for a in actions if isinstance(a, dict) and a.get("requestor", "assistant")
                                == "assistant")
    return out


def _simulation(r: _Reader, value: Any, where: str) -> Tau2Simulation:
    s = r.obj(value, where)
    task_id = str(r.get(s, "task_id", where, (str, int)))
    trial = r.get(s, "trial", where, (int,), required=False, default=0)
    info = r.get(s, "reward_info", where, (dict,), required=False)
    reward = float(r.get(info, "reward", f"{where}.reward_info", (int, float))) if info is not None else None
    messages = [_message(r, m, f"{where}.messages[{j}]")
                for j, m in enumerate(r.get(s, "messages", where, (list,), required=False, default=[]))]
    return Tau2Simulation(
        id=str(r.get(s, "id", where, (str, int), required=False, default=f"{task_id}_{trial}")),
        task_id=task_id, trial=trial, seed=r.get(s, "seed", where, (int,), required=False),
        reward=reward, termination=r.get(s, "termination_reason", where, (str,), required=False, default="unknown"),
        duration=float(r.get(s, "duration", where, (int, float), required=False, default=0.0)),
        skipped=r.get(s, "skipped", where, (bool,), required=False, default=False),
        messages=tuple(m for m, _ in messages), reward_info=info,
        agent_cost=_number(s.get("agent_cost")), user_cost=_number(s.get("user_cost")),
        variant_marks=frozenset(v for _, marks in messages for v in marks))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _message(r: _Reader, value: Any, where: str) -> tuple[dict[str, Any], set[str]]:
    """A tau2 message in OpenAI form and, for the agent's messages, the variants its
    ``raw_data`` names."""
    m = r.obj(value, where)
    role = r.get(m, "role", where, (str,))
    content = m.get("content")
    out: dict[str, Any] = {"role": role, "content": content if isinstance(content, str) else None}
    calls = []
    for k, c in enumerate(r.get(m, "tool_calls", where, (list,), required=False, default=[])):
        here = f"{where}.tool_calls[{k}]"
        call = r.obj(c, here)
        name = r.get(call, "name", here, (str,))
        args = r.get(call, "arguments", here, (dict, str), required=False, default={})
        calls.append({"id": str(call.get("id") or ""), "type": "function",
                      "function": {"name": name,
                                   "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}})
    if calls:
        out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = str(m.get("id") or "")
        if m.get("error"):
            out["error"] = True
    usage = m.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {k: v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens")
                        and isinstance(v, int) and not isinstance(v, bool)}
    return out, _marks(m.get("raw_data")) if role == "assistant" else set()  # the agent's replies, not the user's


def _marks(raw: Any) -> set[str]:
    """Variants named by the proxy's ``"toolbias": {"variant": ...}`` wherever litellm kept it."""
    if not isinstance(raw, dict):
        return set()
    message: dict[str, Any] = raw["message"] if isinstance(raw.get("message"), dict) else {}
    places = [raw, raw.get("provider_specific_fields"), message, message.get("provider_specific_fields")]
    out = set()
    for place in places:
        mark = place.get("toolbias") if isinstance(place, dict) else None
        if isinstance(mark, dict) and isinstance(mark.get("variant"), str) and mark["variant"]:
            out.add(mark["variant"])
    return out


# -- the import -----------------------------------------------------------------------------

def toolbias_model(litellm_model: str) -> str:
    """tau2's agent model (a litellm name) as a toolbias model spec: an OpenAI-compatible
    server's ``openai/M`` (or ``hosted_vllm/M``) is ``openai:M``, as ``toolbias run`` names it;
    any other litellm name is kept as it is."""
    for prefix in _OPENAI_PREFIXES:
        if litellm_model.startswith(prefix) and len(litellm_model) > len(prefix):
            return "openai:" + litellm_model[len(prefix):]
    return litellm_model


def resolve_variant_name(spec: str) -> str:
    """A registered variant name, or a variant spec file (``*.json``: its name)."""
    from ..variants import resolve_variants

    if "," in spec or spec.strip() in ("all", "representative"):
        raise Tau2ResultsError(f"--tau2-variant names one variant, not '{spec}'",
                               fix="give the one variant the proxy ran with (its --variant)")
    return resolve_variants(spec.strip())[0].name


@dataclass(frozen=True)
class Tau2Import:
    """What importing one results file did."""

    path: str
    domain: str
    model: str
    variant: str
    #: "file" (the proxy's replies named it) or "option"
    variant_from: str
    run_id: str
    simulations: int
    added: int
    already: int
    #: simulations without a reward (never evaluated): not imported
    not_evaluated: int
    #: samples tau2 skipped after an error: imported as failures (reward 0), as tau2 scores them
    skipped: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def describe(self) -> str:
        text = (f"imported {self.path}: tau2 {self.domain}, model {self.model}, variant {self.variant} "
                f"({'named by the proxy in the file' if self.variant_from == 'file' else 'from --tau2-variant'}): "
                f"{self.simulations} simulations, {self.added} added, {self.already} already in the store")
        if self.skipped:
            text += f", {self.skipped} skipped by tau2 after an error (counted as failures)"
        if self.not_evaluated:
            text += f", {self.not_evaluated} without a reward left out"
        return text


def _choose_variant(results: Tau2Results, variant: str | None) -> tuple[str, str]:
    marks = results.variant_marks()
    if len(marks) > 1:
        raise Tau2ResultsError(f"the proxy's replies in this file name several variants ({', '.join(sorted(marks))})",
                               where=results.path,
                               fix="run tau2 once per variant (one proxy --variant per results file)")
    if variant is not None:
        name = resolve_variant_name(variant)
        if marks and name not in marks:
            raise Tau2ResultsError(f"--tau2-variant says '{name}' but the proxy's replies in the file say "
                                   f"'{next(iter(marks))}'", where=results.path,
                                   fix="drop --tau2-variant (the file names its variant) or fix it")
        return name, "option"
    if marks:
        return next(iter(marks)), "file"
    raise Tau2ResultsError(
        "the file does not say which schema (variant) the agent ran under: tau2 keeps only each reply's "
        "choice (litellm drops the proxy's top-level \"toolbias\" field)", where=results.path,
        fix="pass --tau2-variant NAME, the --variant `toolbias proxy` ran with (native for a run without the proxy)")


def _model(results: Tau2Results, model: str | None) -> str:
    if model:
        return model
    if results.agent_llm:
        return toolbias_model(results.agent_llm)
    raise Tau2ResultsError("the file names no agent model (info.agent_info.llm)", where=results.path,
                           fix="pass --tau2-model NAME (the model spec the in-process runs used, e.g. openai:M)")


def import_rows(results: Tau2Results, *, variant: str, model: str) -> list[EpisodeRow]:
    """The results' evaluated simulations as store rows (kind :data:`TAU2_KIND`)."""
    rows = []
    agent = {"implementation": results.agent_implementation, "llm": results.agent_llm}
    user = {"implementation": results.user_implementation, "llm": results.user_llm}
    for s in results.simulations:
        if s.reward is None:
            continue
        assistant = [m for m in s.messages if m["role"] == "assistant"]
        query = next((m["content"] for m in s.messages if m["role"] == "user" and m["content"]), None)
        info = s.reward_info or {}
        db = info.get("db_check")
        evaluation = {"reward": s.reward, "evaluator": "tau2",
                      "db_match": db.get("db_match") if isinstance(db, dict) else None,
                      "communicated": [c.get("met") for c in info.get("communicate_checks") or []
                                       if isinstance(c, dict)],
                      "reward_basis": info.get("reward_basis"), "reward_info": info}
        tau2 = {"source": results.path, "run_id": results.run_id, "timestamp": results.timestamp,
                "simulation_id": s.id, "trial": s.trial, "seed": s.seed, "termination_reason": s.termination,
                "skipped": s.skipped, "agent": agent, "user": user, "git_commit": results.git_commit,
                "num_trials": results.num_trials, "agent_cost": s.agent_cost, "user_cost": s.user_cost}
        rows.append(EpisodeRow(
            key=tau2_key(results.run_id, s.task_id, s.trial), study=f"tau2-results:{Path(results.path).stem}",
            kind=TAU2_KIND, model=model, settings_hash=results.run_id, catalog=f"tau2:{results.domain}",
            variant=variant, task_id=s.task_id, domain=results.domain, control="strict", condition="base",
            seed=s.seed or 0, status="done", success=s.success,
            failure_mode=SKIPPED if s.skipped and not s.success else None,
            termination=s.termination, n_gold=results.gold_counts.get(s.task_id, 0),
            n_executed=sum(len(m.get("tool_calls") or ()) for m in assistant), n_rejections=0,
            turns=len(assistant), prompt_tokens=sum(m.get("usage", {}).get("prompt_tokens", 0) for m in assistant),
            completion_tokens=sum(m.get("usage", {}).get("completion_tokens", 0) for m in assistant),
            wall_s=s.duration,
            record={"tau2": tau2, "evaluation": evaluation, "query": query, "termination": s.termination,
                    "turns": len(assistant), "messages": list(s.messages)}))
    return rows


def tau2_key(run_id: str, task_id: str, trial: int) -> str:
    """An imported simulation's episode key: one per (run, task, trial)."""
    return sha256_of(["tau2-results", run_id, task_id, trial], 32)


def import_tau2_results(store: Store, path: str | Path, *, variant: str | None = None,
                        model: str | None = None) -> Tau2Import:
    """Import a tau2 results file's simulations into ``store`` (idempotent); raises
    :class:`Tau2ResultsError` for a file that cannot be imported, before writing anything."""
    results = read_tau2_results(path)
    name, source = _choose_variant(results, variant)
    label = _model(results, model)
    rows = import_rows(results, variant=name, model=label)
    known = _stored(store, [r.key for r in rows])
    clash = [(r, known[r.key]) for r in rows if r.key in known and known[r.key] != (label, name)]
    if clash:
        row, (m, v) = clash[0]
        raise Tau2ResultsError(
            f"this run is already in the store as model '{m}', variant '{v}' (now: '{label}', '{name}')",
            where=f"{results.path} -> {store.path}",
            fix="import it with the same --tau2-model/--tau2-variant (it is then already there), or into a new "
                "--store")
    new = [r for r in rows if r.key not in known]
    first: dict[str, EpisodeRow] = {}
    for r in new:  # the first of a repeated (task, trial)
        first.setdefault(r.key, r)
    unique = list(first.values())
    store.put_values([r.values() for r in unique])
    notes = []
    if not results.simulations:
        notes.append("the file holds no simulations yet (tau2 appends each as it finishes): import it again later")
    if results.agent_implementation not in (None, "llm_agent"):
        notes.append(f"the agent is tau2's '{results.agent_implementation}', not its plain llm_agent: its success "
                     "is not comparable with the paper's Table 9 (pass --tau2-model to keep it apart)")
    if len(unique) < len(new):
        notes.append(f"{len(new) - len(unique)} simulations repeat a (task, trial) of the file: the first is kept")
    return Tau2Import(path=results.path, domain=results.domain, model=label, variant=name, variant_from=source,
                      run_id=results.run_id, simulations=len(results.simulations), added=len(unique),
                      already=len(rows) - len(new),
                      not_evaluated=sum(1 for s in results.simulations if s.reward is None),
                      skipped=sum(1 for s in results.simulations if s.skipped and s.reward is not None), notes=notes)


def _stored(store: Store, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
    """key -> (model, variant) of the keys already in the store."""
    keys = list(keys)
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(keys), 500):
        batch = keys[i:i + 500]
        marks = ",".join("?" * len(batch))
        for key, model, variant in store.query(f"SELECT key, model, variant FROM episodes WHERE key IN ({marks})",
                                               batch):
            out[key] = (model, variant)
    return out


def parse_results_option(value: str) -> tuple[str, str | None]:
    """``FILE`` or ``VARIANT=FILE`` (a ``--tau2-results`` value) -> (file, variant or None).
    A value that is an existing file is a file even if it holds ``=``."""
    if Path(value).exists() or "=" not in value:
        return value, None
    variant, _, path = value.partition("=")
    return path, variant or None


__all__ = ["SKIPPED", "SUCCESS_TOLERANCE", "TAU2_KIND", "Tau2Import", "Tau2Results", "Tau2ResultsError", "Tau2Simulation",
           "import_rows", "import_tau2_results", "parse_results_option", "read_tau2_results", "resolve_variant_name",
           "tau2_key", "toolbias_model"]
