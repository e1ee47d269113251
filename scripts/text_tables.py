#!/usr/bin/env python3
"""The README's language tables from the runs of `scripts/experiments.sh text`.

    python3 scripts/text_tables.py [--runs runs/lm]

Reads each finished run's metrics.jsonl (the last epoch) and counts its checkpoint's parameters
from the safetensors header, then prints two markdown tables in the shape of the paper's: dev perplexity
and finetuned test accuracy per model, and the gating ablation by perplexity. A run that is
missing or unfinished shows as "–".
"""
import argparse
import json
import math
import struct
import sys
from pathlib import Path

MODELS = [("kjv-gmlp", "gMLP"), ("kjv-amlp", "aMLP"), ("kjv-bert", "BERT (absolute positions)"),
          ("kjv-bert-rel", "BERT + relative position biases")]
TASKS = ["ot-nt", "genre", "next-verse"]
GATES = [("linear s(Z) = f(Z)", "kjv-gmlp-linear"), ("additive Z + f(Z)", "kjv-gmlp-additive"),
         ("multiplicative Z ⊙ f(Z)", "kjv-gmlp-multiplicative"),
         ("split multiplicative Z1 ⊙ f(Z2) (default)", "kjv-gmlp")]


def header(path: Path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def finished_rows(run: Path):
    """The run's metrics rows when it has run all its epochs (its train_state says how many)."""
    state, metrics = run / "train_state.safetensors", run / "metrics.jsonl"
    if not state.exists() or not metrics.exists():
        return None
    meta = header(state)["__metadata__"]
    if int(meta["epoch"]) < json.loads(meta["options"])["epochs"]:
        return None
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def params(run: Path):
    path = run / "checkpoint.safetensors"
    if not path.exists():
        return None
    return sum(math.prod(t["shape"]) for k, t in header(path).items() if k != "__metadata__")


def fmt_params(n):
    return "–" if n is None else f"{n / 1e6:.2f}M"


def pretrain_cells(run: Path):
    rows = finished_rows(run)
    if not rows:
        return "–", "–"
    return f"{rows[-1]['dev_ppl']:.2f}", f"{sum(r['seconds'] for r in rows) / 60:.1f} min"


def finetune_cell(run: Path):
    rows = finished_rows(run)
    return f"{100 * rows[-1]['test_acc']:.2f} %" if rows else "–"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="runs/lm", type=Path)
    args = ap.parse_args()
    if not args.runs.is_dir():
        sys.exit(f"text_tables.py: expected a folder of runs at '{args.runs}', found none")

    print("| model | params | dev perplexity | pretraining time | OT/NT | genre | next verse |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for preset, name in MODELS:
        ppl, minutes = pretrain_cells(args.runs / preset)
        accs = [finetune_cell(args.runs / f"{preset}-{t}") for t in TASKS]
        print(f"| {name} (`{preset}`) | {fmt_params(params(args.runs / preset))} | {ppl} | {minutes} | "
              + " | ".join(accs) + " |")
    if not any((args.runs / run).is_dir() for _, run in GATES if run != "kjv-gmlp"):
        return  # a study without the gating ablation (experiments.sh text-long)
    print()
    print("| gate | params | dev perplexity |")
    print("|---|---:|---:|")
    for name, run in GATES:
        ppl, _ = pretrain_cells(args.runs / run)
        print(f"| {name} | {fmt_params(params(args.runs / run))} | {ppl} |")


if __name__ == "__main__":
    main()
