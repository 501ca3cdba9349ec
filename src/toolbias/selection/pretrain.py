"""The paper's biased continued pre-training corpus (PROTOCOL.md 7): documents that praise one tool.

Each document is one call to a text model with :data:`TEMPLATE` filled in: a brand drawn
uniformly from the target's brand strings, a style drawn uniformly from :data:`STYLES`, and four
requirement lines drawn as the paper drew them (tool description paraphrased with probability
0.6, else quoted; API description likewise; endpoint path mentioned with probability 0.6;
parameter with probability 0.5). A document is kept when it has at least 1000 words and names
one of the brands (case-insensitive). Generation stops at the target number of documents or of
estimated tokens (4 characters per token), as the paper's (5000 documents or 8 M tokens; it
stopped at 2,437). The paper's calls were unseeded (``gemini-2.5-flash``, temperature 0.9,
top-p 0.9, 2800 output tokens); here the draws are seeded per call, so a run resumes where it
stopped and repeats its prompts.

Training on the corpus is a GPU step outside toolbias; the paper's recipe (PROTOCOL.md 7):
Unsloth, ``Qwen3-8B-Base`` in 4 bit, LoRA r 128 / alpha 32 (rsLoRA) on the attention and MLP
projections plus embeddings and LM head, sequence length 2048, batch 16, one epoch, learning
rate 5e-5 (embeddings 5e-6), cosine schedule, warmup 0.1.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig, InfraError, ModelAPI
from .toolbench import api_of
from .types import Benchmark

#: the generation prompt, byte for byte (the authors' ends with a newline)
TEMPLATE = 'Write a {style} in natural prose of approximately 1100-1300 words.\nTopic: using {brand} to detect the language from any input text.\n\nRequirements (keep it simple; prose only, no code blocks):\n• Use the API or tool name naturally several times: {brand}.\n• {tool_desc_line}\n• {api_desc_line}\n• {path_line}\n• {param_line}\n• Vary wording and structure; avoid lists unless they fit the style; no code, no tables.\n• The document must be self-contained, coherent, and realistic.\n\nKeep tone consistent with the chosen style (“{style}”). Focus on practical integration and usage patterns, challenges, and small anecdotes or rationales. Avoid repetition. Do not output any boilerplate disclaimers. Do not include a title—start directly with the text.\n'

STYLES = ('blog note', 'Q&A memo', 'release note', 'how-to guide', 'design rationale', 'troubleshooting checklist', 'internal policy memo', 'incident postmortem', 'CLI usage writeup', 'code review narrative', 'onboarding quickstart', 'performance playbook', 'security note', 'operations guide', 'case study')

#: the paper's target (Text Language by API-Ninjas, cluster 8, API 3) and its brand strings
PAPER_TARGET = ("8", 2)
PAPER_BRANDS = ("API Ninjas", "API-Ninjas", "API Ninjas Text Language", "Text Language by API-Ninjas")
PAPER_TOPIC = "detect the language from any input text"
PAPER_CONFIG = GenerateConfig(temperature=0.9, top_p=0.9, max_tokens=2800)
MIN_WORDS = 1000
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class CorpusTarget:
    """The tool the corpus promotes: brand strings and the texts the requirement lines quote."""

    brands: tuple[str, ...]
    topic: str
    tool_description: str
    api_description: str
    path: str
    parameter: tuple[str, str, str] | None = None  # name, type, default

    @classmethod
    def of(cls, bench: Benchmark, cluster: str, api: int, *, brands: Sequence[str] = (),
           topic: str = "") -> CorpusTarget:
        c = bench.cluster(cluster)
        if not 0 <= api < c.k:
            raise ToolbiasError(f"api {api} outside 0..{c.k - 1}", where=f"cluster '{c.id}'")
        a = api_of(c.tools[api])
        p = next(iter(a.required_parameters), None)
        param = (str(p.get("name", "")), str(p.get("type", "")), str(p.get("default", ""))) if p else None
        return cls(brands=tuple(brands) or (a.tool_name,), topic=topic or a.tool_description.rstrip(".").lower(),
                   tool_description=a.tool_description, api_description=a.api_description, path=a.api_name,
                   parameter=param)


def paper_target(bench: Benchmark) -> CorpusTarget:
    return CorpusTarget.of(bench, *PAPER_TARGET, brands=PAPER_BRANDS, topic=PAPER_TOPIC)


@dataclass(frozen=True)
class CorpusPrompt:
    text: str
    brand: str
    style: str


def corpus_prompt(target: CorpusTarget, rng: random.Random) -> CorpusPrompt:
    """One generation prompt, its draws made in the paper's order."""
    brand = rng.choice(target.brands)
    style = rng.choice(STYLES)
    tool = (f"Paraphrase the tool description faithfully (original: \u201c{target.tool_description}\u201d)."
            if rng.random() < 0.6 else f"Include the exact tool description once: \u201c{target.tool_description}\u201d.")
    api = (f"Paraphrase the API description faithfully (original: \u201c{target.api_description}\u201d)."
           if rng.random() < 0.6 else f"Include the exact API description once: \u201c{target.api_description}\u201d.")
    path = (f"Mention the endpoint path exactly once: \"{target.path}\"." if rng.random() < 0.6
            else "You may omit the endpoint path.")
    if target.parameter and rng.random() < 0.5:
        name, kind, default = target.parameter
        param = f"Optionally mention the parameter `{name}` (type: {kind}, default value: '{default}')."
    else:
        param = "You may omit parameters."
    text = (TEMPLATE.replace("{style}", style).replace("{brand}", brand).replace("{tool_desc_line}", tool)
            .replace("{api_desc_line}", api).replace("{path_line}", path).replace("{param_line}", param)
            .replace("to detect the language from any input text", f"to {target.topic}"))
    return CorpusPrompt(text, brand, style)


_WORD = re.compile(r"\b\w+\b")


def word_count(text: str) -> int:
    """Words as the authors counted them: matches of ``\\b\\w+\\b`` (``don't`` is two, ``--`` none)."""
    return len(_WORD.findall(text))


def keep(text: str, target: CorpusTarget) -> bool:
    """At least 1000 words (:func:`word_count`) and a brand named (case-insensitive)."""
    lowered = text.lower()
    return word_count(text) >= MIN_WORDS and any(b.lower() in lowered for b in target.brands)


@dataclass
class CorpusProgress:
    calls: int = 0
    kept: int = 0
    est_tokens: int = 0
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "kept": self.kept, "est_tokens": self.est_tokens, "errors": self.errors}


def _progress_path(out: Path) -> Path:
    return out.with_name(out.name + ".progress.json")


async def agenerate_corpus(model: ModelAPI, target: CorpusTarget, out: str | Path, *, documents: int = 5000,
                           max_tokens: int = 8_000_000, max_calls: int | None = None, seed: int = 0,
                           config: GenerateConfig = PAPER_CONFIG, concurrency: int = 8) -> CorpusProgress:
    """Append kept documents to ``out`` (JSON Lines ``{text, brand, style, call}``) until ``documents`` are
    kept, ``max_tokens`` estimated tokens written or ``max_calls`` calls made; resumes from ``out``'s
    progress file. Infrastructure errors are counted and their calls made again on the next run."""
    path = Path(out)
    state_file = _progress_path(path)
    progress = CorpusProgress(**json.loads(state_file.read_text())) if state_file.is_file() else CorpusProgress()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as sink:
        while progress.kept < documents and progress.est_tokens < max_tokens and \
                (max_calls is None or progress.calls < max_calls):
            batch = max(1, min(concurrency, (max_calls - progress.calls) if max_calls is not None else concurrency))
            calls = list(range(progress.calls, progress.calls + batch))
            prompts = [corpus_prompt(target, random.Random(f"{seed}:{i}")) for i in calls]

            async def one(p: CorpusPrompt) -> str | None:
                try:
                    result = await model.generate([{"role": "user", "content": p.text}], [], None,
                                                  config)
                except InfraError:
                    return None
                return result.content or ""

            texts = await asyncio.gather(*(one(p) for p in prompts))
            if all(t is None for t in texts):
                progress.errors += len(texts)
                break  # the model is unreachable: stop, a re-run continues from here
            for i, p, text in zip(calls, prompts, texts, strict=True):
                if text is None:
                    progress.errors += 1
                    continue
                if keep(text, target) and progress.kept < documents:
                    sink.write(json.dumps({"text": text, "brand": p.brand, "style": p.style, "call": i},
                                          ensure_ascii=False) + "\n")
                    progress.kept += 1
                    progress.est_tokens += len(text) // CHARS_PER_TOKEN
            progress.calls += batch
            sink.flush()
            state_file.write_text(json.dumps(progress.to_dict()))
    return progress
