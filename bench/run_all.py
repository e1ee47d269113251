"""`make bench`: gmlp beside PyTorch on every benchmark shape, one table per shape.

    make bench                                   # = make deps-bench build; .venv/bin/python bench/run_all.py
    make bench BENCH_ARGS="--quick --shapes fmnist-s"
    .venv/bin/python bench/run_all.py [--threads 2] [--reps 10] [--rounds 1] [--shapes fmnist-s cifar-s gmlp-ti16]
                                      [--quick] [--peak-gflops G] [--gmlp build/gmlp] [--json]

For each shape (preset, batch) -- fmnist-s at 64 (28×28, patch 4, 49 tokens), cifar-s at 64
(32×32×3, patch 4, 64 tokens), gmlp-ti16 at 8 (224×224×3, patch 16, 196 tokens) -- it runs, one
after the other and never two at once:
  `gmlp bench --json` in fp32, and in bf16 when `gmlp bench --help` offers --precision, and the
  training step in bf16 and fp32 alternating in one process (`--versus f32`), whose ratio does not
  carry two processes' different luck with the host;
  bench/pytorch_baseline.py on the same architecture (from `gmlp info --json`), same batch, same
  thread count, in modes eager, compile (torch.compile), max-autotune (torch.compile's
  mode="max-autotune"), autocast (bf16 autocast), and inference only in ONNX Runtime, OpenVINO
  with its f32 hint and OpenVINO at its default precision (bf16 on CPUs with AVX512-BF16 or AMX),
  each on the ONNX that PyTorch exports and on the one `gmlp export` writes.
It does not build: `make bench` does that first. Each measurement is images/s, the median over
--reps repetitions after warm-up with [min, max] beside it; a training step is forward, loss,
backward and AdamW. Then it prints one markdown table per shape with gmlp's GFLOP/s as a share of
the machine's fp32 peak, and the ratio gmlp / each PyTorch column, stamped with the git commit,
date, CPU and thread count. --json prints everything as one JSON object instead.

The fp32 peak is measured (a few FMA loops compiled with cc, about a second) unless
--peak-gflops gives it: under a hypervisor /proc/cpuinfo states the nominal clock, not the boost
clock the cores actually run at.

Each run also records the share of the machine's cores that other processes used meanwhile:
above a few percent, someone else's work skews the numbers and the tables say so.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = [("fmnist-s", 64), ("cifar-s", 64), ("gmlp-ti16", 8)]  # (preset, batch size)
# The baselines: column key -> (pytorch_baseline.py --mode, whose ONNX the runtimes run).
TORCH_MODES = {"eager": ("eager", None), "compile": ("compile", None),
               "max-autotune": ("max-autotune", None), "autocast": ("autocast", None),
               "onnxruntime": ("onnxruntime", "torch"), "onnxruntime-gmlp": ("onnxruntime", "gmlp"),
               "openvino": ("openvino", "torch"), "openvino-gmlp": ("openvino", "gmlp"),
               "openvino-default": ("openvino-default", "torch"),
               "openvino-default-gmlp": ("openvino-default", "gmlp")}
RUNTIME_MODES = {"onnxruntime", "openvino", "openvino-default"}  # inference only, in a process of their own
COLUMN_NAMES = {"eager": "PyTorch eager", "compile": "PyTorch compile",
                "max-autotune": "PyTorch compile max-autotune", "autocast": "PyTorch autocast bf16",
                "onnxruntime": "ONNX Runtime (PyTorch's ONNX)", "onnxruntime-gmlp": "ONNX Runtime (gmlp's ONNX)",
                "openvino": "OpenVINO f32 (PyTorch's ONNX)", "openvino-gmlp": "OpenVINO f32 (gmlp's ONNX)",
                "openvino-default": "OpenVINO default (PyTorch's ONNX)",
                "openvino-default-gmlp": "OpenVINO default (gmlp's ONNX)"}
SHORT_NAMES = {"eager": "eager", "compile": "compile", "max-autotune": "max-autotune", "autocast": "autocast",
               "onnxruntime": "ORT", "onnxruntime-gmlp": "ORT (gmlp ONNX)", "openvino": "OV f32",
               "openvino-gmlp": "OV f32 (gmlp ONNX)", "openvino-default": "OV default",
               "openvino-default-gmlp": "OV default (gmlp ONNX)"}
BUSY_WARNING = 0.05  # others' share of the cores above which a table is flagged


def busy_cpu_seconds():
    """CPU seconds used so far by the whole machine, and by our finished child processes."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    machine = (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait
    children = os.times()
    return machine, children.children_user + children.children_system


def run_json(cmd):
    """Runs cmd, returns the JSON object on the last line of its stdout, with `others_cpu_share`
    (the share of the cores other processes used while it ran) added. On failure returns
    {"error": ...} rather than stopping the other runs."""
    print("$ " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd),
          file=sys.stderr, flush=True)
    machine0, children0 = busy_cpu_seconds()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    machine1, children1 = busy_cpu_seconds()
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        result = {"error": f"exit status {proc.returncode}: {' '.join(proc.stderr.split())[-1000:]}"}
    others = max(0.0, (machine1 - machine0) - (children1 - children0))
    result["others_cpu_share"] = round(others / (wall * os.cpu_count()), 3)
    result["wall_s"] = round(wall, 1)
    if "error" in result:
        print(f"  failed: {result['error'][:300]}", file=sys.stderr, flush=True)
    return result


def cpu_info():
    """(model name, vendor, family, flags) from /proc/cpuinfo, and the clock in GHz it states."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break  # the first processor is enough
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    return (info.get("model name", "unknown CPU"), info.get("vendor_id", ""),
            int(info.get("cpu family", "0")), info.get("flags", "").split(),
            float(info.get("cpu MHz", "0")) / 1000.0)


# Peak fp32 FLOP/s of `threads` cores, measured: 12 independent chains of vector FMAs per
# thread (enough to fill two FMA pipes of latency <= 6), AVX-512 where the compiler targets it.
FMA_LOOP_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef __AVX512F__
typedef float vec __attribute__((vector_size(64)));
#else
typedef float vec __attribute__((vector_size(32)));
#endif
#define ITERS 100000000L
#define STEP(a) a = a * b + c; __asm__ volatile("" : "+v"(a));
static void* loop(void* out) {
  vec b = {0}, c = {0}, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
  b += 0.999f, c += 1e-3f;
  a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = c;
  for (long n = 0; n < ITERS; ++n) {
    STEP(a0) STEP(a1) STEP(a2) STEP(a3) STEP(a4) STEP(a5)
    STEP(a6) STEP(a7) STEP(a8) STEP(a9) STEP(a10) STEP(a11)
  }
  *(float*)out = (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11)[0];
  return 0;
}
int main(int argc, char** argv) {
  int threads = atoi(argv[1]);
  pthread_t t[256]; float out[256]; struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], 0, loop, &out[i]);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  printf("%.1f %d\n", 2.0 * sizeof(vec) / 4 * 12 * ITERS * threads / s / 1e9, (int)sizeof(vec) * 8);
  return 0;
}
"""


def measured_peak_gflops(threads):
    """(GFLOP/s, vector bits) of the FMA loop above on `threads` threads, best of 3; None if
    there is no C compiler or it fails."""
    with tempfile.TemporaryDirectory(prefix="gmlp_peak_") as tmp:
        src, exe = os.path.join(tmp, "fma.c"), os.path.join(tmp, "fma")
        with open(src, "w") as f:
            f.write(FMA_LOOP_C)
        try:
            subprocess.run(["cc", "-O2", "-march=native", "-pthread", src, "-o", exe], check=True,
                           capture_output=True)
            runs = [subprocess.run([exe, str(threads)], check=True, capture_output=True, text=True)
                    .stdout.split() for _ in range(3)]
        except (OSError, subprocess.CalledProcessError):
            return None
    return max(float(r[0]) for r in runs), int(runs[0][1])


def default_peak_gflops(threads):
    """The fp32 peak of `threads` cores, and the sentence that says how it was derived: measured
    with an FMA loop, since under a hypervisor the clock /proc/cpuinfo states is the nominal one
    (2.6 GHz here) while the cores run at their boost clock (about 4 GHz here); else that stated
    clock × cores × fp32 FLOP per cycle per core."""
    _, vendor, family, flags, ghz = cpu_info()
    if "avx512f" in flags and vendor == "AuthenticAMD" and family == 25:
        per_cycle, why = 32, "Zen 4 runs 512-bit FMAs on 256-bit pipes: 2 × 8 lanes × 2 FLOP"
    elif "avx512f" in flags:
        per_cycle, why = 64, "AVX-512 with two full-width FMA pipes: 2 × 16 lanes × 2 FLOP"
    elif "fma" in flags:
        per_cycle, why = 32, "AVX2 with two FMA pipes: 2 × 8 lanes × 2 FLOP"
    else:
        per_cycle, why = 8, "SSE: 2 × 4 lanes × 1 FLOP"
    stated = ghz * threads * per_cycle
    measured = measured_peak_gflops(threads)
    if measured:
        gflops, bits = measured
        return gflops, (f"{gflops:.0f} GFLOP/s measured: {threads} threads of {bits}-bit FMA loops "
                        f"(= {threads} cores × {per_cycle} FLOP/cycle [{why}] at "
                        f"{gflops / threads / per_cycle:.2f} GHz; the clock the CPU states, "
                        f"{ghz:.2f} GHz, would give {stated:.0f})")
    return stated, (f"{stated:.0f} GFLOP/s = {ghz:.2f} GHz (clock stated by the CPU; a boost "
                    f"clock would be higher) × {threads} cores × {per_cycle} fp32 FLOP/cycle ({why})")


def git_commit():
    """The short commit, with -dirty if the working tree has uncommitted changes."""
    def git(*a):
        return subprocess.run(["git", "-C", ROOT] + list(a), capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def merge_rounds(runs):
    """One result from the same measurement in several processes: each rate is the median of
    the processes' medians, its spread the lowest minimum to the highest maximum; peak RSS and
    others' share of the cores are the largest seen. A failed process fails the cell."""
    failed = [r for r in runs if "error" in r]
    if failed or len(runs) == 1:
        return failed[0] if failed else runs[0]

    def rate(get):  # (median, [min, max]) over the runs, from each run's (median, spread)
        cells = [get(r) for r in runs]
        if any(c is None or c[0] is None for c in cells):
            return None, None
        spreads = [c[1] or [c[0], c[0]] for c in cells]
        return statistics.median(c[0] for c in cells), [min(s[0] for s in spreads), max(s[1] for s in spreads)]

    out = dict(runs[0])
    for key in ("train", "infer", "infer1"):
        if f"{key}_images_per_s" in out:
            out[f"{key}_images_per_s"], out[f"{key}_spread"] = rate(
                lambda r: (r.get(f"{key}_images_per_s"), r.get(f"{key}_spread")))
    if isinstance(out.get("infer"), dict):  # pytorch_baseline.py: one entry per inference batch size
        out["infer"] = {}
        for b, m in runs[0]["infer"].items():
            med, spread = rate(lambda r: (r["infer"][b]["images_per_s"], r["infer"][b]["spread"]))
            out["infer"][b] = dict(m, images_per_s=med, spread=spread,
                                   others_cpu_share=max(r["infer"][b].get("others_cpu_share", 0) for r in runs))
    worst = max(runs, key=lambda r: r.get("peak_rss_mb") or 0)
    for key in ("peak_rss_mb", "rss_before_model_mb"):
        if key in worst:
            out[key] = worst[key]
    if "versus" in out:  # `gmlp bench --versus`: the ratio measured within each process
        v = dict(out["versus"])
        for key in ("train", "infer", "infer1"):
            if f"{key}_ratio" in v:
                v[f"{key}_ratio"], v[f"{key}_ratio_spread"] = rate(
                    lambda r: (r["versus"].get(f"{key}_ratio"), r["versus"].get(f"{key}_ratio_spread")))
        out["versus"] = v
    out["others_cpu_share"] = max(r.get("others_cpu_share", 0) for r in runs)
    out["wall_s"] = round(sum(r.get("wall_s", 0) for r in runs), 1)
    out["processes"] = len(runs)
    return out


def bench_shape(a, preset, batch, gmlp_bf16, gmlp_versus):
    """Every run for one shape, as one dict: --rounds rounds of every measurement, each in its own
    process, the rounds one after another so that a slow spell of the host touches all columns."""
    info = run_json([a.gmlp, "info", "--preset", preset, "--json"])
    if "error" in info:
        return {"preset": preset, "batch_size": batch, "error": info["error"]}
    cfg = info["config"]
    common = ["--preset", preset, "--batch-size", str(batch), "--threads", str(a.threads),
              "--reps", str(a.reps), "--warmup", str(a.warmup), "--json"]
    commands = {("gmlp", "fp32"): [a.gmlp, "bench"] + common,
                # An inference-only process, whose peak RSS is set beside the runtimes' (theirs run
                # inference only too); the first command's trains first.
                ("gmlp", "infer"): [a.gmlp, "bench"] + common + ["--mode", "infer"]}
    if gmlp_bf16:
        commands[("gmlp", "bf16")] = [a.gmlp, "bench"] + common + ["--precision", "bf16"]
    if gmlp_bf16 and gmlp_versus:
        # bf16 ÷ fp32 of the training step, the two alternating repetition by repetition in one
        # process: a ratio of two processes' speeds carries each one's own luck with the host.
        commands[("gmlp", "pair")] = [a.gmlp, "bench"] + common + ["--precision", "bf16", "--versus", "f32",
                                                                   "--mode", "train"]
    for key, (mode, onnx_from) in TORCH_MODES.items():
        commands[("pytorch", key)] = [
            sys.executable, os.path.join(HERE, "pytorch_baseline.py"),
            "--img-size", str(cfg["img_size"]), "--in-chans", str(cfg["in_chans"]),
            "--patch-size", str(cfg["patch_size"]), "--depth", str(cfg["depth"]),
            "--dim", str(cfg["dim"]), "--ffn", str(cfg["ffn"]), "--num-classes", str(cfg["num_classes"]),
            "--batch-size", str(batch), "--threads", str(a.threads), "--reps", str(a.reps),
            "--warmup", str(a.warmup), "--mode", mode] + (
                ["--onnx-from", onnx_from, "--gmlp", a.gmlp] if onnx_from else [])
    runs = {k: [] for k in commands}
    for _ in range(a.rounds):
        for k, cmd in commands.items():
            runs[k].append(run_json(cmd))
    merged = {k: merge_rounds(v) for k, v in runs.items()}
    gmlp = {"fp32": dict(merged[("gmlp", "fp32")], inference_process=merged[("gmlp", "infer")])}
    # Without native bf16 gmlp falls back to fp32 (and says so): that run is not a bf16 column.
    if gmlp_bf16 and merged[("gmlp", "bf16")].get("precision", "bf16") == "bf16":
        gmlp["bf16"] = merged[("gmlp", "bf16")]
        pair = merged.get(("gmlp", "pair"), {})
        if "versus" in pair:
            gmlp["bf16"]["paired_with_fp32"] = pair["versus"]
    pytorch = {mode: merged[("pytorch", mode)] for mode in TORCH_MODES}
    return {"preset": preset, "batch_size": batch, "params": info["params"], "tokens": info.get("tokens"),
            "flops_per_image": info["flops_per_image"], "config": cfg, "gmlp": gmlp, "pytorch": pytorch}


# ---- the table ----------------------------------------------------------------------------

def gmlp_cells(r, B):
    """Row name -> (median, [min, max] or None) for a `gmlp bench --json` result."""
    if "error" in r:
        return {}
    cells = {"train": (r["train_images_per_s"], r.get("train_spread")),
             "infer": (r["infer_images_per_s"], r.get("infer_spread")),
             "infer1": (r["infer1_images_per_s"], r.get("infer1_spread")),
             "rss": (r["peak_rss_mb"], r["peak_rss_mb"] - r["rss_before_model_mb"])}
    alone = r.get("inference_process", {})
    if alone.get("peak_rss_mb") is not None and "error" not in alone:
        cells["rss_infer"] = (alone["peak_rss_mb"], alone["peak_rss_mb"] - alone["rss_before_model_mb"])
    return cells


def torch_cells(r, B):
    """Row name -> (median, [min, max]) for a pytorch_baseline.py result; missing rows left out."""
    cells = {}
    if r.get("train_images_per_s") is not None:
        cells["train"] = (r["train_images_per_s"], r["train_spread"])
    for row, b in (("infer", B), ("infer1", "1")):
        m = r.get("infer", {}).get(b)
        if m:
            cells[row] = (m["images_per_s"], m["spread"])
    if r.get("peak_rss_mb") is not None and "error" not in r:
        cells["rss"] = (r["peak_rss_mb"], r["peak_rss_mb"] - r["rss_before_model_mb"])
        if r.get("mode") in RUNTIME_MODES:  # the runtime's own process runs inference only
            cells["rss_infer"] = cells["rss"]
    return cells


def fmt_rate(cell, gflop=None, peak=None):
    median, spread = cell
    s = f"{median:,.0f}"
    if spread:
        s += f" [{spread[0]:,.0f}–{spread[1]:,.0f}]"
    if gflop:
        s += f"; {median * gflop:.0f} GFLOP/s, {100 * median * gflop / peak:.0f} % of peak"
    return s


def print_table(shape, peak, native_bf16):
    B = str(shape["batch_size"])
    print(f"### {shape['preset']}, batch {B}\n")
    if "error" in shape:
        print(f"failed: {shape['error']}\n")
        return
    flop = shape["flops_per_image"] / 1e9  # GFLOP per image, forward; a training step is 3×
    columns = [(f"gmlp {p}", gmlp_cells(r, B)) for p, r in shape["gmlp"].items()]
    columns += [(COLUMN_NAMES[m], torch_cells(r, B)) for m, r in shape["pytorch"].items()]
    # Without native bf16 PyTorch's autocast emulates it: a baseline at its worst, not its best,
    # so its column is shown but nothing is claimed against it. With it, OpenVINO's default runs
    # bf16: it is set beside gmlp bf16, not fp32.
    bf16_columns = {"autocast", "openvino-default", "openvino-default-gmlp"}
    ratios = [(f"gmlp / {SHORT_NAMES[m]}", "gmlp fp32", COLUMN_NAMES[m]) for m in shape["pytorch"]
              if not native_bf16 and m != "autocast" or native_bf16 and m not in bf16_columns]
    if "bf16" in shape["gmlp"]:
        ratios += [("gmlp bf16 / gmlp fp32", "gmlp bf16", "gmlp fp32")]
        ratios += [(f"gmlp bf16 / {SHORT_NAMES[m]}", "gmlp bf16", COLUMN_NAMES[m]) for m in sorted(bf16_columns)
                   if m in shape["pytorch"]]
    paired = shape["gmlp"].get("bf16", {}).get("paired_with_fp32")
    rows = [("train", f"train step, batch {B} (images/s)", 3 * flop),
            ("infer", f"inference, batch {B} (images/s)", flop),
            ("infer1", "inference, batch 1 (images/s)", flop),
            ("rss", "peak RSS, MB (+ above start)", None),
            ("rss_infer", "peak RSS of an inference-only process, MB (+ above start)", None)]
    by_name = dict(columns)
    pair_name = ["gmlp bf16 / fp32, alternating in one process"] if paired else []
    print("| | " + " | ".join(n for n, _ in columns) + " | " + " | ".join([n for n, _, _ in ratios] + pair_name)
          + " |")
    print("|---|" + "---:|" * (len(columns) + len(ratios) + len(pair_name)))
    for key, label, gflop in rows:
        cells = []
        for name, col in columns:
            if key not in col:
                cells.append("–")
            elif key in ("rss", "rss_infer"):
                cells.append(f"{col[key][0]:,.0f} (+{col[key][1]:,.0f})")
            else:
                cells.append(fmt_rate(col[key], gflop if name.startswith("gmlp") else None, peak))
        for _, mine, theirs in ratios:
            a_, b_ = by_name.get(mine, {}).get(key), by_name.get(theirs, {}).get(key)
            cells.append(f"{a_[0] / b_[0]:.2f}×" if a_ and b_ and b_[0] else "–")
        if paired:
            r, spread = paired.get(f"{key}_ratio"), paired.get(f"{key}_ratio_spread")
            cells.append(f"{r:.2f}× [{spread[0]:.2f}–{spread[1]:.2f}]" if r else "–")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    runs = [(f"gmlp {p}", r) for p, r in shape["gmlp"].items()] + \
           [(COLUMN_NAMES[m], r) for m, r in shape["pytorch"].items()]
    busy = [f"{name} {100 * r['others_cpu_share']:.0f} %" for name, r in runs
            if r.get("others_cpu_share", 0) > BUSY_WARNING]
    if busy:
        print(f"**Busy machine, these columns are skewed**: other processes used this share of the "
              f"cores while they ran: {', '.join(busy)}.")
    else:
        top = max(r.get("others_cpu_share", 0) for _, r in runs)
        print(f"Quiet machine: other processes used at most {100 * top:.1f} % of the cores during any run.")
    checked = [f"{COLUMN_NAMES[m]} {r['onnx_max_abs_diff']:.1e}" for m, r in shape["pytorch"].items()
               if "onnx_max_abs_diff" in r]
    if checked:
        print(f"ONNX exports checked, max |runtime − PyTorch| logit (random weights, batch 2): "
              f"{', '.join(checked)}.")
    for name, r in runs:
        if "error" in r:
            print(f"{name} failed: {r['error'][:400]}")
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="threads for gmlp, torch and ORT alike")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions, each >= 0.3 s")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every measurement in this many separate processes, round by round, "
                        "and report the median of their medians (the host's noise differs between "
                        "processes more than within one)")
    p.add_argument("--shapes", nargs="+", choices=[s for s, _ in SHAPES], default=[s for s, _ in SHAPES],
                   help="presets to run (default: all)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 reps, 1 warm-up")
    p.add_argument("--peak-gflops", type=float,
                   help="the fp32 peak of --threads cores (default: measured with an FMA loop)")
    p.add_argument("--gmlp", default=os.path.join(ROOT, "build", "gmlp"), help="the gmlp binary")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object")
    a = p.parse_args()
    if a.quick:
        a.reps, a.warmup = 3, 1
    if not os.access(a.gmlp, os.X_OK):
        sys.exit(f"run_all: {a.gmlp} not found; build it first (make build)")
    if a.peak_gflops:
        peak, derivation = a.peak_gflops, f"{a.peak_gflops:.0f} GFLOP/s (given with --peak-gflops)"
    else:
        peak, derivation = default_peak_gflops(a.threads)
    help_text = subprocess.run([a.gmlp, "bench", "--help"], capture_output=True, text=True).stdout
    gmlp_bf16 = "--precision" in help_text
    gmlp_versus = "--versus" in help_text

    cpu, _, family, flags, _ = cpu_info()
    native_bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
    stamp = {"commit": git_commit(), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "cpu": f"{cpu} (family {family}, {os.cpu_count()} cores"
                    f"{', avx512_bf16' if 'avx512_bf16' in flags else ''}{', amx' if 'amx_tile' in flags else ''})",
             "threads": a.threads, "reps": a.reps, "warmup": a.warmup, "rounds": a.rounds,
             "peak_gflops": round(peak, 1), "peak_derivation": derivation}
    shapes = [bench_shape(a, preset, batch, gmlp_bf16, gmlp_versus) for preset, batch in SHAPES if preset in a.shapes]

    if a.json:
        print(json.dumps({"stamp": stamp, "native_bf16": native_bf16, "shapes": shapes}))
        return 0
    versions = next((r for s in shapes for r in s.get("pytorch", {}).values() if "torch" in r), {})
    runtimes = sorted({r["runtime"] for s in shapes for r in s.get("pytorch", {}).values() if "runtime" in r})
    print(f"## gmlp beside PyTorch\n\ncommit {stamp['commit']}, {stamp['date']}, {stamp['cpu']}, "
          f"{a.threads} threads, median [min–max] of {a.reps} reps after {a.warmup} warm-up"
          + (f", then the median of {a.rounds} such processes per cell, run round by round "
             f"[the lowest min to the highest max]" if a.rounds > 1 else "") + "; "
          f"torch {versions.get('torch', '?')}, {', '.join(runtimes) or 'no runtime'}.\n"
          f"fp32 peak: {derivation}.\n"
          f"Columns gmlp / X: gmlp fp32 ÷ X (above 1: gmlp faster; for RSS, below 1: gmlp smaller). "
          f"Training step = forward, loss, backward, AdamW (gmlp also clips the gradient norm); "
          f"GFLOP/s counts a training step as 3× the forward FLOPs; % of peak is of the fp32 peak, "
          f"for gmlp bf16 too. "
          f"Peak RSS is the whole process; the increase over its footprint before the model was "
          f"built is in brackets (a PyTorch process starts with torch imported; the ONNX Runtime and "
          f"OpenVINO columns are separate processes that import only the runtime and numpy, and run "
          f"inference only). Intel's extension for PyTorch is not measured: it is discontinued and "
          f"needs an older torch."
          + ("" if gmlp_bf16 else " gmlp bf16: not yet (`gmlp bench` has no --precision).") + "\n")
    if not native_bf16:
        print("This CPU has no native bf16 (AVX512-BF16 or AMX): gmlp's `--precision bf16` falls "
              "back to fp32, so there is no gmlp bf16 column, and PyTorch's bf16 autocast is "
              "emulated, so no ratio is taken against it; OpenVINO's default runs f32 here, so its "
              "columns are set beside gmlp fp32.\n")
    for shape in shapes:
        print_table(shape, peak, native_bf16)
    return 0


if __name__ == "__main__":
    sys.exit(main())
