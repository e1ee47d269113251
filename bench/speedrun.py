#!/usr/bin/env python3
"""Time to accuracy: gmlp against PyTorch training the same model with the same recipe.

    bench/speedrun.py --gmlp build/gmlp --targets 90 93 --epochs 30 --threads 2
    bench/speedrun.py --recipe demo --targets 90 --epochs 4     # make demo's recipe

MLPerf Training's figure: the wall time from the start of training until the end of the first
epoch whose evaluation on the whole Fashion-MNIST test set (10,000 images) reaches each target
accuracy. Every epoch is evaluated and the evaluation's time counts, for both. Each engine runs
once, one after the other on the same cores, and stops when it has reached every target or run
--epochs:
  gmlp           `gmlp train --preset fmnist-s --epochs E` with the recipe's flags;
  gmlp-bf16      the same with `--precision bf16`, where the CPU has native bf16;
  torch eager    timm's gMLP of the same config (tests/reference/timm_gmlp.py), fp32;
  torch autocast the same under torch.autocast("cpu", dtype=torch.bfloat16) (bf16 products,
                 fp32 weights and AdamW), where the CPU has native bf16 (AVX512-BF16 or AMX);
                 elsewhere it is emulated, many times slower, and left out unless --autocast.
Both engines get the same recipe (--recipe): AdamW (β 0.9, 0.999, ε 1e-8, weight decay 0.05 on
matrices only), learning rate 2e-3 reached by a linear warm-up and then a cosine down to 1e-5
over E epochs, stepped every step, gradient norm clipped at 1, the last partial batch dropped,
images normalised with mean = std = 0.5, and
  augmented (the default; gmlp's fmnist-s preset): batch 128, a one-epoch warm-up, cross-entropy
             with label smoothing 0.1, each image randomly shifted by up to 2 pixels (zero
             padding, as RandomCrop(28, padding=2)) and flipped left-right with probability 0.5;
  demo       make demo's (the Makefile's DEMO_RECIPE): batch 64, no label smoothing, no shift,
             no flip. Regularisation pays back over long schedules (93 %) and costs a short one.

Prints a markdown table (seconds to each target, each one's ratio to gmlp, and the accuracy of
each engine's last epoch, for comparing precisions at the same schedule), writes every epoch's
figures to --out/speedrun.json as each engine ends, and draws every engine's test accuracy
against minutes to --out/runs.png (gmlp viz --against time). Needs torch (scripts/setup.sh --python).
"""
import argparse
import gzip
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE_DIR = os.path.join(HERE, "..", "tests", "reference")
DATA_DIR = "/usr/share/datasets/fashion-mnist"
PRESET = dict(img_size=28, in_chans=1, patch_size=4, depth=6, dim=128, ffn=512, num_classes=10)
LR, MIN_LR, WD, CLIP = 2e-3, 1e-5, 0.05, 1.0
AUGMENTED = dict(batch=128, warmup=1.0, smoothing=0.1, pad=2, flip=True)  # gmlp train's defaults for fmnist-s


def demo_recipe():
    """make demo's recipe: gmlp train's defaults, changed by the Makefile's DEMO_RECIPE flags."""
    line = next(l for l in open(os.path.join(HERE, "..", "Makefile")) if l.startswith("DEMO_RECIPE :="))
    flags, r = line.split(":=", 1)[1].split(), dict(AUGMENTED)
    keys = {"--batch-size": ("batch", int), "--warmup-epochs": ("warmup", float),
            "--label-smoothing": ("smoothing", float), "--crop-padding": ("pad", int)}
    while flags:
        flag = flags.pop(0)
        if flag == "--no-hflip":
            r["flip"] = False
        elif flag in keys:
            key, kind = keys[flag]
            r[key] = kind(flags.pop(0))
        else:
            sys.exit(f"speedrun.py: Makefile's DEMO_RECIPE has {flag}, which this script cannot give PyTorch")
    return r


# The recipes' differences, as gmlp train's flags and the same settings for PyTorch.
RECIPES = {"augmented": AUGMENTED, "demo": demo_recipe()}


def gmlp_flags(recipe):
    r = RECIPES[recipe]
    flags = ["--batch-size", str(r["batch"]), "--warmup-epochs", f"{r['warmup']:g}", "--label-smoothing",
             f"{r['smoothing']:g}", "--crop-padding", str(r["pad"])]
    return flags + ([] if r["flip"] else ["--no-hflip"])


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def cpu_has_bf16():
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def first_reaching(epochs, targets):
    """{target: (seconds, epoch)} of the first epoch whose test accuracy reaches each target."""
    out = {}
    for t in targets:
        for e in epochs:
            if 100 * e["test_acc"] >= t:
                out[t] = (e["elapsed"], e["epoch"])
                break
    return out


def run_gmlp(args, folder, precision="f32"):
    """gmlp train, watched: stopped (SIGTERM, which saves and exits) once every target is reached."""
    cmd = [args.gmlp, "train", "--preset", "fmnist-s", "--epochs", str(args.epochs), "--threads",
           str(args.threads), "--out", folder, "--overwrite", "--data-dir", args.data_dir, "--precision", precision,
           *gmlp_flags(args.recipe)]
    if args.train_limit:
        cmd += ["--train-limit", str(args.train_limit)]
    metrics = os.path.join(folder, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)  # --overwrite clears the folder; no stale rows meanwhile
    t0 = time.perf_counter()
    log = open(folder + ".log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
    epochs = []
    while True:
        done = proc.poll() is not None
        if os.path.exists(metrics):
            rows = [json.loads(l) for l in open(metrics) if l.strip()]
            for row in rows[len(epochs):]:
                epochs.append({"epoch": row["epoch"], "test_acc": row["test_acc"],
                               "elapsed": round(sum(r["seconds"] for r in rows[:row["epoch"]]), 2)})
                print(f"  gmlp epoch {row['epoch']}: {100 * row['test_acc']:.2f} % at {epochs[-1]['elapsed']:.0f} s",
                      flush=True)
            if len(first_reaching(epochs, args.targets)) == len(args.targets) and not done:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
                break
        if done:
            break
        time.sleep(1)
    log.close()
    if proc.returncode not in (0, 143, -signal.SIGTERM) and not epochs:
        sys.exit(f"speedrun.py: {' '.join(cmd)} failed ({proc.returncode}): {open(folder + '.log').read()[-600:]}")
    return {"epochs": epochs, "wall_s": round(time.perf_counter() - t0, 1)}


def load_idx(data_dir, split):
    prefix = "train" if split == "train" else "t10k"

    def read(name, offset):
        with gzip.open(os.path.join(data_dir, name)) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)

    x = read(f"{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    y = read(f"{prefix}-labels-idx1-ubyte.gz", 8)
    return x, y


def run_torch(args, mode):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, REFERENCE_DIR)
    import timm_gmlp
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x_train, y_train = (torch.from_numpy(a.copy()) for a in load_idx(args.data_dir, "train"))
    x_test, y_test = (torch.from_numpy(a.copy()) for a in load_idx(args.data_dir, "test"))
    if args.train_limit:
        x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]
    model = timm_gmlp.build(dict(PRESET))
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and not n.endswith(".bias")]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1 or n.endswith(".bias")]
    opt = torch.optim.AdamW([dict(params=no_decay, weight_decay=0.0), dict(params=decay, weight_decay=WD)],
                            lr=LR, betas=(0.9, 0.999), eps=1e-8)
    recipe = RECIPES[args.recipe]
    batch, pad = recipe["batch"], recipe["pad"]
    steps_per_epoch = len(x_train) // batch
    total, warmup = steps_per_epoch * args.epochs, int(steps_per_epoch * recipe["warmup"])  # as gmlp truncates

    def lr_at(step):
        if step < warmup:
            return LR * (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * progress))

    precision = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if mode == "autocast" \
        else (lambda: torch.autocast("cpu", enabled=False))
    normalize = lambda u8: (u8.float() / 255 - 0.5) / 0.5

    def augment(u8):  # random shift by up to pad pixels (zero padding), then a random flip
        if pad == 0 and not recipe["flip"]:
            return u8
        padded = F.pad(u8, (pad, pad, pad, pad))
        off = torch.randint(0, 2 * pad + 1, (len(u8), 2), generator=gen)
        out = torch.stack([padded[i, :, dy:dy + 28, dx:dx + 28] for i, (dy, dx) in enumerate(off.tolist())])
        if recipe["flip"]:
            flip = torch.rand(len(u8), generator=gen) < 0.5
            out[flip] = out[flip].flip(-1)
        return out

    epochs, step, elapsed = [], 0, 0.0
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for s in range(steps_per_epoch):
            idx = order[s * batch:(s + 1) * batch]
            xb, yb = normalize(augment(x_train[idx])), y_train[idx].long()
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with precision():
                loss = F.cross_entropy(model(xb), yb, label_smoothing=recipe["smoothing"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            step += 1
        model.eval()
        correct = 0
        with torch.inference_mode(), precision():
            for i in range(0, len(x_test), batch):
                correct += (model(normalize(x_test[i:i + batch])).argmax(1) == y_test[i:i + batch]).sum().item()
        elapsed += time.perf_counter() - t0
        epochs.append({"epoch": epoch + 1, "test_acc": correct / len(x_test), "elapsed": round(elapsed, 2)})
        print(f"  torch {mode} epoch {epoch + 1}: {100 * correct / len(x_test):.2f} % at {elapsed:.0f} s", flush=True)
        if len(first_reaching(epochs, args.targets)) == len(args.targets):
            break
    return {"epochs": epochs, "wall_s": round(elapsed, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gmlp", default=os.path.join(HERE, "..", "build", "gmlp"))
    ap.add_argument("--targets", type=float, nargs="+", default=[90, 93], help="test accuracies, in %%")
    ap.add_argument("--epochs", type=int, default=30, help="the schedule's length, and the most any engine runs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="augmented",
                    help="the training recipe both engines follow (see above)")
    ap.add_argument("--data-dir", default=DATA_DIR, help="Fashion-MNIST's gzipped IDX files")
    ap.add_argument("--engines", nargs="+", default=["gmlp", "gmlp-bf16", "eager", "autocast"],
                    choices=["gmlp", "gmlp-bf16", "eager", "autocast"])
    ap.add_argument("--autocast", action="store_true", help="run torch autocast even without native bf16")
    ap.add_argument("--out", default="runs/speedrun")
    ap.add_argument("--train-limit", type=int, default=0, help="train on the first N images only (a quick check)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    results = {}
    for engine in [e for e in ("gmlp", "gmlp-bf16", "eager", "autocast") if e in args.engines]:  # in this order
        if engine == "autocast" and not (cpu_has_bf16() or args.autocast):
            print("torch autocast: left out, this CPU has no native bf16 (--autocast runs it emulated)")
            continue
        if engine == "gmlp-bf16" and not cpu_has_bf16():
            print("gmlp bf16: left out, this CPU has no native bf16 (gmlp would run f32)")
            continue
        print(f"{engine}:", flush=True)
        if engine.startswith("gmlp"):
            results[engine] = run_gmlp(args, os.path.join(args.out, engine), "bf16" if engine == "gmlp-bf16" else "f32")
        else:
            results[engine] = run_torch(args, engine)
        save(args, commit, results)  # each engine's figures kept as it ends: the whole run takes hours
    names = {"gmlp": "gmlp (fp32)", "gmlp-bf16": "gmlp (bf16)", "eager": "PyTorch eager (fp32)",
             "autocast": "PyTorch bf16 autocast"}
    print(f"\nfmnist-s to test accuracy, {args.recipe} recipe, {args.epochs}-epoch schedule, {args.threads} threads, "
          f"{cpu_name()}, commit {commit}\n")
    print("| target | " + " | ".join(names[e] for e in results) + " |")
    print("|---|" + "---:|" * len(results))
    reached = {e: first_reaching(r["epochs"], args.targets) for e, r in results.items()}
    for t in args.targets:
        cells = []
        for e in results:
            if t not in reached[e]:
                best = max((x["test_acc"] for x in results[e]["epochs"]), default=0)
                n = len(results[e]["epochs"])
                cells.append(f"not in {n} epoch{'s' if n != 1 else ''} (best {100 * best:.2f} %)")
                continue
            s, ep = reached[e][t]
            ratio = ""
            if e != "gmlp" and t in reached.get("gmlp", {}):
                ratio = f", {s / reached['gmlp'][t][0]:.2f}× gmlp's"
            cells.append(f"{s:.0f} s (epoch {ep}{ratio})")
        print(f"| {t:g} % | " + " | ".join(cells) + " |")
    last = [f"{100 * r['epochs'][-1]['test_acc']:.2f} % (epoch {r['epochs'][-1]['epoch']})" if r["epochs"] else "-"
            for r in results.values()]
    print("| last epoch run | " + " | ".join(last) + " |")
    draw(args.gmlp, args.out, results)


def save(args, commit, results):
    """speedrun.json, written to a temporary name and renamed."""
    path = os.path.join(args.out, "speedrun.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"cpu": cpu_name(), "commit": commit, "threads": args.threads, "recipe": args.recipe, "epochs": args.epochs,
                   "targets": args.targets, "results": results}, f, indent=1)
    os.replace(path + ".tmp", path)


def draw(gmlp, out, results):
    """Test accuracy against minutes for every engine, one picture: gmlp viz --against time.

    gmlp's runs have their metrics.jsonl; PyTorch's get one from their epochs (each epoch's own
    seconds, evaluation included), named as the table names them."""
    paths = []
    for engine, r in results.items():
        if engine.startswith("gmlp"):  # gmlp train wrote it
            paths.append(os.path.join(out, engine, "metrics.jsonl"))
            continue
        folder = os.path.join(out, f"pytorch-{engine}")
        os.makedirs(folder, exist_ok=True)
        paths.append(os.path.join(folder, "metrics.jsonl"))
        with open(paths[-1], "w") as f:
            previous = 0.0
            for e in r["epochs"]:
                f.write(json.dumps({"epoch": e["epoch"], "test_acc": e["test_acc"],
                                    "seconds": round(e["elapsed"] - previous, 2)}) + "\n")
                previous = e["elapsed"]
    if len(paths) > 1:
        subprocess.run([gmlp, "viz", "--metrics", *paths, "--against", "time", "--out", out], check=True)


if __name__ == "__main__":
    main()
