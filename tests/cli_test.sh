#!/usr/bin/env bash
# End-to-end checks of the gmlp binary on real Fashion-MNIST: exit codes and one-line errors for
# bad input, a short training run whose loss falls, resume after a stop gives the same weights as
# an uninterrupted run, evaluation on a random subset (--eval-limit), eval/predict/info/bench/viz
# on the result, and the text commands.
#   tests/cli_test.sh path/to/gmlp workdir
set -uo pipefail
GMLP=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

# expect_error NAME STATUS PATTERN -- command...: the command exits with STATUS and its stderr is
# one line matching PATTERN.
expect_error() {
  local name=$1 status=$2 pattern=$3
  shift 4
  "$@" >"$WORK/out" 2>"$WORK/err"
  local got=$?
  local lines
  lines=$(wc -l <"$WORK/err")
  if [ "$got" -ne "$status" ]; then
    bad "$name: exit $got, expected $status ($(head -c 300 "$WORK/err"))"
  elif [ "$status" -eq 1 ] && [ "$lines" -ne 1 ]; then
    bad "$name: expected a one-line error, got $lines lines"
  elif ! grep -qE -- "$pattern" "$WORK/err"; then
    bad "$name: stderr does not match '$pattern': $(head -c 300 "$WORK/err")"
  else
    ok "$name"
  fi
}

# --- bad input ---------------------------------------------------------------------------------
expect_error "unknown subcommand is a usage error" 2 "subcommand" -- "$GMLP" bogus
expect_error "unknown option is a usage error" 2 "--nope" -- "$GMLP" train --nope
expect_error "unknown preset" 1 "unknown preset 'nope'" -- "$GMLP" train --preset nope --out "$WORK/x"
# A preset of the other kind names the command that takes it.
expect_error "train with a text preset" 1 "'kjv-gmlp' is a text preset: pretrain it with gmlp pretrain --preset kjv-gmlp" -- \
  "$GMLP" train --preset kjv-gmlp --out "$WORK/x"
expect_error "compare with a text preset" 1 "'kjv-bert' is a text preset" -- "$GMLP" compare fmnist-ti kjv-bert --out "$WORK/cmpx"
[ ! -e "$WORK/cmpx" ] && ok "a compare that fails to resolve creates no folder" || bad "a failed compare created $WORK/cmpx"
expect_error "pretrain with an image preset" 1 "'fmnist-s' is an image preset: train it with gmlp train --preset fmnist-s" -- \
  "$GMLP" pretrain --preset fmnist-s --out "$WORK/x"
expect_error "missing checkpoint" 1 "$WORK/missing.safetensors" -- "$GMLP" eval --checkpoint "$WORK/missing.safetensors"
printf 'abc' >"$WORK/short.safetensors"
expect_error "truncated checkpoint" 1 "short.safetensors" -- "$GMLP" eval --checkpoint "$WORK/short.safetensors"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2' >"$WORK/badjson.safetensors"
expect_error "malformed checkpoint header" 1 "badjson.safetensors" -- "$GMLP" info --checkpoint "$WORK/badjson.safetensors"
mkdir -p "$WORK/nodata"
expect_error "missing data files" 1 "nodata" -- "$GMLP" train --preset fmnist-ti --data-dir "$WORK/nodata" --out "$WORK/x"
mkdir -p "$WORK/baddata"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  head -c 100 "/usr/share/datasets/fashion-mnist/$f.gz" >"$WORK/baddata/$f.gz"
done
expect_error "truncated data files" 1 "baddata" -- "$GMLP" train --preset fmnist-ti --data-dir "$WORK/baddata" --out "$WORK/x"
expect_error "resume without a run" 1 "does not exist" -- "$GMLP" train --resume "$WORK/norun"
expect_error "unknown --set field" 1 "has no field 'nope'" -- "$GMLP" train --set nope=1 --out "$WORK/x"
expect_error "bad --set value" 1 "invalid model config: gate" -- "$GMLP" train --set gate=sideways --out "$WORK/x"
expect_error "bad --set pooling" 1 "invalid model config: global_pool must be one of token, avg \\(got 'max'\\)" -- \
  "$GMLP" train --preset fmnist-vit --set global_pool=max --out "$WORK/x"
expect_error "token pooling without a class token" 1 "global_pool 'token' needs class_token true" -- \
  "$GMLP" train --preset fmnist-vit --set class_token=false --out "$WORK/x"
expect_error "bad --set boolean" 1 "'class_token' takes true or false \\(got '0'\\)" -- \
  "$GMLP" train --preset fmnist-vit --set class_token=0 --out "$WORK/x"
expect_error "bad --random-erase" 2 "--random-erase: expected a number in \[0, 1\], found '2'" -- \
  "$GMLP" train --random-erase 2 --train-limit 100 --out "$WORK/x"
expect_error "bad --ema" 2 "--ema: expected a number in \[0, 1\), found '1'" -- "$GMLP" train --ema 1 --train-limit 100 --out "$WORK/x"

# --- a short run: the loss falls, and resume equals an uninterrupted run (weights' average too) --
run() { "$GMLP" train --preset fmnist-ti --train-limit 3000 --batch-size 100 --seed 7 --threads 2 --ema 0.9 "$@" 2>>"$WORK/train.log"; }
if run --epochs 3 --out "$WORK/full" >/dev/null; then
  python3 - "$WORK/full/metrics.jsonl" <<'PY' && ok "training loss falls, metrics.jsonl complete" || bad "training loss falls"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "test_acc_ema", "images_per_s",
        "seconds"}
assert len(rows) == 3 and all(keys <= r.keys() for r in rows), rows
assert rows[2]["train_loss"] < rows[0]["train_loss"], [r["train_loss"] for r in rows]
assert rows[2]["test_acc"] > 0.5, rows[2]["test_acc"]  # chance is 0.1
assert rows[2]["test_acc_ema"] > 0.5, rows[2]["test_acc_ema"]
PY
else
  bad "training run failed: $(tail -3 "$WORK/train.log")"
fi
run --epochs 1 --out "$WORK/split" >/dev/null && "$GMLP" train --resume "$WORK/split" --epochs 3 --threads 2 >/dev/null 2>>"$WORK/train.log"
if cmp -s "$WORK/full/checkpoint.safetensors" "$WORK/split/checkpoint.safetensors" &&
   cmp -s "$WORK/full/train_state.safetensors" "$WORK/split/train_state.safetensors" &&
   cmp -s "$WORK/full/checkpoint_ema.safetensors" "$WORK/split/checkpoint_ema.safetensors"; then
  ok "resume after epoch 1 gives the same weights as an uninterrupted run"
else
  bad "resume after epoch 1 differs from an uninterrupted run"
fi
[ "$(wc -l <"$WORK/split/metrics.jsonl")" -eq 3 ] && ok "resumed metrics.jsonl has 3 epochs" || bad "resumed metrics.jsonl"
ls "$WORK/full"/*.tmp* >/dev/null 2>&1 && bad "temporary files left behind" || ok "no temporary files left behind"
# bf16 end to end, emulated where the CPU has no bf16 (GMLP_TEST_BF16_EMULATED): the loss falls,
# and resume equals an uninterrupted run byte for byte.
bf16() { GMLP_TEST_BF16_EMULATED=1 "$GMLP" train --precision bf16 --preset fmnist-ti --train-limit 1000 --eval-limit 200 --batch-size 100 --seed 7 --threads 2 "$@"; }
if bf16 --epochs 2 --out "$WORK/bf16_full" >/dev/null 2>"$WORK/bf16.log" &&
   grep -q "^gmlp: training .*, bf16$" "$WORK/bf16.log" &&
   bf16 --epochs 1 --out "$WORK/bf16_split" >/dev/null 2>>"$WORK/bf16.log" &&
   GMLP_TEST_BF16_EMULATED=1 "$GMLP" train --resume "$WORK/bf16_split" --epochs 2 --threads 2 >/dev/null 2>>"$WORK/bf16.log" &&
   cmp -s "$WORK/bf16_full/checkpoint.safetensors" "$WORK/bf16_split/checkpoint.safetensors" &&
   cmp -s "$WORK/bf16_full/train_state.safetensors" "$WORK/bf16_split/train_state.safetensors" &&
   python3 -c 'import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; sys.exit(not r[1]["train_loss"] < r[0]["train_loss"])' "$WORK/bf16_full/metrics.jsonl"
then ok "train --precision bf16: the loss falls, resume equals an uninterrupted run"
else bad "train --precision bf16: $(tail -3 "$WORK/bf16.log")"; fi
# --grad-accum: each step's batch as micro-batches. It is recorded, kept by --resume, and
# resuming still ends on the uninterrupted run's bytes.
acc() { "$GMLP" train --preset fmnist-ti --train-limit 800 --batch-size 100 --grad-accum 4 --eval-limit 200 --seed 7 --threads 2 "$@"; }
if acc --epochs 2 --out "$WORK/acc_full" >/dev/null 2>"$WORK/acc.log" &&
   grep -q "^gmlp: training .*, batch 100 (4 micro-batches of 25), 8 steps/epoch," "$WORK/acc.log" &&
   acc --epochs 1 --out "$WORK/acc_split" >/dev/null 2>>"$WORK/acc.log" &&
   "$GMLP" train --resume "$WORK/acc_split" --epochs 2 --threads 2 >/dev/null 2>>"$WORK/acc.log" &&
   cmp -s "$WORK/acc_full/checkpoint.safetensors" "$WORK/acc_split/checkpoint.safetensors"
then ok "train --grad-accum 4: micro-batches of 25, resume equals an uninterrupted run"
else bad "train --grad-accum: $(tail -3 "$WORK/acc.log")"; fi
expect_error "--grad-accum that does not divide the batch" 1 "invalid --grad-accum 3: expected a divisor of --batch-size 100" -- \
  "$GMLP" train --preset fmnist-ti --batch-size 100 --grad-accum 3 --out "$WORK/v"

# --- --eval-limit: N test images drawn by --seed, the same every epoch, kept by --resume, and the
# same N that eval --eval-limit N --seed S reads ---------------------------------------------------
expect_error "train --eval-limit 0 is a usage error" 2 "--eval-limit: expected a whole number >= 1, found '0'" -- \
  "$GMLP" train --preset fmnist-ti --eval-limit 0 --out "$WORK/el0"
[ ! -e "$WORK/el0" ] && ok "a bad --eval-limit creates no run folder" || bad "a bad --eval-limit created $WORK/el0"
expect_error "compare --eval-limit -5 is a usage error" 2 "--eval-limit: expected a whole number >= 1, found '-5'" -- \
  "$GMLP" compare fmnist-ti --eval-limit -5 --out "$WORK/el0"
expect_error "pretrain --eval-limit 0 is a usage error" 2 "--eval-limit: expected a whole number >= 1" -- \
  "$GMLP" pretrain --eval-limit 0 --out "$WORK/el0"
expect_error "eval --eval-limit with --logits is a usage error" 2 "excludes" -- \
  "$GMLP" eval --checkpoint "$WORK/full/checkpoint.safetensors" --eval-limit 10 --logits "$WORK/el.npy"
el() { "$GMLP" train --preset fmnist-ti --train-limit 500 --batch-size 100 --seed 11 --threads 2 --eval-limit 500 "$@"; }
ELCK="$WORK/el/checkpoint.safetensors"
if el --epochs 1 --out "$WORK/el" >/dev/null 2>"$WORK/el.log" &&
   grep -q "^gmlp: training .*, 500 train / 500 of 10,000 test images," "$WORK/el.log" &&
   grep -q "^epoch 1/1  train loss .*  test (500 of 10,000) loss [0-9.]* acc [0-9.]*%" "$WORK/el.log" &&
   "$GMLP" train --resume "$WORK/el" --epochs 2 --threads 2 >/dev/null 2>"$WORK/el2.log" &&
   grep -q "^epoch 2/2  .*  test (500 of 10,000) loss" "$WORK/el2.log" &&
   "$GMLP" eval --checkpoint "$ELCK" --eval-limit 500 --seed 11 --json >"$WORK/el_same.json" 2>"$WORK/el_eval.err" &&
   "$GMLP" eval --checkpoint "$ELCK" --eval-limit 500 --seed 12 --json >"$WORK/el_other.json" &&
   "$GMLP" eval --checkpoint "$ELCK" --limit 500 --json >"$WORK/el_first.json" &&
   python3 - "$WORK" <<'PY'
import json, sys
from safetensors import safe_open
w = sys.argv[1]
rows = [json.loads(l) for l in open(f"{w}/el/metrics.jsonl")]
assert len(rows) == 2 and all(r["test_count"] == 500 and r["test_total"] == 10000 for r in rows), rows
with safe_open(f"{w}/el/train_state.safetensors", "np") as f:
    assert json.loads(f.metadata()["options"])["eval_limit"] == 500  # in the run's config
same, other, first = (json.load(open(f"{w}/el_{n}.json")) for n in ("same", "other", "first"))
assert same["count"] == 500 and same["total"] == 10000, same
# eval draws the subset train drew: the same loss and accuracy, to the printed digits
assert abs(same["loss"] - rows[-1]["test_loss"]) < 1e-5 and abs(same["accuracy"] - rows[-1]["test_acc"]) < 1e-9, (same, rows[-1])
# another seed, or the first 500 images, are other images
assert abs(other["loss"] - same["loss"]) > 1e-4 and abs(first["loss"] - same["loss"]) > 1e-4, (same, other, first)
PY
then ok "train --eval-limit: 500 random test images, the same every epoch and after --resume, the ones eval --eval-limit --seed reads"
else bad "train --eval-limit: $(tail -2 "$WORK/el.log" "$WORK/el2.log" 2>/dev/null)"; fi
[ ! -s "$WORK/el_eval.err" ] && ok "eval writes no progress lines when stderr is a file" || bad "eval's stderr: $(head -c 300 "$WORK/el_eval.err")"
# On a terminal, a progress line while evaluating, erased before the result.
if script -qec "$(printf '%q ' "$GMLP" eval --checkpoint "$ELCK" --limit 3000 --batch-size 100 --threads 2)" /dev/null \
     >"$WORK/el_tty.log" 2>&1 &&
   tr '\r' '\n' <"$WORK/el_tty.log" | grep -q "evaluating test  [0-9,]*/3,000  acc [0-9.]*%  eta" &&
   tr '\r' '\n' <"$WORK/el_tty.log" | grep -q "^.*checkpoint.safetensors test: accuracy [0-9.]*% (3,000 of 10,000 images)"
then ok "eval on a terminal shows its progress"; else bad "eval's progress line: $(head -c 400 "$WORK/el_tty.log" | tr '\r\033' '|~')"; fi
# train on a terminal: the step line ends on the last step, then the evaluation's line, which
# the epoch's report replaces.
if script -qec "$(printf '%q ' "$GMLP" train --preset fmnist-ti --train-limit 500 --batch-size 100 --epochs 1 \
                    --eval-limit 300 --threads 2 --out "$WORK/el_tty")" /dev/null >"$WORK/el_tty_train.log" 2>&1 &&
   tr '\r' '\n' <"$WORK/el_tty_train.log" | grep -q "^.*epoch 1/1  step 5/5  loss" &&
   tr '\r' '\n' <"$WORK/el_tty_train.log" | grep -q "evaluating test  [0-9,]*/300" &&
   tr '\r' '\n' <"$WORK/el_tty_train.log" | grep -q "epoch 1/1  train loss .*  test (300 of 10,000) loss"
then ok "train on a terminal: the step line reaches the last step, then the evaluation's progress"
else bad "train's progress lines: $(head -c 600 "$WORK/el_tty_train.log" | tr '\r\033' '|~')"; fi

# --- eval, predict, info, bench on the result ---------------------------------------------------
CK="$WORK/full/checkpoint.safetensors"
if "$GMLP" eval --checkpoint "$CK" --limit 100 --logits "$WORK/logits.npy" --json >"$WORK/eval.json"; then
  python3 - "$WORK" <<'PY' && ok "eval --logits writes [100, 10] float32 in file order" || bad "eval --logits"
import json, sys, numpy as np
w = sys.argv[1]
e = json.load(open(f"{w}/eval.json"))
l = np.load(f"{w}/logits.npy")
assert l.shape == (100, 10) and l.dtype == np.float32 and e["count"] == 100
PY
else
  bad "eval failed"
fi
# The moving average is a checkpoint like any other; flip TTA evaluates it on images and mirrors.
if "$GMLP" eval --checkpoint "$WORK/full/checkpoint_ema.safetensors" --tta-flip --json >"$WORK/eval_tta.json"; then
  python3 - "$WORK/eval_tta.json" <<'PY' && ok "eval --tta-flip on the moving average" || bad "eval --tta-flip"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["count"] == 10000 and e["tta_flip"] is True and e["accuracy"] > 0.5, e
PY
else
  bad "eval --tta-flip failed"
fi
# A model trained without flips has never seen a mirror image: eval --tta-flip says so, and
# evaluates as asked; without --tta-flip it says nothing.
if "$GMLP" train --preset fmnist-ti --train-limit 200 --batch-size 100 --epochs 1 --eval-limit 100 --no-hflip \
     --threads 2 --out "$WORK/noflip" >/dev/null 2>&1 &&
   "$GMLP" eval --checkpoint "$WORK/noflip/checkpoint.safetensors" --limit 50 --tta-flip >/dev/null 2>"$WORK/noflip_tta.err" &&
   grep -q "note: '.*noflip/checkpoint.safetensors' was trained with --no-hflip: --tta-flip shows it mirror images" \
     "$WORK/noflip_tta.err" &&
   "$GMLP" eval --checkpoint "$WORK/noflip/checkpoint.safetensors" --limit 50 >/dev/null 2>"$WORK/noflip.err" &&
   ! grep -q "no-hflip" "$WORK/noflip.err"
then ok "eval --tta-flip notes a model trained with --no-hflip"
else bad "eval --tta-flip's note: $(cat "$WORK/noflip_tta.err" "$WORK/noflip.err" 2>/dev/null | head -c 400)"; fi
python3 - "$WORK/boot.png" <<'PY'
# The first Fashion-MNIST test image (an ankle boot) as an 8-bit gray PNG, written by hand.
import gzip, struct, sys, zlib
import numpy as np
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
img = np.frombuffer(raw, np.uint8, 784, 16).reshape(28, 28)
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
rows = b"".join(b"\0" + img[y].tobytes() for y in range(28))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0)) + \
      chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
if out=$("$GMLP" predict --checkpoint "$CK" --top 2 "$WORK/boot.png"); then
  echo "$out" | grep -qE "boot.png: [A-Za-z/ -]+ [0-9.]+, [A-Za-z/ -]+ [0-9.]+$" && ok "predict prints top classes: $out" || bad "predict output: $out"
else
  bad "predict failed"
fi
# Another image size: the spatial weights resampled (eval, predict), or a run started from them.
if "$GMLP" eval --checkpoint "$CK" --limit 500 --json >"$WORK/at28.json" &&
   "$GMLP" eval --checkpoint "$CK" --limit 500 --img-size 36 --fit pad --json >"$WORK/at36.json" 2>"$WORK/at36.err" &&
   "$GMLP" eval --checkpoint "$CK" --limit 500 --img-size 32 --json >"$WORK/at32.json"; then
  python3 - "$WORK" <<'PY' && ok "eval --img-size: near the model's own accuracy, and says what it resampled" || bad "eval --img-size"
import json, sys
w = sys.argv[1]
a28, a32, a36 = (json.load(open(f"{w}/at{s}.json"))["accuracy"] for s in (28, 32, 36))
note = open(f"{w}/at36.err").read()
assert "trained at 28 px: running it at 36 px" in note and "padded" in note, note
assert a36 > a28 - 0.15 and a32 > a28 - 0.25 and a32 > 0.3, (a28, a32, a36)
PY
else
  bad "eval --img-size failed"
fi
if out=$("$GMLP" predict --checkpoint "$CK" --img-size 32 --top 1 "$WORK/boot.png" 2>"$WORK/p32.err") &&
   grep -q "running it at 32 px" "$WORK/p32.err"; then ok "predict --img-size 32: $out"
else bad "predict --img-size: $out $(head -c 300 "$WORK/p32.err")"; fi
expect_error "eval off the patch grid" 1 "invalid image size 30: expected a multiple of the model's patch size, 4" -- \
  "$GMLP" eval --checkpoint "$CK" --img-size 30
expect_error "train --init of another width" 1 "invalid --init .*its model has dim 64, the run's 96" -- \
  "$GMLP" train --init "$CK" --set dim=96 --train-limit 100 --out "$WORK/x"
if "$GMLP" train --init "$CK" --set img_size=32 --epochs 1 --train-limit 500 --eval-limit 200 --lr 1e-4 --warmup-epochs 0 \
     --out "$WORK/at32" --threads 2 >/dev/null 2>"$WORK/at32.log" &&
   "$GMLP" eval --checkpoint "$WORK/at32/checkpoint.safetensors" --limit 500 --json >"$WORK/at32ft.json"; then
  python3 - "$WORK" <<'PY' && ok "train --init --set img_size=32 finetunes the resampled model" || bad "train --init"
import json, sys
from safetensors import safe_open
w = sys.argv[1]
with safe_open(f"{w}/at32/checkpoint.safetensors", "np") as f:
    cfg = json.loads(f.metadata()["config"])
    assert f.get_slice("blocks.0.mlp_channels.gate.proj.weight").get_shape() == [64, 64]
assert cfg["img_size"] == 32, cfg
assert json.load(open(f"{w}/at32ft.json"))["accuracy"] > 0.3
PY
else
  bad "train --init failed: $(tail -c 300 "$WORK/at32.log")"
fi
printf 'not a png' >"$WORK/bad.png"
expect_error "unreadable image" 1 "bad.png" -- "$GMLP" predict --checkpoint "$CK" "$WORK/bad.png"
# The library's example program (examples/classify.cpp, public header only) agrees with predict.
CLASSIFY="$(dirname "$GMLP")/classify"
top=$("$GMLP" predict --checkpoint "$CK" --top 1 "$WORK/boot.png" | sed -E 's/^[^:]*: (.*) [0-9.]+$/\1/')
if out=$("$CLASSIFY" "$CK" "$WORK/boot.png") && [[ "$out" == "$WORK/boot.png: $top ("* ]]; then
  ok "the classify example names the class predict names ($out)"
else
  bad "classify example: '$out', predict's top class '$top'"
fi
expect_error "classify example on a missing checkpoint" 1 "nope.safetensors" -- "$CLASSIFY" "$WORK/nope.safetensors" "$WORK/boot.png"
if "$GMLP" viz --checkpoint "$CK" --metrics "$WORK/full/metrics.jsonl" --out "$WORK/viz" >"$WORK/viz.out" &&
   [ "$(wc -l <"$WORK/viz.out")" -eq 4 ] && python3 - "$WORK/viz" <<'PY'
import struct, sys
for name in ("spatial_block0.png", "spatial_block2.png", "spatial_block3.png", "curves.png"):
    head = open(f"{sys.argv[1]}/{name}", "rb").read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", name
    w, h = struct.unpack(">II", head[16:24])
    assert w > 100 and h > 100, (name, w, h)
PY
then ok "viz writes the spatial weights of blocks 0, 2, 3 and the curves as PNG"; else bad "viz: $(cat "$WORK/viz.out")"; fi
if "$GMLP" viz --metrics "$WORK/full/metrics.jsonl" --against time --out "$WORK/viztime" >"$WORK/viztime.out" &&
   [ "$(cat "$WORK/viztime.out")" = "$WORK/viztime/curves.png" ] && [ -s "$WORK/viztime/curves.png" ]
then ok "viz --against time draws a run's curves against minutes"; else bad "viz --against time: $(cat "$WORK/viztime.out")"; fi
echo '{"epoch": 1, "test_acc": 0.5}' >"$WORK/untimed.jsonl"
expect_error "viz --against time of rows without seconds" 1 \
  "--against time: '.*untimed.jsonl' row 1 \(epoch 1\) has no number 'seconds' to draw against time" -- \
  "$GMLP" viz --metrics "$WORK/untimed.jsonl" --against time --out "$WORK/viztime2"
[ ! -e "$WORK/viztime2" ] && ok "viz --against time checks the rows before it writes anything" ||
  bad "viz --against time made '$WORK/viztime2' before failing"
echo '{"epoch": 1}' >"$WORK/m.jsonl"; echo 'oops' >>"$WORK/m.jsonl"
expect_error "malformed metrics.jsonl" 1 "line 2 is not a JSON object" -- "$GMLP" viz --metrics "$WORK/m.jsonl" --out "$WORK/viz2"
"$GMLP" info --preset gmlp-s16 --json | grep -q '"params":19422656' && ok "gMLP-S/16 has 19,422,656 parameters" || bad "gMLP-S/16 parameter count"
"$GMLP" bench --checkpoint "$CK" --batch-size 8 --reps 1 --warmup 1 --json --profile | python3 -c "
import json, sys; j = json.load(sys.stdin)
assert all(j[k] > 0 for k in ('train_images_per_s', 'infer_images_per_s', 'peak_rss_mb'))
train, infer, infer1 = (j[k] for k in ('profile_ms_per_step', 'profile_ms_per_infer_batch', 'profile_ms_per_infer1'))
assert 'bwd.sgu' in train and 'optimizer' in train, train
for p in (infer, infer1):  # inference runs forward ops only, the gate among them
    assert 'fwd.sgu' in p and not any(k.startswith('bwd.') or k == 'optimizer' for k in p), p
    assert sum(p.values()) > 0" && ok "bench --json --profile" || bad "bench --json --profile"

# --versus: a second model of the same weights in another precision, alternating repetition by
# repetition; its rates and the per-repetition ratio in "versus" (f32 against f32 runs anywhere).
"$GMLP" bench --checkpoint "$CK" --batch-size 8 --reps 3 --warmup 1 --json --versus f32 | python3 -c "
import json, sys; j = json.load(sys.stdin); v = j['versus']
assert v['precision'] == 'f32', v
for k in ('train', 'infer', 'infer1'):
    lo, hi = v[k + '_ratio_spread']
    assert v[k + '_images_per_s'] > 0 and 0 < lo <= v[k + '_ratio'] <= hi, v" &&
  ok "bench --versus times both precisions and their ratio" || bad "bench --versus"

# bench/ab.py: two builds in turns (here one build twice), a line a round with both rates and
# their ratio, then each ratio's median and range; a bad --rounds is a usage error.
AB="$(dirname "$0")/../bench/ab.py"
if python3 "$AB" --base "$GMLP" --new "$GMLP" --preset fmnist-ti --batch-size 8 --mode infer --rounds 2 --reps 1 \
     --warmup 0 >"$WORK/ab.txt" 2>&1 &&
   grep -qE "^round 2: inference [0-9,.]+ -> [0-9,.]+ images/s \([0-9.]+x\) \| inference b=1 " "$WORK/ab.txt" &&
   grep -qE "^  inference b=1 +[0-9.]+x \[[0-9.]+-[0-9.]+\]$" "$WORK/ab.txt" && ! grep -q "train step" "$WORK/ab.txt"; then
  ok "bench/ab.py times two builds in turns"
else
  bad "bench/ab.py: $(tail -c 300 "$WORK/ab.txt")"
fi
expect_error "bench/ab.py --rounds 0" 2 "--rounds: expected at least 1, found 0" -- \
  python3 "$AB" --base "$GMLP" --new "$GMLP" --rounds 0

# info on a checkpoint: its classes on one wrapped line, and what its run recorded.
if "$GMLP" info --checkpoint "$CK" >"$WORK/info.txt" &&
   grep -q "^classes          10: T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag,$" "$WORK/info.txt" &&
   grep -q "^                 Ankle boot$" "$WORK/info.txt" &&
   grep -q "^trained          3 epochs of preset fmnist-ti on /usr/share/datasets/fashion-mnist (its first 3,000 train images)$" "$WORK/info.txt" &&
   grep -qE "^last epoch       train acc [0-9.]+ %, test acc [0-9.]+ %" "$WORK/info.txt" &&
   grep -qE "moving-average test acc [0-9.]+ %" "$WORK/info.txt" &&
   grep -q "^options          batch_size=100, " "$WORK/info.txt" && grep -q " seed=7, " "$WORK/info.txt"
then ok "info --checkpoint prints the classes and the run's record"; else bad "info --checkpoint: $(cat "$WORK/info.txt")"; fi
"$GMLP" info --checkpoint "$CK" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["classes"][0] == "T-shirt/top" and len(j["classes"]) == 10, j
t = j["training"]
assert t["epochs"] == 3 and t["options"]["preset"] == "fmnist-ti" and 0.5 < t["last"]["test_acc"] <= 1, t
assert t["best"]["test_acc"] >= t["last"]["test_acc"] and "seconds" not in t["last"], t' &&
  ok "info --checkpoint --json has the classes and the run's record" || bad "info --checkpoint --json"

# --- validation and limits (docs/reliability.md): a bad value is refused before any work -------
for cmd in train pretrain finetune; do
  expect_error "$cmd --lr nan is a usage error" 2 "--lr: expected a finite number >= 0, found 'nan'" -- \
    "$GMLP" $cmd --lr nan --out "$WORK/v"
  expect_error "$cmd --lr -1 is a usage error" 2 "--lr: expected a finite number >= 0, found '-1'" -- \
    "$GMLP" $cmd --lr -1 --out "$WORK/v"
done
expect_error "pretrain --epochs 0" 2 "--epochs: expected a whole number >= 1, found '0'" -- "$GMLP" pretrain --epochs 0 --out "$WORK/v"
expect_error "finetune --epochs -3" 2 "--epochs: expected a whole number >= 1, found '-3'" -- "$GMLP" finetune --epochs -3 --out "$WORK/v"
expect_error "finetune --seq-len -5" 2 "--seq-len: expected a whole number in 0..8192, found '-5'" -- \
  "$GMLP" finetune --seq-len -5 --out "$WORK/v"
expect_error "compare --warmup-epochs inf" 2 "--warmup-epochs: expected a finite number >= 0, found 'inf'" -- \
  "$GMLP" compare fmnist-ti --warmup-epochs inf --out "$WORK/v"
expect_error "train --min-lr above --lr" 1 "invalid --min-lr 1: expected a number in \[0, 0.1\] \(at most --lr" -- \
  "$GMLP" train --lr 0.1 --min-lr 1 --out "$WORK/v"
expect_error "train --lr with a weight decay that flips the weights" 1 "invalid --lr 100 with --weight-decay 0.05: .* below 1, found 5" -- \
  "$GMLP" train --lr 100 --out "$WORK/v"
echo '{"label-smoothing": 1.5}' >"$WORK/vconfig.json"
expect_error "a --config value passes the flag's check" 2 "--label-smoothing: expected a number in \[0, 1\), found '1.5'" -- \
  "$GMLP" train --config "$WORK/vconfig.json" --out "$WORK/v"
expect_error "--threads above the CPUs this process may use" 2 "--threads: expected a whole number in 0..[0-9]+, found '100000'" -- \
  "$GMLP" eval --checkpoint "$CK" --threads 100000
# With OMP_PROC_BIND the runtime binds the main thread to one CPU before gmlp counts them: the
# count must still be the process's CPUs, not that one.
expect_error "--threads counts the process's CPUs under OMP_PROC_BIND" 2 "--threads: expected a whole number in 0..$(nproc), found '100000'" -- \
  env OMP_PROC_BIND=close "$GMLP" eval --checkpoint "$CK" --threads 100000
# Under a CPU quota of one CPU's time (a container's --cpus 1; made here with a cgroup where the
# machine lets root make one), "all of them" is one: the count names it.
QUOTA=/sys/fs/cgroup/cpu/gmlp_cli_test_$$
if [ "$(nproc)" -gt 1 ] && mkdir "$QUOTA" 2>/dev/null; then
  if echo 100000 >"$QUOTA/cpu.cfs_quota_us" && echo 100000 >"$QUOTA/cpu.cfs_period_us"; then
    expect_error "--threads counts a CPU quota's CPUs" 2 "--threads: expected a whole number in 0..1, found '100000'" -- \
      bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2" eval --checkpoint "$3" --threads 100000' _ "$QUOTA" "$GMLP" "$CK"
  fi
  rmdir "$QUOTA"
else
  echo "skip  --threads under a CPU quota (no writable cgroup v1 cpu controller here)"
fi
expect_error "--threads -2" 2 "--threads: expected a whole number in 0..[0-9]+, found '-2'" -- "$GMLP" train --threads -2 --out "$WORK/v"
expect_error "predict --top -5" 2 "--top: expected a whole number >= 1, found '-5'" -- "$GMLP" predict --checkpoint "$CK" --top -5 "$WORK/boot.png"
expect_error "fill-mask --top 0" 2 "--top: expected a whole number >= 1, found '0'" -- "$GMLP" fill-mask --checkpoint "$CK" --top 0 "[MASK]"
expect_error "eval --seed -1" 2 "--seed: expected a whole number in 0..18446744073709551615, found '-1'" -- \
  "$GMLP" eval --checkpoint "$CK" --eval-limit 10 --seed -1
expect_error "bench --versus bf32" 2 "--versus: bf32 not in \\{f32,bf16,auto\\}" -- "$GMLP" bench --preset fmnist-ti --versus bf32
expect_error "bench --reps 0" 2 "--reps: expected a whole number >= 1, found '0'" -- "$GMLP" bench --preset fmnist-ti --reps 0
expect_error "a model too large to allocate names its fields" 1 \
  "invalid model config: .* more than the 2,147,483,648 a model may have .*\[262144, 65536\]: ffn 262144, dim 65536" -- \
  "$GMLP" train --set dim=65536 --set ffn=262144 --out "$WORK/v"
expect_error "bench --batch-size beyond memory" 1 "activations of a batch of 100,000,000 need .* \(lower --batch-size\)" -- \
  "$GMLP" bench --preset fmnist-ti --batch-size 100000000
truncate -s 2G "$WORK/huge.txt"  # sparse: nothing to read, 2 GiB to stat
expect_error "pretrain on a corpus over the cap" 1 "failed to read corpus '.*huge.txt': the file is 2147483648 bytes, more than the 1024 MiB" -- \
  "$GMLP" pretrain --corpus "$WORK/huge.txt" --out "$WORK/v"
rm -f "$WORK/huge.txt"
[ ! -e "$WORK/v" ] && ok "no refused command created its run folder" || bad "a refused command created $WORK/v"
# eval: a batch larger than the images evaluated plans for those images only.
"$GMLP" eval --checkpoint "$CK" --batch-size 10000000 --limit 50 --json | grep -q '"count": 50' &&
  ok "eval --batch-size 10000000 --limit 50 runs on 50 images" || bad "eval with a batch larger than the split"
# Output paths are probed before the work: under a file, in a missing folder.
printf x >"$WORK/afile"
expect_error "eval --logits under a file fails before evaluating" 1 "invalid --logits '.*afile/l.npy': '.*afile' is not a folder" -- \
  "$GMLP" eval --checkpoint "$CK" --logits "$WORK/afile/l.npy"
expect_error "eval --logits in a missing folder" 1 "invalid --logits '.*nodir/l.npy': its folder '.*nodir' does not exist" -- \
  "$GMLP" eval --checkpoint "$CK" --logits "$WORK/nodir/l.npy"
expect_error "viz --out under a file" 1 "invalid --out '.*afile/figs': '.*afile' is a file, expected a folder" -- \
  "$GMLP" viz --metrics "$WORK/full/metrics.jsonl" --out "$WORK/afile/figs"
# predict, as sha256sum: an unreadable image is reported on stderr, the others get whole lines.
"$GMLP" predict --checkpoint "$CK" "$WORK/boot.png" "$WORK/bad.png" "$WORK/boot.png" >"$WORK/pred.out" 2>"$WORK/pred.err"
status=$?
if [ "$status" -eq 1 ] && [ "$(grep -c "^$WORK/boot.png: .* [0-9.]*$" "$WORK/pred.out")" -eq 2 ] &&
   [ "$(wc -l <"$WORK/pred.out")" -eq 2 ] && [ "$(wc -l <"$WORK/pred.err")" -eq 1 ] && grep -q "bad.png" "$WORK/pred.err"
then ok "predict reports an unreadable image, classifies the rest, exits 1"
else bad "predict with an unreadable image: status $status, $(cat "$WORK/pred.out" "$WORK/pred.err")"; fi
# A checkpoint of a few hundred bytes whose metadata asks for a 3 GB model: refused from its
# header, before anything is allocated.
python3 - "$WORK/tiny_big.safetensors" <<'PY'
import json, struct, sys
config = {"model": "gmlp", "img_size": 224, "in_chans": 3, "patch_size": 16, "depth": 30, "dim": 2048, "ffn": 8192}
header = json.dumps({"__metadata__": {"format": "gmlp", "config": json.dumps(config)}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header)
PY
start=$(date +%s.%N)
expect_error "a small checkpoint asking for a large model" 1 \
  "failed to load checkpoint '.*tiny_big.safetensors': tensor 'stem.proj.weight' is missing \(its config asks for .* the file has 0\)" -- \
  "$GMLP" eval --checkpoint "$WORK/tiny_big.safetensors"
python3 -c "import sys; t = float(sys.argv[2]) - float(sys.argv[1]); assert t < 2, t" "$start" "$(date +%s.%N)" &&
  ok "  ... within 2 s" || bad "the small checkpoint asking for a large model took over 2 s"
# An empty class folder is named.
mkdir -p "$WORK/emptyclass/train/boot" "$WORK/emptyclass/train/coat" "$WORK/emptyclass/test/boot"
cp "$WORK/boot.png" "$WORK/emptyclass/train/boot/" && cp "$WORK/boot.png" "$WORK/emptyclass/test/boot/"
expect_error "an empty class folder" 1 "class folder '.*emptyclass/train/coat' has no .png, .jpg or .jpeg images" -- \
  "$GMLP" eval --checkpoint "$CK" --data-dir "$WORK/emptyclass" --split train
# A loss that explodes stops the run and names --lr (at --lr 10 it passes 100 times its start
# within an epoch); the error is the last line, after the run's opening line.
"$GMLP" train --preset fmnist-ti --train-limit 500 --batch-size 100 --epochs 2 --eval-limit 100 --lr 10 --threads 2 \
  --out "$WORK/diverged" >/dev/null 2>"$WORK/diverged.err"
status=$?
if [ "$status" -eq 1 ] && tail -1 "$WORK/diverged.err" |
     grep -qE "^gmlp: error: training diverged at step [0-9]+: the loss is .*, over 100 times the first step's .*lower --lr, now 10"
then ok "a diverging run stops, naming --lr"; else bad "a diverging run: status $status, $(tail -1 "$WORK/diverged.err")"; fi

# --- an image folder ({dir}/{split}/{class}/*.png): four Fashion-MNIST classes written as PNG ---
if fmnist_folder "$WORK/folder" 808 240; then
  # At 32 × 32 (resized from 28) with a head of four outputs, the classes the folder has.
  if "$GMLP" train --preset fmnist-ti --set img_size=32 --data-dir "$WORK/folder" --epochs 3 --batch-size 50 \
       --threads 2 --out "$WORK/folder_run" 2>>"$WORK/train.log" >/dev/null &&
     "$GMLP" eval --checkpoint "$WORK/folder_run/checkpoint.safetensors" --data-dir "$WORK/folder" --json \
       >"$WORK/folder_eval.json" &&
     "$GMLP" eval --checkpoint "$WORK/folder_run/checkpoint.safetensors" --data-dir "$WORK/folder" --json \
       --eval-limit 100000 >"$WORK/folder_eval_all.json" 2>"$WORK/folder_eval_all.err" &&
     grep -q "^gmlp: --eval-limit 100000 is at least the split's [0-9,]* test images: evaluating on all of them$" \
       "$WORK/folder_eval_all.err" &&
     "$GMLP" info --checkpoint "$WORK/folder_run/checkpoint.safetensors" --json >"$WORK/folder_info.json" &&
     python3 - "$WORK" <<'PY'
import glob, json, sys
w = sys.argv[1]
metrics = [json.loads(l) for l in open(f"{w}/folder_run/metrics.jsonl")]
ev, info = json.load(open(f"{w}/folder_eval.json")), json.load(open(f"{w}/folder_info.json"))
assert info["config"]["num_classes"] == 4 and info["config"]["img_size"] == 32, info["config"]
assert ev["count"] == len(glob.glob(f"{w}/folder/test/*/*.png")), ev
assert metrics[-1]["test_acc"] > 0.7, metrics[-1]  # four classes: chance is 0.25
assert abs(ev["accuracy"] - metrics[-1]["test_acc"]) < 1e-6, (ev, metrics[-1])  # eval reads it as train did
assert json.load(open(f"{w}/folder_eval_all.json")) | {"seconds": 0} == ev | {"seconds": 0}  # a limit over the split: all of it
assert info["classes"] == ["Ankle boot", "Bag", "T-shirt-top", "Trouser"], info.get("classes")
assert info["training"]["epochs"] == 3 and info["training"]["options"]["data_dir"].endswith("/folder"), info["training"]
PY
  then ok "train and eval on an image folder (4 classes, resized to 32 x 32)"; else bad "image folder training"; fi
  "$GMLP" predict --checkpoint "$WORK/folder_run/checkpoint.safetensors" "$(ls "$WORK"/folder/test/Trouser/*.png | head -1)" \
    | head -1 | grep -q "Trouser" && ok "predict names the image folder's classes" || bad "predict on the image folder model"
  # predict takes the images in groups of a forward pass: each line is its image's alone, whatever
  # the group (the same in reverse order, and classified alone), in the order given, and an
  # unreadable file among them costs its own line only.
  mapfile -t files < <(ls "$WORK"/folder/test/*/*.png | head -70)
  many=("${files[@]:0:40}" "$WORK/bad.png" "${files[@]:40}")
  reversed=()
  for ((i = ${#many[@]} - 1; i >= 0; i--)); do reversed+=("${many[i]}"); done
  pred=("$GMLP" predict --checkpoint "$WORK/folder_run/checkpoint.safetensors" --top 2)
  "${pred[@]}" "${many[@]}" >"$WORK/many.out" 2>"$WORK/many.err"
  status=$?
  "${pred[@]}" "${reversed[@]}" >"$WORK/reversed.out" 2>/dev/null
  for f in "${files[0]}" "${files[65]}" "${files[69]}"; do "${pred[@]}" "$f"; done >"$WORK/alone.out"
  if [ "$status" -eq 1 ] && [ "$(wc -l <"$WORK/many.out")" -eq 70 ] && grep -q "bad.png" "$WORK/many.err" &&
     [ "$(cut -d: -f1 "$WORK/many.out")" = "$(printf '%s\n' "${files[@]}")" ] &&
     [ "$(sort "$WORK/many.out")" = "$(sort "$WORK/reversed.out")" ] &&
     [ "$(grep -cFxf "$WORK/alone.out" "$WORK/many.out")" -eq 3 ]
  then ok "predict in groups: 70 images and a bad one, each line its image's alone, in order"
  else bad "predict of many images: status $status, $(diff <(sort "$WORK/many.out") <(sort "$WORK/reversed.out") | head -4)"; fi
  cp -r "$WORK/folder" "$WORK/folder2" && mv "$WORK/folder2/train/Bag" "$WORK/folder2/train/Bags" &&
    mv "$WORK/folder2/test/Bag" "$WORK/folder2/test/Bags"
  expect_error "eval on other classes" 1 "calls class 1 'Bags', but .* was trained with it as 'Bag'" -- \
    "$GMLP" eval --checkpoint "$WORK/folder_run/checkpoint.safetensors" --data-dir "$WORK/folder2"
  mkdir -p "$WORK/folder2/test/Unknown" && cp "$(ls "$WORK"/folder/test/Bag/*.png | head -1)" "$WORK/folder2/test/Unknown/"
  expect_error "test class missing from train" 1 "class 'Unknown' is not a class of" -- \
    "$GMLP" train --preset fmnist-ti --data-dir "$WORK/folder2" --out "$WORK/x"
else
  bad "writing the image folder"
fi

# --- CIFAR-10's binary batches: cifar-s trains on them and eval reads the test batch -------------
python3 - "$WORK/cifar" <<'PY'
import os, random, sys
d = sys.argv[1]
os.makedirs(d)
rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(f"{d}/{name}", "wb") as f:
        for _ in range(40):
            f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
PY
if "$GMLP" train --preset cifar-s --set depth=1 --data-dir "$WORK/cifar" --epochs 1 --batch-size 50 \
     --out "$WORK/cifar_run" 2>>"$WORK/train.log" >/dev/null &&
   "$GMLP" eval --checkpoint "$WORK/cifar_run/checkpoint.safetensors" --data-dir "$WORK/cifar" --json | grep -q '"count": 40'
then ok "cifar-s trains on CIFAR-10 binary batches (200 images) and evaluates on the test batch (40)"
else bad "CIFAR-10 binary batches"; fi
expect_error "CIFAR-10 images into a gray model" 1 "has 3×32×32 images, but the model expects 1×28×28" -- \
  "$GMLP" train --preset fmnist-ti --data-dir "$WORK/cifar" --out "$WORK/x"

# --- --config FILE.json: its entries as options, arrays as repeated ones; the command line wins --
cat >"$WORK/config.json" <<'JSON'
{"preset": "fmnist-ti", "epochs": 1, "train-limit": 200, "batch-size": 50, "lr": 0.001,
 "set": ["depth=2", "dim=32"], "threads": 2}
JSON
if "$GMLP" train --config "$WORK/config.json" --epochs 2 --out "$WORK/config_run" 2>>"$WORK/train.log" >/dev/null &&
   "$GMLP" info --checkpoint "$WORK/config_run/checkpoint.safetensors" --json >"$WORK/config_info.json" &&
   python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
m = [json.loads(l) for l in open(f"{w}/config_run/metrics.jsonl")]
c = json.load(open(f"{w}/config_info.json"))["config"]
assert len(m) == 2, m                                        # --epochs 2 beat the file's 1
assert m[0]["step"] == 4 and m[0]["lr"] == 0.001, m[0]     # train-limit 200 / batch-size 50; lr
assert (c["depth"], c["dim"]) == (2, 32), c                  # both --set entries
PY
then ok "train --config: the file's options, the command line's --epochs over them"; else bad "train --config"; fi
echo '{"nope": 1}' >"$WORK/badconfig.json"
expect_error "config with an unknown option" 1 "badconfig.json': 'nope' is not an option of 'gmlp train'" -- \
  "$GMLP" train --config "$WORK/badconfig.json"
printf '{"\\nope": 1}' >"$WORK/badconfig.json"  # a key with a newline: the message stays one line
expect_error "config key with a control character" 1 "badconfig.json': \"\\\\nope\" is not an option of 'gmlp train'" -- \
  "$GMLP" train --config "$WORK/badconfig.json"
echo '{"epochs": ' >"$WORK/badconfig.json"
expect_error "config that is not JSON" 1 "failed to read config '.*badconfig.json': not valid JSON" -- \
  "$GMLP" train --config "$WORK/badconfig.json"
# Nesting deeper than a config needs is refused while it is parsed: 400,000 nested arrays (800 kB,
# under the 1 MiB cap) would otherwise be walked recursively, one stack frame per level.
{ printf '{"set": '; head -c 400000 /dev/zero | tr '\0' '['; head -c 400000 /dev/zero | tr '\0' ']'; printf '}'; } \
  >"$WORK/deepconfig.json"
expect_error "config nested 400,000 deep" 1 \
  "deepconfig.json': expected JSON nested at most 64 levels deep, found deeper nesting" -- \
  "$GMLP" train --config "$WORK/deepconfig.json"

# --- compare: two models, one budget, DeiT's regularisation and the moving average on -----------
if "$GMLP" compare fmnist-ti fmnist-ti:gate=additive --epochs 1 --train-limit 500 --batch-size 100 \
     --mixup 0.8 --cutmix 1 --random-erase 0.25 --drop-path 0.1 --ema 0.9 --eval-limit 2000 --threads 2 --out "$WORK/cmp" \
     >"$WORK/cmp.out" 2>>"$WORK/train.log" && python3 - "$WORK/cmp" <<'PY'
import json, sys
d = sys.argv[1]
rows = json.load(open(f"{d}/compare.json"))
assert [r["label"] for r in rows] == ["fmnist-ti", "fmnist-ti:gate=additive"], rows
assert rows[1]["params"] > rows[0]["params"]  # the additive gate keeps all F channels
# Five steps of heavily regularised training need not leave chance (0.1) behind: the rows must
# hold what each model's own run folder recorded.
for r, sub in zip(rows, ["fmnist-ti", "fmnist-ti_gate_additive"]):
    m = [json.loads(l) for l in open(f"{d}/{sub}/metrics.jsonl") if l.strip()]
    assert len(m) == 1 and r["epochs"] == 1, (r, m)
    assert r["final_test_acc"] == m[-1]["test_acc"] and r["final_test_acc_ema"] == m[-1]["test_acc_ema"], (r, m)
    assert 0 < r["final_test_acc"] <= 1 and 0 < r["final_test_acc_ema"] <= 1, r
assert all(r["test_count"] == 2000 and r["test_total"] == 10000 for r in rows), rows
md = open(f"{d}/compare.md").read()
assert md.count("| fmnist-ti") == 2 and "final test acc, EMA |" in md and "decay 0.9 " in md, md
assert "Test accuracy on 2,000 of 10,000 test images" in md, md
for name in ("accuracy.png", "train_test.png"):
    assert open(f"{d}/{name}", "rb").read(8) == b"\x89PNG\r\n\x1a\n", name
PY
then ok "compare trains both models and writes compare.md/.json and two plots"; else bad "compare: $(tail -3 "$WORK/train.log")"; fi

# --- language modelling: pretrain on a small corpus, resume, fill-mask, finetune on a KJV task ---
bible -f Gen1:1-Gen5:32 | cut -d' ' -f2- >"$WORK/corpus.txt"
lm() { "$GMLP" pretrain --preset kjv-gmlp --set depth=1 --set dim=32 --set ffn=64 --set seq_len=32 \
         --vocab-size 300 --corpus "$WORK/corpus.txt" --batch-size 8 --seed 3 --threads 2 "$@" 2>>"$WORK/lm.log"; }
if lm --epochs 2 --out "$WORK/lm_full" >/dev/null && lm --epochs 1 --out "$WORK/lm_split" >/dev/null &&
   "$GMLP" pretrain --resume "$WORK/lm_split" --epochs 2 --threads 2 >/dev/null 2>>"$WORK/lm.log" &&
   cmp -s "$WORK/lm_full/checkpoint.safetensors" "$WORK/lm_split/checkpoint.safetensors" &&
   python3 - "$WORK/lm_full/metrics.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2 and all(1 < r["dev_ppl"] < 300 and r["dev_masked_tokens"] > 0 for r in rows), rows
assert rows[1]["train_loss"] < rows[0]["train_loss"], rows
# Single dev verses (the corpus's lines), padded alone: perplexity, top-1 and top-5 beside the packed ones.
for r in rows:
    assert 1 < r["dev_verse_ppl"] < 300 and r["dev_verse_masked_tokens"] > 0 and r["dev_verses"] == r["dev_verses_total"] > 0, r
    assert 0 <= r["dev_acc"] <= r["dev_top5"] <= 1 and 0 <= r["dev_verse_acc"] <= r["dev_verse_top5"] <= 1, r
PY
then ok "pretrain: perplexity and top-1/top-5 on packed sequences and single verses, loss falls, resume equals an uninterrupted run"; else bad "pretrain: $(tail -3 "$WORK/lm.log")"; fi
LMCK="$WORK/lm_full/checkpoint.safetensors"
if lm --epochs 1 --grad-accum 2 --out "$WORK/lm_acc" >/dev/null &&
   grep -q "^gmlp: training .*, batch 8 (2 micro-batches of 4)," "$WORK/lm.log" &&
   python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); assert 1 < r['dev_ppl'] < 300, r" "$WORK/lm_acc/metrics.jsonl"
then ok "pretrain --grad-accum 2 trains in micro-batches"; else bad "pretrain --grad-accum: $(tail -3 "$WORK/lm.log")"; fi
# --nsp (the KJV only): BERT's next-sentence pairs drawn afresh each epoch, so resuming must
# redraw the same ones.
nsp() { "$GMLP" pretrain --preset kjv-amlp --nsp --set depth=1 --set dim=32 --set ffn=64 --set attn_dim=8 \
          --set seq_len=48 --vocab-size 300 --train-limit 64 --eval-limit 64 --batch-size 8 --threads 2 "$@" 2>>"$WORK/lm.log"; }
if nsp --epochs 2 --out "$WORK/nsp_full" >/dev/null && nsp --epochs 1 --out "$WORK/nsp_split" >/dev/null &&
   "$GMLP" pretrain --resume "$WORK/nsp_split" --epochs 2 --threads 2 >/dev/null 2>>"$WORK/lm.log" &&
   cmp -s "$WORK/nsp_full/checkpoint.safetensors" "$WORK/nsp_split/checkpoint.safetensors" &&
   python3 - "$WORK/nsp_full" <<'PY'
import json, sys
from safetensors import safe_open
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert len(rows) == 2 and all(r["dev_nsp_pairs"] > 0 and 0 <= r["dev_nsp_acc"] <= 1 and 0 <= r["train_nsp_acc"] <= 1
                              and 0 < r["train_nsp_loss"] < 2 and 1 < r["dev_ppl"] < 300 for r in rows), rows
with safe_open(sys.argv[1] + "/checkpoint.safetensors", "np") as f:
    c = json.loads(f.metadata()["config"])
    assert c["num_classes"] == 2 and c["segments"] and "cls_head.weight" in f.keys(), c
PY
then ok "pretrain --nsp: next-sentence accuracy reported, segments and a 2-class head, resume equals an uninterrupted run"; else bad "pretrain --nsp: $(tail -3 "$WORK/lm.log")"; fi
# next-verse starts from the next-sentence head (at lr 0 it stays as pretrained); genre gets its own.
if "$GMLP" finetune --init "$WORK/nsp_full/checkpoint.safetensors" --task next-verse --lr 0 --min-lr 0 --epochs 1 \
     --train-limit 16 --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftnsp" >/dev/null 2>>"$WORK/lm.log" &&
   "$GMLP" finetune --init "$WORK/nsp_full/checkpoint.safetensors" --task genre --epochs 1 \
     --train-limit 16 --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftnspg" >/dev/null 2>>"$WORK/lm.log" &&
   python3 - "$WORK/nsp_full" "$WORK/ftnsp" "$WORK/ftnspg" <<'PY'
import sys
from safetensors.numpy import load_file
pre, pair, genre = (load_file(d + "/checkpoint.safetensors") for d in sys.argv[1:])
assert (pre["cls_head.weight"] == pair["cls_head.weight"]).all() and (pre["cls_head.bias"] == pair["cls_head.bias"]).all()
assert genre["cls_head.weight"].shape == (7, pre["cls_head.weight"].shape[1]), genre["cls_head.weight"].shape
PY
then ok "finetune next-verse keeps the next-sentence head; genre gets a new one"; else bad "finetune from --nsp: $(tail -3 "$WORK/lm.log")"; fi
expect_error "pretrain --nsp on a text file" 1 "needs the KJV.*split line by line" -- \
  "$GMLP" pretrain --nsp --corpus "$WORK/corpus.txt" --out "$WORK/nspx"
out=$("$GMLP" fill-mask --checkpoint "$LMCK" --top 3 "And God said, Let there be [MASK]: and there was [MASK].")
[ "$(echo "$out" | grep -cE '^  \[MASK\] [12] of 2$')" -eq 2 ] &&
  [ "$(echo "$out" | grep -cE '^ +[01]\.[0-9]{3}  [^ ]+ +And God said, Let there be ')" -eq 6 ] && ! echo "$out" | grep -q $'\xe2\x96\x81' &&
  ok "fill-mask prints the top 3 tokens of each [MASK] as text, with the filled-in sentence" || bad "fill-mask: $out"
# --json: Hugging Face's fill-mask shapes (one text and one mask: a list; several masks: a list per
# mask; several texts: a list per text), texts from stdin, the same figures as the text output.
if printf 'In the beginning God created the [MASK].\n\nAnd God said, Let there be [MASK]: and there was [MASK].\n' |
   "$GMLP" fill-mask --checkpoint "$LMCK" --top 2 --json >"$WORK/fill.json" &&
   "$GMLP" fill-mask --checkpoint "$LMCK" --top 2 --json "In the beginning God created the [MASK]." >"$WORK/fill1.json" &&
   python3 - "$WORK/fill.json" "$WORK/fill1.json" <<'PY'
import json, sys
both, one = (json.load(open(p)) for p in sys.argv[1:])
assert len(both) == 2 and both[0] == one, "stdin's first text is the argument's"
assert len(one) == 2 and all(set(f) == {"score", "token", "token_str", "sequence"} for f in one), one
assert len(both[1]) == 2 and all(len(m) == 2 for m in both[1]), "a list of 2 per mask"
for f in one:
    assert 0 < f["score"] <= 1 and "\u2581" not in f["token_str"], f
    assert f["sequence"] == "In the beginning God created the " + f["token_str"] + "." or not f["token_str"], f
assert one[0]["score"] >= one[1]["score"]
assert both[1][1][0]["sequence"].startswith("And God said, Let there be [MASK]: and there was"), both[1][1][0]
PY
then ok "fill-mask --json has the pipeline's shape, reads stdin"; else bad "fill-mask --json: $(cat "$WORK/fill.json" | head -5)"; fi
expect_error "fill-mask without a mask" 1 "text 2: no \[MASK\] to fill in 'no mask here'" -- \
  "$GMLP" fill-mask --checkpoint "$LMCK" "a [MASK]" "no mask here"
expect_error "fill-mask past the model's length" 1 "' is [0-9]+ tokens with \[CLS\] and \[SEP\]; the model reads at most 32$" -- \
  "$GMLP" fill-mask --checkpoint "$LMCK" "$(printf 'and the light [MASK] %.0s' $(seq 20))"
# A checkpoint of the other kind: one line naming the file, what it is and the commands it is for.
expect_error "fill-mask on an image checkpoint" 1 \
  "'$CK' is an image classifier checkpoint \(gmlp train\), not a text model \(of gmlp pretrain or finetune\): use it with gmlp predict, eval or viz" -- \
  "$GMLP" fill-mask --checkpoint "$CK" "a [MASK]"
expect_error "finetune --init an image checkpoint" 1 "'$CK' is an image classifier checkpoint" -- \
  "$GMLP" finetune --init "$CK" --task ot-nt --out "$WORK/ftimg"
[ ! -e "$WORK/ftimg" ] && ok "finetune --init of an image checkpoint creates no run folder" || bad "finetune --init of an image checkpoint created $WORK/ftimg"
for cmd in "predict --checkpoint $LMCK $WORK/boot.png" "eval --checkpoint $LMCK" "viz --checkpoint $LMCK --out $WORK/vizx" \
           "bench --checkpoint $LMCK"; do
  # shellcheck disable=SC2086
  expect_error "${cmd%% *} on a text checkpoint" 1 \
    "'$LMCK' is a text checkpoint \(a masked-language model from gmlp pretrain\), not an image classifier .*: use it with gmlp fill-mask, or as gmlp finetune --init" -- \
    "$GMLP" $cmd
done
# A run's optimizer state given for its model: named, with the checkpoint beside it.
for run in full lm_full; do
  for cmd in "predict --checkpoint $WORK/$run/train_state.safetensors $WORK/boot.png" \
             "fill-mask --checkpoint $WORK/$run/train_state.safetensors a" \
             "export --checkpoint $WORK/$run/train_state.safetensors --onnx $WORK/state.onnx"; do
    # shellcheck disable=SC2086
    expect_error "${cmd%% *} on $run's optimizer state" 1 \
      "'$WORK/$run/train_state.safetensors' is a run's optimizer state \(the AdamW moments, no weights\), not a checkpoint: use '$WORK/$run/checkpoint.safetensors' from the same run" -- \
      "$GMLP" $cmd
  done
done
expect_error "train --resume of a text run" 1 "'$WORK/lm_full' is a text run, not an image classifier's: resume it with gmlp pretrain --resume" -- \
  "$GMLP" train --resume "$WORK/lm_full"
expect_error "pretrain --resume of an image run" 1 "'$WORK/full' is an image classifier's run, not a text run: resume it with gmlp train --resume" -- \
  "$GMLP" pretrain --resume "$WORK/full"
if "$GMLP" finetune --init "$LMCK" --task next-verse --epochs 1 --train-limit 64 --eval-limit 64 --batch-size 8 \
     --threads 2 --out "$WORK/ft" >/dev/null 2>>"$WORK/lm.log" && python3 - "$WORK/ft" <<'PY'
import json, sys
from safetensors import safe_open
r = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][-1]
assert r["task"] == "next-verse" and 0 <= r["dev_acc"] <= 1 and 0 <= r["test_acc"] <= 1, r
assert r["dev_count"] == 64 < r["dev_total"] and r["test_count"] == 64 < r["test_total"], r  # --eval-limit 64
with safe_open(sys.argv[1] + "/checkpoint.safetensors", "np") as f:  # a pair task: segments on
    assert json.loads(f.metadata()["config"])["segments"] and "segment_embed.weight" in f.keys()
PY
then ok "finetune from the pretrained checkpoint writes dev and test accuracy, with segment embeddings for pairs"; else bad "finetune: $(tail -3 "$WORK/lm.log")"; fi
# --segments off drops them even from a checkpoint that has them (the pair model just written).
if "$GMLP" finetune --init "$WORK/ft/checkpoint.safetensors" --task next-verse --segments off --epochs 1 \
     --train-limit 16 --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftoff" >/dev/null 2>>"$WORK/lm.log" &&
   python3 -c '
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    assert not json.loads(f.metadata()["config"])["segments"] and "segment_embed.weight" not in f.keys()' \
     "$WORK/ftoff/checkpoint.safetensors"
then ok "finetune --segments off drops the segment embedding"; else bad "finetune --segments off: $(tail -3 "$WORK/lm.log")"; fi
out=$("$GMLP" info --checkpoint "$WORK/ft/checkpoint.safetensors" --json)
echo "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["config"]["model"] == "gmlp" and j["config"]["num_classes"] == 2 and j["tokens"] == 32, j
assert j["params"] > 0 and j["flops_per_sequence"] > 0, j
assert j["task"] == "next-verse" and j["classes"] == ["not next", "next"] and j["training"]["epochs"] == 1, j' &&
  ok "info reads a text checkpoint, its task and classes" || bad "info on a text checkpoint: $out"
out=$("$GMLP" info --checkpoint "$WORK/ft/checkpoint.safetensors")
echo "$out" | grep -q "^task             next-verse$" && echo "$out" | grep -q "^classes          2: not next, next$" &&
  echo "$out" | grep -qE "^last epoch       train acc [0-9.]+ %, dev acc [0-9.]+ % \(64 of [0-9,]+\), test acc [0-9.]+ % \(64 of [0-9,]+\)" &&
  ok "info prints a finetuned checkpoint's task, classes and last epoch" || bad "info on a finetuned checkpoint: $out"
[ "$("$GMLP" info --preset kjv-gmlp | grep -c '^params  *3706688$')" -eq 1 ] && ok "info --preset names a text preset's size" || bad "info --preset kjv-gmlp: $("$GMLP" info --preset kjv-gmlp 2>&1)"
# At a shorter length, with a zero learning rate the weights stay as loaded: every tensor equals
# the pretrained one, or its leading block where an axis was the pretraining length (32 → 16).
if "$GMLP" finetune --init "$LMCK" --task ot-nt --seq-len 16 --lr 0 --min-lr 0 --epochs 1 --train-limit 32 --eval-limit 32 \
     --batch-size 8 --threads 2 --out "$WORK/ft16" >/dev/null 2>>"$WORK/lm.log" &&
   python3 - "$LMCK" "$WORK/ft16/checkpoint.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
pre, ft = load_file(sys.argv[1]), load_file(sys.argv[2])
sliced = 0
for name, a in pre.items():
    b = ft[name]
    assert all(m == n or (m, n) == (32, 16) for m, n in zip(a.shape, b.shape)), (name, a.shape, b.shape)
    sliced += a.shape != b.shape
    assert (a[tuple(slice(0, n) for n in b.shape)] == b).all(), name
assert sliced >= 2, sliced  # the spatial W and its bias
assert "segment_embed.weight" not in ft  # one verse: no segments
PY
then ok "finetune --seq-len keeps the leading block of the length-sized tensors"; else bad "finetune --seq-len: $(tail -3 "$WORK/lm.log")"; fi
# finetune on the user's own labelled files, generated here from the KJV: Genesis verses "law",
# Matthew's "gospel"; TSV train and dev, a CSV test with quoted fields, JSON Lines pairs.
kjv_rows() { bible -f "$1" | cut -d' ' -f2- | sed "s/\$/\t$2/"; }
{ printf 'text\tlabel\n'; kjv_rows Gen1:1-Gen2:25 law; kjv_rows Matt5:1-Matt6:34 gospel; } >"$WORK/lab_train.tsv"
{ printf 'text\tlabel\n'; kjv_rows Gen3:1-Gen3:24 law; kjv_rows Matt7:1-Matt7:29 gospel; } >"$WORK/lab_dev.tsv"
{ echo 'id,text,label'; kjv_rows Gen4:1-Gen4:8 law | awk -F'\t' '{gsub(/"/, "\"\""); printf "%d,\"%s\",%s\n", NR, $1, $2}'; } >"$WORK/lab_test.csv"
kjv_rows Gen1:1-Gen1:20 x | python3 -c '
import json, sys
v = [l.rstrip("\n").split("\t")[0] for l in sys.stdin]
for i in range(len(v) - 2):
    print(json.dumps({"a": v[i], "b": v[i + 1], "y": "next"}))
    print(json.dumps({"a": v[i], "b": v[i + 2], "y": "other"}))' >"$WORK/lab_pairs.jsonl"
if "$GMLP" finetune --init "$LMCK" --train "$WORK/lab_train.tsv" --dev "$WORK/lab_dev.tsv" --test "$WORK/lab_test.csv" \
     --epochs 1 --batch-size 8 --threads 2 --out "$WORK/ftf" >/dev/null 2>>"$WORK/lm.log" &&
   "$GMLP" finetune --init "$LMCK" --train "$WORK/lab_pairs.jsonl" --dev "$WORK/lab_pairs.jsonl" --text-column a \
     --pair-column b --label-column y --epochs 1 --batch-size 8 --threads 2 --out "$WORK/ftp" >/dev/null 2>>"$WORK/lm.log" &&
   python3 - "$WORK/ftf" "$WORK/ftp" <<'PY'
import json, sys
from safetensors import safe_open
f, p = ([json.loads(l) for l in open(d + "/metrics.jsonl")][-1] for d in sys.argv[1:])
assert f["task"] == "files" and f["dev_total"] == 53 and f["test_total"] == 8 and 0 <= f["test_acc"] <= 1, f
assert "test_acc" not in p and p["dev_total"] == 36, p
with safe_open(sys.argv[1] + "/checkpoint.safetensors", "np") as c:
    m = c.metadata()
    assert json.loads(m["classes"]) == ["gospel", "law"] and m["pairs"] == "false", m
with safe_open(sys.argv[2] + "/checkpoint.safetensors", "np") as c:
    m = c.metadata()
    assert json.loads(m["classes"]) == ["next", "other"] and m["pairs"] == "true", m
    assert json.loads(m["config"])["segments"]  # pairs: segment embeddings, as next-verse
PY
then ok "finetune --train/--dev/--test on TSV, CSV and JSON Lines files, labels kept as text"; else bad "finetune on files: $(tail -3 "$WORK/lm.log")"; fi
out=$("$GMLP" classify-text --checkpoint "$WORK/ftf/checkpoint.safetensors" --top 1 "Blessed are the merciful: for they shall obtain mercy.")
echo "$out" | grep -qE '^ +[01]\.[0-9]{3}  (gospel|law)$' && ok "classify-text applies a model finetuned on files" || bad "classify-text on files: $out"
printf 'text\tlabel\nIn the beginning\tlaw\nAnd God said\n' >"$WORK/bad_fields.tsv"
expect_error "finetune --train with a short row" 1 "failed to read '$WORK/bad_fields.tsv': line 3: expected 2 fields as the header has, found 1" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/bad_fields.tsv" --dev "$WORK/lab_dev.tsv" --out "$WORK/ftbad"
expect_error "finetune --train without the text column" 1 "the header has no column 'sentence' \(its columns: text, label\)" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/lab_train.tsv" --dev "$WORK/lab_dev.tsv" --text-column sentence --out "$WORK/ftbad"
printf 'text\tlabel\nIn the beginning\tprophecy\n' >"$WORK/bad_label.tsv"
expect_error "finetune --dev with a label training never saw" 1 "'$WORK/bad_label.tsv': line 2: label 'prophecy' is not one of the training file's \(gospel, law\)" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/lab_train.tsv" --dev "$WORK/bad_label.tsv" --out "$WORK/ftbad"
printf '{"text": "In the beginning", "label": "law"}\nnot json\n' >"$WORK/bad.jsonl"
expect_error "finetune --train with a malformed JSON line" 1 "'$WORK/bad.jsonl': line 2: expected a JSON object, found 'not json'" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/bad.jsonl" --dev "$WORK/lab_dev.tsv" --out "$WORK/ftbad"
expect_error "finetune --train of a .txt" 1 "expected a .tsv, .csv or .jsonl file of labelled texts" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/corpus.txt" --dev "$WORK/lab_dev.tsv" --out "$WORK/ftbad"
expect_error "finetune --train without --dev" 1 "finetune on your files needs --train and --dev" -- \
  "$GMLP" finetune --init "$LMCK" --train "$WORK/lab_train.tsv" --out "$WORK/ftbad"
expect_error "finetune --task with --train" 2 "--task excludes --train" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --train "$WORK/lab_train.tsv" --dev "$WORK/lab_dev.tsv" --out "$WORK/ftbad"
[ ! -e "$WORK/ftbad" ] && ok "a bad labelled file leaves no run folder" || bad "a bad labelled file left $WORK/ftbad"
# classify-text: the finetuned models on new texts, as text and as the pipeline's JSON; a pair
# model takes each pair as two texts separated by a tab.
out=$("$GMLP" classify-text --checkpoint "$WORK/ft16/checkpoint.safetensors" "In the beginning God created the heaven" "Jesus wept.")
[ "$(echo "$out" | grep -cE '^ +[01]\.[0-9]{3}  (Old|New) Testament$')" -eq 4 ] && [ "$(echo "$out" | head -1)" = "In the beginning God created the heaven" ] &&
  ok "classify-text prints every class of each text with its probability" || bad "classify-text: $out"
if printf 'And God said\tLet there be light\nJesus wept.\tAnd the earth was without form\n' |
   "$GMLP" classify-text --checkpoint "$WORK/ft/checkpoint.safetensors" --json --top 1 >"$WORK/ct.json" &&
   python3 - "$WORK/ct.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j) == 2 and all(len(r) == 1 and set(r[0]) == {"label", "score"} for r in j), j
assert all(r[0]["label"] in ("next", "not next") and 0.5 <= r[0]["score"] <= 1 for r in j), j
PY
then ok "classify-text --json reads pairs from stdin, in the pipeline's shape"; else bad "classify-text --json: $(head -c 300 "$WORK/ct.json")"; fi
expect_error "classify-text of a single text with a pair model" 1 "text 1 is one text, but the model was finetuned on pairs \(next-verse\)" -- \
  "$GMLP" classify-text --checkpoint "$WORK/ft/checkpoint.safetensors" "And God said"
expect_error "classify-text with a masked-language model" 1 "is a masked-language model \(gmlp pretrain\), not a text classifier: finetune it first" -- \
  "$GMLP" classify-text --checkpoint "$LMCK" "And God said"
if "$GMLP" viz --metrics "$WORK/lm_full/metrics.jsonl" "$WORK/lm_split/metrics.jsonl" --out "$WORK/vizlm" >"$WORK/vizlm.out" &&
   "$GMLP" viz --metrics "$WORK/ft/metrics.jsonl" --out "$WORK/vizlm" >>"$WORK/vizlm.out" &&
   [ "$(cat "$WORK/vizlm.out")" = "$WORK/vizlm/runs.png
$WORK/vizlm/curves.png" ] && [ -s "$WORK/vizlm/runs.png" ] && [ -s "$WORK/vizlm/curves.png" ]
then ok "viz draws two pretraining runs on shared axes and a finetuning run's curves"; else bad "viz of text runs: $(cat "$WORK/vizlm.out")"; fi
expect_error "viz of runs with nothing in common" 1 "the runs share no metric" -- \
  "$GMLP" viz --metrics "$WORK/lm_full/metrics.jsonl" "$WORK/full/metrics.jsonl" --out "$WORK/vizmix"
# --layer-decay 1e-12: every block and the embeddings step at 1e-12 times the rate or less, so
# they stay where pretraining left them while the new head learns; the option is kept for --resume.
if "$GMLP" finetune --init "$LMCK" --task ot-nt --layer-decay 1e-12 --lr 1e-2 --epochs 1 --train-limit 32 \
     --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftld" >/dev/null 2>"$WORK/ftld.log" &&
   grep -q "layer decay 1e-12" "$WORK/ftld.log" &&
   python3 - "$LMCK" "$WORK/ftld" <<'PY'
import json, sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
pre, ft = load_file(sys.argv[1]), load_file(sys.argv[2] + "/checkpoint.safetensors")
for name, a in pre.items():
    if name.startswith("blocks.") or name == "embed.weight":
        assert np.abs(ft[name] - a).max() < 1e-9, name
assert np.abs(ft["cls_head.weight"]).max() > 1e-3 and np.abs(ft["norm.weight"] - pre["norm.weight"]).max() > 1e-4
with safe_open(sys.argv[2] + "/train_state.safetensors", "np") as f:
    assert json.loads(f.metadata()["options"])["layer_decay"] == 1e-12
PY
then ok "finetune --layer-decay holds the lower layers back, the head at the full rate"; else bad "finetune --layer-decay: $(tail -3 "$WORK/ftld.log")"; fi
expect_error "finetune --layer-decay out of range" 2 "--layer-decay: expected a number in \(0, 1\], found '0'" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --layer-decay 0 --out "$WORK/ftld0"
# --drop-path: stochastic depth while finetuning, in the saved config (so --resume keeps it).
if "$GMLP" finetune --init "$LMCK" --task ot-nt --drop-path 0.3 --epochs 1 --train-limit 32 \
     --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftdp" >/dev/null 2>"$WORK/ftdp.log" &&
   grep -q "^gmlp: training .*, drop path 0.3$" "$WORK/ftdp.log" &&
   "$GMLP" finetune --resume "$WORK/ftdp" --epochs 2 --threads 2 >/dev/null 2>"$WORK/ftdp2.log" &&
   grep -q "^gmlp: resuming .*, drop path 0.3$" "$WORK/ftdp2.log" &&
   python3 - "$WORK/ftdp/checkpoint.safetensors" <<'PY'
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    assert json.loads(f.metadata()["config"])["drop_path"] == 0.3
PY
then ok "finetune --drop-path is in the run's config and survives --resume"; else bad "finetune --drop-path: $(tail -3 "$WORK/ftdp.log" "$WORK/ftdp2.log")"; fi
expect_error "finetune --drop-path out of range" 2 "--drop-path: expected a number in \[0, 1\), found '1'" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --drop-path 1 --out "$WORK/ftdp1"
expect_error "finetune --mask-prob without --mlm-weight is a usage error" 2 "--mask-prob applies only with --mlm-weight > 0" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --mask-prob 0.3 --out "$WORK/ftmp"
[ ! -e "$WORK/ftmp" ] && ok "a --mask-prob without --mlm-weight creates no run folder" || bad "a lone --mask-prob created $WORK/ftmp"
# --mlm-weight: the masked-token loss kept beside the task's, reported per epoch, kept by --resume.
if "$GMLP" finetune --init "$LMCK" --task next-verse --mlm-weight 0.5 --epochs 1 --train-limit 32 \
     --eval-limit 16 --batch-size 8 --threads 2 --out "$WORK/ftmlm" >/dev/null 2>"$WORK/ftmlm.log" &&
   grep -q "^gmlp: training .*, masked-token loss x0.5$" "$WORK/ftmlm.log" &&
   tr '\r' '\n' <"$WORK/ftmlm.log" | grep -q "^epoch 1/1 .* masked tokens: train acc [0-9.]*%" &&
   "$GMLP" finetune --resume "$WORK/ftmlm" --epochs 2 --threads 2 >/dev/null 2>"$WORK/ftmlm2.log" &&
   grep -q "^gmlp: resuming .*, masked-token loss x0.5$" "$WORK/ftmlm2.log" &&
   python3 - "$WORK/ftmlm/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2, rows
for r in rows:
    assert 0 < r["train_mlm_loss"] and 0 <= r["train_mlm_acc"] <= 1, r
PY
then ok "finetune --mlm-weight trains both losses and survives --resume"; else bad "finetune --mlm-weight: $(tail -3 "$WORK/ftmlm.log" "$WORK/ftmlm2.log")"; fi
expect_error "finetune --mlm-weight negative" 2 "--mlm-weight: expected a finite number >= 0, found '-1'" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --mlm-weight -1 --out "$WORK/ftmlm1"
expect_error "pretrain --mask-prob out of range" 2 "--mask-prob: expected a number in \(0, 1\], found '1.5'" -- \
  "$GMLP" pretrain --preset kjv-gmlp --mask-prob 1.5 --out "$WORK/mp"
[ ! -e "$WORK/mp" ] && ok "a bad --mask-prob creates no run folder" || bad "a bad --mask-prob created $WORK/mp"
expect_error "pretrain --short-seq-prob out of range" 2 "--short-seq-prob: expected a number in \[0, 1\], found '1.5'" -- \
  "$GMLP" pretrain --preset kjv-gmlp --short-seq-prob 1.5 --out "$WORK/ssp"
expect_error "pretrain --short-seq-prob with --nsp" 1 "--short-seq-prob is for masked-token pretraining: --nsp's pairs" -- \
  "$GMLP" pretrain --preset kjv-amlp --nsp --short-seq-prob 0.2 --out "$WORK/ssp"
[ ! -e "$WORK/ssp" ] && ok "a refused --short-seq-prob creates no run folder" || bad "a refused --short-seq-prob created $WORK/ssp"
expect_error "finetune longer than pretraining" 1 "expected --seq-len <= the pretraining length 32, found 64" -- \
  "$GMLP" finetune --init "$LMCK" --task ot-nt --seq-len 64 --out "$WORK/ft64"

finish
