"""CLI: ``toolbias train-data`` (SFT traces over a variant mixture)."""

from __future__ import annotations

import json

import click

from ..catalog import load_catalog
from ..runner import StudyConfig, select_tasks
from ..training import sft_examples
from ..variants import build_codec, resolve_variants


def register(group: click.Group) -> None:
    @group.command("train-data")
    @click.option("--catalog", default="builtin", show_default=True)
    @click.option("--variants", default="native,fully_merged,transaction,reference_resolution,schema_discovery,"
                  "opaque_names,split_one_enum", show_default=True, help="the mixture (rotated over tasks)")
    @click.option("--sample", type=int, help="a stratified sample of N tasks")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--instruction", is_flag=True, help="include per-variant instructions in the system prompt")
    @click.option("-o", "--output", default="sft.jsonl", show_default=True)
    def train_data(catalog: str, variants: str, sample: int | None, seed: int, instruction: bool,
                   output: str) -> None:
        """Write SFT traces (TRL / HF datasets chat format) from oracle episodes."""
        cat = load_catalog(catalog)
        codecs = [build_codec(cat, s) for s in resolve_variants(variants)]
        tasks = select_tasks(cat, StudyConfig(catalog=catalog, sample=sample, seed=seed))
        n = 0
        with open(output, "w", encoding="utf-8") as fh:
            for row in sft_examples(codecs, tasks, condition_instruction=instruction):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        click.echo(f"wrote {n} traces over {len(codecs)} variants to {output}")
