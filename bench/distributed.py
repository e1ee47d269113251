#!/usr/bin/env python3
"""Data-parallel training on one machine: gmlp under mpirun against gmlp's threads and PyTorch DDP.

    bench/distributed.py --gmlp build/gmlp --preset fmnist-s --batch-size 128 --repeats 5

Side by side, interleaved round by round so that the machine's drift falls on all alike, the
images/s of one training step (forward, loss, backward, the gradient sum, AdamW) at the same
global batch:
  gmlp 1x2      one process, 2 threads (`gmlp bench --threads 2`);
  gmlp 2x1      2 ranks of 1 thread (`mpirun -np 2 --bind-to core gmlp bench --threads 1`), each
                half the batch, the gradients summed over the ranks while backward runs;
  DDP 2x1       PyTorch DistributedDataParallel on the gloo backend, 2 ranks of 1 thread (started
                as torchrun would: RANK, WORLD_SIZE, MASTER_ADDR), each half the batch, timm's
                gMLP of the same config (tests/reference/timm_gmlp.py), PyTorch's AdamW;
  torch 1x2     plain PyTorch eager, one process, 2 threads, for reference.
With --train-images N also whole training runs, `gmlp train` for one epoch of N Fashion-MNIST
images (augmentation, evaluation excluded), 1x2 against 2x1, images/s from metrics.jsonl.

Prints a markdown table (median [min-max] over the rounds, and each one's ratio to gmlp 2x1) and
writes every figure as JSON to --out. Needs Open MPI's mpirun and torch (scripts/setup.sh --python).
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE_DIR = os.path.join(HERE, "..", "tests", "reference")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"distributed.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-600:]}")
    return r.stdout


def gmlp_step(args, ranks):
    bench = [args.gmlp, "bench", "--preset", args.preset, "--batch-size", str(args.batch_size), "--json",
             "--reps", str(args.reps), "--threads", str(2 // ranks)]
    if ranks == 1:
        return json.loads(sh(bench))
    return json.loads(sh(["mpirun", "-np", str(ranks), "--bind-to", "core"] + bench +
                         ["--bucket-mb", str(args.bucket_mb)], MPI_ENV))


def gmlp_train(args, ranks, folder):
    train = [args.gmlp, "train", "--preset", args.preset, "--batch-size", str(args.batch_size), "--epochs", "1",
             "--train-limit", str(args.train_images), "--eval-limit", "100", "--out", folder, "--overwrite",
             "--threads", str(2 // ranks)]
    if ranks > 1:
        train = ["mpirun", "-np", str(ranks), "--bind-to", "core"] + train
    sh(train, MPI_ENV)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return json.loads(f.readline())["images_per_s"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_step(args, cfg, ranks):
    """DDP on gloo with `ranks` processes of 2/ranks threads (ranks 1: plain eager, no DDP)."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(ranks)}
    procs = []
    for r in range(ranks):
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--torch-worker", json.dumps(cfg), "--batch-size", str(args.batch_size),
             "--reps", str(args.reps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, RANK=str(r), **env)))
    outs = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"distributed.py: the PyTorch worker failed: {err.strip()[-600:]}")
    return json.loads(outs[0][0])


def torch_worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    sys.path.insert(0, REFERENCE_DIR)
    import timm_gmlp

    cfg = json.loads(args.torch_worker)
    rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    threads = 2 // ranks
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    model = timm_gmlp.build(cfg)
    net = model
    if ranks > 1:
        dist.init_process_group("gloo", rank=rank, world_size=ranks)
        net = torch.nn.parallel.DistributedDataParallel(model)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and not n.endswith(".bias")]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1 or n.endswith(".bias")]
    opt = torch.optim.AdamW([dict(params=no_decay, weight_decay=0.0), dict(params=decay, weight_decay=0.05)],
                            lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    b = args.batch_size // ranks
    x = torch.randn((b, cfg["in_chans"], cfg["img_size"], cfg["img_size"]), generator=gen)
    y = torch.randint(0, cfg["num_classes"], (b,), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y, label_smoothing=0.1).backward()
        opt.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    step()
    iters = torch.tensor([max(1, int(0.3 / max(time.perf_counter() - t0, 1e-6)))])
    if ranks > 1:
        dist.broadcast(iters, 0)  # every rank runs rank 0's number of steps
    rates = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for _ in range(int(iters)):
            step()
        rates.append(int(iters) * args.batch_size / (time.perf_counter() - t0))
    if ranks > 1:
        dist.destroy_process_group()
    if rank == 0:
        rates.sort()
        print(json.dumps({"train_images_per_s": statistics.median(rates), "train_spread": [rates[0], rates[-1]],
                          "torch": torch.__version__}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gmlp", default=os.path.join(HERE, "..", "build", "gmlp"))
    ap.add_argument("--preset", default="fmnist-s")
    ap.add_argument("--batch-size", type=int, default=128, help="the global batch of one step")
    ap.add_argument("--repeats", type=int, default=5, help="rounds, each running every configuration once")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions within each run (>= 0.3 s each)")
    ap.add_argument("--bucket-mb", type=float, default=1, help="gmlp's gradient chunks under mpirun")
    ap.add_argument("--train-images", type=int, default=0, help="also time gmlp train on this many images")
    ap.add_argument("--out", default="runs/distributed")
    ap.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)

    os.makedirs(args.out, exist_ok=True)
    cfg = {k: v for k, v in gmlp_step(args, 1)["config"].items()
           if k in ("img_size", "in_chans", "patch_size", "depth", "dim", "ffn", "num_classes")}
    runs = {"gmlp 1x2": lambda: gmlp_step(args, 1)["train_images_per_s"],
            "gmlp 2x1": lambda: gmlp_step(args, 2)["train_images_per_s"],
            "DDP 2x1": lambda: torch_step(args, cfg, 2)["train_images_per_s"],
            "torch 1x2": lambda: torch_step(args, cfg, 1)["train_images_per_s"]}
    tmp = tempfile.mkdtemp(prefix="gmlp_distributed_")
    if args.train_images:
        runs["gmlp train 1x2"] = lambda: gmlp_train(args, 1, os.path.join(tmp, "one"))
        runs["gmlp train 2x1"] = lambda: gmlp_train(args, 2, os.path.join(tmp, "two"))
    got = {name: [] for name in runs}
    for r in range(args.repeats):
        for name, run in runs.items():
            got[name].append(run())
        print(f"round {r + 1}/{args.repeats}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in got.items()),
              file=sys.stderr, flush=True)

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    med = {n: statistics.median(v) for n, v in got.items()}
    print(f"{args.preset}, global batch {args.batch_size}, images/s of a training step, median [min-max] of "
          f"{args.repeats} interleaved rounds ({cpu}, {os.cpu_count()} cores, commit {commit})\n")
    print("| configuration | images/s | gmlp 2x1 ÷ this |\n|---|---:|---:|")
    for n, v in got.items():
        ref = med["gmlp train 2x1" if n.startswith("gmlp train") else "gmlp 2x1"]
        print(f"| {n} | {med[n]:.0f} [{min(v):.0f}-{max(v):.0f}] | {ref / med[n]:.2f} |")
    with open(os.path.join(args.out, "distributed.json"), "w") as f:
        json.dump({"preset": args.preset, "batch_size": args.batch_size, "cpu": cpu, "commit": commit,
                   "config": cfg, "images_per_s": got, "median": med}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
