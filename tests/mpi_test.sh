#!/usr/bin/env bash
# Data-parallel training under Open MPI's mpirun, 2 ranks on this machine (train/loop.h,
# dist/communicator.h), on 512 Fashion-MNIST images and 128 sequences of the KJV:
#   - 2 ranks x 1 thread write the checkpoint and state of 1 process x 1 thread with --grad-accum 2,
#     byte for byte, and the same metrics (the evaluation's among them, its batches shared by the
#     ranks): image training with drop path and random erasing, pretraining with the
#     next-sentence objective, finetuning with the masked-token loss beside the task's;
#   - only rank 0 writes: the run folder holds what a single process's holds, nothing more;
#   - a 2-rank run stopped by SIGTERM after an epoch and resumed as 1 process (whose steps keep the
#     run's 2 micro-batches) ends byte for byte as the uninterrupted 2-rank run;
#   - ranks started with different options are refused with one line naming the rank;
#   - a rank killed mid-run ends the job with mpirun's message naming it, never a hang;
#   - gmlp bench under mpirun times the data-parallel step.
#   tests/mpi_test.sh path/to/gmlp workdir
set -uo pipefail
GMLP=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

if ! command -v mpirun >/dev/null; then
  echo "FAIL  mpirun not found: scripts/setup.sh installs Open MPI"
  exit 1
fi
if ! "$GMLP" --version | grep -q "^data-parallel: .*MPI"; then
  echo "FAIL  this gmlp was built without MPI (scripts/setup.sh installs Open MPI; then rebuild)"
  exit 1
fi
# As root Open MPI needs leave to run; in a container its shared-memory transport cannot use
# cross-memory attach. Each rank runs one thread; --bind-to none leaves the threads unpinned.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under make test-sanitize: Open MPI leaks at MPI_Finalize, in plugins it has unloaded by the time
# LeakSanitizer reports (their frames cannot be named, so not suppressed). Memory errors are still
# checked here; gmlp's own leaks are checked by every test that runs without MPI.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi2() { timeout 300 mpirun -np 2 --bind-to none "$@"; }

RUN_FILES="checkpoint.safetensors train_state.safetensors run.json"
# same_metrics A B: the two folders' metrics.jsonl agree in every figure but the timings.
same_metrics() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    timing = lambda k: k.endswith("seconds") or k.endswith("_per_s")
    return [{k: v for k, v in json.loads(line).items() if not timing(k)} for line in open(path)]
sys.exit(0 if rows(sys.argv[1]) == rows(sys.argv[2]) else 1)
PY
}

fmnist_subset "$WORK/data" 512 100

# The runs, as argument lists of gmlp: one process runs "$GMLP" "${ITRAIN[@]}", two ranks
# mpirun ... "$GMLP" "${ITRAIN[@]}".
ITRAIN=(train --preset fmnist-ti --set depth=2 --data-dir "$WORK/data" --batch-size 64 --seed 5 --threads 1
        --drop-path 0.1 --random-erase 0.25 --ema 0.9)
PTRAIN=(pretrain --preset kjv-gmlp --set depth=2 --set dim=32 --set ffn=64 --set seq_len=32 --set drop_path=0.1
        --vocab-size 300 --batch-size 16 --train-limit 128 --eval-limit 32 --seed 3 --threads 1)

# --- 2 ranks x 1 thread == 1 process x 1 thread x 2 micro-batches, byte for byte -----------------
# compare NAME FILES ARGS...: gmlp ARGS --grad-accum 2 in one process, and on 2 ranks.
compare() {
  local name=$1 files=$2
  shift 2
  if ! "$GMLP" "$@" --grad-accum 2 --out "$WORK/$name.1" >/dev/null 2>"$WORK/$name.1.log"; then
    bad "$name: the single process failed: $(tail -1 "$WORK/$name.1.log")"
    return
  fi
  if ! mpi2 "$GMLP" "$@" --out "$WORK/$name.2" >/dev/null 2>"$WORK/$name.2.log"; then
    bad "$name: the 2-rank run failed: $(grep -m1 error "$WORK/$name.2.log")"
    return
  fi
  if ! grep -q "Open MPI .*2 ranks" "$WORK/$name.2.log"; then
    bad "$name: the 2-rank run's opening line does not name the job: $(head -1 "$WORK/$name.2.log")"
  elif same_files "$WORK/$name.1" "$WORK/$name.2" $files && same_metrics "$WORK/$name.1" "$WORK/$name.2"; then
    ok "$name: 2 ranks x 1 thread write the files of 1 process with --grad-accum 2, byte for byte ($files; metrics.jsonl but its timings)"
  else
    bad "$name: 2 ranks and 1 process with --grad-accum 2 differ"
  fi
  # Only rank 0 writes: nothing in the folder that a single process would not have written.
  local extra
  extra=$(diff <(cd "$WORK/$name.1" && find . | sort) <(cd "$WORK/$name.2" && find . | sort))
  if [ -z "$extra" ]; then ok "$name: the 2-rank run folder holds exactly the single process's files"
  else bad "$name: the run folders differ in their files: $extra"; fi
}
compare train "$RUN_FILES checkpoint_ema.safetensors" "${ITRAIN[@]}" --epochs 2
# The next-sentence objective needs the KJV's chapters: the whole Bible, 128 of its sequences.
compare pretrain "$RUN_FILES" "${PTRAIN[@]}" --epochs 2 --nsp
if [ -f "$WORK/pretrain.1/checkpoint.safetensors" ]; then
  compare finetune "$RUN_FILES" finetune --init "$WORK/pretrain.1/checkpoint.safetensors" --task ot-nt \
    --train-limit 128 --eval-limit 32 --batch-size 16 --epochs 2 --mlm-weight 0.5 --drop-path 0.1 --layer-decay 0.8 \
    --seed 2 --threads 1
fi

# --- an image folder, read on demand: each rank decodes only its own images ---------------------
fmnist_folder "$WORK/folder" 192 32
FTRAIN=(train --preset fmnist-ti --set depth=2 --data-dir "$WORK/folder" --batch-size 32 --seed 5 --threads 1
        --random-erase 0.25)
compare folder "$RUN_FILES" "${FTRAIN[@]}" --epochs 2
# The test split's last image cannot be decoded. It lies in the second of the two evaluation
# batches of 16, which is rank 1's: rank 1 alone reads it, and fails naming it; rank 0 never
# decodes it (read at load, both ranks would have failed before training).
last=$(find "$WORK/folder/test" -name '*.png' | LC_ALL=C sort | tail -1)
printf 'not a png' >"$last"
out=$(mpi2 "$GMLP" "${FTRAIN[@]}" --epochs 1 --out "$WORK/folder_bad" 2>&1 >/dev/null)
if echo "$out" | grep -q "^gmlp: error: rank 1 of 2: failed to load image '$last'" &&
   ! echo "$out" | grep -q "rank 0 of 2"; then
  ok "an image folder under 2 ranks: each rank decodes only its own images (rank 1's bad test image fails rank 1 alone)"
else
  bad "an undecodable image of rank 1's evaluation batch: $(echo "$out" | grep -m2 -E 'error|epoch')"
fi

# --- stopped at 2 ranks, resumed as 1 process ---------------------------------------------------
EPOCHS=40
mpi2 "$GMLP" "${ITRAIN[@]}" --epochs $EPOCHS --out "$WORK/uninterrupted" >/dev/null 2>"$WORK/uninterrupted.log" ||
  bad "the uninterrupted 2-rank run failed: $(grep -m1 error "$WORK/uninterrupted.log")"
# mpirun itself gets the signal (no `timeout` around it, which would signal the ranks as well) and
# passes it on to every rank.
set -m
mpirun -np 2 --bind-to none "$GMLP" "${ITRAIN[@]}" --epochs $EPOCHS --out "$WORK/stopped" >/dev/null 2>"$WORK/stopped.log" &
BG=$!
set +m
for _ in $(seq 600); do
  [ -f "$WORK/stopped/run.json" ] && break
  kill -0 $BG 2>/dev/null || break
  sleep 0.05
done
kill -TERM $BG 2>/dev/null
wait $BG
line=$(grep "stopped by SIGTERM" "$WORK/stopped.log")
saved=$(echo "$line" | sed -nE "s/^gmlp: stopped by SIGTERM: epoch ([0-9]+) of $EPOCHS is saved in .*/\1/p")
if [ -z "$saved" ] || [ "$saved" -ge $EPOCHS ]; then
  bad "SIGTERM to mpirun: expected rank 0's line naming the epoch saved, got: $(tail -2 "$WORK/stopped.log")"
elif [ "$(grep -c 'stopped by' "$WORK/stopped.log")" -ne 1 ]; then
  bad "SIGTERM to mpirun: expected one line from rank 0 alone, got: $(grep 'stopped by' "$WORK/stopped.log")"
else
  ok "SIGTERM to mpirun: every rank stops after the same step, rank 0 says epoch $saved of $EPOCHS is saved"
  if "$GMLP" train --resume "$WORK/stopped" --threads 1 >/dev/null 2>"$WORK/resumed.log" &&
     grep -q "resuming .*(2 micro-batches of 32)" "$WORK/resumed.log" &&
     same_files "$WORK/uninterrupted" "$WORK/stopped" $RUN_FILES checkpoint_ema.safetensors; then
    ok "stopped at 2 ranks after epoch $saved, resumed as 1 process with the run's 2 micro-batches: byte for byte the uninterrupted 2-rank run"
  else
    bad "resumed as 1 process, the run differs from the uninterrupted 2-rank run: $(tail -1 "$WORK/resumed.log")"
  fi
fi
# A run of 2 micro-batches cannot go on with 3 ranks; a new one on 2 ranks cannot have 3. Every
# rank finds the same fault, and whichever reaches MPI_Abort first speaks for the job.
out=$(timeout 60 mpirun -np 3 --oversubscribe --bind-to none "$GMLP" train --resume "$WORK/uninterrupted" \
  --epochs $((EPOCHS + 1)) --threads 1 2>&1 >/dev/null)
if echo "$out" | grep -qE "^gmlp: error: rank [0-2] of 3: failed to resume on 3 ranks: the run's steps have 2 micro-batches"; then
  ok "resuming a run of 2 micro-batches on 3 ranks: one line saying why"
else
  bad "resuming on 3 ranks: $(echo "$out" | head -3)"
fi
out=$(mpi2 "$GMLP" train --preset fmnist-ti --data-dir "$WORK/data" --grad-accum 3 --batch-size 48 --out "$WORK/x" 2>&1)
if echo "$out" | grep -qE "^gmlp: error: rank [01] of 2: invalid --grad-accum 3: expected a multiple of the 2 ranks"; then
  ok "--grad-accum 3 on 2 ranks: one line saying why"
else
  bad "--grad-accum 3 on 2 ranks: $(echo "$out" | head -3)"
fi

# --- ranks of different jobs, a killed rank ------------------------------------------------------
out=$(timeout 60 mpirun -np 1 --bind-to none "$GMLP" train --preset fmnist-ti --data-dir "$WORK/data" --lr 1e-3 --out "$WORK/mixed" : \
  -np 1 --bind-to none "$GMLP" train --preset fmnist-ti --data-dir "$WORK/data" --lr 2e-3 --out "$WORK/mixed" 2>&1)
status=$?
if [ $status -ne 0 ] && [ $status -ne 124 ] &&
   echo "$out" | grep -qE "^gmlp: error: rank 1 of 2: this rank runs another job than rank 0: its option lr is 0.002, rank 0's 0.001"; then
  ok "ranks started with different options: the job ends with one line naming the rank and the option"
else
  bad "ranks with different options: exit $status, $(echo "$out" | head -3)"
fi

set -m
mpi2 "$GMLP" "${ITRAIN[@]}" --epochs 200 --out "$WORK/killed" >/dev/null 2>"$WORK/killed.log" &
BG=$!
set +m
for _ in $(seq 600); do
  [ -f "$WORK/killed/run.json" ] && break
  sleep 0.05
done
victim=""
for p in $(pgrep -f -- "--out $WORK/killed"); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
done
if [ -z "$victim" ]; then
  bad "a killed rank: could not find rank 1 of the running job"
  kill -9 $BG 2>/dev/null
else
  start=$SECONDS
  kill -9 "$victim"
  wait $BG
  status=$?
  if [ $status -ne 0 ] && [ $((SECONDS - start)) -le 30 ] &&
     grep -q "process rank 1 .*exited on signal 9" "$WORK/killed.log"; then
    ok "rank 1 killed mid-run: the job ends in $((SECONDS - start)) s (exit $status), mpirun names rank 1"
  else
    bad "rank 1 killed mid-run: exit $status after $((SECONDS - start)) s: $(tail -3 "$WORK/killed.log")"
  fi
fi

# --- gmlp bench under mpirun ----------------------------------------------------------------------
out=$(mpi2 "$GMLP" bench --preset fmnist-ti --batch-size 32 --threads 1 --warmup 1 --reps 2 --json 2>&1)
if echo "$out" | python3 -c "import json,sys; j=json.loads(sys.stdin.read()); assert j['ranks'] == 2 and j['train_images_per_s'] > 0" 2>/dev/null; then
  ok "gmlp bench under mpirun: one JSON object, from rank 0, of the 2-rank step"
else
  bad "gmlp bench under mpirun: $(echo "$out" | head -3)"
fi

finish
