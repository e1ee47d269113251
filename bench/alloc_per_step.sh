#!/usr/bin/env bash
# Heap allocations per training step, counted from outside the process (bench/alloc_counter.c,
# preloaded): each preset trains one epoch of 4 steps and one of 20 (--train-limit 256 and 1280,
# --batch-size 64), and the difference over 16 is what one more step allocates. Start-up, data
# loading, evaluation and saving are the same in both runs and cancel.
#
#   bench/alloc_per_step.sh [--gmlp build/gmlp] [--threads 2] [PRESET ...]   (default: every fmnist-* preset, one per image model kind)
set -euo pipefail
gmlp=build/gmlp
threads=2
presets=()
while (($#)); do
  case $1 in
    --gmlp) gmlp=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "alloc_per_step.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) presets+=("$1"); shift ;;
  esac
done
[[ -x $gmlp ]] || { echo "alloc_per_step.sh: '$gmlp' is not an executable (build first: make build)" >&2; exit 2; }
if ((${#presets[@]} == 0)); then
  mapfile -t presets < <("$gmlp" info --list 2>/dev/null | awk '/^fmnist-/ {print $1}')
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -shared -fPIC "$(dirname "$0")/alloc_counter.c" -o "$work/alloc_counter.so"

count() {  # preset, images → allocations of the whole run
  LD_PRELOAD=$work/alloc_counter.so "$gmlp" train --preset "$1" --train-limit "$2" --epochs 1 --batch-size 64 \
    --threads "$threads" --eval-limit 256 --out "$work/run-$1-$2" 2>&1 >/dev/null |
    awk '/^allocations / {print $2}'
}

printf '%-14s %12s %12s %14s\n' preset "4 steps" "20 steps" "per step"
for p in "${presets[@]}"; do
  a=$(count "$p" 256)
  b=$(count "$p" 1280)
  printf '%-14s %12d %12d %14.1f\n' "$p" "$a" "$b" "$(echo "($b - $a) / 16" | bc -l)"
done
