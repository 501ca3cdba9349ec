"""Run policy: the study a user gets from the options they give, the defaults filled in.

:func:`study_config` is the one place that turns options as a user gives them (``None``: not
given) into a :class:`~toolbias.runner.StudyConfig`; ``toolbias run`` passes what was typed,
and a script gets the same study from the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .codec import Control
from .episode import Condition
from .errors import ToolbiasError
from .providers.base import GenerateConfig
from .runner import StudyConfig

#: model turns per episode and tokens per model turn, unless a default job says otherwise
TURN_LIMIT = 16
MAX_TOKENS = 512


@dataclass(frozen=True)
class DefaultJob:
    """What a study plays when the user names a model and nothing else: a few tasks, short turns."""

    sample: int
    domains: tuple[str, ...]
    turn_limit: int
    max_tokens: int


#: the embedded model with no task options: one task per variant from the domain with the smallest
#: schema, at most 3 turns of at most 192 tokens unless turn_limit/max_tokens say otherwise.
#: Measured on 2 cores: the first prompt of a variant (its tools, 1,200-3,000 tokens) takes 16-40 s
#: at ~76 tokens/s, and the 0.5B model tends to use every turn (uncapped, one episode spent 155 s
#: on 8 turns of 1,150 generated tokens; at 4 turns of 256 tokens, 77-90 s). Pass sample/domains
#: for more.
EMBEDDED_DEFAULT_JOB = DefaultJob(sample=1, domains=("fitness_watch",), turn_limit=3, max_tokens=192)


def default_job(model: str, catalog: str, *, tasks: int | None, sample: int | None,
                domains: Sequence[str]) -> DefaultJob | None:
    """The default job these options leave to the policy, if any: the embedded model on the
    builtin catalog with no task option."""
    if model.startswith("local") and catalog == "builtin" and tasks is None and sample is None and not domains:
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


def study_config(*, model: str = "local", catalog: str = "builtin", variants: str = "representative",
                 tasks: int | None = None, sample: int | None = None, domains: str | Sequence[str] | None = None,
                 split: str | None = None, splits: str = "default", seed: int = 0,
                 control: Control | str = Control.STRICT, condition: Condition | str = Condition.BASE,
                 turn_limit: int | None = None, temperature: float = 0.0, max_tokens: int | None = None,
                 concurrency: int = 8, workers: int | None = None, shard: str | tuple[int, int] | None = None,
                 study: str | None = None, cache: str | None = None,
                 base_urls: Sequence[str] = (), phrasing: str = "query", user_model: str | None = None) -> StudyConfig:
    """The study these options describe, the run policy applied: with no task option on the
    embedded model, :data:`EMBEDDED_DEFAULT_JOB`; ``turn_limit``/``max_tokens`` left None take
    the job's (else :data:`TURN_LIMIT`/:data:`MAX_TOKENS`)."""
    chosen = parse_domains(domains)
    job = default_job(model, catalog, tasks=tasks, sample=sample, domains=chosen)
    if job is not None:
        sample, chosen = job.sample, job.domains
    if turn_limit is None:
        turn_limit = job.turn_limit if job else TURN_LIMIT
    if max_tokens is None:
        max_tokens = job.max_tokens if job else MAX_TOKENS
    return StudyConfig(model=model, catalog=catalog, variants=variants, tasks=tasks, sample=sample, seed=seed,
                       domains=chosen, split=split, splits=splits, control=Control(control),
                       condition=Condition(condition), turn_limit=turn_limit,
                       generate=GenerateConfig(temperature=temperature, max_tokens=max_tokens),
                       concurrency=concurrency, workers=workers,
                       shard=parse_shard(shard) if isinstance(shard, str | None) else shard,
                       study=study, cache=cache, provider_options={"base_urls": list(base_urls)} if base_urls else {},
                       phrasing=phrasing, user_model=user_model)


__all__ = ["EMBEDDED_DEFAULT_JOB", "MAX_TOKENS", "TURN_LIMIT", "DefaultJob", "default_job", "parse_domains",
           "parse_shard", "study_config"]
