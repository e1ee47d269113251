"""PyTorch baseline for the vision gMLP: training and inference throughput on the CPU.

    python bench/pytorch_baseline.py --img-size 28 --in-chans 1 --patch-size 4 --depth 6 \
        --dim 128 --ffn 512 --num-classes 10 --batch-size 64 --threads 2 --mode eager

The model is timm's gMLP (tests/reference/timm_gmlp.py) with timm's own init, run the way its
users run it at best, one --mode per process:
  eager         plain PyTorch, fp32;
  compile       torch.compile (default inductor backend), fp32;
  max-autotune  torch.compile(mode="max-autotune"): inductor also benchmarks its GEMM choices
                (slow to compile, minutes on two cores), fp32;
  autocast      eager under torch.autocast("cpu", dtype=torch.bfloat16): bf16 matrix products,
                fp32 master weights, AdamW in fp32 (the usual mixed-precision recipe);
  onnxruntime   inference only: the eval-mode model as ONNX, run by onnxruntime's
                CPUExecutionProvider with intra_op_num_threads = --threads, inter_op 1,
                ORT_ENABLE_ALL;
  openvino      inference only: the same ONNX run by OpenVINO on the CPU with
                INFERENCE_PRECISION_HINT f32, --threads inference threads, one stream, the
                latency hint (without the f32 hint OpenVINO runs bf16 on CPUs that have it);
  openvino-default  the same at OpenVINO's default precision: bf16 on CPUs with AVX512-BF16 or
                AMX, else f32.
The three runtimes time their model in a child process that imports only the runtime and numpy
(so its peak RSS is the runtime's own). --onnx-from says whose ONNX: torch (torch.onnx.export,
one file per batch size, fixed shapes) or gmlp (`gmlp export` of the same timm state_dict, one
file with a dynamic batch; needs --gmlp).
Intel's extension for PyTorch is not measured: it is discontinued and needs an older torch.
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
# read: the runtime child process (--runtime-worker) must not pay for importing torch.
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")

MIN_REP_SECONDS = 0.3


RUNTIMES = ["onnxruntime", "openvino", "openvino-default"]
MODES = ["eager", "compile", "max-autotune", "autocast"] + RUNTIMES


def peak_rss_mb():
    """This process's peak resident memory in MB: VmHWM, which (unlike getrusage's ru_maxrss)
    starts afresh at exec, so the runtime child does not inherit its parent's peak."""
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
    if args.mode in RUNTIMES:
        return run_runtime(args, cfg, model, result)
    net = model
    if args.mode == "compile":
        net = torch.compile(model)
    elif args.mode == "max-autotune":
        net = torch.compile(model, mode="max-autotune")
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


def run_runtime(args, cfg, model, result):
    """Writes the eval-mode model as ONNX (PyTorch's export per batch size, or gmlp's with a
    dynamic batch), then times it in a child process that imports only the runtime."""
    __import__("onnxruntime" if args.mode == "onnxruntime" else "openvino")  # a clear error if missing
    model.eval()
    gen = torch.Generator().manual_seed(0)
    shape = (cfg["in_chans"], cfg["img_size"], cfg["img_size"])
    result["onnx_from"] = args.onnx_from
    with tempfile.TemporaryDirectory(prefix="gmlp_onnx_") as tmp:
        def export(net, x, name):
            path = os.path.join(tmp, name)
            if args.onnx_from == "torch":
                export_onnx(net, x, path)
            else:  # gmlp reads the timm state_dict with no flags and writes its own graph
                weights = os.path.join(tmp, "weights.safetensors")
                save_file({k: v.contiguous() for k, v in net.state_dict().items()}, weights)
                proc = subprocess.run([args.gmlp, "export", "--checkpoint", weights, "--onnx", path],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"gmlp export failed: {proc.stderr.strip()[-500:]}")

        t0 = time.perf_counter()
        if args.onnx_from == "torch":
            for b in args.infer_batch_sizes:
                export(model, torch.randn((b,) + shape, generator=gen), f"b{b}.onnx")
        else:
            export(model, None, "model.onnx")
        result["export_s"] = round(time.perf_counter() - t0, 3)

        # Equivalence check on a copy with random weights (timm's head starts at zero).
        check = timm_gmlp.randomize_(timm_gmlp.build(cfg), torch.Generator().manual_seed(1)).eval()
        xc = torch.randn((2,) + shape, generator=gen)
        export(check, xc, "check.onnx")
        with torch.inference_mode():
            expected = check(xc).numpy()
        np.save(os.path.join(tmp, "check_x.npy"), xc.numpy())
        np.save(os.path.join(tmp, "check_logits.npy"), expected)
        del check

        cmd = [sys.executable, os.path.abspath(__file__), "--runtime-worker", tmp, "--mode", args.mode,
               "--threads", str(args.threads), "--warmup", str(args.warmup), "--reps", str(args.reps),
               "--infer-batch-sizes"] + [str(b) for b in args.infer_batch_sizes]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{args.mode} worker failed: {proc.stderr.strip()[-1500:]}")
    worker = json.loads(proc.stdout.strip().splitlines()[-1])
    result["runtime"] = worker["runtime"]
    result["onnx_max_abs_diff"] = worker["onnx_max_abs_diff"]
    result["infer"] = worker["infer"]
    result["rss_before_model_mb"] = worker["rss_before_model_mb"]
    result["torch_process_peak_rss_mb"] = round(peak_rss_mb(), 1)  # the export's, for the record
    result["peak_rss_mb"] = worker["peak_rss_mb"]


def export_onnx(model, x, path):
    """torch.onnx.export of model at x's (fixed) shape; its progress lines go to stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"])


def runtime_session(mode, threads, path):
    """A function x -> logits running the ONNX file at `path` in ONNX Runtime or OpenVINO."""
    if mode == "onnxruntime":
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return lambda x: sess.run(None, {name: x})[0]
    import openvino as ov
    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    if mode == "openvino":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    request = ov.Core().compile_model(path, "CPU", config).create_infer_request()

    def infer(x):
        request.infer({0: x})
        return request.get_output_tensor(0).data
    return infer


def runtime_worker(args):
    """Child process of the runtime modes: times the ONNX files in args.runtime_worker."""
    if args.mode == "onnxruntime":
        import onnxruntime
        version = f"onnxruntime {onnxruntime.__version__}"
    else:
        import openvino
        version = f"openvino {openvino.__version__}"
    folder = args.runtime_worker
    result = {"runtime": version, "rss_before_model_mb": round(peak_rss_mb(), 1), "infer": {}}
    check = runtime_session(args.mode, args.threads, os.path.join(folder, "check.onnx"))
    got = check(np.load(os.path.join(folder, "check_x.npy")))
    result["onnx_max_abs_diff"] = float(np.abs(got - np.load(os.path.join(folder, "check_logits.npy"))).max())
    del check

    rng = np.random.default_rng(0)
    shape = list(np.load(os.path.join(folder, "check_x.npy")).shape[1:])
    for b in args.infer_batch_sizes:
        fixed = os.path.join(folder, f"b{b}.onnx")  # PyTorch's export, else gmlp's dynamic batch
        run = runtime_session(args.mode, args.threads, fixed if os.path.exists(fixed)
                              else os.path.join(folder, "model.onnx"))
        xb = rng.standard_normal([b] + shape).astype(np.float32)
        result["infer"][str(b)] = measure(lambda: run(xb), b, args.warmup, args.reps)
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
    parser.add_argument("--mode", choices=MODES, default="eager")
    parser.add_argument("--onnx-from", choices=["torch", "gmlp"], default="torch",
                        help="runtime modes: whose ONNX export they run")
    parser.add_argument("--gmlp", help="the gmlp binary, for --onnx-from gmlp")
    parser.add_argument("--infer-batch-sizes", type=int, nargs="+",
                        help="default: the training batch size and 1")
    parser.add_argument("--runtime-worker", metavar="DIR", help=argparse.SUPPRESS)  # internal: runtime_worker()
    args = parser.parse_args()
    if not args.infer_batch_sizes:
        args.infer_batch_sizes = [args.batch_size, 1]
    if args.runtime_worker:
        return runtime_worker(args)
    if args.onnx_from == "gmlp" and not (args.gmlp and os.access(args.gmlp, os.X_OK)):
        parser.error(f"--onnx-from gmlp needs --gmlp, the gmlp binary (got {args.gmlp})")

    global torch, F, timm_gmlp, save_file
    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file
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
        what = {"compile": "torch.compile", "max-autotune": "torch.compile(mode='max-autotune')",
                "autocast": "bf16 autocast", "onnxruntime": "ONNX export / onnxruntime",
                "openvino": "ONNX export / OpenVINO f32", "openvino-default": "ONNX export / OpenVINO"}[args.mode]
        result["error"] = f"{what} failed: {type(e).__name__}: {' '.join(str(e).split())[:2000]}"
    if result["peak_rss_mb"] is None:  # else it is the runtime worker's
        result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
