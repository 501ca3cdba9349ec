"""CLI: ``toolbias train-data`` (SFT traces) and ``toolbias train-env`` (the RL environment's prompts)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..catalog import load_catalog
from ..runner import StudyConfig, select_tasks
from ..splits import load_splits
from ..training.traces import TraceOptions, sft_examples, training_variants
from ..variants import build_codec, resolve_variants


def register(group: click.Group) -> None:
    @group.command("train-data")
    @click.option("--catalog", default="builtin", show_default=True)
    @click.option("--variants", default="mixture", show_default=True,
                  help="mixture (the paper's seven variants, rotated over tasks), native, one variant, "
                       "a comma list or spec files")
    @click.option("--sample", type=int, help="a stratified sample of N training tasks")
    @click.option("--domains", help="only training tasks of these domains (comma list)")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--instructions/--no-instructions", default=False, show_default=True,
                  help="append each variant's calling-convention instruction (Table 11) to the system prompt")
    @click.option("--instruction", "instruction_flag", is_flag=True, hidden=True)
    @click.option("--recovery", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
                  help="share of traces that open with a refused call, its error, then the corrected call")
    @click.option("--format", "fmt", type=click.Choice(["messages", "prompt-completion"]), default="messages",
                  show_default=True, help="prompt-completion: loss only on what follows the prompt (and a "
                  "recovery example's refused call)")
    @click.option("--splits", default="default", show_default=True,
                  help="the splits manifest (default: the catalog's; table4, builtin, a JSON file, or none "
                       "for every task)")
    @click.option("-o", "--output", default="sft.jsonl", show_default=True)
    def train_data(catalog: str, variants: str, sample: int | None, domains: str | None, seed: int,
                   instructions: bool, instruction_flag: bool, recovery: float, fmt: str, splits: str,
                   output: str) -> None:
        """Write SFT traces (TRL conversational format with tools) from turn-by-turn oracle episodes.

        Only the splits manifest's training tasks are used; the manifest, with the variants
        trained on, is written next to the output (OUTPUT.splits.json) for `toolbias run --split
        eval` and `toolbias report --splits`."""
        cat = load_catalog(catalog)
        specs = resolve_variants(training_variants(variants))
        codecs = [build_codec(cat, s) for s in specs]
        chosen = tuple(d.strip() for d in domains.split(",") if d.strip()) if domains else ()
        use_split = splits != "none"
        cfg = StudyConfig(catalog=catalog, sample=sample, seed=seed, domains=chosen,
                          split="train" if use_split else None, splits=splits)
        tasks = select_tasks(cat, cfg)
        opts = TraceOptions(instructions=instructions or instruction_flag, recovery=recovery,
                            prompt_completion=fmt == "prompt-completion")
        n = n_recovery = 0
        with open(output, "w", encoding="utf-8") as fh:
            for row in sft_examples(codecs, tasks, opts):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
                n_recovery += bool(row["recovery"])
        more = f" ({n_recovery} recovery examples)" if recovery else ""
        click.echo(f"wrote {n} traces over {len(codecs)} variants to {output}{more}")
        if use_split:
            manifest = load_splits(splits, cat).with_variants([c.name for c in codecs])
            path = Path(output).with_suffix(".splits.json")
            manifest.write(path)
            click.echo(f"splits manifest (training tasks, domains and variants): {path}")
        else:
            click.echo("warning: --splits none: evaluations may reuse these training tasks", err=True)
