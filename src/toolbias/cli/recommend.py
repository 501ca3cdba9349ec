"""CLI: ``toolbias recommend`` - which schema variant suits a model."""

from __future__ import annotations

import asyncio
import json

import click
from rich.console import Console
from rich.table import Table

from ..codec import Control
from ..recommend import rank_variants
from ..runner import StudyConfig, build_study, run_study_async
from ..store import Store


def register(group: click.Group) -> None:
    @group.command("recommend")
    @click.option("--model", default="local", show_default=True, envvar="TOOLBIAS_MODEL")
    @click.option("--base-url", multiple=True, help="OpenAI-compatible endpoint(s)")
    @click.option("--catalog", default="builtin", show_default=True)
    @click.option("--variants", default="representative", show_default=True, help="candidates")
    @click.option("--sample", type=int, default=36, show_default=True, help="tasks per candidate (paired)")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--control", type=click.Choice([c.value for c in Control]), default="strict", show_default=True)
    @click.option("--store", default="recommend.db", show_default=True)
    @click.option("--concurrency", type=int, default=8, show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    def recommend_cmd(model: str, base_url: tuple[str, ...], catalog: str, variants: str, sample: int, seed: int,
                      control: str, store: str, concurrency: int, as_json: bool) -> None:
        """Estimate each candidate variant's success on a small sample and rank them."""
        cfg = StudyConfig(model=model, catalog=catalog, variants=variants, sample=sample, seed=seed,
                          control=Control(control), concurrency=concurrency,
                          study=f"recommend|{model}|{control}|{sample}|{seed}",
                          provider_options={"base_urls": list(base_url)} if base_url else {})
        study = build_study(cfg)
        with Store(store) as st:
            asyncio.run(run_study_async(study, st))  # checks the model first, in the same event loop
            ranked = rank_variants(study, st, seed=seed)
        if as_json:
            click.echo(json.dumps([r.to_dict() for r in ranked], indent=2))
            return
        table = Table(title=f"{model} on {catalog}: {sample} paired tasks per variant")
        for col in ("variant", "functions", "success [95% CI]", "vs best [95% CI]", ""):
            table.add_column(col)
        for r in ranked:
            table.add_row(r.variant, f"{r.functions} ({r.ratio:.2f}x)",
                          f"{100 * r.success:.0f}% [{100 * r.ci_low:.0f}, {100 * r.ci_high:.0f}]",
                          f"{100 * r.diff_to_best:+.0f} [{100 * r.diff_ci_low:+.0f}, {100 * r.diff_ci_high:+.0f}]",
                          "best" if r is ranked[0] else ("tied" if r.tied_with_best else ""))
        Console().print(table)
        tied = [r.variant for r in ranked if r.tied_with_best]
        click.echo(f"recommended: {ranked[0].variant}" +
                   (f" (statistically tied at n={sample}: {', '.join(tied[1:])})" if len(tied) > 1 else ""))
