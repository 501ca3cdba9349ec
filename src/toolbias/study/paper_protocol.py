"""The schema-bias artifact's evaluation protocol, reproduced (``--protocol paper``).

toolbias has two protocols, named so that their results are never confused:

* ``toolbias`` (the default): toolbias's own evaluation: JSON Schema validated at every level
  under strict control, rejections that list the available tools, state JSON after each call,
  its own system prompt, and success under ``--match exact`` (values as JSON values, strings
  character for character). It is stricter than the artifact's and tells the model more.
* ``paper``: the artifact's evaluation (``eval/run_agentic.py`` with ``toolschema/simenv.py``):
  its success rule (below), its hard and loose control (``--control strict`` and ``lenient``),
  its tool-result and rejection texts, its prompt (the domain's system prompt, a blank line, then
  :data:`TOOL_INSTRUCTION`; the whole-catalog runners their own instructions), 1,024 tokens per
  turn, 16 turns and its livelock rule (``turns >= 16``), unparseable arguments executed as
  ``{}``. The episode loop is :mod:`toolbias.study.paper_episode`; the environment that answers
  calls as the artifact's ``SimEnv`` does is :mod:`toolbias.study.paper_env`. Episodes are
  stored under the condition ``<condition>@paper`` (:func:`protocol_label`), so they are never
  pooled with toolbias's.

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
    """``--protocol paper`` asked of a command or variant whose part of the artifact's protocol
    toolbias does not reproduce yet."""


#: tokens per model turn, model turns per episode (an episode that reaches it is a livelock)
PAPER_MAX_TOKENS = 1024
PAPER_TURN_LIMIT = 16

#: the instruction the artifact's per-domain runner appends to the domain's system prompt
#: (``toolschema/schema_adapter.py`` ``TOOL_INSTRUCTION``), after a blank line
TOOL_INSTRUCTION = (
    "IMPORTANT: You are given a specific set of callable functions as your tools. "
    "You must accomplish the task using ONLY these provided functions and their "
    "declared arguments. Do not call any function that is not in the provided tool "
    "list, even if you know such a function exists. Encode every action using the "
    "tools exactly as defined."
)
#: the transaction protocol's note (the artifact's proxy adds it after :data:`TOOL_INSTRUCTION`; its
#: tau2 adapter sends it instead of that)
TRANSACTION_INSTRUCTION = ("Some actions are transactional: call the begin_* function first, read the returned txn_id, "
                           "set each argument with the set_* functions (passing that exact txn_id), then call commit_* "
                           "to execute. Nothing happens until commit.")
#: the whole-catalog runners' instructions (``eval/run_hierarchy.py``, ``eval/run_class_grouping.py``)
HIERARCHY_INSTRUCTION = ("Use the provided tools to fulfil the request. The catalog spans "
                         "several device/service classes; make sure you act on the right one. "
                         "Call tools until the request is fully handled, then stop.")
CLASS_GROUPING_INSTRUCTION = HIERARCHY_INSTRUCTION + " Use ONLY the provided functions and their declared arguments."


def unknown_function(name: str) -> dict[str, str]:
    """The artifact's reply, under hard control, to a call of a name it does not expose (its
    environment's and its proxy's alike)."""
    return {"error": f"Unknown function `{name}`. Use only the provided tools."}


class Runner(str, Enum):
    """Which of the artifact's runners plays a variant (it decides the prompt)."""

    AGENTIC = "agentic"                # eval/run_agentic.py: per-domain variants
    HIERARCHY = "hierarchy"            # eval/run_hierarchy.py: class dispatch, namespaced names, discovery
    CLASS_GROUPING = "class_grouping"  # eval/run_class_grouping.py: Table 8's whole-catalog groupings


#: variants the artifact plays with its whole-catalog runners (by toolbias name or prefix)
_HIERARCHY = ("class_dispatch", "namespaced_names", "schema_discovery", "native_whole_catalog", "hier_")
_CLASS_GROUPING = ("class_semantic", "class_neutral", "random_neutral", "anti_class_neutral", "merge_catalog_",
                   "table8_")


def runner_of(variant: str) -> Runner:
    """The artifact runner whose prompt a variant is played with (``paper.<name>``, the artifact's
    own rendering of a variant, as ``<name>``)."""
    variant = variant.removeprefix("paper.")
    if variant.startswith(_HIERARCHY):
        return Runner.HIERARCHY
    if variant.startswith(_CLASS_GROUPING):
        return Runner.CLASS_GROUPING
    return Runner.AGENTIC


def paper_system_prompt(domain_system: str, runner: Runner, note: str | None = None,
                        instruction: str | None = None) -> str:
    """The system message of a paper-protocol episode: the domain's system prompt, a blank line,
    the runner's instruction (or ``instruction``: a tau2 adapter seam's own), and ``note`` (an
    extra instruction, the artifact's ``SYN_NOTE``) on a line of its own."""
    instruction = instruction or {Runner.AGENTIC: TOOL_INSTRUCTION, Runner.HIERARCHY: HIERARCHY_INSTRUCTION,
                                  Runner.CLASS_GROUPING: CLASS_GROUPING_INSTRUCTION}[runner]
    return f"{domain_system}\n\n{instruction}" + (f"\n{note}" if note else "")


def protocol_label(condition: str, protocol: Protocol | str) -> str:
    """The stored condition under a protocol: toolbias's keeps its label, the paper's is
    ``<condition>@paper`` (its success rule is always the paper's)."""
    return condition if Protocol(protocol) is Protocol.TOOLBIAS else f"{condition}@paper"


def protocol_of(condition: str) -> Protocol:
    """The protocol a stored condition was played under (:func:`protocol_label`'s inverse)."""
    return Protocol.PAPER if condition.endswith("@paper") else Protocol.TOOLBIAS


def check_protocol(protocol: Protocol | str, command: str = "run") -> Protocol:
    """The protocol to run under; a command that does not reproduce the paper's yet refuses it
    with what to use instead."""
    p = Protocol(protocol)
    if p is Protocol.PAPER and command not in PAPER_COMMANDS:
        raise ProtocolNotImplemented(
            what=f"--protocol paper is not implemented for `toolbias {command}` yet (it is for "
                 f"{', '.join('`toolbias ' + c + '`' for c in PAPER_COMMANDS)})",
            where="--protocol",
            fix="run the study with `toolbias run --protocol paper`, or keep toolbias's protocol with the "
                "artifact's success rule: --match paper (stored as its own condition, e.g. base+paper)")
    return p


#: commands that run under the paper's protocol
PAPER_COMMANDS = ("run", "probe", "recommend", "reproduce schema", "train-data", "train-grpo")


__all__ = ["CLASS_GROUPING_INSTRUCTION", "HIERARCHY_INSTRUCTION", "PAPER_COMMANDS", "PAPER_MAX_TOKENS",
           "PAPER_TURN_LIMIT", "TOOL_INSTRUCTION", "TRANSACTION_INSTRUCTION", "Protocol", "ProtocolNotImplemented", "Runner",
           "check_protocol", "paper_arguments", "paper_key", "paper_match", "paper_system_prompt", "paper_value",
           "protocol_label", "protocol_of", "runner_of", "unknown_function"]
