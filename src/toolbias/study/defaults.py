"""Run policy: the study a user gets from the options they give, the defaults filled in.

:func:`study_config` is the one place that turns options as a user gives them (``None``: not
given) into a :class:`~toolbias.study.runner.StudyConfig`; ``toolbias run`` passes what was typed,
and a script gets the same study from the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ToolbiasError
from ..providers.base import GenerateConfig
from ..variants.codec import Control
from .episode import Condition
from .paper_protocol import PAPER_MAX_TOKENS, PAPER_TURN_LIMIT, Protocol
from .runner import StudyConfig
from .success import MatchRule

#: model turns per episode and tokens per model turn, unless a default job says otherwise
TURN_LIMIT = 16
MAX_TOKENS = 512


@dataclass(frozen=True)
class DefaultJob:
    """What a study plays when the user names a model and nothing else: the same measurement as a
    full study (same episodes, scoring, intervals), on fewer variants and tasks and shorter turns.
    Every field is an ordinary ``toolbias run`` option (:meth:`command` spells it out)."""

    variants: str
    domains: tuple[str, ...]
    calls: tuple[int, ...]
    phrasing: str
    turn_limit: int
    max_tokens: int
    sample: int | None = None
    #: the HTML report the job writes beside the store
    html: str = "toolbias-report.html"

    def command(self) -> str:
        """The explicit ``toolbias run`` that plays the same study."""
        parts = ["toolbias run --model local", f"--variants {self.variants}", f"--domains {','.join(self.domains)}"]
        if self.calls:
            parts.append(f"--calls {','.join(map(str, self.calls))}")
        if self.sample:
            parts.append(f"--sample {self.sample}")
        parts += [f"--phrasing {self.phrasing}", f"--turn-limit {self.turn_limit}", f"--max-tokens {self.max_tokens}",
                  f"--html {self.html}"]
        return " ".join(parts)


#: The embedded model (Qwen2.5-Coder-0.5B, 2 CPU cores) with no task option. Chosen by measurement:
#:
#: - variants: native against fully_merged (one dispatcher per domain, the paper's most different
#:   representative). The others either do not fit the 8,192-token window (whole-catalog
#:   namespaced_names ~21,000 prompt tokens, class_dispatch ~19,000, composed and fully_split ~14,000)
#:   or cost a 2-4k-token prompt prefix and ~8 CPU-seconds per
#:   episode that the 10 minutes cannot afford beside enough tasks (a third variant measured at
#:   ~575 s for the job on idle cores: too close to the limit);
#: - tasks: every single-call task of fitness_watch (41; its native schema is the smallest, ~2,000
#:   prompt tokens): more tasks per variant rather than more variants, so the paired interval is
#:   narrow enough to exclude zero;
#: - phrasing query_base (the templated query): on the colloquial one the 0.5B model picks the first
#:   tool for almost anything (native 0 of 8 measured), so no variant could differ from it;
#: - 2 turns of at most 128 tokens: the call, then the model's answer or one retry after an error
#:   (a single call takes 30-60 tokens; the 0.5B model otherwise loops until the turn limit).
#:
#: Measured on a loaded 2-core machine, one thread per variant: ~5.8 CPU-s per native episode, ~7.6
#: per fully_merged one, ~55 s per variant to load and evaluate its prompt prefix: ~660 CPU-s for
#: the job, an estimated 6-7 minutes on 2 idle cores. Finding after 28 paired tasks: fully_merged
#: -50 pp vs native [-68, -32] (native 50%, fully_merged 0%, every failure a livelock).
EMBEDDED_DEFAULT_JOB = DefaultJob(variants="native,fully_merged", domains=("fitness_watch",), calls=(1,),
                                  phrasing="query_base", turn_limit=2, max_tokens=128)


def default_job(model: str, catalog: str, *, tasks: int | None, sample: int | None,
                domains: Sequence[str], variants: str | None = None, split: str | None = None) -> DefaultJob | None:
    """The default job these options leave to the policy, if any: the embedded model on the
    builtin catalog with no task or variant option."""
    if model.startswith("local") and catalog == "builtin" and tasks is None and sample is None and not domains \
            and variants is None and split is None:
        return EMBEDDED_DEFAULT_JOB
    return None


def parse_shard(value: str | None) -> tuple[int, int] | None:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``; None or empty: no sharding."""
    if not value:
        return None
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise ToolbiasError(f"bad --shard '{value}'", fix="write i/n with 0 <= i < n, e.g. 0/4") from None
    if not 0 <= i < n:
        raise ToolbiasError(f"bad --shard '{value}': need 0 <= i < n", fix="e.g. --shard 0/4 ... 3/4")
    return (i, n)


def parse_domains(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A comma list (or a sequence) of domain names, blanks dropped."""
    if not value:
        return ()
    names = value.split(",") if isinstance(value, str) else value
    return tuple(d.strip() for d in names if d.strip())


def study_config(**options: Any) -> StudyConfig:
    """The study these options describe: :func:`plan_study`'s configuration (same keywords)."""
    return plan_study(**options)[0]


def plan_study(*, model: str = "local", catalog: str = "builtin", variants: str | None = None,
               tasks: int | None = None, sample: int | None = None, domains: str | Sequence[str] | None = None,
               calls: Sequence[int] = (), phrasing: str | None = None,
               split: str | None = None, splits: str = "default", seed: int = 0,
               control: Control | str = Control.STRICT, condition: Condition | str = Condition.BASE,
               turn_limit: int | None = None, temperature: float = 0.0, max_tokens: int | None = None,
               concurrency: int | None = None, workers: int | None = None, shard: str | tuple[int, int] | None = None,
               study: str | None = None, cache: str | None = None,
               base_urls: Sequence[str] = (), user_model: str | None = None,
               match: MatchRule | str | None = None,
               task_file: str | None = None,
               protocol: Protocol | str = Protocol.TOOLBIAS) -> tuple[StudyConfig, DefaultJob | None]:
    """The study these options describe and the default job it is, if it is one: the run policy applied: with no task or variant option on
    the embedded model, :data:`EMBEDDED_DEFAULT_JOB`; options left None take the job's (else
    ``representative`` variants, :data:`TURN_LIMIT`, :data:`MAX_TOKENS`, the colloquial phrasing);
    ``match`` None or ``"auto"``: the catalog's own success rule (toolbias.study.success).

    ``protocol`` paper (toolbias.study.paper_protocol): the artifact's 16 turns and 1,024 tokens
    unless given, its success rule (another ``match`` is refused), and no default job (its short
    turns are not the paper's)."""
    chosen = parse_domains(domains)
    paper = Protocol(protocol) is Protocol.PAPER
    if paper and match not in (None, "auto", MatchRule.PAPER, MatchRule.PAPER.value):
        raise ToolbiasError(f"--match {MatchRule(match).value} cannot be used with --protocol paper",
                            where="--match", fix="leave --match out: the paper's protocol scores by the paper's rule")
    job = None if paper else default_job(model, catalog, tasks=tasks, sample=sample, domains=chosen,
                                         variants=variants, split=split)
    if job is not None:
        sample, chosen, variants, calls = job.sample, job.domains, job.variants, calls or job.calls
        phrasing = phrasing or job.phrasing
    if turn_limit is None:
        turn_limit = PAPER_TURN_LIMIT if paper else job.turn_limit if job else TURN_LIMIT
    if max_tokens is None:
        max_tokens = PAPER_MAX_TOKENS if paper else job.max_tokens if job else MAX_TOKENS
    cfg = StudyConfig(model=model, catalog=catalog, variants=variants or "representative", tasks=tasks,
                       sample=sample, seed=seed, domains=chosen, calls=tuple(calls), phrasing=phrasing or "query",
                       split=split, splits=splits, control=Control(control), condition=Condition(condition),
                       turn_limit=turn_limit, generate=GenerateConfig(temperature=temperature, max_tokens=max_tokens),
                       concurrency=concurrency, workers=workers,
                       shard=parse_shard(shard) if isinstance(shard, str | None) else shard,
                       study=study, cache=cache, provider_options={"base_urls": list(base_urls)} if base_urls else {},
                       user_model=user_model, match=None if match in (None, "auto") else MatchRule(match),
                       task_file=task_file, protocol=Protocol(protocol))
    return cfg, job


__all__ = ["EMBEDDED_DEFAULT_JOB", "MAX_TOKENS", "TURN_LIMIT", "DefaultJob", "default_job", "parse_domains",
           "parse_shard", "plan_study", "study_config"]
