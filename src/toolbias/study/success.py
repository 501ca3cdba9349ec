"""The success rule: when do an episode's executed native actions count as the task done?

Two things decide it, both stored with every episode:

* **The match rule** (``--match``; a stored condition, so results under two rules are never
  pooled: a non-default rule is part of the stored condition label, e.g. ``base+normalised``):

  - ``exact`` (default; toolbias's own rule, stricter than the paper's): the multiset of executed
    native actions equals the gold multiset. Values compare as JSON values: numbers as numbers (``20 == 20.0``;
    JSON has one number type), strings character for character, booleans never equal numbers.
  - ``normalised``: as ``exact``, but strings are trimmed and case-folded first (``" Kitchen"``
    matches ``"kitchen"``); toolbias's rule before exact became the default.
  - ``bfcl``: strings standardised as BFCL's AST checker does (spaces and ``, . / - _ * ^``
    removed, lower case, ``'`` read as ``"``), so ``"April 1, 2024"`` matches ``"april 1 2024"``.
  - ``paper``: the schema-bias artifact's rule (``eval/common.py``): null and ``""`` arguments
    dropped, values numeric-aware (``"25"`` matches ``25``) and case-insensitive; see
    :mod:`toolbias.study.paper_protocol`.

* **Answer sets** (a task's ``meta["accept"]``, built by importers such as BFCL's): one entry per
  gold call, ``{"tool": NAME, "arguments": {PARAM: [acceptable values]}}``. The episode succeeds
  when its executed actions can be paired one to one with the entries, in any order, such that
  each action calls the entry's tool, every argument it passes is listed for that tool and takes
  one of the listed values, and every listed parameter it omits lists ``""`` (BFCL's "may be
  omitted"). A listed value that is a list is an acceptable list (compared element by element);
  one that is an object is an acceptable object (each key's listed values, ``""`` = may be
  omitted). Without answer sets the gold is the only answer.

* **State checks**: an environment that checks success itself (BFCL multi-turn: state and
  results per user turn, :mod:`toolbias.integrations.bfcl_env`) stores its verdict as the record's
  ``state_check``; it then decides success.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from ..base.canonical import canonical_json
from ..catalog.model import NativeAction
from .paper_protocol import paper_key


class MatchRule(str, Enum):
    """How two argument values are compared (see the module doc)."""

    EXACT = "exact"
    NORMALISED = "normalised"
    BFCL = "bfcl"
    PAPER = "paper"


_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


def _string_form(rule: MatchRule) -> Callable[[str], str]:
    if rule is MatchRule.NORMALISED:
        return lambda s: s.strip().casefold()
    if rule is MatchRule.PAPER:  # answer sets (not in the artifact): strings as the artifact reads them
        return lambda s: s.strip().lower()
    if rule is MatchRule.BFCL:
        return lambda s: _BFCL_STRIP.sub("", s).lower().replace("'", '"')
    return lambda s: s


def normalise_value(v: Any, rule: MatchRule | str = MatchRule.NORMALISED) -> Any:
    """``v`` in the form two values equal under ``rule`` share: numbers as numbers
    (an integral float becomes an int), strings per the rule, containers element-wise."""
    rule = MatchRule(rule)
    return _normalise(v, _string_form(rule))


def _normalise(v: Any, string: Callable[[str], str]) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        return int(f) if f.is_integer() else f
    if isinstance(v, str):
        return string(v)
    if isinstance(v, Mapping):
        return {str(k): _normalise(x, string) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_normalise(x, string) for x in v]
    return v


def action_key(a: NativeAction, rule: MatchRule | str = MatchRule.EXACT) -> str:
    """The identity of an action under ``rule``: two actions are the same action exactly when
    their keys are equal."""
    if MatchRule(rule) is MatchRule.PAPER:
        return f"{a.domain}::{paper_key(a.tool, a.arguments)}"
    return f"{a.domain}::{a.tool}{canonical_json(normalise_value(dict(a.arguments), rule))}"


def condition_label(condition: str, rule: MatchRule | str) -> str:
    """The stored condition of an episode: the intervention, plus the match rule unless it is
    the default (so existing stores keep their labels and keys)."""
    rule = MatchRule(rule)
    return condition if rule is MatchRule.EXACT else f"{condition}+{rule.value}"


# -- answer sets -------------------------------------------------------------------------

def _same_scalar(v: Any, c: Any, string: Callable[[str], str]) -> bool:
    if isinstance(v, bool) or isinstance(c, bool):
        return isinstance(v, bool) and isinstance(c, bool) and v == c
    if isinstance(v, (int, float)) and isinstance(c, (int, float)):
        return float(v) == float(c)
    if isinstance(v, str) and isinstance(c, str):
        return string(v) == string(c)
    return v is None and c is None


def value_accepted(value: Any, candidate: Any, string: Callable[[str], str]) -> bool:
    """``value`` is the listed ``candidate`` (an acceptable list or object: see the module doc)."""
    if isinstance(candidate, Mapping):
        return isinstance(value, Mapping) and arguments_accepted(value, candidate, string)
    if isinstance(candidate, list):
        return (isinstance(value, list) and len(value) == len(candidate)
                and all(value_accepted(v, c, string) for v, c in zip(value, candidate, strict=True)))
    return _same_scalar(value, candidate, string)


def _listed(values: Any) -> list[Any]:
    return values if isinstance(values, list) else [values]


def arguments_accepted(args: Mapping[str, Any], accepted: Mapping[str, Any],
                       string: Callable[[str], str]) -> bool:
    """Every passed argument is listed and takes a listed value; every omitted one may be omitted."""
    for name, value in args.items():
        if name not in accepted or not any(value_accepted(value, c, string) for c in _listed(accepted[name])):
            return False
    return all(name in args or "" in _listed(values) for name, values in accepted.items())


def _accepts(entry: Mapping[str, Any], action: NativeAction, string: Callable[[str], str]) -> bool:
    return entry.get("tool") == action.tool and arguments_accepted(action.arguments, entry.get("arguments") or {},
                                                                    string)


def answer_accepted(executed: Sequence[NativeAction], accept: Sequence[Mapping[str, Any]],
                    rule: MatchRule | str = MatchRule.EXACT) -> bool:
    """The executed actions pair one to one with the answer set's calls, in any order (a
    bipartite matching, so no greedy choice can miss a pairing that exists)."""
    if len(executed) != len(accept):
        return False
    string = _string_form(MatchRule(rule))
    fits = [[j for j, entry in enumerate(accept) if _accepts(entry, a, string)] for a in executed]
    owner: dict[int, int] = {}  # answer entry -> executed action paired with it

    def pair(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or pair(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(pair(i, set()) for i in range(len(executed)))


def succeeded(executed: Sequence[NativeAction], gold: Sequence[NativeAction],
              accept: Sequence[Mapping[str, Any]] | None = None,
              rule: MatchRule | str = MatchRule.EXACT, state: Mapping[str, Any] | None = None) -> bool:
    """The success rule (see the module doc): an environment's own state check when it made
    one (BFCL multi-turn), else the answer sets when the task has them, else the gold multiset
    under ``rule``."""
    if state is not None:
        return bool(state.get("ok"))
    if accept:
        return answer_accepted(executed, accept, rule)
    if len(executed) != len(gold):
        return False
    return Counter(action_key(a, rule) for a in executed) == Counter(action_key(a, rule) for a in gold)


__all__ = ["MatchRule", "action_key", "answer_accepted", "condition_label", "normalise_value", "succeeded",
           "value_accepted"]
