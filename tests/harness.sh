# What the end-to-end test scripts share; sourced by tests/*_test.sh.
#   ok NAME / bad NAME     a passed or failed check, counted
#   finish                 the counts; the script's exit status (0: none failed)
#   same_files A B FILE... each FILE is identical in folders A and B
#   fmnist_subset DIR N M  the first N training and M test images of Fashion-MNIST (the Debian
#                          package's) as raw IDX files in DIR: a run starts in a blink
failures=0
passes=0
ok() { echo "ok    $1"; passes=$((passes + 1)); }
bad() { echo "FAIL  $1"; failures=$((failures + 1)); }
finish() {
  echo "$passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

same_files() {
  local a=$1 b=$2 f
  shift 2
  for f in "$@"; do cmp -s "$a/$f" "$b/$f" || return 1; done
}

fmnist_subset() {
  python3 - "$@" <<'PY'
import gzip, os, sys
src, out, n_train, n_test = "/usr/share/datasets/fashion-mnist", sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out)
for prefix, n in (("train", n_train), ("t10k", n_test)):
    for kind, head, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        raw = gzip.open(f"{src}/{prefix}-{kind}-ubyte.gz").read(head + n * size)
        with open(f"{out}/{prefix}-{kind}-ubyte", "wb") as f:
            f.write(raw[:4] + n.to_bytes(4, "big") + raw[8:head] + raw[head:])
PY
}
