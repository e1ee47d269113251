#!/usr/bin/env bash
# Run folders end to end (src/train/run_dir.h), on 200 Fashion-MNIST images and Genesis 1-5:
#   - a kill -9 at every step of the save sequence (GMLP_TEST_CRASH_AT), for train with --ema
#     (a second epoch's save) and for pretrain (a first epoch's): what the folder holds then,
#     resumed (or, before the first epoch, started again), ends with the checkpoint and state of
#     an uninterrupted run, byte for byte;
#   - a second process in a running folder gets one line naming it and the holder's pid;
#   - a new run into a folder that holds one is refused before any data is read, --overwrite
#     replaces it; compare continues its own runs and refuses one of other settings;
#   - --resume with an option it does not take is a usage error naming the option;
#   - stale temporaries are removed when a run starts;
#   - SIGINT and SIGTERM stop a run with exit 130 / 143 and the command that continues it,
#     which ends where an uninterrupted run does.
#   tests/run_folder_test.sh path/to/gmlp workdir
set -uo pipefail
GMLP=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
# The many short runs go to a tmpfs folder where there is one, where fsync costs nothing: neither
# a kill -9 nor a signal tests it (the page cache outlives the process).
CRASH=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "$WORK")/gmlp_run_folder.XXXXXX")
trap 'rm -rf "$CRASH"' EXIT
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

# expect_error NAME STATUS PATTERN -- command...: the command exits with STATUS and its stderr
# matches PATTERN, on one line when STATUS is 1.
expect_error() {
  local name=$1 status=$2 pattern=$3
  shift 4
  "$@" >"$WORK/out" 2>"$WORK/err"
  local got=$?
  if [ "$got" -ne "$status" ]; then
    bad "$name: exit $got, expected $status ($(head -c 300 "$WORK/err"))"
  elif [ "$status" -eq 1 ] && [ "$(wc -l <"$WORK/err")" -ne 1 ]; then
    bad "$name: expected a one-line error, got: $(head -c 300 "$WORK/err")"
  elif ! grep -qE -- "$pattern" "$WORK/err"; then
    bad "$name: stderr does not match '$pattern': $(head -c 300 "$WORK/err")"
  else
    ok "$name"
  fi
}


# Leftovers of an interrupted save: temporaries and staged files.
leftovers() { find "$1" -name '*.tmp.*' -o -name '*.epoch-*' | head -3; }

# 200 training and 100 test images of Fashion-MNIST as raw IDX files: a run starts in a blink.
fmnist_subset "$WORK/data" 200 100
bible -f Gen1:1-Gen5:32 | cut -d' ' -f2- >"$WORK/corpus.txt"
itrain() { "$GMLP" train --preset fmnist-ti --set depth=1 --set dim=32 --set ffn=128 --data-dir "$WORK/data" --batch-size 50 --seed 5 --threads 1 "$@"; }
ptrain() { "$GMLP" pretrain --preset kjv-gmlp --set depth=1 --set dim=16 --set ffn=32 --set seq_len=16 --vocab-size 200 \
         --corpus "$WORK/corpus.txt" --batch-size 16 --train-limit 64 --eval-limit 16 --seed 3 --threads 1 "$@"; }
itrain --ema 0.9 --epochs 2 --out "$WORK/tr_ref" >/dev/null 2>"$WORK/ref.log" || bad "train reference run: $(tail -2 "$WORK/ref.log")"
ptrain --epochs 1 --out "$WORK/lm_ref" >/dev/null 2>"$WORK/ref.log" || bad "pretrain reference run: $(tail -2 "$WORK/ref.log")"

# --- a kill -9 at every step of a save -------------------------------------------------------------
# crash_every_step NAME REFERENCE FILES SETUP RUN RECOVER: for N = 1, 2, ... makes the folder
# $dir ready (SETUP), then RUNs in it with GMLP_TEST_CRASH_AT=N, until RUN ends without being
# killed. After each kill, RECOVER (what the folder calls for) must end the run with FILES equal to
# REFERENCE's and leave no temporary or staged file.
crash_every_step() {
  local name=$1 ref=$2 files=$3 setup=$4 run=$5 recover=$6 n=1 status problems=""
  while [ $n -lt 100 ]; do
    dir="$CRASH/$name$n"
    $setup
    export GMLP_TEST_CRASH_AT=$n
    $run >/dev/null 2>"$CRASH/log"
    status=$?
    unset GMLP_TEST_CRASH_AT
    [ $status -eq 0 ] && break
    if [ $status -ne 137 ]; then problems+=" step $n: exit $status ($(tail -1 "$CRASH/log"));"; break; fi
    $recover >/dev/null 2>"$CRASH/log" || problems+=" step $n: the run after the kill failed ($(tail -1 "$CRASH/log"));"
    # shellcheck disable=SC2086
    same_files "$ref" "$dir" $files || problems+=" step $n: the files differ from the uninterrupted run's;"
    [ -z "$(leftovers "$dir")" ] || problems+=" step $n: leftovers $(leftovers "$dir");"
    rm -rf "$dir"
    n=$((n + 1))
  done
  # shellcheck disable=SC2086
  same_files "$ref" "$dir" $files || problems+=" the unharmed run differs;"
  if [ -z "$problems" ] && [ $((n - 1)) -eq "$STEPS" ]; then
    ok "$name: a kill at each of the $STEPS steps of a save, then what the folder calls for, ends byte for byte as an uninterrupted run"
  else
    bad "$name: $((n - 1)) steps (expected $STEPS):$problems"
  fi
}
# train --ema, its second epoch's save (the first in place), each kill followed by the --resume
# that continues the run. Per file (state, checkpoint, moving average, metrics): write, fsync,
# rename, folder fsync; then the manifest's four steps, four renames and a folder fsync.
itrain --ema 0.9 --epochs 1 --out "$WORK/tr_e1" >/dev/null 2>>"$WORK/ref.log"
tr_setup() { cp -r "$WORK/tr_e1" "$dir"; }
tr_run() { "$GMLP" train --resume "$dir" --epochs 2 --threads 1; }
STEPS=25 crash_every_step train "$WORK/tr_ref" "checkpoint.safetensors checkpoint_ema.safetensors train_state.safetensors" \
  tr_setup tr_run tr_run
# pretrain, its first epoch's save: a kill before the manifest is in place leaves no run, and the
# same command starts again; after it, --resume finishes the save. Three files: 20 steps.
lm_setup() { :; }
lm_run() { ptrain --epochs 1 --out "$dir"; }
lm_recover() { if [ -f "$dir/run.json" ]; then "$GMLP" pretrain --resume "$dir" --threads 1; else lm_run; fi; }
STEPS=20 crash_every_step pretrain "$WORK/lm_ref" "checkpoint.safetensors train_state.safetensors" lm_setup lm_run lm_recover

# --- a new run into a folder that holds one; --overwrite ----------------------------------------
cp -r "$WORK/tr_ref" "$WORK/held"
expect_error "train into a folder that holds a run is refused" 1 \
  "^gmlp: error: '$WORK/held' holds a gmlp train run of 2 epochs: continue it with gmlp train --resume $WORK/held, or start a new run over it with --overwrite$" -- \
  itrain --epochs 1 --out "$WORK/held"
# Before any data is read: a folder of no data does not get to say so.
expect_error "the refusal comes before the data is read" 1 "holds a gmlp train run" -- \
  "$GMLP" train --data-dir "$WORK/nowhere" --out "$WORK/held"
same_files "$WORK/tr_ref" "$WORK/held" checkpoint.safetensors train_state.safetensors metrics.jsonl &&
  ok "a refused run leaves the folder as it was" || bad "a refused run changed the folder"
expect_error "pretrain into a train run's folder is refused" 1 "'$WORK/held' holds a gmlp train run of 2 epochs" -- \
  ptrain --out "$WORK/held"
expect_error "pretrain into a folder that holds a run is refused" 1 \
  "'$WORK/lm_ref' holds a gmlp pretrain run of 1 epoch: continue it with gmlp pretrain --resume" -- ptrain --out "$WORK/lm_ref"
expect_error "finetune into a folder that holds a run is refused" 1 "'$WORK/lm_ref' holds a gmlp pretrain run of 1 epoch:" -- \
  "$GMLP" finetune --init "$WORK/lm_ref/checkpoint.safetensors" --task ot-nt --out "$WORK/lm_ref"
if itrain --epochs 1 --overwrite --out "$WORK/held" >/dev/null 2>"$WORK/over.log" &&
   [ "$(wc -l <"$WORK/held/metrics.jsonl")" -eq 1 ] && [ ! -e "$WORK/held/checkpoint_ema.safetensors" ] &&
   grep -q '"epoch":1,' "$WORK/held/run.json"
then ok "--overwrite starts a new run over the old one (its moving average gone too)"
else bad "--overwrite: $(tail -2 "$WORK/over.log")"; fi

# --- compare: the same command continues its runs; other settings are refused -----------------
cmp_run() { "$GMLP" compare fmnist-ti --set depth=1 --data-dir "$WORK/data" --batch-size 50 --threads 1 --out "$WORK/cmp" "$@"; }
if cmp_run --epochs 1 >/dev/null 2>"$WORK/cmp.log" && touch "$WORK/cmp/compare.md.tmp.777" &&
   cmp_run --epochs 1 >/dev/null 2>>"$WORK/cmp.log" && [ ! -e "$WORK/cmp/compare.md.tmp.777" ] &&
   [ "$(wc -l <"$WORK/cmp/fmnist-ti/metrics.jsonl")" -eq 1 ] &&
   cmp_run --epochs 2 >/dev/null 2>>"$WORK/cmp.log" && [ "$(wc -l <"$WORK/cmp/fmnist-ti/metrics.jsonl")" -eq 2 ]
then ok "compare run again continues its runs (--epochs extends them) and removes its stale temporaries"
else bad "compare run again: $(tail -2 "$WORK/cmp.log")"; fi
expect_error "compare refuses a run of other settings" 1 \
  "'$WORK/cmp/fmnist-ti' holds a run of 2 epochs with lr 0.002, not 0.01: give compare that run's options to continue it, or --overwrite" -- \
  cmp_run --epochs 2 --lr 0.01
expect_error "compare refuses a run of another model config" 1 "holds a run of 2 epochs with dim 64, not 32" -- \
  cmp_run --epochs 2 --set dim=32
if cmp_run --epochs 1 --lr 0.01 --overwrite >/dev/null 2>>"$WORK/cmp.log" &&
   [ "$(wc -l <"$WORK/cmp/fmnist-ti/metrics.jsonl")" -eq 1 ] && python3 -c '
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    assert json.loads(f.metadata()["options"])["lr"] == 0.01' "$WORK/cmp/fmnist-ti/train_state.safetensors"
then ok "compare --overwrite trains its models again"; else bad "compare --overwrite: $(tail -2 "$WORK/cmp.log")"; fi

# --- --resume keeps the run's options: others are usage errors naming them -----------------------
expect_error "train --resume with --lr" 2 "^--lr: cannot be given with --resume, which continues the run with its own options \(with it, only --epochs, --threads, --bucket-mb and --config apply\)" -- \
  "$GMLP" train --resume "$WORK/tr_ref" --lr 0.1
expect_error "train --resume with --data-dir" 2 "^--data-dir: cannot be given with --resume" -- \
  "$GMLP" train --resume "$WORK/tr_ref" --data-dir "$WORK/data"
expect_error "train --resume with --preset" 2 "^--preset: cannot be given with --resume" -- \
  "$GMLP" train --resume "$WORK/tr_ref" --preset fmnist-s
echo '{"batch-size": 10}' >"$WORK/batch.json"
expect_error "train --resume with --batch-size from --config" 2 "^--batch-size: cannot be given with --resume" -- \
  "$GMLP" train --resume "$WORK/tr_ref" --config "$WORK/batch.json"
expect_error "train --resume with --overwrite" 2 "^--overwrite: cannot be given with --resume" -- \
  "$GMLP" train --resume "$WORK/tr_ref" --overwrite
expect_error "pretrain --resume with --corpus" 2 "^--corpus: cannot be given with --resume" -- \
  "$GMLP" pretrain --resume "$WORK/lm_ref" --corpus "$WORK/corpus.txt"
expect_error "finetune --resume with --task" 2 "^--task: cannot be given with --resume" -- \
  "$GMLP" finetune --resume "$WORK/lm_ref" --task genre
expect_error "resume of a folder without a run" 1 "failed to resume: '$WORK/data' holds no finished epoch" -- \
  "$GMLP" train --resume "$WORK/data"

# --- stale temporaries go when a run starts in the folder ---------------------------------------
cp -r "$WORK/tr_ref" "$WORK/stale"
touch "$WORK/stale/checkpoint.safetensors.tmp.4242" "$WORK/stale/metrics.jsonl.epoch-3" "$WORK/stale/notes.txt"
if "$GMLP" train --resume "$WORK/stale" --threads 1 >/dev/null 2>"$WORK/stale.log" && [ -z "$(leftovers "$WORK/stale")" ] &&
   [ -e "$WORK/stale/notes.txt" ] && same_files "$WORK/tr_ref" "$WORK/stale" checkpoint.safetensors train_state.safetensors
then ok "stale temporaries are removed when a run starts; other files stay"
else bad "stale temporaries: $(ls "$WORK/stale") $(tail -1 "$WORK/stale.log")"; fi
if [ "$(id -u)" -ne 0 ]; then  # root writes anywhere
  mkdir -p "$WORK/readonly" && chmod 555 "$WORK/readonly"
  expect_error "a folder that cannot be written" 1 "failed to use folder '$WORK/readonly': cannot create" -- itrain --out "$WORK/readonly"
  chmod 755 "$WORK/readonly"
fi

# --- the lock, SIGINT and SIGTERM ------------------------------------------------------------------
# long_run NAME RUNNER ARGS...: starts the run in the background (job control on, so that SIGINT
# is not ignored in it) and returns once its first epoch is saved, with the gmlp process's pid
# (from the folder's lock file) in PID.
long_run() {
  local name=$1 runner=$2 i
  shift 2
  set -m
  "$runner" "$@" --out "$CRASH/$name" >/dev/null 2>"$WORK/$name.log" &
  BG=$!
  set +m
  for i in $(seq 600); do
    [ -f "$CRASH/$name/run.json" ] && PID=$(head -1 "$CRASH/$name/.lock") && [ -n "$PID" ] && return 0
    kill -0 $BG 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# stopped NAME SIGNAL STATUS SUB EPOCHS REFERENCE FILES: signals the run, which must exit with
# STATUS, naming the signal, the epoch saved and the command that continues it; that command must
# end with FILES equal to the REFERENCE run's.
stopped() {
  local name=$1 sig=$2 status=$3 sub=$4 epochs=$5 ref=$6 files=$7 got line cmd
  kill -"$sig" "$PID"
  wait $BG
  got=$?
  line=$(tail -1 "$WORK/$name.log")
  cmd=$(echo "$line" | sed -nE "s/^gmlp: stopped by SIG$sig: epoch [0-9]+ of $epochs is saved in '.*'; continue with: (.*)$/\1/p")
  if [ "$got" -ne "$status" ] || [ "$cmd" != "$GMLP $sub --resume $CRASH/$name --epochs $epochs" ]; then
    bad "$name: exit $got (expected $status), last line: $line"
    return
  fi
  ok "SIG$sig: exit $status, the epoch saved and the command that continues: $cmd"
  # shellcheck disable=SC2086
  if $cmd --threads 1 >/dev/null 2>>"$WORK/$name.log" && same_files "$ref" "$CRASH/$name" $files; then
    ok "SIG$sig: that command ends byte for byte as an uninterrupted run"
  else
    bad "SIG$sig: the continued run differs from an uninterrupted one: $(tail -1 "$WORK/$name.log")"
  fi
}
itrain --epochs 20 --out "$CRASH/tr20" >/dev/null 2>&1
if long_run sigint itrain --epochs 20; then
  expect_error "a second process in a running folder" 1 \
    "^gmlp: error: failed to use folder '$CRASH/sigint': another gmlp process \(pid $PID\) is running in it; wait for it to end, or stop it$" -- \
    "$GMLP" train --resume "$CRASH/sigint"
  expect_error "a new run into a running folder" 1 "another gmlp process \(pid $PID\)" -- itrain --out "$CRASH/sigint"
  stopped sigint INT 130 train 20 "$CRASH/tr20" "checkpoint.safetensors train_state.safetensors"
else
  bad "the run to interrupt did not save its first epoch: $(tail -2 "$WORK/sigint.log")"
  kill -- -$BG 2>/dev/null
fi
# 200 epochs of this pretraining take about a second: long enough to be caught running (20 took
# 0.15 s, in which the run could end between two looks for its lock).
ptrain --epochs 200 --out "$CRASH/lm200" >/dev/null 2>&1
if long_run sigterm ptrain --epochs 200; then
  stopped sigterm TERM 143 pretrain 200 "$CRASH/lm200" "checkpoint.safetensors train_state.safetensors"
else
  bad "the pretraining to stop did not save its first epoch: $(tail -2 "$WORK/sigterm.log")"
  kill -- -$BG 2>/dev/null
fi

finish
