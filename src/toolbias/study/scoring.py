"""Exact success and the failure taxonomy (paper Table 2).

Exact success: the multiset of executed native actions equals the gold multiset, values
compared exactly as JSON values (numbers as numbers: ``20 == 20.0``; numeric strings are *not*
numbers; strings character for character). The match rule (exact, normalised, bfcl) and a
task's answer sets (BFCL's possible answers) are :mod:`toolbias.study.success`'s; a record carries
both (``match``, ``accept``), so it is re-scored under the rule it was played under.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple

from ..base.canonical import same_json
from ..catalog.model import NativeAction
from ..operators.base import TRANSACTION_FLAGS, FlagKind
from .success import MatchRule, succeeded
from .success import action_key as action_key  # re-exported: probes and callers score with it
from .success import normalise_value as normalise_value


class FailureMode(str, Enum):
    """Paper Table 2, in rule order: the first rule that fires names the failure."""

    LIVELOCK = "livelock"
    TRANSACTION_HANDLE = "transaction_handle"
    REJECTED_AND_STUCK = "rejected_and_stuck"
    WRONG_CLASS = "wrong_class"
    UNDER_EXECUTION = "under_execution"
    OVER_EXECUTION = "over_execution"
    WRONG_ARGUMENTS = "wrong_arguments"


FAILURE_ORDER = tuple(FailureMode)

#: Table 2: (rule, what went wrong) per mode, in rule order (shown in reports)
FAILURE_RULES: dict[FailureMode, tuple[str, str]] = {
    FailureMode.LIVELOCK: ("The episode hits the turn limit.",
                           "The agent loops on retries or clarifications without committing an action."),
    FailureMode.TRANSACTION_HANDLE: (
        "A transaction flag fires (unknown handle, write after commit, double commit, commit before the "
        "required writes, or a handle never committed).", "The begin / write / commit protocol is broken."),
    FailureMode.REJECTED_AND_STUCK: (
        "At least one call was rejected as off-schema and fewer native actions executed than required.",
        "The agent calls a name or argument the schema does not expose and cannot recover."),
    FailureMode.WRONG_CLASS: ("A call is routed through a dispatcher or namespace of the wrong class.",
                              "The operation is chosen from the wrong group."),
    FailureMode.UNDER_EXECUTION: ("Fewer native actions executed than the task requires, with no rejection.",
                                  "Required steps are skipped."),
    FailureMode.OVER_EXECUTION: ("More native actions executed than the task requires.",
                                 "Extra or repeated actions are taken."),
    FailureMode.WRONG_ARGUMENTS: ("The right number of native actions, but wrong actions or argument values.",
                                  "The episode ends with the wrong set of actions or values."),
}


def exact_success(executed: Iterable[NativeAction], gold: Iterable[NativeAction],
                  rule: MatchRule | str = MatchRule.EXACT) -> bool:
    return succeeded(list(executed), list(gold), rule=rule)


def failure_mode(*, success: bool, termination: str, flags: Sequence[str], rejections: int,
                 executed: Sequence[NativeAction], gold: Sequence[NativeAction],
                 route_classes: Sequence[Sequence[str]] = (),
                 gold_classes: Iterable[str] = ()) -> FailureMode | None:
    """The first Table-2 rule that fires for a failed episode (None on success).

    ``flags`` are FlagKind values; ``route_classes`` the class sets of every routed
    call (dispatcher / namespace); a route whose classes share nothing with the
    gold's classes is a wrong-class routing.
    """
    if success:
        return None
    if termination == "turn_limit":
        return FailureMode.LIVELOCK
    if any(FlagKind(f) in TRANSACTION_FLAGS for f in flags if f in FlagKind._value2member_map_):
        return FailureMode.TRANSACTION_HANDLE
    if rejections > 0 and len(executed) < len(gold):
        return FailureMode.REJECTED_AND_STUCK
    wanted = set(gold_classes)
    if wanted and any(rc and not (set(rc) & wanted) for rc in route_classes):
        return FailureMode.WRONG_CLASS
    if len(executed) < len(gold):
        return FailureMode.UNDER_EXECUTION
    if len(executed) > len(gold):
        return FailureMode.OVER_EXECUTION
    return FailureMode.WRONG_ARGUMENTS


def memo_keys() -> Callable[[NativeAction], str]:
    """:func:`action_key` computed once per action object (one scoring pass asks for each
    action's key several times); only for actions that outlive the returned function's use."""
    cache: dict[int, str] = {}

    def key(a: NativeAction) -> str:
        k = cache.get(id(a))
        if k is None:
            k = cache[id(a)] = action_key(a)
        return k
    return key


def action_diff(executed: Sequence[NativeAction], gold: Sequence[NativeAction],
                key: Callable[[NativeAction], str] = action_key) -> tuple[list[NativeAction], list[NativeAction]]:
    """(gold actions not executed, executed actions not in the gold), as multisets after normalisation."""
    want = Counter(map(key, gold))
    have = Counter(map(key, executed))
    missing_keys, extra_keys = want - have, have - want
    missing, extra = [], []
    for a in gold:
        k = key(a)
        if missing_keys[k] > 0:
            missing.append(a)
            missing_keys[k] -= 1
    for a in executed:
        k = key(a)
        if extra_keys[k] > 0:
            extra.append(a)
            extra_keys[k] -= 1
    return missing, extra


def explain_failure(rec: Any, classes: Mapping[str, str] | None = None, max_items: int = 5) -> list[str]:
    """Plain-language reasons an episode failed (empty on success): the Table-2 rule that
    fired, then the specifics (flags, rejections, routes, missing and extra actions; at most
    ``max_items`` flags and rejections are listed, then a count)."""
    d = rec if isinstance(rec, Mapping) else rec.to_dict()
    ok, mode = score_record(d, classes)
    if ok or mode is None:
        return []
    out = [f"{mode.value}: {FAILURE_RULES[mode][0]}"]
    out.extend(state_check_reasons(d.get("state_check")))
    calls = d.get("calls", [])
    if d.get("termination") == "turn_limit":
        out.append(f"the agent was still calling tools after {d.get('turns', '?')} turns (the turn limit)")
    flags = [f"flag {f.get('kind')}: {f.get('detail', '')}".rstrip(": ") for f in d.get("flags", [])]
    out.extend(flags[:max_items])
    if len(flags) > max_items:
        out.append(f"... and {len(flags) - max_items} more flags")
    rejected = []
    for c in calls:
        dec = c.get("decoded")
        name = c.get("tool_call", {}).get("name", "?")
        if dec is None:
            rejected.append(f"turn {c.get('turn', 0) + 1}: call '{name}' could not be parsed")
        elif dec.get("outcome") == "rejection":
            rejected.append(f"turn {c.get('turn', 0) + 1}: '{name}' rejected ({dec.get('rejection_kind')}): "
                            f"{dec.get('message', '')}")
    out.extend(rejected[:max_items])
    if len(rejected) > max_items:
        out.append(f"... and {len(rejected) - max_items} more rejected calls")
    executed = [NativeAction.from_dict(a) for a in d["executed"]]
    gold = [NativeAction.from_dict(a) for a in d["gold"]]
    if mode is FailureMode.WRONG_CLASS and classes:
        _, wanted = suspect_routes(routed_calls(calls), gold, executed, classes)
        for c in calls:
            dec = c.get("decoded") or {}
            rc = dec.get("route_classes") or []
            if rc and not set(rc) & set(wanted):
                out.append(f"'{c['tool_call']['name']}' went through {', '.join(dec.get('routes') or ['?'])} "
                           f"(class {', '.join(rc)}); the task needs class {', '.join(sorted(set(wanted)))}")
    missing, extra = action_diff(executed, gold)
    out.append(f"executed {len(executed)} native action(s); the task requires {len(gold)}")
    out.extend(f"missing: {a}" for a in missing)
    out.extend(f"not in the gold: {a}" for a in extra)
    return out


def state_check_reasons(check: Mapping[str, Any] | None) -> list[str]:
    """The turns an environment's own state check failed (BFCL multi-turn), in words."""
    out = []
    for t in (check or {}).get("turns", []) if not (check or {}).get("ok") else []:
        n = t.get("turn", 0) + 1
        if t.get("reached") is False:
            out.append(f"user turn {n} was never reached")
        elif not t.get("called"):
            out.append(f"user turn {n}: no tool call, but the turn needs some")
        elif not t.get("state"):
            out.append(f"user turn {n}: the state differs from the gold's in {', '.join(t.get('differences') or ['?'])}")
        elif not t.get("results"):
            out.append(f"user turn {n}: gold results never produced: {'; '.join(t.get('missing_results') or [])}"[:300])
    return out


class RoutedCall(NamedTuple):
    """What the wrong-class rule needs of one call: did it decode to native actions, which,
    and through which classes (dispatcher / namespace) it was routed."""

    native: bool
    actions: tuple[NativeAction, ...]
    classes: tuple[str, ...]


def routed_calls(calls: Iterable[Any]) -> list[RoutedCall]:
    """The routed calls of an episode: typed :class:`~toolbias.study.episode.CallRecord` objects or
    their stored dict form."""
    out = []
    for c in calls:
        if isinstance(c, Mapping):
            dec = c.get("decoded")
            if dec and dec.get("route_classes"):
                out.append(RoutedCall(dec.get("outcome") == "native",
                                      tuple(NativeAction.from_dict(a) for a in dec.get("actions", [])),
                                      tuple(dec["route_classes"])))
        elif c.decoded is not None and c.decoded.route_classes:
            d = c.decoded
            out.append(RoutedCall(d.outcome.value == "native", tuple(d.actions), tuple(d.route_classes)))
    return out


def suspect_routes(routes: Sequence[RoutedCall], gold: Sequence[NativeAction],
                   executed: Sequence[NativeAction], classes: Mapping[str, str] | None,
                   key: Callable[[NativeAction], str] = action_key) -> tuple[list[list[str]], list[str]]:
    """The routes the wrong-class rule looks at, and the classes they are compared with.

    A routed call whose decoded actions are all still-needed gold actions was routed
    correctly and is not looked at. Every other routed call (an action not in the gold,
    or a rejected call) is compared with the classes of the gold actions that were never
    executed, or, when none is missing, with all the gold's classes. So a dispatcher of
    another class used *instead of* the needed one is a wrong-class routing even when the
    task also involves that other class."""
    if not classes:
        return [], []
    needed = Counter(map(key, gold))
    out: list[list[str]] = []
    for r in routes:
        keys = [action_key(a) for a in r.actions]
        if r.native and keys and all(needed[k] > 0 for k in keys):
            needed.subtract(keys)
            continue
        out.append(list(r.classes))
    missing, _ = action_diff(executed, gold, key)
    basis = missing or list(gold)
    return out, [classes[a.uid] for a in basis if a.uid in classes]


def score_record(rec: Any, classes: Mapping[str, str] | None = None) -> tuple[bool, FailureMode | None]:
    """(success, failure mode) for an :class:`~toolbias.study.episode.EpisodeRecord`, scored on its
    typed fields, or for its stored dict form (reports, explanations).

    ``classes`` maps native tool uids to their class (``Catalog`` gives it) for
    wrong-class detection (see :func:`suspect_routes`); without it that rule cannot fire."""
    if isinstance(rec, Mapping):
        return _score_stored(rec, classes)
    infra = rec.termination.value == "infra_error"
    verdict = _verdict(getattr(rec, "evaluation", None), getattr(rec, "state_check", None))
    judged = verdict is not None and not infra
    if judged and verdict:
        return True, None
    if not judged and not infra and _same_actions(rec.executed, rec.gold):  # the gold, as given
        return True, None
    return _score(infra, rec.termination.value, rec.executed, rec.gold, [f.kind.value for f in rec.flags],
                  rec.rejections, rec.calls, classes, judged, (rec.accept, rec.match))


def _verdict(evaluation: Any, state_check: Any) -> bool | None:
    """An environment's own verdict on an episode (None: it gave none): tau2-bench's reward of 1,
    or BFCL multi-turn's state check passing on every turn."""
    if isinstance(evaluation, Mapping):
        return float(evaluation.get("reward") or 0.0) >= 1.0
    if isinstance(state_check, Mapping):
        return bool(state_check.get("ok"))
    return None


def _same_actions(a: Sequence[NativeAction], b: Sequence[NativeAction]) -> bool:
    """The same actions in the same order, arguments exactly equal (:func:`same_json`)."""
    return len(a) == len(b) and all(
        x.domain == y.domain and x.tool == y.tool
        and (same_json(x.arguments, y.arguments) if type(x.arguments) is dict and type(y.arguments) is dict
             else x == y)  # (NativeAction equality: canonical JSON, exact too)
        for x, y in zip(a, b, strict=True))


def _score_stored(d: Mapping[str, Any], classes: Mapping[str, str] | None) -> tuple[bool, FailureMode | None]:
    infra = d["termination"] == "infra_error"
    # an environment with its own evaluator (tau2-bench's reward, BFCL multi-turn's state check)
    # decides success; the failure analysis below still names what went wrong
    verdict = _verdict(d.get("evaluation"), d.get("state_check"))
    judged = verdict is not None and not infra
    if judged and verdict:
        return True, None
    if not judged and not infra and same_json(d["executed"], d["gold"]):  # the gold, as given: success without any keys
        return True, None
    calls = d.get("calls", [])
    rejections = sum(1 for c in calls if c.get("decoded") is None or c["decoded"]["outcome"] == "rejection")
    return _score(infra, d["termination"], [NativeAction.from_dict(a) for a in d["executed"]],
                  [NativeAction.from_dict(a) for a in d["gold"]], [f["kind"] for f in d.get("flags", [])],
                  rejections, calls, classes, judged, (d.get("accept"), d.get("match")))


def _score(infra: bool, termination: str, executed: Sequence[NativeAction], gold: Sequence[NativeAction],
           flags: Sequence[str], rejections: int, calls: Sequence[Any],
           classes: Mapping[str, str] | None, judged: bool = False,
           rule: tuple[Any, Any] = (None, None)) -> tuple[bool, FailureMode | None]:
    """``judged``: an external evaluator already said the episode failed; ``rule``: the record's
    answer sets and match rule (:func:`toolbias.study.success.succeeded`)."""
    key = memo_keys()
    accept, match = rule
    ok = not infra and not judged and succeeded(executed, gold, accept, match or MatchRule.EXACT)
    if ok:  # no failure mode to find: skip the failure analysis (most of scoring's cost)
        return True, None
    route_classes, gold_classes = suspect_routes(routed_calls(calls), gold, executed, classes, key)
    mode = failure_mode(success=ok, termination=termination, flags=flags, rejections=rejections,
                        executed=executed, gold=gold, route_classes=route_classes, gold_classes=gold_classes)
    return ok, mode
