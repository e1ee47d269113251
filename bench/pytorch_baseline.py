"""PyTorch baseline for the vision gMLP: training and inference throughput on the CPU.

    python bench/pytorch_baseline.py --img-size 28 --in-chans 1 --patch-size 4 --depth 6 \
        --dim 128 --ffn 512 --num-classes 10 --batch-size 64 --threads 2 --mode eager

The model is timm's gMLP (tests/reference/timm_gmlp.py) with timm's own init, run the way its
users run it at best, one --mode per process:
  eager        plain PyTorch, fp32;
  compile      torch.compile (default inductor backend), fp32;
  autocast     eager under torch.autocast("cpu", dtype=torch.bfloat16): bf16 matrix products,
               fp32 master weights, AdamW in fp32 (the usual mixed-precision recipe);
  onnxruntime  inference only: the eval-mode model exported with torch.onnx.export (one file per
               batch size, fixed shapes), run by onnxruntime's CPUExecutionProvider with
               intra_op_num_threads = --threads, inter_op 1, ORT_ENABLE_ALL, in a child process
               that imports only onnxruntime and numpy (so its peak RSS is ORT's own).
(a) a training step: forward, cross entropy (label smoothing 0.1), backward, AdamW step
    (PyTorch's default implementation choice), on a fixed random batch;
(b) inference in eval mode under torch.inference_mode(), for each --infer-batch-sizes.
Each of --reps timed reps runs enough iterations to last >= 0.3 s, after --warmup iterations.
Prints one JSON object: median images/s and [min, max] over reps, peak RSS in MB (before the
model is built, and at the end), and per measurement the share of the cores that other processes
used meanwhile (a busy machine makes the numbers meaningless). If torch.compile or the ONNX
export fails, the JSON holds the error instead. In onnxruntime mode the training fields are null,
and `onnx_max_abs_diff` is the largest |ORT logit - PyTorch logit| on a copy of the model with
random weights of a sensible scale (timm's init zeroes the head, so its logits are all 0 and
would prove nothing), which shows the exported graph is the same model.
"""
import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# torch, torch.nn.functional (F) and timm_gmlp are imported in main(), after the arguments are
# read: the onnxruntime child process (--ort-worker) must not pay for importing torch.
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")

MIN_REP_SECONDS = 0.3


def peak_rss_mb():
    """This process's peak resident memory in MB: VmHWM, which (unlike getrusage's ru_maxrss)
    starts afresh at exec, so the onnxruntime child does not inherit its parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
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
    if args.mode == "onnxruntime":
        return run_onnxruntime(args, cfg, model, result)
    net = torch.compile(model) if args.mode == "compile" else model
    # autocast: bf16 matrix products in forward (and so in backward); fp32 weights and AdamW.
    precision = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.mode == "autocast" \
        else contextlib.nullcontext
    gen = torch.Generator().manual_seed(0)
    shape = (cfg["in_chans"], cfg["img_size"], cfg["img_size"])

    # (a) training step
    model.train()
    x = torch.randn((args.batch_size,) + shape, generator=gen)
    y = torch.randint(0, cfg["num_classes"], (args.batch_size,), generator=gen)
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3)

    def train_step():
        opt.zero_grad(set_to_none=True)
        with precision():
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
            with torch.inference_mode(), precision():
                net(xb)

        result["infer"][str(b)] = measure(infer_step, b, args.warmup, args.reps)


def run_onnxruntime(args, cfg, model, result):
    """Exports the eval-mode model per batch size, then times ORT in a child process."""
    import onnxruntime  # noqa: F401  (fail here, with a clear error, if it is not installed)
    model.eval()
    gen = torch.Generator().manual_seed(0)
    shape = (cfg["in_chans"], cfg["img_size"], cfg["img_size"])
    with tempfile.TemporaryDirectory(prefix="gmlp_onnx_") as tmp:
        t0 = time.perf_counter()
        for b in args.infer_batch_sizes:
            export_onnx(model, torch.randn((b,) + shape, generator=gen), os.path.join(tmp, f"b{b}.onnx"))
        result["export_s"] = round(time.perf_counter() - t0, 3)

        # Equivalence check on a copy with random weights (timm's head starts at zero).
        check = timm_gmlp.randomize_(timm_gmlp.build(cfg), torch.Generator().manual_seed(1)).eval()
        xc = torch.randn((2,) + shape, generator=gen)
        export_onnx(check, xc, os.path.join(tmp, "check.onnx"))
        with torch.inference_mode():
            expected = check(xc).numpy()
        np.save(os.path.join(tmp, "check_x.npy"), xc.numpy())
        np.save(os.path.join(tmp, "check_logits.npy"), expected)
        del check

        cmd = [sys.executable, os.path.abspath(__file__), "--ort-worker", tmp,
               "--threads", str(args.threads), "--warmup", str(args.warmup), "--reps", str(args.reps),
               "--infer-batch-sizes"] + [str(b) for b in args.infer_batch_sizes]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"onnxruntime worker failed: {proc.stderr.strip()[-1500:]}")
    worker = json.loads(proc.stdout.strip().splitlines()[-1])
    result["onnxruntime"] = worker["onnxruntime"]
    result["onnx_max_abs_diff"] = worker["onnx_max_abs_diff"]
    result["infer"] = worker["infer"]
    result["rss_before_model_mb"] = worker["rss_before_model_mb"]
    result["torch_process_peak_rss_mb"] = round(peak_rss_mb(), 1)  # the export's, for the record
    result["peak_rss_mb"] = worker["peak_rss_mb"]


def export_onnx(model, x, path):
    """torch.onnx.export of model at x's (fixed) shape; its progress lines go to stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"])


def ort_worker(args):
    """Child process of --mode onnxruntime: times the exported files in args.ort_worker."""
    import onnxruntime as ort
    folder = args.ort_worker
    result = {"onnxruntime": ort.__version__, "rss_before_model_mb": round(peak_rss_mb(), 1), "infer": {}}

    def session(path):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    check = session(os.path.join(folder, "check.onnx"))
    got = check.run(None, {"x": np.load(os.path.join(folder, "check_x.npy"))})[0]
    result["onnx_max_abs_diff"] = float(np.abs(got - np.load(os.path.join(folder, "check_logits.npy"))).max())
    del check

    rng = np.random.default_rng(0)
    for b in args.infer_batch_sizes:
        sess = session(os.path.join(folder, f"b{b}.onnx"))
        (inp,) = sess.get_inputs()
        xb = rng.standard_normal([b] + list(inp.shape[1:])).astype(np.float32)
        result["infer"][str(b)] = measure(lambda: sess.run(None, {"x": xb}), b, args.warmup, args.reps)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(result))
    return 0


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
    parser.add_argument("--mode", choices=["eager", "compile", "autocast", "onnxruntime"], default="eager")
    parser.add_argument("--infer-batch-sizes", type=int, nargs="+",
                        help="default: the training batch size and 1")
    parser.add_argument("--ort-worker", metavar="DIR", help=argparse.SUPPRESS)  # internal, see ort_worker()
    args = parser.parse_args()
    if not args.infer_batch_sizes:
        args.infer_batch_sizes = [args.batch_size, 1]
    if args.ort_worker:
        return ort_worker(args)

    global torch, F, timm_gmlp
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, REFERENCE_DIR)
    import timm_gmlp

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
    except Exception as e:  # torch.compile needs a C++ toolchain, ONNX export onnxscript: say so
        if args.mode == "eager":
            raise
        what = {"compile": "torch.compile", "autocast": "bf16 autocast",
                "onnxruntime": "ONNX export / onnxruntime"}[args.mode]
        result["error"] = f"{what} failed: {type(e).__name__}: {' '.join(str(e).split())[:2000]}"
    if result["peak_rss_mb"] is None:  # else it is the onnxruntime worker's
        result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
