#!/usr/bin/env python3
"""Data-parallel training across two hosts, simulated on this machine: two network namespaces
joined by a veth pair whose both ends are rate-limited with tc (traffic stays inside the machine).

    sudo bench/netns_scaling.py --gmlp build/gmlp --rates 1gbit 10gbit --repeats 3

For each rate and each model (gMLP-Ti/16: 23 MB of gradients, gMLP-S/16: 78 MB), `gmlp bench`
runs one rank in each namespace (Open MPI over TCP only: --mca btl tcp,self, so no shared memory
between the "hosts"), 1 thread a rank, --batch-size 2 x --per-rank, with the gradient sum
overlapping backward (--bucket-mb 1, the default) and without (--bucket-mb 0: one sum after backward), the two
interleaved round by round. Reported per configuration, medians over the rounds: the step time,
the time a step waits for the sum after backward (`gmlp bench --profile`'s "gradient sum": the part
of the sum that backward did not hide), the share of the sum the overlap hid (1 - waited overlapping
/ waited after backward), and beside them the time a ring allreduce of the gradients needs at that
rate, 2(N-1)/N x bytes / rate (for N = 2: the gradients' bytes once each way).

mpirun starts the remote rank through a launcher script that enters the other namespace
(plm_rsh_agent), as it would through ssh. Needs root (ip netns, tc) and Open MPI. The namespaces
are removed at the end, also on error.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NS = ("gmlp-a", "gmlp-b")
ADDR = ("10.77.0.1", "10.77.0.2")
DEV = ("veth-gmlp-a", "veth-gmlp-b")
MODELS = {"gmlp-ti16": "gMLP-Ti/16", "gmlp-s16": "gMLP-S/16"}


def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-800:]}")
    return r.stdout


def teardown():
    for ns in NS:
        sh("ip", "netns", "del", ns, check=False)


def setup(rate):
    teardown()
    for ns in NS:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", DEV[0], "netns", NS[0], "type", "veth", "peer", "name", DEV[1], "netns", NS[1])
    bits = parse_rate(rate)
    # tbf: the rate, a bucket of at least one jumbo burst, and enough queue for TCP's window.
    burst = max(64 * 1024, int(bits / 8 / 250))
    for ns, dev, addr in zip(NS, DEV, ADDR):
        sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
           "burst", str(burst), "latency", "50ms")


def parse_rate(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    if not m:
        sys.exit(f"netns_scaling.py: --rates takes tc rates such as 1gbit, found '{rate}'")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def step(args, agent, preset, bucket_mb):
    """One 2-rank `gmlp bench --profile` across the namespaces: (images/s, ms waiting for the sum)."""
    cmd = ["ip", "netns", "exec", NS[0], "mpirun", "-np", "2", "--host", f"{ADDR[0]},{ADDR[1]}",
           "--map-by", "node", "--bind-to", "none",
           "--mca", "plm_rsh_agent", agent, "--mca", "btl", "tcp,self",
           "--mca", "btl_tcp_if_include", "10.77.0.0/24", "--mca", "oob_tcp_if_include", "10.77.0.0/24",
           "-x", "OMP_NUM_THREADS=1",
           args.gmlp, "bench", "--preset", preset, "--batch-size", str(2 * args.per_rank), "--threads", "1",
           "--warmup", "1", "--reps", str(args.reps), "--bucket-mb", str(bucket_mb), "--profile"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {(r.stderr or r.stdout).strip()[-1200:]}")
    ips = float(re.search(r"^train step\s+([\d.]+) images/s", r.stdout, re.M).group(1))
    prof = r.stdout.split("per-op profile of a training step", 1)[1].split("per-op profile of", 1)[0]
    waited = re.search(r"^\s+gradient sum\s+([\d.]+) ms", prof, re.M)
    return ips, float(waited.group(1)) if waited else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gmlp", default=os.path.join(HERE, "..", "build", "gmlp"))
    ap.add_argument("--rates", nargs="+", default=["1gbit", "10gbit"])
    ap.add_argument("--presets", nargs="+", default=list(MODELS))
    ap.add_argument("--per-rank", type=int, default=2, help="images per rank in a step")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=1, help="the chunks of the overlapping sums")
    ap.add_argument("--reps", type=int, default=3, help="gmlp bench's timed repetitions")
    ap.add_argument("--out", default="runs/netns_scaling")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netns_scaling.py: needs root (ip netns, tc)")
    args.gmlp = os.path.abspath(args.gmlp)
    os.makedirs(args.out, exist_ok=True)

    params = {}
    for p in args.presets:
        params[p] = int(re.search(r"(\d+) params", sh(args.gmlp, "bench", "--preset", p, "--batch-size", "1",
                                                       "--reps", "1", "--warmup", "0")).group(1))
    with tempfile.NamedTemporaryFile("w", suffix="-netns-rsh", delete=False) as f:
        # mpirun's "ssh": run the command in the namespace that owns the host's address.
        f.write("#!/bin/sh\nhost=$1\nshift\ncase $host in\n"
                f"  {ADDR[0]}) ns={NS[0]} ;;\n  {ADDR[1]}) ns={NS[1]} ;;\n"
                "  *) echo \"netns-rsh: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                "exec ip netns exec $ns sh -c \"$*\"\n")
        agent = f.name
    os.chmod(agent, 0o755)
    rows = []
    try:
        for rate in args.rates:
            setup(rate)
            for p in args.presets:
                got = {args.bucket_mb: [], 0: []}
                for r in range(args.repeats):
                    for bucket in (args.bucket_mb, 0):
                        got[bucket].append(step(args, agent, p, bucket))
                        print(f"{rate} {p} bucket {bucket} MB round {r + 1}: {got[bucket][-1]}", file=sys.stderr,
                              flush=True)
                med = {b: (statistics.median(x[0] for x in got[b]), statistics.median(x[1] for x in got[b]))
                       for b in got}
                over = med[args.bucket_mb]
                rows.append({"rate": rate, "preset": p, "params": params[p],
                             "ring_ms": 1e3 * params[p] * 4 * 8 / parse_rate(rate),  # 2(N-1)/N = 1 for N = 2
                             "step_ms_after": 1e3 * 2 * args.per_rank / med[0][0], "wait_ms_after": med[0][1],
                             "step_ms_overlap": 1e3 * 2 * args.per_rank / over[0], "wait_ms_overlap": over[1],
                             "runs_after": got[0], "runs_overlap": got[args.bucket_mb]})
    finally:
        teardown()
        os.unlink(agent)
    commit = sh("git", "-C", HERE, "rev-parse", "--short", "HEAD", check=False).strip()
    print(f"2 ranks in 2 network namespaces joined by a rate-limited veth pair, 1 thread a rank, "
          f"{args.per_rank} images a rank, medians of {args.repeats} interleaved rounds (commit {commit})\n")
    print("| rate | model | gradients | ring allreduce at the rate | sum after backward: step / waited |"
          " overlapping backward: step / waited | hidden |\n|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        hidden = 1 - row["wait_ms_overlap"] / row["wait_ms_after"] if row["wait_ms_after"] > 0 else 0.0
        print(f"| {row['rate']} | {MODELS.get(row['preset'], row['preset'])} | {row['params'] * 4 / 1e6:.0f} MB | "
              f"{row['ring_ms']:.0f} ms | {row['step_ms_after']:.0f} / {row['wait_ms_after']:.0f} ms | "
              f"{row['step_ms_overlap']:.0f} / {row['wait_ms_overlap']:.0f} ms | {100 * hidden:.0f} % |")
    with open(os.path.join(args.out, "netns_scaling.json"), "w") as f:
        json.dump({"commit": commit, "per_rank": args.per_rank, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
