"""CLI: ``toolbias train-data`` (SFT traces), ``train-sft`` and ``train-grpo`` (real training runs)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..study.defaults import study_config
from ..study.paper_protocol import check_protocol
from ..study.runner import select_tasks, study_catalog
from ..study.splits import load_splits
from ..training.rl_env import Reward
from ..training.traces import TraceOptions, sft_examples, training_codecs, training_variants
from .options import protocol_option, task_file_option


@click.command("train-data")
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
              help="share of traces that open with a refused call, its error, then the corrected call (with "
                   "--format messages the refused call is a learned turn too; prompt-completion keeps it out)")
@click.option("--format", "fmt", type=click.Choice(["messages", "prompt-completion"]), default="messages",
              show_default=True, help="prompt-completion: loss only on what follows the prompt (and a "
              "recovery example's refused call)")
@click.option("--splits", default="default", show_default=True,
              help="the splits manifest (default: the catalog's; table4, builtin, a JSON file, or none "
                   "for every task)")
@click.option("-o", "--output", default="sft.jsonl", show_default=True)
@protocol_option(
              help="paper: each trace is an episode of the schema-bias artifact's evaluation (its prompt, "
              "replies, 16 turns, success rule; `mixture` is the artifact's seven-variant mix, each as the "
              "artifact renders it); rows carry \"protocol\": \"paper\"")
@task_file_option
def train_data(catalog: str, variants: str, sample: int | None, domains: str | None, seed: int,
               instructions: bool, instruction_flag: bool, recovery: float, fmt: str, splits: str,
               output: str, protocol: str, task_file: str | None) -> None:
    """Write SFT traces (TRL conversational format with tools) from turn-by-turn oracle episodes.

    Only the splits manifest's training tasks are used; the manifest, with the variants
    trained on, is written next to the output (OUTPUT.splits.json) for `toolbias run --split
    eval` and `toolbias report --splits`."""
    chosen = tuple(d.strip() for d in domains.split(",") if d.strip()) if domains else ()
    use_split = splits != "none"
    proto = check_protocol(protocol, "train-data")
    cfg = study_config(catalog=catalog, variants=training_variants(variants, proto), sample=sample, seed=seed,
                       domains=chosen, split="train" if use_split else None, splits=splits, task_file=task_file)
    cat = study_catalog(cfg)
    codecs = training_codecs(cat, variants, proto)
    tasks = select_tasks(cat, cfg)
    if sample and len(tasks) < sample:
        click.echo(f"note: the training part of the splits holds {len(tasks)} tasks; all are used", err=True)
    opts = TraceOptions(instructions=instructions or instruction_flag, recovery=recovery,
                        prompt_completion=fmt == "prompt-completion", protocol=proto)
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

def _overrides(**values: object) -> dict[str, object]:
    return {k: v for k, v in values.items() if v is not None}

@click.command("train-sft")
@click.argument("data")
@click.option("--model", required=True, help="base model (hub id or local path), e.g. Qwen/Qwen3-4B-Instruct-2507")
@click.option("-o", "--output-dir", required=True, help="where the adapter (or model) is saved")
@click.option("--lora/--full", default=True, show_default=True, help="LoRA adapter (Table 12) or full fine-tune")
@click.option("--epochs", type=float, help="[Table 12: 2]")
@click.option("--learning-rate", type=float)
@click.option("--batch-size", type=int, help="per device")
@click.option("--grad-accum", type=int)
@click.option("--max-length", type=int, help="tokens per example [Table 12: 16k; long mixtures need more]")
@click.option("--max-steps", type=int, help="stop after N optimiser steps (smoke runs)")
@click.option("--bf16/--no-bf16", default=None, help="[Table 12: bf16]")
@click.option("--seed", type=int, default=0, show_default=True)
def train_sft(data: str, model: str, output_dir: str, lora: bool, epochs: float | None,
              learning_rate: float | None, batch_size: int | None, grad_accum: int | None,
              max_length: int | None, max_steps: int | None, bf16: bool | None, seed: int) -> None:
    """LoRA SFT on `toolbias train-data` traces with the paper's settings (needs toolbias[train], peft)."""
    from ..training.run import sft

    trainer = sft(data, model, output_dir, lora=lora, overrides=_overrides(
        num_train_epochs=epochs, learning_rate=learning_rate, per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=grad_accum, max_length=max_length, max_steps=max_steps, bf16=bf16,
        seed=seed))
    click.echo(f"trained {trainer.state.global_step} steps; saved to {output_dir}")

@click.command("train-grpo")
@click.option("--model", required=True, help="policy (hub id, local path, or an SFT output)")
@click.option("-o", "--output-dir", required=True)
@click.option("--catalog", default="builtin", show_default=True)
@click.option("--variants", default="mixture", show_default=True, help="mixture, native, or variant names")
@click.option("--sample", type=int, help="a stratified sample of N training tasks")
@click.option("--splits", default="default", show_default=True)
@click.option("--reward", type=click.Choice([r.value for r in Reward]), default="partial", show_default=True,
              help="partial: exact success, else half the F1 of the artifact's recall and precision (toolbias's "
              "reading of the paper's main reward, which neither the paper's text nor its artifact defines); "
              "exact: exact success only (Table 13's reward ablation); shaped: toolbias's own partial credit "
              "with a rejection cost")
@protocol_option(
              help="paper: episodes of the schema-bias artifact's evaluation (its prompt, replies, hard/loose "
              "control, 16 turns, 1,024 tokens per turn, success rule; `mixture` is the artifact's seven-variant "
              "mix, each as the artifact renders it)")
@click.option("--explain/--no-explain", default=True, show_default=True,
              help="rejections with their explanation (ablation: without)")
@click.option("--rejections/--no-rejections", default=True, show_default=True,
              help="ablation --no-rejections: off-schema calls run as their decoded native call")
@click.option("--turn-limit", type=int, default=16, show_default=True)
@click.option("--turn-tokens", type=int, help="tokens the policy may generate per turn")
@click.option("--lora/--full", default=True, show_default=True)
@click.option("--learning-rate", type=float)
@click.option("--beta", type=float, help="KL coefficient (Table 13 varies it)")
@click.option("--num-generations", type=int, help="[Table 12: 8 samples per prompt]")
@click.option("--batch-size", type=int, help="per device")
@click.option("--grad-accum", type=int)
@click.option("--max-completion-length", type=int, help="tokens per episode, all turns")
@click.option("--max-steps", type=int)
@click.option("--bf16/--no-bf16", default=None)
@click.option("--seed", type=int, default=0, show_default=True)
def train_grpo(model: str, output_dir: str, catalog: str, variants: str, sample: int | None, splits: str,
               reward: str, protocol: str, explain: bool, rejections: bool, turn_limit: int, turn_tokens: int | None,
               lora: bool, learning_rate: float | None, beta: float | None, num_generations: int | None,
               batch_size: int | None, grad_accum: int | None, max_completion_length: int | None,
               max_steps: int | None, bf16: bool | None, seed: int) -> None:
    """GRPO in the multi-turn environment with the paper's settings (needs toolbias[train])."""
    from ..training.rl_env import EnvOptions
    from ..training.run import grpo
    from ..variants.codec import Control

    env = EnvOptions(control=Control.STRICT if rejections else Control.LENIENT, explain=explain,
                     reward=Reward(reward), turn_limit=turn_limit,
                     protocol=check_protocol(protocol, "train-grpo"))
    trainer = grpo(model, output_dir, catalog=catalog, variants=variants, sample=sample, seed=seed,
                   splits=splits, env=env, lora=lora, max_turn_tokens=turn_tokens, overrides=_overrides(
                       learning_rate=learning_rate, beta=beta, num_generations=num_generations,
                       per_device_train_batch_size=batch_size, gradient_accumulation_steps=grad_accum,
                       max_completion_length=max_completion_length, max_steps=max_steps, bf16=bf16))
    click.echo(f"trained {trainer.state.global_step} steps; saved to {output_dir}")
