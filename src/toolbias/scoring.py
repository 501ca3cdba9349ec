"""Exact success and the failure taxonomy (paper Table 2).

Normalisation before comparing actions (documented, tested): numbers compare as
numbers (``20 == 20.0``, numeric strings are *not* numbers), strings are trimmed
and case-folded, containers compare element-wise. Exact success: the multiset of
executed native actions equals the gold multiset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from .catalog.model import NativeAction, canonical_json
from .operators.base import TRANSACTION_FLAGS, FlagKind


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


def normalise_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        return int(f) if f.is_integer() else f
    if isinstance(v, str):
        return v.strip().casefold()
    if isinstance(v, Mapping):
        return {str(k): normalise_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [normalise_value(x) for x in v]
    return v


def action_key(a: NativeAction) -> str:
    """Normalised identity of an action for exact-success comparison."""
    return f"{a.domain}::{a.tool}{canonical_json(normalise_value(dict(a.arguments)))}"


def exact_success(executed: Iterable[NativeAction], gold: Iterable[NativeAction]) -> bool:
    return Counter(map(action_key, executed)) == Counter(map(action_key, gold))


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


def score_record(rec: Any, classes: Mapping[str, str] | None = None) -> tuple[bool, FailureMode | None]:
    """(success, failure mode) for an EpisodeRecord (or its stored dict form).

    ``classes`` maps native tool uids to their class (``Catalog`` gives it) for
    wrong-class detection; without it that rule cannot fire."""
    d = rec if isinstance(rec, Mapping) else rec.to_dict()
    executed = [NativeAction.from_dict(a) for a in d["executed"]]
    gold = [NativeAction.from_dict(a) for a in d["gold"]]
    ok = exact_success(executed, gold) and d["termination"] != "infra_error"
    calls = d.get("calls", [])
    rejections = sum(1 for c in calls if c.get("decoded") is None or c["decoded"]["outcome"] == "rejection")
    route_classes = [c["decoded"]["route_classes"] for c in calls if c.get("decoded") and c["decoded"]["route_classes"]]
    gold_classes = [classes[a.uid] for a in gold if classes and a.uid in classes]
    mode = failure_mode(success=ok, termination=d["termination"], flags=[f["kind"] for f in d.get("flags", [])],
                        rejections=rejections, executed=executed, gold=gold, route_classes=route_classes,
                        gold_classes=gold_classes)
    return ok, mode
