#!/usr/bin/env python3
"""gmlp serve under load, on loopback, with wrk (Debian's `wrk`; scripts/setup.sh --bench).

    bench/serve_load.py --gmlp build/gmlp --out runs/serve_load            # the load table
    bench/serve_load.py --gmlp build/gmlp --out runs/serve_soak --soak-minutes 10

The load table: for fmnist-s (gmlp train, one short epoch) and gMLP-Ti/16 (a timm state_dict with
random weights: the speed does not depend on them), throughput and p50/p99 latency of
POST /v2/models/{name}/infer with one image per request (KServe v2 with a binary tensor, as
Triton's clients send it) at concurrency 1, 4 and 16, with --max-batch 1 (no batching), with
--max-batch 16 (batches form while a batch runs) and with --max-batch 16 --max-queue-delay-us 2000;
the average batch from /metrics; and the HTTP overhead: the p50 latency at concurrency 1 without
batching less `gmlp bench`'s in-process batch-1 inference latency. wrk, the server's HTTP threads
and its inference thread all share the machine's cores: on a 2-core machine the load generator
takes a share of what the server could use.

The soak: fmnist-s with batching at concurrency 16 for --soak-minutes: 14 connections send good
requests, 2 send bad ones in turn (malformed JSON, a wrong shape, an undecodable image, an unknown
model). Reports every minute the good requests that failed (any answer but 200), bad requests
answered other than 4xx, and the server's resident memory; at the end the growth of resident
memory after the first minute (warm-up). Exits 1 if a good request failed, a bad one got no 4xx,
or memory grew 5 % or more.

Writes a markdown table on stdout and everything as JSON in --out/serve_load.json.
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

# wrk's Lua: POST a body read from a file; print the summary as JSON at the end.
LUA = r"""
local f = assert(io.open(os.getenv("GMLP_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = os.getenv("GMLP_HEADER_SIZE")
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\nGMLP {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"non_2xx": %d, "socket_errors": %d}\n', summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
"""

# The soak's bad requests, in turn; every answer must be a 4xx.
BAD_LUA = r"""
local bodies = {
  {"/v2/models/MODEL/infer", '{"inputs": [', "application/json"},
  {"/v2/models/MODEL/infer", '{"inputs":[{"name":"input","datatype":"FP32","shape":[1,3,5,5],"data":[0]}]}', "application/json"},
  {"/v1/classify", "GIF89a, not an image gmlp reads", "image/gif"},
  {"/v2/models/nope/infer", '{"inputs":[]}', "application/json"},
}
local i = 0
request = function()
  i = i % #bodies + 1
  local b = bodies[i]
  return wrk.format("POST", (b[1]:gsub("MODEL", os.getenv("GMLP_MODEL"))), {["Content-Type"] = b[3]}, b[2])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\nGMLP {"requests": %d, "socket_errors": %d}\n', summary.requests,
    e.connect + e.read + e.write + e.timeout))
end
"""
# Their answers are counted from the server's /metrics (statuses by route).


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"serve_load: {' '.join(cmd)} failed: {r.stderr.strip()[-600:]}")
    return r.stdout


def cpu_name():
    """The CPU's model name and its widest vector instructions, e.g. "AMD EPYC (AVX2)"."""
    name, flags = platform.processor(), set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return f"{name} ({isa})"


class Server:
    def __init__(self, gmlp, checkpoint, name, args, threads):
        self.proc = subprocess.Popen([gmlp, "serve", "--checkpoint", checkpoint, "--model-name", name, "--port", "0",
                                      "--threads", str(threads), *args], stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if not m:
            sys.exit(f"serve_load: gmlp serve did not start: {line}{self.proc.stderr.read()[-600:]}")
        self.url = f"http://{m.group(1)}:{m.group(2)}"
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        for _ in range(600):
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        sys.exit("serve_load: gmlp serve did not become ready")

    def metrics(self):
        out = {}
        for line in urllib.request.urlopen(self.url + "/metrics").read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def rss_mb(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def wrk(url, path, concurrency, seconds, lua, env, threads=None):
    threads = threads or min(2, concurrency)
    r = subprocess.run(["wrk", "-t", str(threads), "-c", str(concurrency), "-d", f"{seconds}s", "--timeout", "10s",
                        "-s", lua, url + path], capture_output=True, text=True, env={**os.environ, **env})
    m = re.search(r"^GMLP (\{.*\})$", r.stdout, re.MULTILINE)
    if r.returncode != 0 or not m:
        sys.exit(f"serve_load: wrk failed: {r.stdout[-600:]}{r.stderr[-600:]}")
    return json.loads(m.group(1))


def make_checkpoints(gmlp, out, python):
    cks = {}
    fm = os.path.join(out, "fmnist-s")
    if not os.path.exists(os.path.join(fm, "checkpoint.safetensors")):
        run([gmlp, "train", "--preset", "fmnist-s", "--epochs", "1", "--train-limit", "2000", "--eval-limit", "100",
             "--out", fm, "--overwrite"])
    cks["fmnist-s"] = (os.path.join(fm, "checkpoint.safetensors"), (1, 28, 28))
    ti = os.path.join(out, "gmlp_ti16.safetensors")
    if not os.path.exists(ti):
        run([python, "-c", "import sys, timm, torch; from safetensors.torch import save_file; torch.manual_seed(0); "
             "m = timm.create_model('gmlp_ti16_224'); "
             "save_file({k: v.contiguous() for k, v in m.state_dict().items()}, sys.argv[1])", ti])
    cks["gmlp-ti16"] = (ti, (3, 224, 224))
    return cks


def request_body(out, name, chw):
    """A v2 request for one image (random pixels in [0, 1]) as a binary tensor."""
    import random
    rnd = random.Random(0)
    n = chw[0] * chw[1] * chw[2]
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, *chw],
                                     "parameters": {"binary_data_size": 4 * n}}]}).encode()
    path = os.path.join(out, f"{name}.body")
    with open(path, "wb") as f:
        f.write(header + struct.pack(f"<{n}f", *(rnd.random() for _ in range(n))))
    return path, len(header)


def load_table(args, cks):
    configs = [("max-batch 1", ["--max-batch", "1"]), ("max-batch 16", ["--max-batch", "16"]),
               ("max-batch 16, delay 2 ms", ["--max-batch", "16", "--max-queue-delay-us", "2000"])]
    lua = os.path.join(args.out, "post.lua")
    open(lua, "w").write(LUA)
    rows, overhead = [], {}
    for model, (ck, chw) in cks.items():
        body, header_size = request_body(args.out, model, chw)
        bench = json.loads(run([args.gmlp, "bench", "--checkpoint", ck, "--json", "--batch-size", "8",
                                "--threads", str(args.threads)]))
        in_process_ms = bench["infer1_latency_ms"]
        for label, flags in configs:
            s = Server(args.gmlp, ck, model, ["--http-threads", "32", "--max-queue", "256", *flags], args.threads)
            wrk(s.url, f"/v2/models/{model}/infer", 4, 2, lua, {"GMLP_BODY": body,
                                                                "GMLP_HEADER_SIZE": str(header_size)})  # warm-up
            for c in args.concurrency:
                before = s.metrics()
                r = wrk(s.url, f"/v2/models/{model}/infer", c, args.seconds, lua,
                        {"GMLP_BODY": body, "GMLP_HEADER_SIZE": str(header_size)})
                after = s.metrics()
                rows_run = after["gmlp_inference_count_total"] - before["gmlp_inference_count_total"]
                batches = after["gmlp_inference_exec_count_total"] - before["gmlp_inference_exec_count_total"]
                row = {"model": model, "config": label, "concurrency": c,
                       "requests_per_s": r["requests"] / (r["duration_us"] / 1e6),
                       "p50_ms": r["p50_us"] / 1e3, "p99_ms": r["p99_us"] / 1e3,
                       "avg_batch": rows_run / batches if batches else 0.0,
                       "failed": r["non_2xx"] + r["socket_errors"]}
                rows.append(row)
                print(f"  {model:10} {label:26} c={c:<3} {row['requests_per_s']:8.1f} req/s  "
                      f"p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  batch {row['avg_batch']:.2f}  "
                      f"failed {row['failed']}", file=sys.stderr, flush=True)
                if label == "max-batch 1" and c == 1:
                    overhead[model] = {"in_process_batch1_ms": in_process_ms, "http_p50_ms": row["p50_ms"],
                                       "overhead_ms": row["p50_ms"] - in_process_ms}
            s.stop()
    return rows, overhead


def soak(args, cks):
    ck, chw = cks["fmnist-s"]
    body, header_size = request_body(args.out, "fmnist-s", chw)
    good_lua, bad_lua = os.path.join(args.out, "post.lua"), os.path.join(args.out, "bad.lua")
    open(good_lua, "w").write(LUA)
    open(bad_lua, "w").write(BAD_LUA)
    s = Server(args.gmlp, ck, "fmnist-s", ["--max-batch", "16", "--http-threads", "32", "--max-queue", "256"],
               args.threads)
    minutes = []
    for minute in range(args.soak_minutes):
        before = s.metrics()
        bad = {}
        t = threading.Thread(target=lambda: bad.update(wrk(s.url, "/", 2, 60, bad_lua, {"GMLP_MODEL": "fmnist-s"}, 1)))
        t.start()
        good = wrk(s.url, "/v2/models/fmnist-s/infer", 14, 60, good_lua,
                   {"GMLP_BODY": body, "GMLP_HEADER_SIZE": str(header_size)}, 1)
        t.join()
        after = s.metrics()
        answered = {k: after[k] - before.get(k, 0) for k in after if k.startswith("gmlp_http_requests_total")}
        bad_answers = sum(v for k, v in answered.items() if not re.search(r'code="(200|4\d\d)"', k))
        m = {"minute": minute + 1, "good_requests": good["requests"],
             "good_failed": good["non_2xx"] + good["socket_errors"], "bad_requests": bad["requests"],
             "bad_not_4xx": int(bad_answers) + bad["socket_errors"], "rss_mb": s.rss_mb()}
        minutes.append(m)
        print(f"  minute {m['minute']:3}: {m['good_requests']} good ({m['good_failed']} failed), "
              f"{m['bad_requests']} bad ({m['bad_not_4xx']} not 4xx), RSS {m['rss_mb']:.1f} MB",
              file=sys.stderr, flush=True)
    rc = s.stop()
    warm = minutes[0]["rss_mb"]
    growth = max(m["rss_mb"] for m in minutes) / warm - 1 if warm else 0.0
    return {"minutes": minutes, "rss_growth_after_warmup": growth, "exit_status": rc,
            "good_failed": sum(m["good_failed"] for m in minutes),
            "bad_not_4xx": sum(m["bad_not_4xx"] for m in minutes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gmlp", required=True)
    ap.add_argument("--out", required=True, help="work folder: checkpoints, request bodies, serve_load.json")
    ap.add_argument("--seconds", type=int, default=10, help="wrk's duration per point")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--threads", type=int, default=0, help="the server's --threads (0: every core)")
    ap.add_argument("--soak-minutes", type=int, default=0, help="run the soak instead of the load table")
    ap.add_argument("--python", default=os.path.join(os.path.dirname(HERE), ".venv", "bin", "python"),
                    help="a Python with timm, for the gMLP-Ti/16 checkpoint")
    args = ap.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    if not shutil.which("wrk"):
        sys.exit("serve_load: wrk is not installed (scripts/setup.sh --bench installs it)")
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {"cpu": cpu_name(), "cores": os.cpu_count(), "commit": commit}
    cks = make_checkpoints(args.gmlp, args.out, args.python)
    if args.soak_minutes:
        result["soak"] = soak(args, cks)
        r = result["soak"]
        print(f"soak: {args.soak_minutes} min at concurrency 16 (14 good, 2 bad), {r['good_failed']} good requests "
              f"failed, {r['bad_not_4xx']} bad ones not answered 4xx, resident memory "
              f"{r['minutes'][0]['rss_mb']:.1f} MB after the first minute, growth after it "
              f"{100 * r['rss_growth_after_warmup']:.1f} %, exit status {r['exit_status']} "
              f"({result['cpu']}, {result['cores']} cores, commit {commit})")
        ok = r["good_failed"] == 0 and r["bad_not_4xx"] == 0 and r["rss_growth_after_warmup"] < 0.05
    else:
        rows, overhead = load_table(args, cks)
        result.update(rows=rows, http_overhead=overhead)
        print(f"{result['cpu']}, {result['cores']} cores, commit {commit}; wrk on the same cores; "
              f"one image per request, KServe v2 with a binary tensor; {args.seconds} s per point\n")
        print("| model | server | concurrency | requests/s | p50 ms | p99 ms | average batch |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['model']} | {r['config']} | {r['concurrency']} | {r['requests_per_s']:.0f} | "
                  f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['avg_batch']:.2f} |")
        print("\n| model | in-process batch-1 (gmlp bench) ms | HTTP p50 at concurrency 1 ms | HTTP overhead ms |")
        print("|---|---|---|---|")
        for model, o in overhead.items():
            print(f"| {model} | {o['in_process_batch1_ms']:.3f} | {o['http_p50_ms']:.3f} | {o['overhead_ms']:.3f} |")
        ok = all(r["failed"] == 0 for r in rows)
    with open(os.path.join(args.out, "serve_load.json"), "w") as f:
        json.dump(result, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
