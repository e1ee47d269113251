#!/usr/bin/env python3
"""Two builds of gmlp timed in turn: what a change did to the speed of a model.

    bench/ab.py --base OLD/gmlp --new build/gmlp --preset gmlp-ti16 --batch-size 8 --mode infer --rounds 6

Each round runs `gmlp bench --json` once with each binary, in alternating order (base first in
odd rounds, new first in even ones, so that a drift of the machine's speed weighs on both alike),
and prints the images/s of each and their ratio, new ÷ base. The summary is the median ratio and
its range over the rounds. Nothing else should run meanwhile: on a shared or throttling machine a
single round can move by ±15 %, which is why the rounds are many and the spread is printed.
"""
import argparse
import json
import statistics
import subprocess
import sys

METRICS = [("train_images_per_s", "train step"), ("infer_images_per_s", "inference"),
           ("infer1_images_per_s", "inference b=1")]


def bench(binary, a):
    cmd = [binary, "bench", "--preset", a.preset, "--batch-size", str(a.batch_size), "--mode", a.mode,
           "--reps", str(a.reps), "--warmup", str(a.warmup), "--precision", a.precision, "--threads",
           str(a.threads), "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{binary}: gmlp bench failed ({run.returncode}): {run.stderr.strip()[-300:]}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{binary}: expected gmlp bench's JSON on stdout, found {run.stdout[:200]!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the gmlp binary before the change")
    p.add_argument("--new", required=True, help="the gmlp binary after it")
    p.add_argument("--preset", default="fmnist-s")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--mode", choices=["all", "train", "infer"], default="all")
    p.add_argument("--precision", choices=["f32", "bf16", "auto"], default="f32")
    p.add_argument("--threads", type=int, default=0, help="0: all cores")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5, help="timed repetitions of each gmlp bench")
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    if a.rounds < 1:
        p.error(f"--rounds: expected at least 1, found {a.rounds}")
    ratios = {key: [] for key, _ in METRICS}
    for r in range(1, a.rounds + 1):
        order = [("base", a.base), ("new", a.new)]
        if r % 2 == 0:
            order.reverse()
        got = {name: bench(binary, a) for name, binary in order}
        cells = []
        for key, label in METRICS:
            if key in got["base"] and key in got["new"]:
                b, n = got["base"][key], got["new"][key]
                ratios[key].append(n / b)
                cells.append(f"{label} {b:,.1f} -> {n:,.1f} images/s ({n / b:.3f}x)")
        print(f"round {r}: " + " | ".join(cells), flush=True)
    print(f"{a.preset}, batch {a.batch_size}, {a.precision}, {a.rounds} rounds; new / base, median [min-max]:")
    for key, label in METRICS:
        if ratios[key]:
            x = ratios[key]
            print(f"  {label:14s} {statistics.median(x):.3f}x [{min(x):.3f}-{max(x):.3f}]")


if __name__ == "__main__":
    main()
