#!/usr/bin/env bash
# The long runs behind the README's result tables, in order of priority. Every run resumes
# where it stopped, so running this script again continues the work. Runs go to runs/; on this
# machine's two cores the whole list takes many hours. The comparison budgets (3 epochs per
# model) are what one 3-hour session of two shared cores affords for all eight models and the
# ablation: about 1.5 hours.
#
#   scripts/experiments.sh            # after `make build` (or `make demo`)
set -euo pipefail
cd "$(dirname "$0")/.."
G=build/gmlp
# Sleeping at OpenMP barriers costs nothing alone and avoids starvation when something else runs.
export OMP_WAIT_POLICY=PASSIVE

# run SUBCOMMAND DIR EPOCHS ARGS...: start the run in DIR, or resume it (a finished run is a no-op).
run() {
  local sub=$1 dir=$2 epochs=$3
  shift 3
  if [ -f "$dir/train_state.safetensors" ]; then
    "$G" "$sub" --resume "$dir" --epochs "$epochs"
  else
    "$G" "$sub" --out "$dir" --epochs "$epochs" "$@"
  fi
}

# 1. Issue 4: every vision model under one budget, then the pictures of the gMLP.
"$G" compare fmnist-gmlp fmnist-amlp fmnist-vit fmnist-mixer fmnist-resmlp fmnist-ffonly \
  fmnist-eamlp fmnist-cnn --epochs 3 --random-erase 0.25 --out runs/compare
"$G" viz --checkpoint runs/compare/fmnist-gmlp/checkpoint.safetensors \
  --metrics runs/compare/fmnist-gmlp/metrics.jsonl --out runs/compare/viz-gmlp

# 2. Issue 4: the gating ablation (split is fmnist-gmlp in runs/compare).
"$G" compare fmnist-gmlp:gate=multiplicative fmnist-gmlp:gate=additive fmnist-gmlp:gate=linear \
  --epochs 3 --random-erase 0.25 --out runs/ablation

# 3. Issue 4: the best gMLP, trained longer (the >= 94 % target).
run train runs/gmlp60 60 --preset fmnist-gmlp --random-erase 0.25 --drop-path 0.1

# 4. Issue 5: pretraining, then finetuning on the three KJV tasks.
for p in kjv-gmlp kjv-amlp kjv-bert kjv-bert-rel; do
  run pretrain "runs/lm/$p" 10 --preset "$p"
done
for p in kjv-gmlp kjv-amlp kjv-bert kjv-bert-rel; do
  for t in ot-nt genre next-verse; do
    run finetune "runs/lm/$p-$t" 3 --init "runs/lm/$p/checkpoint.safetensors" --task "$t"
  done
done

# 5. Issue 5: the gating ablation by perplexity (split is kjv-gmlp above).
for g in multiplicative additive linear; do
  run pretrain "runs/lm/kjv-gmlp-$g" 10 --preset kjv-gmlp --set "gate=$g"
done
