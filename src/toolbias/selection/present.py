"""How a trial is shown to the model (presentations and system prompts) and how its answer is read.

Presentations (:data:`PRESENTATIONS`):

- ``tools``: each tool is one OpenAI function in the request's ``tools`` list, in the
  rotation's order (real JSON-schema definitions); the selection is the function called;
- ``text``: the tools are a numbered list in the user message; the model answers with a
  number or a name;
- ``toolbench``: the paper's text (ReAct) prompt, byte for byte (PROTOCOL.md 1.3): one user
  message after an empty system message; the model writes ``Action: <function>``;
- ``toolbench-functions``: the paper's native function-calling mode (PROTOCOL.md 1.4, the
  GPT-3.5 "Func." runs): the AutoGPT system text, ``\\n<query>\\nBegin!\\n`` as the user turn,
  the six ToolBench function dicts (Finish last) as tools, no tool_choice.

System prompts (:func:`resolve_prompt`): ``toolbias`` (this project's prompt for ``tools``
and ``text``), the paper's ``base``, ``similar`` and ``adj`` templates (the default of the
toolbench presentations is ``base``), or ``file:PATH`` with any text (``{task_description}``
is filled with the paper's task text and tool blurbs). The prompt's name is part of every
record's result group.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import Message, ModelOutput
from . import prompts, toolbench
from .parse import Parsed, match_name, parse_output, parse_text
from .types import SelectionTool

PRESENTATIONS = ("tools", "text", "toolbench", "toolbench-functions")
#: presentations whose system prompt is an AutoGPT template holding ``{task_description}``
TOOLBENCH_PRESENTATIONS = ("toolbench", "toolbench-functions")
PAPER_PROMPTS = {"base": prompts.PAPER_BASE, "similar": prompts.PAPER_SIMILAR, "adj": prompts.PAPER_ADJ}

SYSTEM_TOOLS = ("You are an assistant that fulfils user requests with tools. Several of the provided tools may "
                "be able to serve the request. Call exactly one tool, the one you would use, with suitable "
                "arguments.")
SYSTEM_TEXT = ("You choose which tool to use for a user request. Several of the listed tools may be able to serve "
               "it. Answer with the number or the exact name of the one tool you would use, and nothing else.")
OWN_PROMPT = "toolbias"


@dataclass(frozen=True)
class Prompt:
    """A system prompt: its name (part of the result group) and its text (a template for toolbench)."""

    name: str
    text: str


def default_prompt(presentation: str) -> str:
    return "base" if presentation in TOOLBENCH_PRESENTATIONS else OWN_PROMPT


def resolve_prompt(presentation: str, spec: str | None = None) -> Prompt:
    """The system prompt ``spec`` names for a presentation (None: the presentation's default)."""
    check_presentation(presentation)
    spec = spec or default_prompt(presentation)
    if spec == OWN_PROMPT:
        if presentation in TOOLBENCH_PRESENTATIONS:
            raise ToolbiasError(f"the {presentation} presentation uses the paper's AutoGPT templates",
                                fix="use --system-prompt base, similar, adj or file:PATH")
        return Prompt(OWN_PROMPT, SYSTEM_TOOLS if presentation == "tools" else SYSTEM_TEXT)
    if spec in PAPER_PROMPTS:
        return Prompt(spec, PAPER_PROMPTS[spec])
    if spec.startswith("file:"):
        path = Path(spec[5:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolbiasError(f"cannot read the system prompt: {exc.strerror or exc}", where=str(path),
                                fix="give file:PATH of a UTF-8 text file") from None
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
        return Prompt(f"file:{path.name}@{digest}", text)
    raise ToolbiasError(f"unknown system prompt '{spec}'",
                        fix=f"use {OWN_PROMPT} (tools/text), base, similar, adj (the paper's) or file:PATH")


def check_presentation(presentation: str) -> None:
    if presentation not in PRESENTATIONS:
        raise ToolbiasError(f"unknown presentation '{presentation}'", fix=f"use one of: {', '.join(PRESENTATIONS)}")


@dataclass(frozen=True)
class Request:
    """One trial's request and the name the model sees for each presented tool."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: str | None
    shown: tuple[str, ...]


def describe_parameters(tool: SelectionTool) -> str:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    parts = []
    for name, schema in props.items():
        schema = schema if isinstance(schema, dict) else {}
        bits = [str(schema.get("type", "any"))]
        if name in required:
            bits.append("required")
        desc = str(schema.get("description", "") or "").strip()
        parts.append(f"{name} ({', '.join(bits)})" + (f": {desc}" if desc else ""))
    return "; ".join(parts) if parts else "none"


def render_text_list(tools: Sequence[SelectionTool]) -> str:
    lines = []
    for i, t in enumerate(tools, 1):
        lines.append(f"{i}. {t.name}: {t.description or '(no description)'}")
        lines.append(f"   parameters: {describe_parameters(t)}")
    return "\n".join(lines)


def _fill(template: str, tools: Sequence[SelectionTool]) -> str:
    if "{task_description}" not in template:
        return template
    return template.replace("{task_description}", toolbench.task_description([toolbench.api_of(t) for t in tools]))


def build(query: str, tools: Sequence[SelectionTool], presentation: str, *, prompt: Prompt | None = None,
          tool_choice: str | None = "required") -> Request:
    """The request of one trial (``tools`` in presented order)."""
    prompt = prompt or resolve_prompt(presentation)
    if presentation == "tools":
        return Request([{"role": "system", "content": _fill(prompt.text, tools)}, {"role": "user", "content": query}],
                       [t.to_openai() for t in tools], tool_choice, tuple(t.name for t in tools))
    if presentation == "text":
        user = (f"Request: {query}\n\nTools:\n{render_text_list(tools)}\n\n"
                "Which tool do you use? Reply with its number or exact name only.")
        return Request([{"role": "system", "content": _fill(prompt.text, tools)}, {"role": "user", "content": user}],
                       [], None, tuple(t.name for t in tools))
    apis = [toolbench.api_of(t) for t in tools]
    shown = tuple(a.function_name for a in apis)
    if presentation == "toolbench":
        text = toolbench.text_prompt(query, apis, prompt.text)
        return Request([{"role": "system", "content": ""}, {"role": "user", "content": text}], [], None, shown)
    if presentation == "toolbench-functions":
        messages, specs = toolbench.function_messages(query, apis, prompt.text)
        return Request(messages, specs, None, shown)
    check_presentation(presentation)
    raise AssertionError(presentation)


def build_request(query: str, tools: Sequence[SelectionTool], presentation: str,
                  tool_choice: str | None = "required") -> tuple[list[Message], list[dict[str, Any]], str | None]:
    """(messages, tools, tool_choice) for one trial with the presentation's default prompt."""
    req = build(query, tools, presentation, tool_choice=tool_choice)
    return req.messages, req.tools, req.tool_choice


def _action_value(text: str) -> str | None:
    """The value of the first ``Action:`` line of a ReAct answer (None when there is none)."""
    for line in text.splitlines():
        head, sep, value = line.strip().partition(":")
        if sep and head.strip().strip("*").strip().lower() == "action":
            return value.strip().strip("`'\"*").strip()
    return None


def parse(output: ModelOutput, shown: Sequence[str], presentation: str) -> Parsed:
    """The exact rule: the presented tool the answer names as a whole name, or unparsed with a reason."""
    if presentation in ("tools", "text"):
        return parse_output(output, shown, presentation)
    if presentation == "toolbench-functions":
        calls = [c.name for c in output.tool_calls]
        if calls and calls[0] == "Finish":
            return Parsed(None, reason="called Finish")
        return parse_output(output, shown, "tools")
    text = output.content or ""
    action = _action_value(text)
    if action is not None:
        if action == "Finish":
            return Parsed(None, reason="action is Finish")
        hit = match_name(action, shown)
        if hit is not None:
            return Parsed(hit, via="action")
        return Parsed(None, reason=f"action names no presented function: '{action[:80]}'")
    parsed = parse_text(text, shown, allow_index=False)
    return Parsed(parsed.index, via=f"text-{parsed.via}" if parsed.ok else "", reason=parsed.reason)
