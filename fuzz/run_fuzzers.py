#!/usr/bin/env python3
"""Runs the libFuzzer harnesses one after another, each for a fixed time over its corpus, and
prints a table: harness, runs, seconds, runs/s, coverage (cov: edges, ft: features), corpus size
and findings.

    fuzz/run_fuzzers.py --build build-fuzz --seconds 60            # every harness (make fuzz)
    fuzz/run_fuzzers.py --build build-fuzz --seconds 5 --only fuzz_image fuzz_idx

Each harness's corpus is <corpus>/<harness> (default <build>/fuzz/corpus), seeded from
<seeds>/<harness> (fuzz/make_corpus.py) and grown by every run; fuzz/dict/<harness>.dict is its
dictionary when there is one. A finding (crash, sanitizer report, leak, timeout, out-of-memory)
stops that harness; its input is saved under <build>/fuzz/findings/<harness>/ and the log under
<build>/fuzz/logs/. Exit status 1 if any harness found something or failed to run, else 0.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def last(pattern, text, default=None, cast=int):
    found = re.findall(pattern, text)
    return cast(found[-1]) if found else default


def sanitizer_env():
    """ASan keeps freed memory in a quarantine to catch use after free, 256 MB by default; with
    the allocator's bookkeeping for SentencePiece's many small allocations that alone took the
    tokenizer harness past 2 GB of RSS on a 221 KB input that needs 84 MB without it. 64 MB of
    quarantine keeps use-after-free detection and judges a harness by its own memory. Options set
    in ASAN_OPTIONS come after these and win."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(o for o in ("quarantine_size_mb=64", env.get("ASAN_OPTIONS", "")) if o)
    return env


def run_one(exe, name, args, logs, findings_dir):
    corpus = os.path.join(args.corpus, name)
    seeds = os.path.join(args.seeds, name)
    findings = os.path.join(findings_dir, name)
    for d in (corpus, findings, logs):
        os.makedirs(d, exist_ok=True)
    before = set(os.listdir(findings))
    cmd = [exe, corpus] + ([seeds] if os.path.isdir(seeds) else []) + [
        f"-max_total_time={args.seconds}", "-print_final_stats=1", f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_limit_mb}", f"-artifact_prefix={findings}/", "-close_fd_mask=1"]
    dictionary = os.path.join(HERE, "dict", name + ".dict")
    if os.path.exists(dictionary):
        cmd.append(f"-dict={dictionary}")
    cmd += args.libfuzzer_args
    log_path = os.path.join(logs, name + ".log")
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        status = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=sanitizer_env()).returncode
    seconds = time.monotonic() - start
    text = open(log_path, errors="replace").read()
    new = sorted(set(os.listdir(findings)) - before)
    return {
        "harness": name,
        "runs": last(r"stat::number_of_executed_units:\s*(\d+)", text, 0),
        "seconds": round(seconds, 1),
        "runs_per_s": last(r"stat::average_exec_per_sec:\s*(\d+)", text, 0),
        "cov": last(r"\bcov: (\d+)", text, 0),
        "ft": last(r"\bft: (\d+)", text, 0),
        "corpus": len(os.listdir(corpus)),
        "findings": [os.path.join(findings, f) for f in new],
        "status": status,
        "log": log_path,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the GMLP_FUZZ build folder (its fuzz/ holds the harnesses)")
    ap.add_argument("--seconds", type=int, default=60, help="per harness (default 60)")
    ap.add_argument("--only", nargs="*", default=None, help="these harnesses (default: all)")
    ap.add_argument("--corpus", help="folder of the growing corpora (default <build>/fuzz/corpus)")
    ap.add_argument("--seeds", help="folder of the seed corpora (default <build>/fuzz/seeds)")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    ap.add_argument("--rss-limit-mb", type=int, default=2048, help="memory one harness may use (default 2048)")
    ap.add_argument("--json", help="also write the table as JSON to this file")
    ap.add_argument("libfuzzer_args", nargs="*", help="after --: more libFuzzer flags")
    args = ap.parse_args()
    fuzz_dir = os.path.join(args.build, "fuzz")
    args.corpus = args.corpus or os.path.join(fuzz_dir, "corpus")
    args.seeds = args.seeds or os.path.join(fuzz_dir, "seeds")
    exes = {os.path.basename(p): p for p in sorted(glob.glob(os.path.join(fuzz_dir, "fuzz_*")))
            if os.access(p, os.X_OK) and os.path.isfile(p)}
    if not exes:
        sys.exit(f"run_fuzzers: no harnesses in {fuzz_dir} (build with GMLP_FUZZ=ON: make fuzz)")
    names = args.only if args.only else list(exes)
    unknown = [n for n in names if n not in exes]
    if unknown:
        sys.exit(f"run_fuzzers: unknown harness {', '.join(unknown)} (built: {', '.join(exes)})")

    rows = []
    print(f"{'harness':<18} {'runs':>11} {'seconds':>8} {'runs/s':>8} {'cov':>6} {'ft':>7} {'corpus':>7}  findings",
          flush=True)
    for name in names:
        r = run_one(exes[name], name, args, os.path.join(fuzz_dir, "logs"), os.path.join(fuzz_dir, "findings"))
        rows.append(r)
        found = len(r["findings"])
        note = str(found) if found else ("0" if r["status"] == 0 else f"0 (exit {r['status']}, see {r['log']})")
        print(f"{name:<18} {r['runs']:>11,} {r['seconds']:>8.1f} {r['runs_per_s']:>8,} {r['cov']:>6} {r['ft']:>7} "
              f"{r['corpus']:>7}  {note}", flush=True)
        for f in r["findings"]:
            print(f"  {f} (reproduce: {exes[name]} {f}; log {r['log']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["findings"] or r["status"] != 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
