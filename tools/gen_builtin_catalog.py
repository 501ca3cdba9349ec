"""Generate the built-in query set (``tasks.jsonl``) from the domain files.

A build-time tool, not part of the installed package: run ``python tools/gen_builtin_catalog.py``
from the repository root to rewrite ``src/toolbias/catalog/builtin/tasks.jsonl`` and
``python tools/gen_builtin_catalog.py --check`` to verify that the committed file is exactly
what the generator produces (exit status 1 if not).

Each task is one user utterance with a gold list of 1-6 native actions in one domain.
The gold is drawn first; the query is then rendered twice from the tools' ``phrases``:

* ``query_templated``: the first (canonical) phrase of every action, with enum values
  spelled literally (``front_left`` -> ``front left``) and numbers as digits;
* ``query``: a colloquial paraphrase: a random phrase per action (some indirect),
  lexicon synonyms for enum values, numbers sometimes in words, openers, small talk,
  varied connectors and closers.

Every argument value is stated in both texts (free strings verbatim), so the gold can
be recovered from the query. No two gold actions write the same attribute of the same
object, add and remove the same record, or repeat an event on the same object.

Determinism: one ``random.Random`` per domain seeded from a string (SHA-512 based,
independent of ``PYTHONHASHSEED``), no iteration over sets, and a per-task rendering
seed stored in ``meta.seed``. The output is identical on every machine and Python >= 3.10.

Domain file extensions read only here (the loader ignores them): ``phrases`` per tool
(templates with ``{arg}`` slots; booleans as ``{arg|text if true|text if false}``),
``lexicon`` (synonyms keyed by ``value``, ``param=value`` or ``tool.param=value``; the
most specific key wins), ``samples`` per domain and per tool (value pools for free
strings and integers; a pool may be conditional, keyed ``"other_param=value"``) and
``smalltalk`` (sentences that open some colloquial queries).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolbias.catalog import builtin
from toolbias.catalog.builtin import load_domain_files
from toolbias.catalog.model import NativeAction, Task
from toolbias.catalog.validation import value_error
from toolbias.errors import CatalogError

#: Bump when the generator or the domain files change the produced set.
TASKS_VERSION = "1"
#: Base seed; each domain derives its own generator from it.
SEED = 20260401
#: Tasks per native tool in each domain (a 13-tool domain gets 208 tasks).
TASKS_PER_TOOL = 16
#: Share of tasks by gold length (number of native calls).
LENGTH_WEIGHTS: dict[int, float] = {1: 0.20, 2: 0.22, 3: 0.22, 4: 0.16, 5: 0.11, 6: 0.09}

TASKS_PATH = Path(builtin.__file__).with_name(builtin.TASKS_FILE)

_SLOT = re.compile(r"\{([a-z][a-z0-9_]*)(?:\|([^|}]*)\|([^|}]*))?\}")

#: Words that start an imperative phrase; only those can follow "Can you ...".
IMPERATIVE = frozenset(
    "activate add angle apply begin block bring brew clean clear create delay delete direct do dim empty "
    "freshen get give grab group have heat hold keep launch let log look make microwave move mow open "
    "play preheat put queue raise remind remove run save scale schedule search send set shift shock skip "
    "spot start steam stop store superchlorinate suspend switch sync take text tilt transfer trigger tune "
    "turn unblock ungroup use warm wash water".split()
)

GREETINGS = ("Hey", "Hi", "Hello", "Hey there", "Morning", "Hi assistant", "Evening", "Quick one", "Hiya", "Good day")
FRAMES_IMPERATIVE = (
    "Can you {body}?", "Could you {body}?", "Please {body}.", "I'd like you to {body}.", "I need you to {body}.",
    "Would you {body}?", "{Body}, please.", "{Body}.", "Can you please {body}?", "Do me a favour and {body}.",
)
FRAMES_FREE = ("{Body}.", "So, {body}.", "{Body}, thanks.", "Okay: {body}.", "Right, {body}.")
CONNECTORS = (", then ", " and ", ", and ", "; also ", ", plus ", " - and ", ", after that ", " and then ", ", and also ")
LAST_CONNECTORS = (" and ", ", and finally ", ", and lastly ", " and also ", ", then ", ", and last but not least ")
CLOSERS = (" Thanks!", " Thank you.", " Cheers!", " That's all for now.", " Appreciate it.", " Thanks a lot.")
TEMPLATED_JOIN = ", then "

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """English words for an integer: 42 -> 'forty-two', -3 -> 'minus three'."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    if n < 1_000_000:
        thousands, rest = divmod(n, 1000)
        return f"{number_words(thousands)} thousand" + (f" {number_words(rest)}" if rest else "")
    return str(n)


def display(value: str) -> str:
    """Literal English rendering of an enum value: ``front_left`` -> ``front left``."""
    return value.replace("_", " ")


@dataclass
class DomainSpec:
    """A domain file as the generator needs it."""

    raw: Mapping[str, Any]
    name: str = ""
    tools: list[Mapping[str, Any]] = field(default_factory=list)
    lexicon: Mapping[str, list[str]] = field(default_factory=dict)
    samples: Mapping[str, Any] = field(default_factory=dict)
    smalltalk: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = self.raw["name"]
        self.tools = list(self.raw["tools"])
        self.lexicon = self.raw.get("lexicon", {})
        self.samples = self.raw.get("samples", {})
        self.smalltalk = list(self.raw.get("smalltalk", []))

    def tool(self, name: str) -> Mapping[str, Any]:
        for t in self.tools:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def synonyms(self, tool: str, param: str, value: str) -> list[str]:
        for key in (f"{tool}.{param}={value}", f"{param}={value}", value):
            if key in self.lexicon:
                return list(self.lexicon[key])
        return []

    def pool(self, tool: Mapping[str, Any], param: str) -> Any:
        tool_samples = tool.get("samples", {})
        if param in tool_samples:
            return tool_samples[param]
        return self.samples.get(param)


def _props(tool: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    props: Mapping[str, Mapping[str, Any]] = tool["parameters"]["properties"]
    return props


def _effect(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    effect: Mapping[str, Any] = tool.get("effect") or {"kind": "set", "target": []}
    return effect


def _pick_pool(pool: Any, args: Mapping[str, Any]) -> list[Any] | None:
    """A sample pool, resolving conditional pools against the arguments drawn so far."""
    if pool is None or isinstance(pool, list):
        return pool
    for key, values in pool.items():
        other, _, val = key.partition("=")
        if other in args and str(args[other]) == val:
            return list(values)
    return list(pool["*"]) if "*" in pool else None


# --------------------------------------------------------------------------- lint


def lint_domain(spec: DomainSpec) -> list[str]:
    """Problems that would make tasks ambiguous or unexecutable; empty when the file is sound."""
    problems: list[str] = []
    enum_values: dict[str, set[str]] = {}
    attrs: dict[tuple[str, str], str] = {}
    for tool in spec.tools:
        name = tool["name"]
        props = _props(tool)
        effect = _effect(tool)
        target = list(effect.get("target") or [])
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            problems.append(f"{name}: tool name is not snake_case")
        if not tool.get("class"):
            problems.append(f"{name}: no class")
        if sorted(tool["parameters"].get("required", [])) != sorted(props):
            problems.append(f"{name}: not every parameter is required")
        for t in target:
            if t not in props:
                problems.append(f"{name}: effect target '{t}' is not a parameter")
        phrases = tool.get("phrases") or []
        if len(phrases) < 2:
            problems.append(f"{name}: needs at least two phrases")
        for phrase in phrases:
            slots = sorted(m.group(1) for m in _SLOT.finditer(phrase))
            if slots != sorted(props):
                problems.append(f"{name}: phrase {phrase!r} must name each parameter exactly once")
            for m in _SLOT.finditer(phrase):
                is_int = props.get(m.group(1), {}).get("type") == "integer"
                if is_int and re.match(r"[A-Za-z0-9]", phrase[m.end():m.end() + 1]):
                    problems.append(f"{name}: phrase {phrase!r}: slot {{{m.group(1)}}} runs into the next word")
            first = _SLOT.match(phrase)
            if first and props.get(first.group(1), {}).get("type") == "string" and "enum" not in props[first.group(1)]:
                problems.append(f"{name}: phrase {phrase!r} starts with a free string (capitalising would change it)")
            for m in _SLOT.finditer(phrase):
                is_bool = props.get(m.group(1), {}).get("type") == "boolean"
                if is_bool != (m.group(2) is not None):
                    problems.append(f"{name}: phrase {phrase!r}: booleans (only) use {{arg|yes|no}}")
        for pname, schema in props.items():
            if not schema.get("description"):
                problems.append(f"{name}.{pname}: no description")
            enum = schema.get("enum")
            if enum is not None:
                enum_values.setdefault(pname, set()).update(enum)
                surfaces: dict[str, str] = {}
                for v in enum:
                    if not re.fullmatch(r"[a-z][a-z0-9_]*", v):
                        problems.append(f"{name}.{pname}: enum value {v!r} is not snake_case")
                    for s in [display(v), *spec.synonyms(name, pname, v)]:
                        prev = surfaces.setdefault(s.lower(), v)
                        if prev != v:
                            problems.append(f"{name}.{pname}: '{s}' would mean both {prev!r} and {v!r}")
            elif schema.get("type") in ("string", "integer"):
                pool = spec.pool(tool, pname)
                if schema.get("type") == "string" and pool is None:
                    problems.append(f"{name}.{pname}: free string without samples")
                if schema.get("type") == "integer" and pool is None and (
                        "minimum" not in schema or "maximum" not in schema):
                    problems.append(f"{name}.{pname}: integer without range or samples")
                pools = [] if pool is None else [pool] if isinstance(pool, list) else list(pool.values())
                for values in pools:
                    for v in values:
                        err = value_error(schema, v, pname)
                        if err is not None:
                            problems.append(f"{name}.{pname}: sample {v!r}: {err.message}")
        if effect.get("kind", "set") == "set":
            for pname in props:
                if pname in target:
                    continue
                attr = (tool["class"], pname)
                if attr in attrs:
                    problems.append(f"{name}: attribute '{pname}' of class '{tool['class']}' is also set by {attrs[attr]}")
                attrs[attr] = name
    known = {v for vs in enum_values.values() for v in vs}
    for key in spec.lexicon:
        head, _, value = key.rpartition("=")
        if not head:
            if key not in known:
                problems.append(f"lexicon: '{key}' is no enum value of this domain")
            continue
        tool_name, _, pname = head.rpartition(".")
        if value not in enum_values.get(pname, set()):
            problems.append(f"lexicon: '{key}' names no enum value of parameter '{pname}'")
        if tool_name and not any(t["name"] == tool_name for t in spec.tools):
            problems.append(f"lexicon: '{key}' names no tool of this domain")
    return problems


# --------------------------------------------------------------------------- gold


def _draw_arguments(rng: random.Random, spec: DomainSpec, tool: Mapping[str, Any],
                    reuse: Mapping[str, Any]) -> dict[str, Any]:
    props = _props(tool)
    args: dict[str, Any] = {}
    order = [p for p in props if "enum" in props[p] or props[p].get("type") == "boolean"]
    order += [p for p in props if p not in order]
    for pname in order:
        schema = props[pname]
        if pname in reuse and value_error(schema, reuse[pname], pname) is None and rng.random() < 0.5:
            args[pname] = reuse[pname]
            continue
        enum = schema.get("enum")
        if enum is not None:
            taken = [args[o] for o in args if props[o].get("enum") == enum]
            choices = [v for v in enum if v not in taken] or list(enum)
            args[pname] = rng.choice(choices)
        elif schema.get("type") == "boolean":
            args[pname] = rng.random() < 0.5
        else:
            pool = _pick_pool(spec.pool(tool, pname), args)
            if pool:
                args[pname] = rng.choice(pool)
            else:
                args[pname] = rng.randint(int(schema["minimum"]), int(schema["maximum"]))
    return {p: args[p] for p in props}


def _footprint(tool: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    """What an action touches; two actions of one task must not share any of it."""
    effect = _effect(tool)
    kind = effect.get("kind", "set")
    target = list(effect.get("target") or [])
    instance = "/".join(str(args[t]) for t in target) or "_"
    where = f"{tool['class']}:{instance}"
    if kind == "set":
        return [f"{where}:{p}" for p in args if p not in target]
    if kind == "event":
        return [f"{where}:event:{tool['name']}"]
    record = json.dumps({p: v for p, v in args.items() if p not in target}, sort_keys=True)
    return [f"{where}:{effect.get('list', 'items')}:{record}"]


def draw_gold(rng: random.Random, spec: DomainSpec, n: int, first: Mapping[str, Any] | None = None,
              attempts: int = 200) -> list[tuple[Mapping[str, Any], dict[str, Any]]] | None:
    """A conflict-free list of ``n`` (tool, arguments); None if none was found."""
    for _ in range(attempts):
        chosen: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
        touched: set[str] = set()
        ok = True
        for i in range(n):
            for _try in range(30):
                if i == 0:
                    tool = first or rng.choice(spec.tools)
                elif rng.random() < 0.45:
                    same = [t for t in spec.tools if t["class"] == chosen[-1][0]["class"]]
                    tool = rng.choice(same)
                else:
                    tool = rng.choice(spec.tools)
                reuse: dict[str, Any] = {}
                for _t, prev in chosen:
                    reuse.update(prev)
                args = _draw_arguments(rng, spec, tool, reuse)
                foot = _footprint(tool, args)
                if not touched.intersection(foot):
                    touched.update(foot)
                    chosen.append((tool, args))
                    break
            else:
                ok = False
                break
        if ok:
            return chosen
    return None


# --------------------------------------------------------------------------- rendering


def _fill(phrase: str, render: Any) -> str:
    def sub(m: re.Match[str]) -> str:
        return str(render(m.group(1), m.group(2), m.group(3)))

    return _SLOT.sub(sub, phrase)


def render_templated(tool: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    props = _props(tool)

    def render(p: str, yes: str | None, no: str | None) -> str:
        v = args[p]
        if props[p].get("type") == "boolean":
            return str(yes if v else no)
        if "enum" in props[p]:
            return display(str(v))
        return str(v)

    return tidy(_fill(tool["phrases"][0], render))


def render_colloquial(rng: random.Random, spec: DomainSpec, tool: Mapping[str, Any], args: Mapping[str, Any],
                      used: list[str] | None = None) -> str:
    """One action in colloquial English; ``used`` phrases (of this task) are avoided when possible."""
    props = _props(tool)
    phrases = tool["phrases"]
    fresh = [p for p in phrases if p not in (used or [])] or list(phrases)
    varied = [p for p in fresh if p != phrases[0]]
    phrase = rng.choice(varied) if varied and rng.random() < 0.85 else fresh[0]
    if used is not None:
        used.append(phrase)

    def render(p: str, yes: str | None, no: str | None) -> str:
        v = args[p]
        schema = props[p]
        if schema.get("type") == "boolean":
            return str(yes if v else no)
        if "enum" in schema:
            syn = spec.synonyms(tool["name"], p, str(v))
            return rng.choice(syn) if syn and rng.random() < 0.6 else display(str(v))
        if schema.get("type") == "integer" and isinstance(v, int):
            if (abs(v) <= 100 or v % 50 == 0) and rng.random() < 0.3:
                return number_words(v)
            return str(v)
        return str(v)

    return tidy(_fill(phrase, render))


_SINGULAR = re.compile(
    r"(?<![-\w.])(1|one)( extra)? (minute|hour|step|pass|second|month|day|notch|rinse|degree|kilometer|calorie|millilitre|"
    r"millimetre|kelvin)(es|s)\b")
_ARTICLE = re.compile(r"\b([Aa]) (?=([aeiouAEIOU]|8|11\b|18\b))(?!(?i:one\b|uni|usb|use|eu))")


def tidy(text: str) -> str:
    """Small grammar repairs after filling slots: '1 minutes' -> '1 minute', 'a eco' -> 'an eco'."""
    text = _SINGULAR.sub(lambda m: f"{m.group(1)}{m.group(2) or ''} {m.group(3)}", text)
    return _ARTICLE.sub(lambda m: f"{m.group(1)}n ", text)


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def join_templated(parts: Sequence[str]) -> str:
    return _capitalize(TEMPLATED_JOIN.join(parts)) + "."


def join_colloquial(rng: random.Random, spec: DomainSpec, parts: Sequence[str]) -> str:
    body = parts[0]
    for i, part in enumerate(parts[1:], start=1):
        conn = rng.choice(LAST_CONNECTORS if i == len(parts) - 1 else CONNECTORS)
        body += conn + part
    first_word = parts[0].split()[0].lower()
    frames = FRAMES_IMPERATIVE if first_word in IMPERATIVE else FRAMES_FREE
    frame = rng.choice(frames)
    r = rng.random()
    lead = ""
    if r < 0.25 and spec.smalltalk:
        lead = rng.choice(spec.smalltalk) + " "
    elif r < 0.5:
        lead = rng.choice(GREETINGS) + rng.choice(("! ", ", ", ". "))
    if lead.endswith(", "):
        # mid-sentence: keep the phrase's own casing ("Hey, set the ...", "Hey, Maria is ...")
        if not frame.startswith(("{", "I ", "I'")):
            frame = frame[:1].lower() + frame[1:]
        text = frame.replace("{Body}", body).replace("{body}", body)
    else:
        text = frame.replace("{Body}", _capitalize(body)).replace("{body}", body)
    text = lead + text
    if rng.random() < 0.2 and not re.search(r"thank|cheers|please\W*$", text, re.IGNORECASE):
        text += rng.choice(CLOSERS)
    return text


# --------------------------------------------------------------------------- tasks


def _length_quota(total: int) -> list[int]:
    """Gold lengths for ``total`` tasks, proportional to LENGTH_WEIGHTS (largest remainder)."""
    exact = {n: total * w / sum(LENGTH_WEIGHTS.values()) for n, w in LENGTH_WEIGHTS.items()}
    counts = {n: int(x) for n, x in exact.items()}
    left = total - sum(counts.values())
    for n in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), k))[:left]:
        counts[n] += 1
    return [n for n in sorted(counts) for _ in range(counts[n])]


def generate_domain(spec: DomainSpec) -> list[Task]:
    problems = lint_domain(spec)
    if problems:
        raise CatalogError("; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""),
                           where=f"builtin domain '{spec.name}'", fix="edit the domain file")
    rng = random.Random(f"toolbias-tasks:{SEED}:{spec.name}")
    total = TASKS_PER_TOOL * len(spec.tools)
    lengths = _length_quota(total)
    rng.shuffle(lengths)
    singles = list(spec.tools)
    rng.shuffle(singles)
    next_single = 0
    seen: set[str] = set()
    tasks: list[Task] = []
    for n in lengths:
        gold = None
        for _ in range(50):
            first = None
            if n == 1:
                first = singles[next_single % len(singles)]
                next_single += 1
            gold = draw_gold(rng, spec, n, first)
            if gold is None:
                continue
            signature = "|".join(sorted(json.dumps([t["name"], a], sort_keys=True) for t, a in gold))
            if signature not in seen:
                seen.add(signature)
                break
            gold = None
        if gold is None:
            raise CatalogError(f"cannot draw a new conflict-free task of {n} calls", where=f"builtin domain '{spec.name}'",
                               fix="add tools or values, or lower TASKS_PER_TOOL")
        seed = rng.getrandbits(31)
        render_rng = random.Random(seed)
        templated = join_templated([render_templated(t, a) for t, a in gold])
        query = templated
        while query == templated:  # a paraphrase, never the templated text itself
            used: list[str] = []
            query = join_colloquial(render_rng, spec, [render_colloquial(render_rng, spec, t, a, used) for t, a in gold])
        actions = tuple(NativeAction(spec.name, t["name"], a) for t, a in gold)
        tasks.append(Task(id=f"{spec.name}-{len(tasks) + 1:04d}", domain=spec.name, query=query,
                          query_templated=templated, gold=actions,
                          meta={"n_calls": n, "seed": seed, "version": TASKS_VERSION}))
    return tasks


def generate(domain_files: Sequence[Mapping[str, Any]] | None = None) -> list[Task]:
    """All built-in tasks, domain by domain in file order."""
    raws = load_domain_files() if domain_files is None else domain_files
    tasks: list[Task] = []
    for raw in raws:
        tasks.extend(generate_domain(DomainSpec(raw)))
    return tasks


def dumps(tasks: Sequence[Task]) -> str:
    """The JSON Lines text of ``tasks`` (sorted keys, one task a line)."""
    return "".join(json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False) + "\n" for t in tasks)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/gen_builtin_catalog.py",
                                     description="Regenerate the built-in query set (tasks.jsonl).")
    parser.add_argument("--check", action="store_true", help="exit 1 if tasks.jsonl differs from a fresh generation")
    parser.add_argument("--output", type=Path, default=TASKS_PATH, help="where to write (default: the package file)")
    opts = parser.parse_args(argv)
    try:
        text = dumps(generate())
    except CatalogError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return 2
    if opts.check:
        current = opts.output.read_text(encoding="utf-8") if opts.output.is_file() else ""
        if current != text:
            print(f"{opts.output} is out of date (sha256 {digest(current)[:12]} != generated {digest(text)[:12]}); "
                  f"run python tools/gen_builtin_catalog.py", file=sys.stderr)
            return 1
        print(f"{opts.output} is up to date (sha256 {digest(text)[:12]}, version {TASKS_VERSION})")
        return 0
    opts.output.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} tasks to {opts.output} (sha256 {digest(text)[:12]}, version {TASKS_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
