"""PyTorch baseline for the vision gMLP: training and inference throughput on the CPU.

    python bench/pytorch_baseline.py --img-size 28 --in-chans 1 --patch-size 4 --depth 6 \
        --dim 128 --ffn 512 --num-classes 10 --batch-size 64 --threads 2 --mode eager

The model is timm's gMLP (tests/reference/timm_gmlp.py), run the way its users run it at best:
--mode eager or --mode compile (torch.compile, default inductor backend).
(a) a training step: forward, cross entropy (label smoothing 0.1), backward, AdamW step
    (PyTorch's default implementation choice), on a fixed random batch;
(b) inference in eval mode under torch.inference_mode(), for each --infer-batch-sizes.
Each of --reps timed reps runs enough iterations to last >= 0.3 s, after --warmup iterations.
Prints one JSON object: median images/s and [min, max] over reps, peak RSS in MB (before the
model is built, and at the end), and per measurement the share of the cores that other processes
used meanwhile (a busy machine makes the numbers meaningless). If torch.compile fails, the JSON
holds the error instead.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import timm_gmlp  # noqa: E402

MIN_REP_SECONDS = 0.3


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def busy_cpu_seconds():
    """CPU seconds used so far by the whole machine and by this process."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    machine = (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return machine, usage.ru_utime + usage.ru_stime


def measure(step, images_per_call, warmup, reps):
    """images/s of step() over reps (median, [min, max]), each rep lasting >= MIN_REP_SECONDS.

    Also the share of the machine's cores that other processes used while we timed: above a few
    percent, the numbers are skewed by someone else's work.
    """
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    step()
    one = time.perf_counter() - t0
    iters = max(1, math.ceil(MIN_REP_SECONDS / max(one, 1e-9)))
    rates = []
    machine0, self0 = busy_cpu_seconds()
    start = time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        rates.append(iters * images_per_call / (time.perf_counter() - t0))
    machine1, self1 = busy_cpu_seconds()
    others = max(0.0, (machine1 - machine0) - (self1 - self0))
    others_share = others / ((time.perf_counter() - start) * os.cpu_count())
    return {"images_per_s": round(statistics.median(rates), 1),
            "spread": [round(min(rates), 1), round(max(rates), 1)],
            "iters_per_rep": iters, "others_cpu_share": round(others_share, 3)}


def param_groups(model, weight_decay):
    """timm's split: no weight decay for params with ndim <= 1 or names ending in '.bias'."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
    return [dict(params=no_decay, weight_decay=0.0), dict(params=decay, weight_decay=weight_decay)]


def run(args, cfg, result):
    model = timm_gmlp.build(cfg)
    result["params"] = sum(p.numel() for p in model.parameters())
    net = torch.compile(model) if args.mode == "compile" else model
    gen = torch.Generator().manual_seed(0)
    shape = (cfg["in_chans"], cfg["img_size"], cfg["img_size"])

    # (a) training step
    model.train()
    x = torch.randn((args.batch_size,) + shape, generator=gen)
    y = torch.randint(0, cfg["num_classes"], (args.batch_size,), generator=gen)
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()

    t0 = time.perf_counter()
    train_step()  # the first call compiles in compile mode
    result["first_train_step_s"] = round(time.perf_counter() - t0, 3)
    m = measure(train_step, args.batch_size, args.warmup, args.reps)
    result["train_images_per_s"] = m["images_per_s"]
    result["train_spread"] = m["spread"]
    result["train_iters_per_rep"] = m["iters_per_rep"]
    result["train_others_cpu_share"] = m["others_cpu_share"]

    # (b) inference
    model.eval()
    for b in args.infer_batch_sizes:
        xb = torch.randn((b,) + shape, generator=gen)

        def infer_step():
            with torch.inference_mode():
                net(xb)

        result["infer"][str(b)] = measure(infer_step, b, args.warmup, args.reps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--img-size", type=int, default=28)
    parser.add_argument("--in-chans", type=int, default=1)
    parser.add_argument("--patch-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--mode", choices=["eager", "compile"], default="eager")
    parser.add_argument("--infer-batch-sizes", type=int, nargs="+",
                        help="default: the training batch size and 1")
    args = parser.parse_args()
    if not args.infer_batch_sizes:
        args.infer_batch_sizes = [args.batch_size, 1]

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    cfg = dict(img_size=args.img_size, in_chans=args.in_chans, patch_size=args.patch_size,
               depth=args.depth, dim=args.dim, ffn=args.ffn, num_classes=args.num_classes)
    result = {
        "framework": "pytorch", "torch": torch.__version__, "mode": args.mode,
        "threads": args.threads, "config": dict(cfg, batch_size=args.batch_size),
        "train_images_per_s": None, "train_spread": None, "infer": {},
        "peak_rss_mb": None, "rss_before_model_mb": round(peak_rss_mb(), 1),
    }
    try:
        run(args, cfg, result)
    except Exception as e:  # torch.compile needs a working C++ toolchain; say so, do not crash
        if args.mode != "compile":
            raise
        result["error"] = f"torch.compile failed: {type(e).__name__}: {' '.join(str(e).split())[:2000]}"
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
