"""The BiasBusters / ToolBench presentation, rendered exactly as the paper's runs rendered it.

PROTOCOL.md section 1 (``../shared/data/biasbusters/PROTOCOL.md``) gives the rules; this
module follows them literally:

- :func:`standardize` and :func:`change_name`: ToolBench's name standardisation;
- :func:`function_dict`: an endpoint as the function dict the prompt lists
  (``<api>_for_<tool>`` cut to its last 64 characters, the "This is the subfunction
  for tool ..." description, required then optional parameters with ``example_value``);
- :data:`FINISH`: the sixth function, always listed last;
- :func:`task_description`: the AutoGPT task text and the numbered tool blurbs;
- :func:`text_prompt`: the single user string of the text (ReAct) mode, byte for byte;
- :func:`function_messages`: the native function-calling mode (GPT-3.5 "Func.").

An endpoint is a :class:`ToolbenchAPI`: the ToolBench ``api_list`` definition plus the
tool description behind the blurb. Tools imported from the BiasBusters files carry it in
``metadata["toolbench"]``; any other tool is rendered from its own name, descriptions and
JSON-schema parameters (:func:`api_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .types import SelectionTool

#: ToolBench renames these (API and parameter names) to ``is_<name>``
RESERVED_NAMES = ("from", "class", "return", "false", "true", "id", "and")
DESCRIPTION_LIMIT = 256
BLURB_LIMIT = 512
NAME_LIMIT = 64
_TYPE_MAP = {"NUMBER": "integer", "STRING": "string", "BOOLEAN": "boolean"}

FINISH: dict[str, Any] = {
    "name": "Finish",
    "description": "If you believe that you have obtained a result that can answer the task, please call this "
                   "function to provide the final answer. Alternatively, if you recognize that you are unable to "
                   "proceed with the task in the current state, call this function to restart. Remember: you must "
                   "ALWAYS call this function at the end of your attempt, and the only part that will be shown to the "
                   "user is the final answer, so it should contain sufficient information.",
    "parameters": {"type": "object", "properties": {
        "return_type": {"type": "string", "enum": ["give_answer", "give_up_and_restart"]},
        "final_answer": {"type": "string", "description": "The final answer you want to give the user. You should "
                                                          "have this field if \"return_type\"==\"give_answer\""}},
        "required": ["return_type"]},
}

TASK_DESCRIPTION = (
    "You should use functions to help handle the real time user querys. Remember:\n"
    "1.ALWAYS call \"Finish\" function at the end of the task. And the final answer should contain enough "
    "information to show to the user,If you can't handle the task, or you find that function calls always "
    "fail(the function is not valid now), use function Finish->give_up_and_restart.\n"
    "2.Do not use origin tool names, use only subfunctions' names.\n"
    "You have access of the following tools:\n")

FORMAT_ANCHOR = "with a function call to actually excute your step."
FORMAT_SENTENCE = " Your output should follow this format:\nThought:\nAction\nAction Input:\n"
FUNCTIONS_INTRO = "\nSpecifically, you have access to the following APIs: "


def standardize(text: str) -> str:
    """ToolBench's standardisation: other than ASCII letters, digits, ``_`` and CJK -> ``_``; runs collapsed;
    lower case; outer ``_`` removed; ``get_`` before a leading digit."""
    s = re.sub(r"[^\u4e00-\u9fa5a-zA-Z0-9_]", "_", text)
    s = re.sub(r"_+", "_", s).lower().strip("_")
    if s and s[0].isdigit():
        s = "get_" + s
    return s


def change_name(name: str) -> str:
    return f"is_{name}" if name in RESERVED_NAMES else name


def function_name(tool: str, api_name: str) -> str:
    """``<standardized api>_for_<standardized tool>``, only its last 64 characters kept."""
    return f"{change_name(standardize(api_name))}_for_{standardize(tool)}"[-NAME_LIMIT:]


@dataclass(frozen=True)
class ToolbenchAPI:
    """One endpoint as ToolBench defines it (the ``api_list`` entry) and its tool's description."""

    tool_name: str
    api_name: str
    api_description: str = ""
    tool_description: str = ""
    required_parameters: tuple[Mapping[str, Any], ...] = ()
    optional_parameters: tuple[Mapping[str, Any], ...] = ()
    category_name: str = ""
    #: perturbations: the function name the description's API-name replacement uses (a mapped tool keeps its
    #: original name there, PROTOCOL.md 3), and a replacement for everything after "you can use this tool."
    described_as: str = ""
    rest: str | None = None
    #: between ``<n>.<tool>:`` and the blurb in the tool list (a scrambled blurb follows the colon directly)
    blurb_sep: str = " "
    #: the function name shown instead of the computed one (the authors' renames of a name cut at 64
    #: characters keep the cut API part: PROTOCOL.md 3, :func:`~toolbias.selection.paper_perturb.keep_cut`)
    name_override: str = ""

    @property
    def function_name(self) -> str:
        return self.name_override or function_name(self.tool_name, self.api_name)

    @property
    def standard_tool_name(self) -> str:
        return standardize(self.tool_name)

    def to_dict(self) -> dict[str, Any]:
        d = {"tool_name": self.tool_name, "api_name": self.api_name, "api_description": self.api_description,
             "tool_description": self.tool_description, "category_name": self.category_name,
             "required_parameters": [dict(p) for p in self.required_parameters],
             "optional_parameters": [dict(p) for p in self.optional_parameters]}
        if self.described_as:
            d["described_as"] = self.described_as
        if self.rest is not None:
            d["rest"] = self.rest
        if self.blurb_sep != " ":
            d["blurb_sep"] = self.blurb_sep
        if self.name_override:
            d["name_override"] = self.name_override
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], tool_description: str | None = None) -> ToolbenchAPI:
        """From a ToolBench ``api_list`` definition (or :meth:`to_dict`)."""
        return cls(tool_name=str(d.get("tool_name", "") or ""), api_name=str(d.get("api_name", "") or ""),
                   api_description=str(d.get("api_description", "") or ""),
                   tool_description=str(tool_description if tool_description is not None
                                        else d.get("tool_description", "") or ""),
                   required_parameters=tuple(d.get("required_parameters") or ()),
                   optional_parameters=tuple(d.get("optional_parameters") or ()),
                   category_name=str(d.get("category_name", "") or ""), described_as=str(d.get("described_as") or ""),
                   rest=d.get("rest"), blurb_sep=str(d.get("blurb_sep", " ")),
                   name_override=str(d.get("name_override") or ""))

    def description_rest(self) -> str:
        """What follows "you can use this tool." in the function description ('' without an API description)."""
        if self.rest is not None:
            return self.rest
        if self.api_description.strip() == "":
            return ""
        d = self.api_description.strip()
        if self.api_name:
            d = d.replace(self.api_name, self.described_as or self.function_name)
        return f"The description of this function is: \"{d[:DESCRIPTION_LIMIT]}\""


def api_of(tool: SelectionTool) -> ToolbenchAPI:
    """The ToolBench definition of a tool: the imported one, or one derived from the tool itself
    (tool name = provider or name, API name = name, JSON-schema parameters as STRING/NUMBER/BOOLEAN)."""
    stored = tool.metadata.get("toolbench")
    if isinstance(stored, Mapping):
        return ToolbenchAPI.from_dict(stored)
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    types = {"integer": "NUMBER", "number": "NUMBER", "boolean": "BOOLEAN"}
    params = {True: [], False: []}  # type: dict[bool, list[dict[str, Any]]]
    for name, schema in props.items():
        schema = schema if isinstance(schema, Mapping) else {}
        params[name in required].append({"name": name, "type": types.get(str(schema.get("type")), "STRING"),
                                         "description": str(schema.get("description", "") or ""), "default": ""})
    return ToolbenchAPI(tool_name=tool.provider or tool.name, api_name=tool.name,
                        api_description=tool.api_description, tool_description=tool.tool_description,
                        required_parameters=tuple(params[True]), optional_parameters=tuple(params[False]))


def _parameter(p: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    name = change_name(standardize(str(p.get("name", ""))))
    prop: dict[str, Any] = {"type": _TYPE_MAP.get(str(p.get("type")), "string"),
                            "description": str(p.get("description") or "")[:DESCRIPTION_LIMIT]}
    default = p.get("default", "")
    if len(str(default)) != 0:
        prop["example_value"] = default
    return name, prop


def function_dict(api: ToolbenchAPI, *, optional_fix: bool = True) -> dict[str, Any]:
    """The function dict of one endpoint (PROTOCOL.md 1.2).

    ``optional_fix=False`` reproduces upstream ToolBench before the authors' fix of 2025-08-04:
    optional parameters shown only when the endpoint has a required one."""
    name = api.function_name
    tool = api.standard_tool_name
    description = f"This is the subfunction for tool \"{tool}\", you can use this tool." + api.description_rest()
    params: dict[str, Any] = {"type": "object", "properties": {}, "required": [], "optional": []}
    if api.required_parameters or optional_fix:
        for group, key in ((api.required_parameters, "required"), (api.optional_parameters, "optional")):
            for p in group:
                pname, prop = _parameter(p)
                params["properties"][pname] = prop
                params[key].append(pname)
    return {"name": name, "description": description, "parameters": params}


def blurb(tool_description: str) -> str:
    text = tool_description[:BLURB_LIMIT].replace("\n", "").strip()
    return text if text else "None"


def task_description(apis: Sequence[ToolbenchAPI], *, blurbs: bool = True) -> str:
    """The task text and one ``<n>.<tool>: <blurb>`` line per distinct tool in presented order."""
    text = TASK_DESCRIPTION
    if not blurbs:
        return text
    seen: list[str] = []
    for api in apis:
        tool = api.standard_tool_name
        if tool in seen:
            continue
        seen.append(tool)
        text += f"{len(seen)}.{tool}:{api.blurb_sep}{blurb(api.tool_description)}\n"
    return text


def system_message(template: str, apis: Sequence[ToolbenchAPI], functions: Sequence[Mapping[str, Any]] | None,
                   *, blurbs: bool = True) -> str:
    """The system text: the template with the task description; with ``functions`` (text mode), the output
    format sentence and the Python ``str()`` of the function list appended."""
    system = template.replace("{task_description}", task_description(apis, blurbs=blurbs))
    if functions is None:
        return system
    if FORMAT_ANCHOR not in system:
        from ..errors import ToolbiasError

        raise ToolbiasError("the text (ReAct) mode needs a system prompt containing the sentence "
                            f"'{FORMAT_ANCHOR}'", fix="use the base or similar prompt, or the function-calling "
                                                     "presentation (toolbench-functions)")
    system = system.replace(FORMAT_ANCHOR, FORMAT_ANCHOR + FORMAT_SENTENCE)
    return system + FUNCTIONS_INTRO + str([dict(f) for f in functions])


BLURBS_HEAD = "You have access of the following tools:"


def without_blurbs(text: str) -> str:
    """The prompt with the tool blurb list removed as the authors' mitigated run removed it (PROTOCOL.md 5): from
    ``You have access of the following tools:`` up to, not including, ``Specifically, you have access to the
    following APIs:``, replaced by a newline (unchanged when either anchor is missing)."""
    head = text.find(BLURBS_HEAD)
    tail = text.find(FUNCTIONS_INTRO.lstrip("\n"), head) if head >= 0 else -1
    return text if tail < 0 else text[:head] + "\n" + text[tail:]


def user_message(query: str) -> str:
    return f"\n{query}\nBegin!\n"


def text_prompt(query: str, apis: Sequence[ToolbenchAPI], template: str, *, optional_fix: bool = True) -> str:
    """The one user string of the text (ReAct) mode: ``System: ...``, ``User: ...``, ``Assistant:``."""
    functions = [function_dict(a, optional_fix=optional_fix) for a in apis] + [FINISH]
    system = system_message(template, apis, functions)
    return f"System: {system}\nUser: {user_message(query)}\nAssistant:\n"


def function_messages(query: str, apis: Sequence[ToolbenchAPI], template: str, *,
                      optional_fix: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of the native function-calling mode: the 6 dicts as they are (``optional`` and
    ``example_value`` included), the system text without the format sentence and function list."""
    functions = [function_dict(a, optional_fix=optional_fix) for a in apis] + [FINISH]
    messages = [{"role": "system", "content": system_message(template, apis, None)},
                {"role": "user", "content": user_message(query)}]
    return messages, [{"type": "function", "function": f} for f in functions]
