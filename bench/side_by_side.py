"""gmlp beside PyTorch on the same machine, same model, same batch, same thread count.

    python3 bench/side_by_side.py --preset fmnist-s [--batch-size 64] [--threads 2] [--reps 10]
                                  [--modes eager compile] [--gmlp build/gmlp] [--json]

Runs, one after the other (never at the same time), `gmlp bench --json` and
bench/pytorch_baseline.py in each mode for the preset's architecture, then prints a markdown
table: images/s (median over reps, after warm-up) for a training step (forward, loss, backward,
AdamW) and for inference at the batch size and at batch 1, GFLOP/s, and peak resident memory
(total, and the increase over the process's footprint before the model was built), with the
ratio gmlp / PyTorch.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and not proc.stdout.strip():
        sys.exit(f"side_by_side: `{' '.join(cmd[:3])}` failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="fmnist-s")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--modes", nargs="+", default=["eager", "compile"], choices=["eager", "compile"])
    p.add_argument("--gmlp", default=os.path.join(HERE, "..", "build", "gmlp"))
    p.add_argument("--json", action="store_true", help="print the raw results as one JSON object")
    a = p.parse_args()

    info = run_json([a.gmlp, "info", "--preset", a.preset, "--json"])
    cfg, flops = info["config"], info["flops_per_image"]
    ours = run_json([a.gmlp, "bench", "--preset", a.preset, "--batch-size", str(a.batch_size),
                     "--threads", str(a.threads), "--reps", str(a.reps), "--json"])
    theirs = {}
    for mode in a.modes:
        theirs[mode] = run_json([
            sys.executable, os.path.join(HERE, "pytorch_baseline.py"),
            "--img-size", str(cfg["img_size"]), "--in-chans", str(cfg["in_chans"]),
            "--patch-size", str(cfg["patch_size"]), "--depth", str(cfg["depth"]),
            "--dim", str(cfg["dim"]), "--ffn", str(cfg["ffn"]),
            "--num-classes", str(cfg["num_classes"]), "--batch-size", str(a.batch_size),
            "--threads", str(a.threads), "--reps", str(a.reps), "--mode", mode])
    if a.json:
        print(json.dumps({"preset": a.preset, "gmlp": ours, "pytorch": theirs}))
        return 0

    B = str(a.batch_size)
    rows = [  # (label, gmlp value, pytorch getter, flops per image or None)
        (f"train step, batch {B} (images/s)", ours["train_images_per_s"],
         lambda t: t.get("train_images_per_s"), 3 * flops),
        (f"inference, batch {B} (images/s)", ours["infer_images_per_s"],
         lambda t: t.get("infer", {}).get(B, {}).get("images_per_s"), flops),
        ("inference, batch 1 (images/s)", ours["infer1_images_per_s"],
         lambda t: t.get("infer", {}).get("1", {}).get("images_per_s"), flops),
        ("peak RSS (MB)", ours["peak_rss_mb"], lambda t: t.get("peak_rss_mb"), None),
        ("peak RSS above start (MB)", ours["peak_rss_mb"] - ours["rss_before_model_mb"],
         lambda t: t["peak_rss_mb"] - t["rss_before_model_mb"] if t.get("peak_rss_mb") else None, None),
    ]
    head = "| | gmlp | " + " | ".join(f"PyTorch {m}" for m in a.modes) + " | " + \
           " | ".join(f"gmlp / {m}" for m in a.modes) + " |"
    print(f"{a.preset}: {info['params']:,} params, {flops / 1e6:.1f} MFLOP/image forward, "
          f"{a.threads} threads, torch {next(iter(theirs.values())).get('torch', '?')}\n")
    print(head)
    print("|" + "---|" * (2 + 2 * len(a.modes)))
    for label, mine, get, f in rows:
        vals = [get(theirs[m]) for m in a.modes]
        fmt = lambda v: "error" if v is None else f"{v:,.0f}"
        cell = fmt(mine) + (f" ({mine * f / 1e9:.0f} GFLOP/s)" if f else "")
        ratios = ["–" if v is None else f"{mine / v:.2f}×" for v in vals]
        print(f"| {label} | {cell} | " + " | ".join(fmt(v) for v in vals) + " | " + " | ".join(ratios) + " |")
    for m in a.modes:
        if "error" in theirs[m]:
            print(f"\nPyTorch {m}: {theirs[m]['error'][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
