"""The schema-bias artifact's evaluation protocol, as far as toolbias reproduces it so far.

toolbias has two protocols, named so that their results are never confused:

* ``toolbias`` (the default): toolbias's own evaluation: JSON Schema validated at every level
  under strict control, rejections that list the available tools, state JSON after each call,
  its own system prompt, and success under ``--match exact`` (values as JSON values, strings
  character for character). It is stricter than the artifact's and tells the model more.
* ``paper``: the artifact's evaluation (``eval/run_agentic.py`` with ``toolschema/simenv.py``).
  Implemented so far: its **success rule** (``--match paper``, below). Not yet: its hard/loose
  control, its rejection and tool-result texts, its prompt composition, token cap and livelock
  rule. ``--protocol paper`` therefore stops with an error naming ``--match paper``, rather
  than produce numbers that only look like the paper's.

The artifact's success rule (the ``paper`` match rule): an episode succeeds when the multiset of
executed native actions equals the gold's, where an action is its tool name and its arguments
*cleaned*: an argument whose value is null or ``""`` is dropped, and every other value is read
numeric-aware and case-insensitively:

* a boolean stays a boolean (never equal to a number or a string);
* a number is its float value (``25 == 25.0``);
* anything else is read as text (``str`` of the value, trimmed): text Python's ``float`` reads
  (``"25"``, ``" 2.5 "``, ``"1e3"``, ``"inf"``) is that number, so ``"25"`` equals ``25``; other
  text compares lower-cased (``"Kitchen" == "kitchen"``). A list or object value compares as
  the lower-cased text of its Python form (``[1, 'a']``), as the artifact compares it.

One difference is known and kept: a ``NaN`` value (``"nan"``) equals another ``NaN`` here; in
the artifact it equals nothing but the very same object.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..errors import ToolbiasError


class Protocol(str, Enum):
    """Whose evaluation protocol a run follows (see the module doc)."""

    TOOLBIAS = "toolbias"
    PAPER = "paper"


def paper_value(v: Any) -> tuple[str, Any]:
    """One argument value in the form two values equal under the artifact's rule share:
    ``("b", bool)``, ``("n", float)`` or ``("s", lower-cased text)``."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", float(v) + 0.0)  # + 0.0: -0.0 and 0.0 are one number
    text = str(v).strip()
    try:
        return ("n", float(text) + 0.0)
    except ValueError:
        return ("s", text.lower())


def paper_arguments(args: Mapping[str, Any] | None) -> dict[str, tuple[str, Any]]:
    """The cleaned arguments: null and ``""`` dropped, every other value as :func:`paper_value`."""
    return {str(k): paper_value(v) for k, v in (args or {}).items() if v is not None and v != ""}


def paper_key(tool: str, args: Mapping[str, Any] | None) -> str:
    """The identity of an action under the artifact's rule, as text (equal exactly when the
    artifact's ``(name, sorted cleaned arguments)`` keys are equal, NaN aside)."""
    items = sorted(paper_arguments(args).items())
    return f"{tool}{items!r}"


def paper_match(gold_tool: str, gold_args: Mapping[str, Any] | None, tool: str,
                args: Mapping[str, Any] | None) -> bool:
    """One call against one gold call under the artifact's rule."""
    return tool == gold_tool and paper_arguments(args) == paper_arguments(gold_args)


class ProtocolNotImplemented(ToolbiasError):
    """``--protocol paper`` asked for before the artifact's whole protocol is reproduced."""


def check_protocol(protocol: Protocol | str) -> Protocol:
    """The protocol to run under; ``paper`` stops with what is missing and what to use instead."""
    p = Protocol(protocol)
    if p is Protocol.PAPER:
        raise ProtocolNotImplemented(
            what="--protocol paper is not implemented yet: toolbias reproduces the artifact's success "
                 "rule, but not its hard/loose control, its rejection and tool-result texts, its prompt "
                 "composition, its 1,024-token cap or its livelock rule",
            where="--protocol",
            fix="run under toolbias's protocol with the artifact's success rule: --match paper "
                "(stored as its own condition, e.g. base+paper, so it is never pooled with exact)")
    return p


__all__ = ["Protocol", "ProtocolNotImplemented", "check_protocol", "paper_arguments", "paper_key", "paper_match",
           "paper_value"]
