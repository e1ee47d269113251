#!/usr/bin/env python3
"""The README's language tables from the runs of `scripts/experiments.sh text`.

    python3 scripts/text_tables.py [--runs runs/lm]

Reads each run's metrics.jsonl (the last epoch) and counts its checkpoint's parameters from the
safetensors header, then prints two markdown tables in the shape of the paper's: dev perplexity
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
GATES = [("linear", "linear s(Z) = f(Z)", "kjv-gmlp-linear"),
         ("additive", "additive Z + f(Z)", "kjv-gmlp-additive"),
         ("multiplicative", "multiplicative Z ⊙ f(Z)", "kjv-gmlp-multiplicative"),
         ("split", "split multiplicative Z1 ⊙ f(Z2)", "kjv-gmlp")]


def last_row(run: Path):
    path = run / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows, rows[-1] if rows else None


def params(run: Path):
    path = run / "checkpoint.safetensors"
    if not path.exists():
        return None
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")


def fmt_params(n):
    return "–" if n is None else f"{n / 1e6:.2f}M"


def pretrain_cells(run: Path, epochs: int):
    got = last_row(run)
    if not got or not got[1] or got[1]["epoch"] < epochs:
        return "–", "–"
    rows, last = got
    return f"{last['dev_ppl']:.2f}", f"{sum(r['seconds'] for r in rows) / 60:.1f} min"


def finetune_cell(run: Path):
    got = last_row(run)
    if not got or not got[1] or "test_acc" not in got[1]:
        return "–"
    return f"{100 * got[1]['test_acc']:.2f} %"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="runs/lm", type=Path)
    ap.add_argument("--epochs", default=5, type=int, help="pretraining epochs a finished run has")
    args = ap.parse_args()
    if not args.runs.is_dir():
        sys.exit(f"text_tables.py: expected a folder of runs at '{args.runs}', found none")

    print("| model | params | dev perplexity | pretraining time | OT/NT | genre | next verse |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for preset, name in MODELS:
        ppl, minutes = pretrain_cells(args.runs / preset, args.epochs)
        accs = [finetune_cell(args.runs / f"{preset}-{t}") for t in TASKS]
        print(f"| {name} (`{preset}`) | {fmt_params(params(args.runs / preset))} | {ppl} | {minutes} | "
              + " | ".join(accs) + " |")
    print()
    print("| gate | params | dev perplexity |")
    print("|---|---:|---:|")
    for _, name, run in GATES:
        ppl, _ = pretrain_cells(args.runs / run, args.epochs)
        print(f"| {name} | {fmt_params(params(args.runs / run))} | {ppl} |")


if __name__ == "__main__":
    main()
